"""A run's waterfall tallies: each row counted once, as its stored cell last has it.

A waterfall that fills a cell leaves its provenance in the cell's metadata
(``meta["waterfall"]``, and ``meta["waterfalls"]`` for a column that ran several: the winner,
and each step's status, provider, cost and whether receipts answered it; see
``waterfalls.py``). A run's tallies per waterfall and step (rows, satisfied; attempts, hits,
not found, failed, skipped, cached, credits) are folded from those: one provenance per stored
row, column and waterfall, whichever attempt wrote it. So:

- a row that a resume runs again (a failed row, a row a budget or a stop left pending,
  ``--retry-failed``) counts once, as it is stored now, not once per attempt;
- a row an attempt stored before it was killed counts when the next attempt ends (or whenever
  the rows are read: ``stored_tallies``), although the killed attempt never wrote its stats;
- ``Waterfall(order="cheapest")`` and the suggested order learn from each run once.

What no stored row keeps is counted by the attempt that ran it, and a run keeps its latest
attempt's count of it: waterfalls called outside a dataset (every attempt runs the play from
its start, so it runs them again, answered from receipts) and those of hidden columns
(``_name``: not stored; a resume runs them again for the rows it runs).

One pass reads only the cells of the stored rows that hold a provenance (``iter_cells``):
a run's other rows, and every row's values, are left unread (``playline show`` does it for a
run that has not ended).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from .._waterfall import StepStats, WaterfallStats
from ..store import RowRecord, Store

__all__ = ["Tallies", "Tally", "provenances", "stored_tallies"]

_STATUSES = ("completed", "not_found", "failed", "skipped")


@dataclass(slots=True)
class _StepCount:
    attempts: int = 0
    hits: int = 0
    not_found: int = 0
    failed: int = 0
    skipped: int = 0
    credits: float = 0.0
    cached: int = 0


class Tally:
    """One waterfall's counts over the provenances added: one per row (or direct call)."""

    __slots__ = ("id", "no_input", "rows", "satisfied", "steps")

    def __init__(self, wid: str) -> None:
        self.id = wid
        self.rows = 0
        self.satisfied = 0
        self.no_input = 0  # rows every step skipped, none satisfied
        self.steps: dict[str, _StepCount] = {}  # in the order first run

    def add(self, provenance: Mapping[str, Any]) -> None:
        """Count one row's provenance (``meta["waterfall"]``)."""
        self.rows += 1
        if provenance.get("winner") is not None:
            self.satisfied += 1
        steps = provenance.get("steps")
        if not isinstance(steps, Mapping):
            return
        if provenance.get("winner") is None and all(
            isinstance(meta, Mapping) and meta.get("status") == "skipped" for meta in steps.values()
        ):
            self.no_input += 1
        for step_id, meta in steps.items():
            if not isinstance(step_id, str) or not isinstance(meta, Mapping):
                continue
            count = self.steps.get(step_id)
            if count is None:
                count = self.steps[step_id] = _StepCount()
            status = meta.get("status")
            if status == "completed":
                count.hits += 1
            elif status == "not_found":
                count.not_found += 1
            elif status == "failed":
                count.failed += 1
            else:
                count.skipped += 1
            if status in _STATUSES and status != "skipped":
                count.attempts += 1
                if meta.get("cached"):  # answered from receipts: evidence of hits, not prices
                    count.cached += 1
            cost = meta.get("cost")
            if isinstance(cost, int | float) and not isinstance(cost, bool):
                count.credits += cost

    def merge(self, other: Tally) -> None:
        self.rows += other.rows
        self.satisfied += other.satisfied
        self.no_input += other.no_input
        for step_id, theirs in other.steps.items():
            mine = self.steps.get(step_id)
            if mine is None:
                mine = self.steps[step_id] = _StepCount()
            mine.attempts += theirs.attempts
            mine.hits += theirs.hits
            mine.not_found += theirs.not_found
            mine.failed += theirs.failed
            mine.skipped += theirs.skipped
            mine.credits += theirs.credits
            mine.cached += theirs.cached

    def snapshot(self) -> WaterfallStats:
        steps = tuple(
            StepStats(
                id=step_id,
                attempts=c.attempts,
                hits=c.hits,
                not_found=c.not_found,
                failed=c.failed,
                skipped=c.skipped,
                credits=round(c.credits, 6),
                cached=c.cached,
            )
            for step_id, c in self.steps.items()
        )
        return WaterfallStats(
            id=self.id,
            rows=self.rows,
            satisfied=self.satisfied,
            no_input=self.no_input,
            credits=round(sum(s.credits for s in steps), 6),
            steps=steps,
        )

    def record(self) -> dict[str, Any]:
        """As the run's stats keep it (``RunStats.waterfalls``, the store's history)."""
        snap = self.snapshot()
        return {
            "id": snap.id,
            "rows": snap.rows,
            "satisfied": snap.satisfied,
            "no_input": snap.no_input,
            "credits": snap.credits,
            "steps": [asdict(step) for step in snap.steps],
        }


class Tallies:
    """Per waterfall id, its ``Tally``."""

    __slots__ = ("by_id",)

    def __init__(self) -> None:
        self.by_id: dict[str, Tally] = {}

    def add(self, provenance: Mapping[str, Any]) -> None:
        wid = provenance.get("id")
        if not isinstance(wid, str):
            return
        tally = self.by_id.get(wid)
        if tally is None:
            tally = self.by_id[wid] = Tally(wid)
        tally.add(provenance)

    def add_rows(self, records: Iterable[RowRecord]) -> None:
        for record in records:
            for _, provenance in provenances(record.cells):
                self.add(provenance)

    def merge(self, *others: Tallies) -> Tallies:
        for other in others:
            for wid, theirs in other.by_id.items():
                mine = self.by_id.get(wid)
                if mine is None:
                    mine = self.by_id[wid] = Tally(wid)
                mine.merge(theirs)
        return self

    def records(self) -> dict[str, dict[str, Any]]:
        return {wid: tally.record() for wid, tally in self.by_id.items()}

    def __bool__(self) -> bool:
        return bool(self.by_id)


def provenances(cells: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The waterfall provenances a stored row's cells keep, each with its column: a column's
    last waterfall's (``waterfall``), or each of them when it ran several (``waterfalls``)."""
    for column, meta in cells.items():
        if not isinstance(meta, Mapping):
            continue
        several = meta.get("waterfalls")
        kept = several if isinstance(several, list) else [meta.get("waterfall")]
        for provenance in kept:
            if isinstance(provenance, Mapping):
                yield column, provenance


def stored_tallies(store: Store, run_id: str) -> Tallies:
    """The tallies of every stored row of ``run_id``: each row once, as stored now.

    A row that an attempt ran again may have its steps answered from the receipts that an
    earlier attempt of the run bought for it: its cell says ``cached`` at no cost, yet the run
    paid for them. Such a step counts as paid, at what the run's ledger charged for that cell
    and tool (``_bought_here``), so the run's credits per step are what it paid and a step's
    price is learnt from it once."""
    tallies = Tallies()
    # a cell's provenances, when receipts answered a step of one of them
    replayed: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for dataset, key, cells in store.iter_cells(run_id, "waterfall"):
        kept: dict[str, list[Mapping[str, Any]]] = {}
        for column, provenance in provenances(cells):
            kept.setdefault(column, []).append(provenance)
        for column, provenances_of_cell in kept.items():
            if any(_answered_from_receipts(p) for p in provenances_of_cell):
                replayed[(dataset, key, column)] = provenances_of_cell
            else:
                for provenance in provenances_of_cell:
                    tallies.add(provenance)
    if replayed:
        paid = _paid_by_cell(store, run_id)
        for cell, provenances_of_cell in replayed.items():
            charged = paid.get(cell)
            for provenance in (
                _bought_here(provenances_of_cell, charged) if charged else provenances_of_cell
            ):
                tallies.add(provenance)
    return tallies


def _answered_from_receipts(provenance: Mapping[str, Any]) -> bool:
    steps = provenance.get("steps")
    return isinstance(steps, Mapping) and any(
        cached for meta in steps.values() for _, _, cached in _calls(meta)
    )


def _calls(meta: Any) -> list[tuple[str, float, bool]]:
    """A step's calls as (tool, cost, answered by receipts): each tool's when the step
    called several (``by_tool``), else its provider's."""
    if not isinstance(meta, Mapping):
        return []
    by_tool = meta.get("by_tool")
    if isinstance(by_tool, Mapping):
        return [
            (tool, _number(part.get("cost")), bool(part.get("cached")))
            for tool, part in by_tool.items()
            if isinstance(part, Mapping)
        ]
    provider = meta.get("provider")
    if not isinstance(provider, str):
        return []
    return [(provider, _number(meta.get("cost")), bool(meta.get("cached")))]


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _paid_by_cell(store: Store, run_id: str) -> dict[tuple[str, str, str], dict[str, float]]:
    """The run's charges per cell (dataset, row key, column) and tool, over its attempts."""
    paid: dict[tuple[str, str, str], dict[str, float]] = {}
    for charge in store.read_ledger(run_id):
        if charge.dataset is None or charge.row_key is None or charge.column is None:
            continue  # outside a dataset, or an entry from before entries named their column
        if charge.credits:
            tools = paid.setdefault((charge.dataset, charge.row_key, charge.column), {})
            tools[charge.tool] = tools.get(charge.tool, 0.0) + charge.credits
    return paid


def _bought_here(
    provenances: list[Mapping[str, Any]], charged: Mapping[str, float]
) -> list[Mapping[str, Any]]:
    """A cell's ``provenances`` with the calls of their steps that receipts answered but this
    run paid for (its ledger charged the cell for the tool beyond what the cell's paid calls
    cost) counted as paid, at that charge: each charge once, whichever step it goes to."""
    left = dict(charged)
    for provenance in provenances:
        for meta in provenance["steps"].values():
            for tool, cost, cached in _calls(meta):
                if not cached:
                    left[tool] = left.get(tool, 0.0) - cost
    mended_all: list[Mapping[str, Any]] = []
    for provenance in provenances:
        mended: dict[str, Any] = {}
        for step_id, meta in provenance["steps"].items():
            paid = 0.0
            for tool, _, cached in _calls(meta):
                if cached and left.get(tool, 0.0) > 1e-9:
                    paid += left[tool]
                    left[tool] = 0.0
            if paid:
                meta = {**meta, "cached": False, "cost": _number(meta.get("cost")) + paid}
            mended[step_id] = meta
        mended_all.append({**provenance, "steps": mended})
    return mended_all
