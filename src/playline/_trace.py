"""The read model: a run, read back from the store, as the command line and the web show it.

Everything here works after the process that ran the play is gone (SEMANTICS.md 34), from
any process that can read the store: a run's status as a person should see it (a run whose
holder died is ``interrupted``, not ``running``), its step trace (datasets, requests and
charges per tool, waterfalls, child plays), and its rows for export. The web UI reads the same
things as JSON-shaped dicts: a run's summary and details, a window of a dataset's rows, and
the cells that changed since an event's ``seq`` (``changes_since``), which is how a live view
catches up after a reconnect without gaps or duplicates.
"""

from __future__ import annotations

import bisect
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._engine.history import HISTORY_RUNS, OrderAdvice, advise_order, step_history
from ._engine.tallies import provenances, stored_tallies
from ._flatten import dataset_fields, spread, spread_columns
from ._json import canonical, loads
from ._runner import gate_statistics
from .errors import PlaylineError
from .store import CellMeta, ReceiptStatus, RowRecord, RunRecord, RunStatus, Store
from .store._claims import lease_live

__all__ = [
    "HISTORY_RUNS",
    "INTERRUPTED",
    "LIVE_KINDS",
    "QUEUED",
    "SHOWN_FOR_RUNNING",
    "SOURCE_KIND",
    "TRACE_KINDS",
    "AttemptTrace",
    "Changes",
    "OrderAdvice",
    "Trace",
    "changes_since",
    "child_summaries",
    "columns_of",
    "dataset_columns",
    "export_rows",
    "export_table",
    "gate_statistics",
    "in_doubt",
    "jobs_in_progress",
    "ledger_by_column",
    "row_detail",
    "row_doc",
    "run_detail",
    "run_status",
    "run_summary",
    "trace_of",
    "waterfall_advice",
    "waterfall_summary",
    "waterfall_table",
]

SOURCE_KIND = "source"  # the event `playline run` writes: which file and function ran
# how the log line begins that a worker writes for a run it cannot resume (its play is gone)
WORKER_SKIPPED = "the worker cannot resume this run"
INTERRUPTED = "interrupted"
STOPPED = "stopped"  # a dataset that did not finish: the budget or a stop ended its attempt
QUEUED = "queued"  # submitted to Temporal, and no worker has started it yet
SHOWN_FOR_RUNNING = (INTERRUPTED, QUEUED)  # statuses shown for a stored "running" run
# The events a step trace reads: everything but the (many) row and cell events.
TRACE_KINDS = (SOURCE_KIND, "run", "dataset", "batch", "log", "waterfall", "child")
# The events a live view of a run follows (not ``source``: it is numbered when it is written,
# ahead of the events its attempt numbered earlier and writes later).
LIVE_KINDS = ("run", "dataset", "batch", "log", "waterfall", "child", "row", "rows", "cell")
ROW_KINDS = ("row", "rows", "cell")  # what changes rows and cells
JOBS_SHOWN = 50  # the jobs in progress a run's page and `playline show` list (oldest first)


def run_status(run: RunRecord, now: float | None = None) -> str:
    """The status to show: a ``running`` run whose holder is gone (its process died, or its
    lease ran out unrenewed) was interrupted; resuming it continues where it stopped. One
    submitted to Temporal that no worker has started yet is queued."""
    if run.status is RunStatus.RUNNING and not lease_live(
        run.holder, run.lease_until, time.time() if now is None else now
    ):
        return QUEUED if not run.attempts and run.options.get("temporal") else INTERRUPTED
    return run.status.value


@dataclass
class DatasetTrace:
    name: str
    description: str | None = None
    columns: list[str] = field(default_factory=list)
    status: str = "running"
    stats: dict[str, Any] = field(default_factory=dict)
    total: int | None = None  # rows its input holds, as its (last) start said; None: unknown


@dataclass
class AttemptTrace:
    """One attempt of a run: how it ended (its counts) and what it sent and paid.

    An attempt whose process stopped without recording its end is ``interrupted``: what it
    sent (batch events) and paid (the ledger, by time) are still counted."""

    number: int
    started_at: float
    status: str = INTERRUPTED
    error: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)  # its end's counts (rows, calls)
    requests: int = 0
    inputs: int = 0
    calls: int = 0  # live calls: as the attempt counted them, or (killed) in the ledger
    found: int = 0
    credits: float = 0.0
    usd: float = 0.0  # what its LLM calls cost, in dollars (budgets apart from credits)

    def to_dict(self) -> dict[str, Any]:
        doc = dict(vars(self))
        doc["stats"] = {k: v for k, v in self.stats.items() if k != "waterfalls"}
        doc["credits"] = round(self.credits, 6)
        doc["usd"] = round(self.usd, 9)
        return doc


@dataclass
class ToolTrace:
    requests: int = 0
    inputs: int = 0
    calls: int = 0  # live calls: as their attempts counted them, or (killed) in the ledger
    found: int = 0
    credits: float = 0.0
    reported_calls: int = 0  # calls whose provider said what it charged
    reported: float = 0.0  # what it said, for those calls
    declared: float = 0.0  # what the tool declares, for the same calls
    unit: str = "credits"  # what ``credits`` counts: "usd" for a tool priced in dollars
    # calls a purchase of the run answered, written otherwise (case, spaces) than the input
    # it was keyed on: normalised twins, not paid (as each attempt counted them at its end)
    twins: int = 0
    from_ledger: int = 0  # live calls counted from the ledger (their attempt was killed)
    # Of ``inputs``: sent by an attempt that was killed before it wrote their request events
    # (written up to 0.1 s after the requests go out), known from their answers in the ledger.
    unlogged: int = 0

    @property
    def mismatch(self) -> bool:
        """The provider reported charging otherwise than the tool declares (a tool priced in
        dollars declares none: its calls cost what their tokens do)."""
        return (
            self.unit != "usd"
            and self.reported_calls > 0
            and round(self.reported - self.declared, 6) != 0
        )

    def to_dict(self) -> dict[str, Any]:
        """Its counts; with what the provider reported it charged, where it did."""
        doc: dict[str, Any] = {
            k: getattr(self, k) for k in ("requests", "inputs", "calls", "found", "credits")
        }
        if self.unit != "credits":
            doc["unit"] = self.unit
        if self.twins:
            doc["twins"] = self.twins
        if self.unlogged:
            doc["unlogged"] = self.unlogged
        reported = self.reported_doc()
        if reported is not None:
            doc["reported"] = reported
        return doc

    def reported_doc(self) -> dict[str, Any] | None:
        if not self.reported_calls:
            return None
        return {
            "calls": self.reported_calls,
            "reported": round(self.reported, 6),
            "declared": round(self.declared, 6),
            "mismatch": self.mismatch,
        }


@dataclass
class Trace:
    """A run's step trace: its datasets, its batches and charges per tool, its other steps."""

    source: dict[str, Any] | None = None
    datasets: dict[str, DatasetTrace] = field(default_factory=dict)
    tools: dict[str, ToolTrace] = field(default_factory=lambda: defaultdict(ToolTrace))
    other: Counter[str] = field(default_factory=Counter)
    logs: int = 0
    skipped: str | None = None  # a worker's log line: it cannot resume the run (since its last)
    attempts: int = 0
    waterfalls: dict[str, dict[str, Any]] = field(default_factory=dict)
    children: list[dict[str, Any]] = field(default_factory=list)
    attempt_list: list[AttemptTrace] = field(default_factory=list)
    child_credits: float = 0.0  # what its child plays (and theirs) paid: in their ledgers
    child_usd: float = 0.0

    @property
    def requests(self) -> int:
        return sum(t.requests for t in self.tools.values())

    @property
    def calls(self) -> int:
        return sum(t.calls for t in self.tools.values())

    @property
    def twins(self) -> int:
        """Calls answered by a normalised twin (``ToolTrace.twins``), over every tool."""
        return sum(t.twins for t in self.tools.values())

    @property
    def credits(self) -> float:
        """What the run's own calls paid (its tools' credits)."""
        return self._paid("credits")

    @property
    def usd(self) -> float:
        """What the run's own calls paid in dollars (its tools priced in dollars)."""
        return self._paid("usd")

    def _paid(self, unit: str) -> float:
        places = 9 if unit == "usd" else 6  # dollars: an LLM call costs millionths
        return round(sum(t.credits for t in self.tools.values() if t.unit == unit), places)

    @property
    def run_credits(self) -> float:
        """What the run paid, its child plays included: its ``stats.credits``."""
        return round(self.credits + self.child_credits, 6)

    @property
    def run_usd(self) -> float:
        """What the run paid in dollars, its child plays included: its ``stats.usd``."""
        return round(self.usd + self.child_usd, 9)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "attempts": self.attempts,
            "attempt_list": [a.to_dict() for a in self.attempt_list],
            "totals": {
                "requests": self.requests,
                "calls": self.calls,
                "credits": self.run_credits,
                "child_credits": self.child_credits,
                "usd": self.run_usd,
                "child_usd": self.child_usd,
            },
            "datasets": [vars(d) for d in self.datasets.values()],
            "tools": {tool: t.to_dict() for tool, t in sorted(self.tools.items())},
            "steps": dict(self.other),
            "twins": self.twins,
            "log_lines": self.logs,
            "waterfalls": list(self.waterfalls.values()),
            "children": self.children,
        }


def trace_of(
    store: Store,
    run_id: str,
    *,
    attempts: int | None = None,
    interrupted: bool = False,
    running: bool = False,
) -> Trace:
    """A run's step trace from its events and ledger. ``attempts``: how many attempts the run
    record counts; attempts whose start event was never written (their process was killed
    before its first write) are listed as interrupted, first, and hold the charges made
    before the first attempt on record. ``interrupted`` (the run is shown ``interrupted``:
    its last attempt's process is gone, so it never reported its end): the datasets that
    attempt left ``running`` are ``interrupted`` too, and its waterfalls are counted from its
    stored rows. ``running`` (its holder is alive): its last attempt, without an end on
    record, is ``running``, not interrupted."""
    trace = Trace()
    for event in store.read_events(run_id, kinds=TRACE_KINDS):
        kind = event.kind
        data = event.data or {}
        if kind == SOURCE_KIND:
            trace.source = data
        elif kind == "run" and event.status == "running":
            _left_running(trace, INTERRUPTED)  # the attempt before was killed mid-dataset
            trace.skipped = None  # resumed since a worker skipped it
            trace.attempts += 1
            trace.attempt_list.append(AttemptTrace(number=trace.attempts, started_at=event.at))
        elif kind == "run" and trace.attempt_list:  # how the last attempt ended
            _left_running(trace, STOPPED)
            last = trace.attempt_list[-1]
            last.status = event.status or last.status
            last.error = event.error
            last.stats = {k: v for k, v in data.items() if k != "waiting"}
        elif kind == "dataset" and event.dataset:
            ds = trace.datasets.setdefault(event.dataset, DatasetTrace(event.dataset))
            if event.status == "running":
                ds.stats = {}  # an earlier attempt's counts are not this one's
                ds.description = data.get("description")
                ds.columns = list(data.get("columns") or [])
                total = data.get("total")
                ds.total = total if isinstance(total, int) else None
            ds.status = event.status or ds.status
            if event.status != "running":  # its end (completed, stopped, ...): its counts
                ds.stats = data
        elif kind == "batch" and event.provider:
            tool = trace.tools[event.provider]
            requests = int(data.get("requests", 1))  # a wave reports its requests at once
            tool.requests += requests
            tool.inputs += int(data.get("size", 1))
            if trace.attempt_list:
                trace.attempt_list[-1].requests += requests
                trace.attempt_list[-1].inputs += int(data.get("size", 1))
        elif kind == "log":
            trace.logs += 1
            if (event.preview or "").startswith(WORKER_SKIPPED):
                trace.skipped = event.preview
        elif kind != "run":
            if kind == "waterfall" and data.get("id"):
                if event.status == "run":  # the run's tallies so far: they replace, not add
                    trace.waterfalls.pop(data["id"], None)
                _add_waterfall(trace.waterfalls, data)
            elif kind == "child" and event.status == "running":
                trace.children.append(dict(data))
            trace.other[kind] += 1
    if interrupted:  # no later attempt says so: the run's own status does
        _left_running(trace, INTERRUPTED)
        _recount_waterfalls(trace.waterfalls, store, run_id)
    elif running and trace.attempt_list and not trace.attempt_list[-1].stats:
        trace.attempt_list[-1].status = "running"  # no end yet: its process goes on
    lost = (attempts or 0) - len(trace.attempt_list)
    if lost > 0:
        trace.attempt_list[:0] = [AttemptTrace(number=0, started_at=0.0) for _ in range(lost)]
        for number, attempt in enumerate(trace.attempt_list, 1):
            attempt.number = number
        trace.attempts = len(trace.attempt_list)
    # Live calls as each attempt counted them at its end (free tools have no ledger rows, and
    # an unusable answer is a live call that failed); the ledger's for one that never did.
    for attempt in trace.attempt_list:
        for name, counts in (attempt.stats.get("tools") or {}).items():
            live = int(counts.get("live", 0))
            trace.tools[name].calls += live
            trace.tools[name].twins += int(counts.get("twins", 0))
            attempt.calls += live
    starts = [a.started_at for a in trace.attempt_list]
    for entry in store.read_ledger(run_id):
        tool = trace.tools[entry.tool]
        tool.unit = entry.unit
        tool.found += int(entry.found)
        tool.credits += entry.credits
        if entry.reported is not None:
            tool.reported_calls += 1
            tool.reported += entry.reported
            tool.declared += entry.declared or 0.0
        at = bisect.bisect_right(starts, entry.at) - 1  # the attempt that paid it
        paid_by = trace.attempt_list[at] if at >= 0 else None
        if paid_by is None or "tools" not in paid_by.stats:  # its calls were never counted
            tool.calls += 1
            tool.from_ledger += 1
        if paid_by is not None:
            paid_by.calls += "tools" not in paid_by.stats
            paid_by.found += int(entry.found)
            if entry.unit == "usd":
                paid_by.usd += entry.credits
            else:
                paid_by.credits += entry.credits
    for tool in trace.tools.values():  # every live call was an input sent
        tool.unlogged = min(max(0, tool.calls - tool.inputs), tool.from_ledger)
        tool.inputs += tool.unlogged
    # its child plays' charges are in their own ledgers (their run ids extend this one's)
    trace.child_credits = max(0.0, round(store.spent(run_id) - trace.credits, 6))
    trace.child_usd = max(0.0, round(store.spent(run_id, "usd") - trace.usd, 9))
    return trace


def _left_running(trace: Trace, status: str) -> None:
    """Datasets an attempt left ``running`` when it ended: it never reported their end
    (killed, or, before Playline reported it, stopped by the budget): they did not finish."""
    for ds in trace.datasets.values():
        if ds.status == "running":
            ds.status = status


def export_rows(
    store: Store, run_id: str, dataset: str, *, with_status: bool
) -> Iterator[dict[str, Any]]:
    """The rows of ``dataset``: cell values, and with ``with_status`` the row's key, status
    and error plus each computed column's ``<column>.status`` and ``<column>.provider``."""
    for record in store.iter_rows(run_id, dataset):
        if not with_status:
            yield dict(record.values)
            continue
        row: dict[str, Any] = {"_key": record.key, "_status": record.status}
        row["_error"] = record.error
        for column, value in record.values.items():
            if column in row:
                raise PlaylineError(_clash(dataset, column))
            row[column] = value
            meta = record.cells.get(column)
            if meta is not None:
                for name, part in (
                    ("status", meta.get("status")),
                    ("provider", meta.get("provider")),
                ):
                    if f"{column}.{name}" in record.values:
                        raise PlaylineError(_clash(dataset, f"{column}.{name}"))
                    row[f"{column}.{name}"] = part
        yield row


def _clash(dataset: str, column: str) -> str:
    return (
        f"Dataset {dataset!r} has a column {column!r}, a name that --with-status gives a row's "
        "key, status or error, or a cell's status or provider: export it without --with-status "
        "(or rename that column in the play's input)."
    )


def export_table(
    store: Store,
    run_id: str,
    dataset: str,
    *,
    with_status: bool,
    fields: bool = True,
    flatten: bool = False,
) -> tuple[list[str], Callable[[], Iterator[dict[str, Any]]]]:
    """A dataset as every export writes it (the command line's, the UI's): its columns, and
    its rows read anew from the store at each call. With ``fields``, the columns declared
    with ``fields=`` are spread into their fields' columns (``company.name``), as CSV and
    Parquet write them; ``flatten`` spreads every dict value into dotted columns."""
    chosen = dataset_fields(store, run_id, dataset) if fields or flatten else {}

    def read() -> Iterator[dict[str, Any]]:
        rows = export_rows(store, run_id, dataset, with_status=with_status)
        if not chosen and not flatten:
            return rows
        return (spread(row, chosen, flatten=flatten) for row in rows)

    if chosen or flatten:
        stored = export_rows(store, run_id, dataset, with_status=with_status)
        return spread_columns(stored, chosen, flatten=flatten), read
    return columns_of(read()), read


def columns_of(rows: Iterator[dict[str, Any]]) -> list[str]:
    """Every column, in the order first seen (rows may differ)."""
    seen: dict[str, None] = {}
    for row in rows:
        for name in row:
            seen.setdefault(name, None)
    return list(seen)


def _add_waterfall(into: dict[str, dict[str, Any]], data: dict[str, Any]) -> None:
    """Fold a waterfall event's tally into the run's. An attempt's end reports the run's
    tallies so far (each row once, as stored: status ``run``), which replace the earlier ones;
    before, it reported its own, which add up."""
    current = into.setdefault(
        data["id"],
        {"id": data["id"], "rows": 0, "satisfied": 0, "no_input": 0, "credits": 0.0, "steps": {}},
    )
    current["rows"] += int(data.get("rows") or 0)
    current["satisfied"] += int(data.get("satisfied") or 0)
    current["no_input"] += int(data.get("no_input") or 0)
    current["credits"] = round(current["credits"] + float(data.get("credits") or 0), 6)
    for step in data.get("steps") or ():
        mine = current["steps"].setdefault(
            step["id"],
            {"id": step["id"], "attempts": 0, "hits": 0, "not_found": 0, "failed": 0,
             "skipped": 0, "cached": 0, "credits": 0.0},
        )  # fmt: skip
        for name in ("attempts", "hits", "not_found", "failed", "skipped", "cached"):
            mine[name] += int(step.get(name) or 0)
        mine["credits"] = round(mine["credits"] + float(step.get("credits") or 0), 6)


def _recount_waterfalls(into: dict[str, dict[str, Any]], store: Store, run_id: str) -> None:
    """The waterfalls of the run's stored rows, each row once, replace what the events said
    (a waterfall no stored row keeps stays as its last report had it)."""
    for wid, tally in stored_tallies(store, run_id).records().items():
        into.pop(wid, None)
        _add_waterfall(into, tally)


def waterfall_advice(
    store: Store, waterfalls: dict[str, dict[str, Any]], *, runs: int = HISTORY_RUNS
) -> dict[str, OrderAdvice]:
    """Per waterfall of a run, the step order with the lowest expected credits per hit that the
    store's history (its newest ``runs`` runs, this one included) supports."""
    history, seen = step_history(store.list_runs(limit=runs))
    return {
        wid: advise_order(list(tally["steps"]), history.get(wid, {}), runs=seen[wid])
        for wid, tally in waterfalls.items()
    }


def waterfall_table(tally: dict[str, Any]) -> list[dict[str, Any]]:
    """A waterfall's steps as rows: attempts, hits, hit rate, credits, credits per hit, and
    the coverage reached after each step (rows satisfied so far / rows)."""
    rows = tally["rows"] or 0
    table, satisfied = [], 0
    for step in tally["steps"].values():
        satisfied = min(satisfied + step["hits"], tally["satisfied"])
        table.append(
            {
                **step,
                "hit_rate": step["hits"] / step["attempts"] if step["attempts"] else None,
                "credits_per_hit": step["credits"] / step["hits"] if step["hits"] else None,
                "coverage": satisfied / rows if rows else None,
            }
        )
    return table


def waterfall_summary(tally: dict[str, Any]) -> dict[str, Any]:
    """A waterfall over a run: rows, found, coverage, credits per hit, and its steps as
    ``waterfall_table`` gives them."""
    return {**_waterfall_doc(tally), "steps": waterfall_table(tally)}


def _waterfall_doc(tally: dict[str, Any]) -> dict[str, Any]:
    steps = [
        {**s, "credits_per_hit": s["credits"] / s["hits"] if s["hits"] else None}
        for s in tally["steps"].values()
    ]
    rows, satisfied = tally["rows"], tally["satisfied"]
    return {
        **tally,
        "steps": steps,
        "coverage": satisfied / rows if rows else None,
        "credits_per_hit": tally["credits"] / satisfied if satisfied else None,
    }


# --- the web UI's documents ------------------------------------------------------------------


def run_summary(store: Store, run: RunRecord, *, now: float | None = None) -> dict[str, Any]:
    """One line of the runs page: status, play, rows done/failed/reused, credits, times.

    A finished attempt wrote its stats; a running one has not yet, so its rows are counted in
    the store (an indexed count per dataset) and its credits summed from the ledger."""
    now = time.time() if now is None else now
    status = run_status(run, now)
    stats = dict(run.stats or {})
    live = run.status is RunStatus.RUNNING
    if live or not stats:
        stored = {name: store.count_rows(run.run_id, name) for name in store.datasets(run.run_id)}
        stats.setdefault("rows", 0)
        stats["rows_stored"] = sum(stored.values())
        stats["credits"] = store.spent(run.run_id)
        stats["usd"] = store.spent(run.run_id, "usd")
    end = now if status == "running" else run.updated_at
    return {
        "run_id": run.run_id,
        "play": run.play,
        "status": status,
        "parent_run_id": run.parent_run_id,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
        "duration": max(0.0, end - run.created_at) if run.created_at else None,
        # stored: an attempt that ended counts the rows it left pending among its rows
        "rows": stats.get("rows_stored", stats.get("rows", 0) - stats.get("rows_pending", 0)),
        "rows_failed": stats.get("rows_failed", 0),
        "rows_reused": stats.get("rows_reused", 0),
        "credits": round(float(stats.get("credits") or 0.0), 6),
        "usd": round(float(stats.get("usd") or 0.0), 9),
        "attempts": run.attempts,
        "error": run.error,
        "waiting": run.waiting,
        "stop_requested": run.stop_requested,
    }


def in_doubt(store: Store, run_id: str) -> dict[str, Any]:
    """The calls of the run and its child plays that may have been charged with no record of
    it (their requests were out when their process stopped, or timed out at a provider that
    ignores idempotency keys): how many, and how many of each tool. A call waiting on a job
    its provider accepted is not among them: a resume polls the job, never pays again (it is
    listed by ``jobs_in_progress``)."""
    doubtful = store.doubtful_receipts(run_id, now=time.time())
    if doubtful:
        for receipt in store.pending_jobs(run_id):
            doubtful.pop(receipt.key, None)
    tools = Counter(doubtful.values())
    passed = _passed_over(store, run_id, tools) if tools else {}
    return {"calls": tools.total(), "tools": dict(sorted(tools.items())), "passed": passed}


def _passed_over(store: Store, run_id: str, doubtful: Counter[str]) -> dict[str, int]:
    """Of the calls in doubt, per tool, those of a waterfall step that a later step of its
    row made up for (the row found its value elsewhere): buying them again finds nothing the
    row needs."""
    passed: Counter[str] = Counter()
    for _, _, cells in store.iter_cells(run_id, "waterfall"):
        for _, provenance in provenances(cells):
            if provenance.get("winner") is None:
                continue
            for meta in (provenance.get("steps") or {}).values():
                if isinstance(meta, Mapping) and meta.get("code") == "in_doubt":
                    passed[str(meta.get("provider"))] += 1
    return {tool: min(n, doubtful[tool]) for tool, n in sorted(passed.items()) if doubtful[tool]}


def jobs_in_progress(store: Store, run_id: str, now: float | None = None) -> dict[str, Any]:
    """The jobs the run and its child plays wait on (a provider's batch, an async tool's
    submitted job), from the receipts that hold them: per tool and job, how many calls wait
    on it, since when (the oldest of their claims: a resume claims them again), and whether
    a live attempt polls it (``polling``) or its attempt stopped and a resume will
    (``stopped``). The provider's own state of the job is not kept (a poll's answer is not
    written down): it was submitted and has not answered yet. ``calls`` counts every call
    waiting; the oldest ``JOBS_SHOWN`` jobs are listed and ``more`` says how many were not."""
    at = time.time() if now is None else now
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    receipts = store.pending_jobs(run_id)
    for receipt in receipts:
        assert receipt.job is not None
        job = _job_of(loads(receipt.job))
        group = groups.get((receipt.tool, canonical(job)))
        if group is None:
            group = groups[(receipt.tool, canonical(job))] = {
                "tool": receipt.tool,
                "job": job,
                "label": _job_label(job),
                "run_id": receipt.run_id,
                "calls": 0,
                "since": receipt.updated_at,
                "state": "stopped",
            }
        group["calls"] += 1
        group["since"] = min(group["since"], receipt.updated_at)
        if receipt.status is ReceiptStatus.RUNNING and lease_live(
            receipt.owner, receipt.lease_until, at
        ):
            group["state"] = "polling"
    listed = sorted(groups.values(), key=lambda g: (g["since"], g["tool"], g["label"]))
    return {
        "calls": len(receipts),
        "jobs": listed[:JOBS_SHOWN],
        "more": max(0, len(listed) - JOBS_SHOWN),
    }


def _job_of(kept: Any) -> Any:
    """The job a receipt waits on: a bulk call keeps ``{"job": ..., "item": n}`` (its place
    in the job many calls share), a single call the job itself."""
    if isinstance(kept, dict) and set(kept) == {"job", "item"} and isinstance(kept["item"], int):
        return kept["job"]
    return kept


def _job_label(job: Any) -> str:
    """A job as a person looks it up at its provider: its id (an OpenAI job's batch ids)."""
    if isinstance(job, str | int | float):
        return str(job)
    if isinstance(job, dict):
        batches = job.get("batches")
        if isinstance(batches, list) and all(isinstance(b, dict) and "id" in b for b in batches):
            return ", ".join(str(b["id"]) for b in batches)
        if set(job) == {"single"}:  # a bulk tool's lone input, sent as a single job
            return _job_label(job["single"])
        if isinstance(job.get("id"), str | int):
            return str(job["id"])
    text = canonical(job)
    return text if len(text) <= 80 else text[:79] + "…"


def child_summaries(store: Store, run_id: str) -> list[dict[str, Any]]:
    """The run's child plays (``ctx.run_play``), each with its rows and what it paid (its
    credits count in the run's)."""
    return [
        {k: summary[k] for k in ("run_id", "play", "status", "rows", "credits")}
        for summary in (run_summary(store, child) for child in store.child_runs(run_id))
    ]


def run_detail(store: Store, run: RunRecord) -> dict[str, Any]:
    """The run page: summary, input and output, stats, step trace, ledger by tool and column,
    waterfalls with credits per hit, child plays, the calls in doubt, the jobs in progress,
    and what a suspended run waits for."""
    status = run_status(run)
    trace = trace_of(
        store, run.run_id, interrupted=status == INTERRUPTED, running=status == "running"
    )
    tools = []
    for tool, t in sorted(trace.tools.items()):
        tools.append(
            {
                "tool": tool,
                "requests": t.requests,
                "inputs": t.inputs,
                "calls": t.calls,
                "found": t.found,
                "credits": round(t.credits, 6),
                "unit": t.unit,
                "credits_per_hit": round(t.credits / t.found, 6) if t.found else None,
                "reported": t.reported_doc(),
                "unlogged": t.unlogged,
            }
        )
    awaited = run.awaited_events if run.status is RunStatus.SUSPENDED else []
    doc = run_summary(store, run)
    doc.update(
        input=run.input,
        output=run.output,
        stats=run.stats,
        holder=run.holder,
        trace=trace.to_dict(),
        tools=tools,
        datasets=[
            {**vars(d), "stored": store.count_rows(run.run_id, d.name)}
            for d in trace.datasets.values()
        ],
        waterfalls=[_waterfall_doc(w) for w in trace.waterfalls.values()],
        children=child_summaries(store, run.run_id),
        in_doubt=in_doubt(store, run.run_id),
        jobs=jobs_in_progress(store, run.run_id),
        awaited_events=awaited,
        events_sent=sorted(store.waiting_events(awaited)) if awaited else [],
    )
    return doc


def ledger_by_column(store: Store, run_id: str, *, max_rows: int = 200_000) -> dict[str, Any]:
    """Cells and credits per dataset column.

    Credits are the ledger's, over every attempt, each in the column whose cell made the call
    (so a cell that a later attempt answered from the receipt an earlier one paid for still
    shows what it cost). A call whose cell is not stored is still its column's: its row had
    not finished (it was running, or its attempt stopped before it did: a resume answers the
    call from its receipt), counted apart as ``unstored_credits``; or the column is hidden
    (``_name``: never stored, ``hidden``). A ledger written before entries named their column
    (Playline before schema 6 on SQLite, 3 on PostgreSQL) counts a call in the column of its
    row whose cell used its tool (its provider or one of its waterfall's steps). Paid calls
    made outside any dataset's rows (the play's own code, a durable boundary) and the older
    entries no stored cell claims are ``other_credits``. Dollars (LLM calls) are counted
    apart, as ``usd``, ``unstored_usd`` and ``other_usd``. It reads every row, so a dataset
    past ``max_rows`` is left out (``skipped`` names it)."""
    spent: dict[tuple[str, str, str], float] = {}  # (dataset, row key, column) -> credits
    by_tool: dict[tuple[str, str], dict[str, float]] = {}  # older entries: row -> tool -> credits
    dollars: dict[tuple[str, str, str], float] = {}  # as ``spent``, in dollars
    other = other_usd = 0.0
    for charge in store.read_ledger(run_id):
        if charge.unit == "usd":  # written since entries name their column and unit
            if charge.dataset is None or charge.row_key is None or charge.column is None:
                other_usd += charge.credits
            else:
                cell = (charge.dataset, charge.row_key, charge.column)
                dollars[cell] = dollars.get(cell, 0.0) + charge.credits
        elif charge.dataset is None or charge.row_key is None:
            other += charge.credits
        elif charge.column is not None:
            cell = (charge.dataset, charge.row_key, charge.column)
            spent[cell] = spent.get(cell, 0.0) + charge.credits
        else:
            tools = by_tool.setdefault((charge.dataset, charge.row_key), {})
            tools[charge.tool] = tools.get(charge.tool, 0.0) + charge.credits
    columns: dict[str, dict[str, Any]] = {}
    skipped = []
    for name in store.datasets(run_id):
        if store.count_rows(run_id, name) > max_rows:
            skipped.append(name)
            continue
        for record in store.iter_rows(run_id, name):
            charges = by_tool.pop((name, record.key), {})
            for column, meta in record.cells.items():
                entry = _column_entry(columns, name, column)
                entry["cells"] += 1
                entry["found"] += meta.get("status") in ("completed", "cached")
                credits = spent.pop((name, record.key, column), 0.0)
                credits += sum(charges.pop(tool, 0.0) for tool in _tools_of(meta))
                entry["credits"] = round(entry["credits"] + credits, 6)
                usd = dollars.pop((name, record.key, column), 0.0)
                entry["usd"] = round(entry["usd"] + usd, 9)
                provider = meta.get("provider")
                if provider:
                    entry["providers"][provider] = entry["providers"].get(provider, 0) + 1
            other += sum(charges.values())
    for (dataset, _, column), credits in spent.items():  # cells not stored (yet)
        if dataset not in skipped:
            _unstored(_column_entry(columns, dataset, column), credits, "credits", 6)
    for (dataset, _, column), usd in dollars.items():
        if dataset not in skipped:
            _unstored(_column_entry(columns, dataset, column), usd, "usd", 9)
    other += sum(c for (dataset, _), tools in by_tool.items() if dataset not in skipped
                 for c in tools.values())  # fmt: skip
    return {
        "columns": list(columns.values()),
        "skipped": skipped,
        "other_credits": round(other, 6),
        "other_usd": round(other_usd, 9),
    }


def _column_entry(columns: dict[str, dict[str, Any]], dataset: str, column: str) -> dict[str, Any]:
    """The ledger line of ``dataset.column``, made empty the first time it is asked for."""
    return columns.setdefault(
        f"{dataset}.{column}",
        {"dataset": dataset, "column": column, "cells": 0, "found": 0, "credits": 0.0,
         "usd": 0.0, "unstored_credits": 0.0, "unstored_usd": 0.0, "providers": {},
         "hidden": column.startswith("_")},
    )  # fmt: skip


def _unstored(entry: dict[str, Any], amount: float, unit: str, places: int) -> None:
    """A charge of a column's cell that is not stored: in its column's total, and (unless
    the column is hidden, so never stored) counted apart as its unfinished rows'."""
    entry[unit] = round(entry[unit] + amount, places)
    if not entry["hidden"]:
        entry[f"unstored_{unit}"] = round(entry[f"unstored_{unit}"] + amount, places)


def _tools_of(meta: CellMeta) -> list[str]:
    """The tools a cell's value came from: its provider, and its waterfalls' steps'."""
    falls = meta.get("waterfalls") or [meta.get("waterfall") or {}]
    tools = [
        s["provider"]
        for fall in falls
        for s in (fall.get("steps") or {}).values()
        if isinstance(s, dict) and s.get("provider")
    ]
    provider = meta.get("provider")
    return [provider, *tools] if provider else tools


def dataset_columns(store: Store, run_id: str, dataset: str) -> list[str]:
    """The grid's columns: the input fields (as the first row holds them), then the computed
    columns the dataset declared, hidden ones (``_name``) left out."""
    seen: dict[str, None] = {}
    for record in store.row_window(run_id, dataset, limit=1):
        seen.update(dict.fromkeys(record.values))
    for event in store.read_events(run_id, kinds=["dataset"]):
        if event.dataset == dataset and event.status == "running":
            computed = (event.data or {}).get("columns") or ()
            seen.update((name, None) for name in computed if not name.startswith("_"))
    return list(seen)


def row_doc(record: RowRecord) -> dict[str, Any]:
    """A row as the grid holds it: key, index, status, error, values and cell statuses."""
    return {
        "key": record.key,
        "index": record.index,
        "status": record.status,
        "error": record.error,
        "values": record.values,
        "cells": {c: m.get("status") for c, m in record.cells.items()},
    }


def row_detail(store: Store, run_id: str, dataset: str, key: str) -> dict[str, Any] | None:
    """The row drawer: every cell's metadata (a waterfall's steps: provider, status, cost,
    error) and the row's ledger entries (tool, receipt, credits, found)."""
    found = store.load_rows(run_id, dataset, [key]).get(key)
    if found is None:
        return None
    doc = row_doc(found)
    doc["meta"] = found.cells
    doc["ledger"] = [
        {
            "tool": e.tool,
            "receipt": e.receipt_key,
            "credits": e.credits,
            "found": e.found,
            "at": e.at,
            "generation": e.generation,
        }
        for e in store.read_ledger(run_id)
        if e.dataset == dataset and e.row_key == key
    ]
    return doc


@dataclass
class Changes:
    """What changed in a run after ``after`` up to ``seq`` (the last event read): each changed
    row's latest status and changed cells (statuses and values), and the other events."""

    after: int
    seq: int
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    count: int = 0


def changes_since(
    store: Store,
    run_id: str,
    after: int,
    *,
    dataset: str | None = None,
    limit: int = 5000,
    upto: int | None = None,
) -> Changes:
    """The changes after event ``after`` (up to event ``upto``, when given), each cell in its
    latest state.

    Events are read in ``seq`` order; within a read, a later change of a cell replaces an
    earlier one, so a reader that asks again from the returned ``seq`` misses nothing and
    sees nothing twice. It reads at most ``limit`` events (a page: ask again from ``seq`` for
    the rest)."""
    changes = Changes(after=after, seq=after)
    events = store.read_events(run_id, after_seq=after, kinds=LIVE_KINDS, limit=limit)
    if upto is not None:
        events = [e for e in events if e.seq <= upto]
    changes.count = len(events)
    for event in events:
        changes.seq = event.seq
        if event.kind == "rows":  # completed rows reported together
            if dataset is not None and event.dataset != dataset:
                continue
            for done in (event.data or {}).get("rows", ()):
                row = changes.rows.setdefault(
                    done["key"],
                    {"dataset": event.dataset, "cells": {}, "values": {}, "seq": event.seq},
                )
                row["seq"] = event.seq
                row["status"] = "completed"
                row["error"] = None
                row["cells"].update(done.get("cells") or {})
                row["values"].update(done.get("values") or {})
        elif event.kind in ("row", "cell"):
            if dataset is not None and event.dataset != dataset:
                continue
            key = event.row_key or ""
            row = changes.rows.setdefault(
                key, {"dataset": event.dataset, "cells": {}, "values": {}, "seq": event.seq}
            )
            row["seq"] = event.seq
            if event.kind == "cell" and event.column:
                row["cells"][event.column] = event.status
                row["values"][event.column] = event.preview
                continue
            data = event.data or {}
            row["status"] = event.status
            row["error"] = event.error
            row["cells"].update(data.get("cells") or {})
            row["values"].update(data.get("values") or {})
        else:
            changes.events.append(
                {
                    "seq": event.seq,
                    "kind": event.kind,
                    "at": event.at,
                    "dataset": event.dataset,
                    "status": event.status,
                    "provider": event.provider,
                    "error": event.error,
                    "message": event.preview,
                    "data": event.data,
                }
            )
    return changes
