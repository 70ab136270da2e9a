"""What a store's history says about waterfall steps: how often each hits, what it costs.

Every attempt records its run's waterfall step tallies with the run (``RunStats.waterfalls``:
each row counted once, as it is stored; ``tallies.py``), so the history of a store is one read
of its newest runs, each run counted once however many attempts it took.
From it, the step order with the lowest expected credits per hit is suggested (``playline
show``, ``ctx.waterfall_stats()``) and applied by ``Waterfall(order="cheapest")`` once every
step has ``MIN_STEP_ATTEMPTS`` recorded attempts.

The order: a step ``i`` that hits a row with probability ``p_i`` and costs ``c_i`` credits per
attempt (both as recorded, so an on-hit price is already weighed by its hit rate) costs a row
``sum_k c_k * prod_{j<k} (1 - p_j)`` in order ``1..n``, and finds a value with probability
``1 - prod (1 - p_j)`` whatever the order. So the cheapest order per hit is the cheapest order
per row: steps by ``c_i / p_i`` ascending (the classic rule for sequential search, optimal when
steps hit independently), ties kept in their declared order, steps that never hit last.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..store import RunRecord

__all__ = [
    "HISTORY_RUNS",
    "MIN_STEP_ATTEMPTS",
    "History",
    "OrderAdvice",
    "StepRecord",
    "add_tallies",
    "advise_order",
    "expected_cost",
    "step_history",
]

HISTORY_RUNS = 200  # the newest runs of a store read as its history
MIN_STEP_ATTEMPTS = 50  # every step needs this many recorded attempts before it is reordered


@dataclass(frozen=True, kw_only=True)
class StepRecord:
    """One waterfall step over a store's history: rows it ran for, rows it hit, credits."""

    id: str
    attempts: int = 0
    hits: int = 0
    credits: float = 0.0
    cached: int = 0  # attempts answered from receipts: they hit or missed, but cost nothing

    @property
    def hit_rate(self) -> float | None:
        return self.hits / self.attempts if self.attempts else None

    @property
    def cost(self) -> float | None:
        """Credits per paid attempt (a price charged on hits only is weighed by the hit
        rate); attempts answered from receipts say nothing of the price."""
        live = self.attempts - self.cached
        return self.credits / live if live > 0 else None


# per waterfall id, its steps' records; and how many runs ran each waterfall
History = tuple[dict[str, dict[str, StepRecord]], Counter[str]]


@dataclass(frozen=True, kw_only=True)
class OrderAdvice:
    """The cheapest step order the history supports, or why it cannot tell yet."""

    declared: tuple[str, ...]
    order: tuple[str, ...] | None  # None: not enough history
    runs: int  # runs of the history that ran this waterfall
    credits_per_hit: float | None = None  # expected, in ``order``
    declared_credits_per_hit: float | None = None  # expected, in the declared order
    note: str = ""

    @property
    def changes(self) -> bool:
        return self.order is not None and self.order != self.declared

    def to_dict(self) -> dict[str, Any]:
        return {
            "declared": list(self.declared),
            "order": None if self.order is None else list(self.order),
            "runs": self.runs,
            "credits_per_hit": self.credits_per_hit,
            "declared_credits_per_hit": self.declared_credits_per_hit,
            "note": self.note,
        }


def add_tallies(
    into: dict[str, dict[str, Any]], tallies: Iterable[Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Sum waterfall tallies (``WaterfallStats.to_dict()`` shapes) by waterfall and step."""
    for tally in tallies:
        wid = tally.get("id")
        if not isinstance(wid, str):
            continue
        mine = into.setdefault(wid, {"id": wid, "rows": 0, "satisfied": 0, "steps": {}})
        mine["rows"] += int(tally.get("rows") or 0)
        mine["satisfied"] += int(tally.get("satisfied") or 0)
        steps = tally.get("steps") or ()
        for step in steps.values() if isinstance(steps, Mapping) else steps:
            sid = step.get("id")
            if not isinstance(sid, str):
                continue
            count = mine["steps"].setdefault(sid, {"id": sid, "attempts": 0, "hits": 0,
                                                   "credits": 0.0, "cached": 0})  # fmt: skip
            count["attempts"] += int(step.get("attempts") or 0)
            count["hits"] += int(step.get("hits") or 0)
            count["cached"] += int(step.get("cached") or 0)
            count["credits"] = round(count["credits"] + float(step.get("credits") or 0), 6)
    return into


def step_history(runs: Iterable[RunRecord]) -> History:
    """Per waterfall id, its steps' records over ``runs`` (their ``stats["waterfalls"]``), and
    how many runs ran each waterfall."""
    summed: dict[str, dict[str, Any]] = {}
    seen: Counter[str] = Counter()
    for run in runs:
        tallies = (run.stats or {}).get("waterfalls") or {}
        if not isinstance(tallies, Mapping):
            continue
        add_tallies(summed, tallies.values())
        seen.update(w for w in tallies if isinstance(w, str))
    history = {
        wid: {
            sid: StepRecord(
                id=sid,
                attempts=s["attempts"],
                hits=s["hits"],
                credits=s["credits"],
                cached=s["cached"],
            )
            for sid, s in w["steps"].items()
        }
        for wid, w in summed.items()
    }
    return history, seen


def expected_cost(order: Sequence[str], steps: Mapping[str, StepRecord]) -> float | None:
    """Expected credits per hit of ``order`` (None when no step ever hit)."""
    cost, miss = 0.0, 1.0
    for sid in order:
        step = steps[sid]
        cost += miss * (step.cost or 0.0)
        miss *= 1.0 - (step.hit_rate or 0.0)
    hit = 1.0 - miss
    return round(cost / hit, 6) if hit > 0 else None


def advise_order(
    declared: Sequence[str],
    steps: Mapping[str, StepRecord],
    *,
    runs: int,
    min_attempts: int = MIN_STEP_ATTEMPTS,
) -> OrderAdvice:
    """The order of ``declared`` steps with the lowest expected credits per hit, once every
    step has ``min_attempts`` recorded attempts; else ``order`` is None and ``note`` says
    what is missing."""
    names = tuple(declared)
    short = [
        f"{sid} {steps[sid].attempts if sid in steps else 0}"
        for sid in names
        if sid not in steps or steps[sid].attempts < min_attempts or steps[sid].cost is None
    ]
    if short:
        return OrderAdvice(
            declared=names,
            order=None,
            runs=runs,
            note=(
                f"not enough history to order by cost: every step needs {min_attempts} "
                f"recorded attempts, some of them paid (now: {', '.join(short)})"
            ),
        )

    def ratio(sid: str) -> float:
        step = steps[sid]
        rate = step.hit_rate or 0.0
        return (step.cost or 0.0) / rate if rate > 0 else float("inf")

    order = tuple(sorted(names, key=ratio))  # sorted() is stable: ties keep their order
    best = expected_cost(order, steps)
    current = expected_cost(names, steps)
    if order == names:
        note = "the declared order is already the cheapest per hit"
    else:
        note = f"{' → '.join(order)} is cheaper per hit than the declared order"
    return OrderAdvice(
        declared=names,
        order=order,
        runs=runs,
        credits_per_hit=best,
        declared_credits_per_hit=current,
        note=note,
    )
