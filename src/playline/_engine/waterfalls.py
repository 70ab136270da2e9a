"""How a waterfall runs (SEMANTICS.md 20-23): a plain coroutine per row.

Each ``ToolStep`` is a tool call. Inside a column every row runs its own copy at the same
time, so the rows waiting on the same step queue their calls together and the dispatcher
sends them as one batched pass; a row that a step satisfied stops there, so later steps are
never called for it. Receipts make a re-run free. Outside a column the same code runs with
direct calls.

A step learns what its calls returned (and cost) through ``result_sink``: a code step gets
the play's own context and nothing wraps it. Per cell, the provenance (which step won; each
step's status, provider and cost) goes into the cell's metadata under ``"waterfall"`` (and
each one's under ``"waterfalls"``, when a column runs several). A row
that no step satisfied while a step *failed* (a 5xx, a 401, a timeout) fails with that cause,
so a resume tries it again; a row every step answered "not found" is not found. The run's
tallies are folded from these provenances, each row once (``tallies.py``).
"""

from __future__ import annotations

import asyncio
import inspect
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .._waterfall import Step, StepStatus, ToolStep, Waterfall, WaterfallStats
from ..errors import PlayDefinitionError, PlaylineError, ToolError
from ..store import RowRecord, Store, StoreIO
from ..tools import ToolResult, ToolSpec, dotted, is_value
from .callmaking import tool_spec
from .deferred import Deferred
from .events import EventLog
from .history import HISTORY_RUNS, History, StepRecord, advise_order, step_history
from .scope import current_row, result_sink
from .tallies import Tallies

__all__ = ["WaterfallRuns", "extract", "run_waterfall"]

CallTool = Callable[..., Awaitable[ToolResult]]
Count = Callable[[dict[str, Any]], None]


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def extract(result: Any, output: str) -> list[Any]:
    """The values a step's result holds for ``output`` (SEMANTICS.md 21), lists spread.

    A ``ToolResult``: its declared getters for ``output``, then the dotted path; other
    results: the dotted path. When the path is there its value decides (a blank one is
    nothing); when it is not, the whole result counts.
    """
    if isinstance(result, ToolResult):
        found = result.get(output)
        if is_value(found):
            return _spread(found)
        result = result.data
    if isinstance(result, Mapping | list) and _has_path(result, output):
        found = dotted(result, output)
        return _spread(found) if is_value(found) else []
    return _spread(result) if is_value(result) else []


def _has_path(data: Any, path: str) -> bool:
    head, _, last = path.rpartition(".")
    parent = dotted(data, head) if head else data
    if isinstance(parent, Mapping):
        return last in parent
    if isinstance(parent, list) and last.lstrip("-").isdigit():
        return -len(parent) <= int(last) < len(parent)
    return False


def _spread(value: Any) -> list[Any]:
    if isinstance(value, list | tuple):
        return [v for v in value if is_value(v)]
    return [value]


@dataclass(slots=True)
class _StepOutcome:
    status: StepStatus
    values: list[Any] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)
    rejected: int = 0
    provider: str | None = None
    note: str | None = None
    error: ToolError | None = None

    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"status": self.status, "cost": sum(r.cost for r in self.results)}
        if self.provider is not None:
            meta["provider"] = self.provider
        if self.results:
            meta["cached"] = all(r.execution.cached for r in self.results)
            if any(r.tool != self.results[0].tool for r in self.results):
                meta["by_tool"] = self._by_tool()
        if self.values:
            meta["values"] = len(self.values)
        if self.rejected:
            meta["rejected"] = self.rejected
        if self.note is not None:
            meta["error" if self.status == "failed" else "reason"] = self.note
        if self.error is not None and self.error.code:
            meta["code"] = self.error.code  # "in_doubt": `playline show` tells it apart
        return meta

    def _by_tool(self) -> dict[str, dict[str, Any]]:
        """A step that called several tools (a code step's finder and verifier): each one's
        cost and whether receipts answered it, so what a resume answers from the receipts of
        an earlier attempt is counted at what that attempt paid (``tallies.py``)."""
        parts: dict[str, dict[str, Any]] = {}
        for r in self.results:
            part = parts.setdefault(r.tool, {"cost": 0.0, "cached": True})
            part["cost"] += r.cost
            part["cached"] = part["cached"] and r.execution.cached
        return parts


async def run_waterfall(
    spec: Waterfall,
    input: Mapping[str, Any],
    *,
    ctx: object,
    call_tool: CallTool,
    count: Count,
    order: Sequence[Step] | None = None,
) -> Any:
    """Run ``spec`` for one input (one row); returns the value, or None.

    ``ctx`` is the play's context (what code steps and ``accept`` receive), ``call_tool`` the
    attempt's ``call_tool``, ``count`` takes the provenance once the waterfall has run (a
    waterfall cut off, by a budget or a stop, is not counted: its row is not stored either),
    ``order`` the steps in the order to try them (default: as declared; ``order="cheapest"``
    gives another).
    """
    row = current_row.get()
    held: list[Any] = []
    steps: dict[str, dict[str, Any]] = {}
    winner: str | None = None
    provider: str | None = None
    failure: _StepOutcome | None = None
    for step in spec.steps if order is None else order:
        if winner is not None:
            steps[step.id] = {"status": "skipped"}
            continue
        outcome = await _run_step(spec, step, input, held, ctx, call_tool)
        steps[step.id] = outcome.meta()
        if outcome.error is not None and failure is None:
            failure = outcome
        if len(held) >= spec.min_results:
            winner, provider = step.id, outcome.provider
    provenance: dict[str, Any] = {"id": spec.id, "winner": winner, "steps": steps}
    if provider is not None:
        provenance["provider"] = provider
    if winner is None:
        provenance["reason"] = _reason(spec, held, steps)
    if row is not None:  # folded into the cell's metadata when the column settles or fails
        row.notes.setdefault("waterfalls", []).append(provenance)
    count(provenance)
    if winner is None and failure is not None:
        raise _unsatisfied(spec, failure)
    if winner is None:
        return None
    return held[0] if spec.min_results == 1 else held


def _unsatisfied(spec: Waterfall, failure: _StepOutcome) -> ToolError:
    """No step found a value and one failed: the cell fails with that cause (not found
    would hide it, and a resume would not try the row again)."""
    error = failure.error
    assert error is not None
    return ToolError(
        error.tool,
        f"waterfall {spec.id!r} found no value, and {error.tool} failed: {error.provider_message}",
        status=error.status,
        code=error.code,
        request_id=error.request_id,
    )


def _reason(spec: Waterfall, held: list[Any], steps: Mapping[str, Mapping[str, Any]]) -> str:
    tried = ", ".join(f"{sid} {meta['status']}" for sid, meta in steps.items())
    if all(meta["status"] == "skipped" for meta in steps.values()):
        return (
            f"No step of waterfall {spec.id!r} had an input for this row ({tried}): it lacks "
            "the fields they read."
        )
    if held:
        return (
            f"Waterfall {spec.id!r} found {len(held)} of the {spec.min_results} values it "
            f"needs ({tried})."
        )
    return f"No step of waterfall {spec.id!r} found a value ({tried})."


async def _run_step(
    spec: Waterfall,
    step: Step,
    input: Mapping[str, Any],
    held: list[Any],
    ctx: object,
    call_tool: CallTool,
) -> _StepOutcome:
    outcome = _StepOutcome("not_found")
    token = result_sink.set(outcome.results)  # the step's calls report here
    try:
        if isinstance(step, ToolStep):
            outcome.provider = step.tool
        payload = step.map_input(input) if step.map_input is not None else input
        if payload is None:
            outcome.status, outcome.note = "skipped", "map_input gave no input for this row"
            return outcome
        if not isinstance(payload, Mapping):
            raise PlayDefinitionError(
                f"Waterfall {spec.id!r}, step {step.id!r}: map_input returned "
                f"{type(payload).__name__}; return a dict (or None to skip the row)."
            )
        if isinstance(step, ToolStep):
            found: Any = await call_tool(step.tool, payload, label=f"{spec.id}.{step.id}")
        else:
            run = step.run(payload, ctx) if step._takes_ctx else step.run(payload)
            found = await _maybe_await(run)
        for value in extract(found, spec.output):
            if len(held) >= spec.min_results:
                break  # satisfied: the rest need no (possibly paid) acceptance check
            if value in held:
                continue
            if spec.accept is not None:
                verdict = spec.accept(value, ctx) if spec._accept_takes_ctx else spec.accept(value)
                if not await _maybe_await(verdict):
                    outcome.rejected += 1
                    continue
            held.append(value)
            outcome.values.append(value)
    except ToolError as exc:  # this row's step failed; the waterfall goes on
        outcome.status, outcome.note = "failed", str(exc) or type(exc).__name__
        outcome.error = exc
    else:
        outcome.status = "completed" if outcome.values else "not_found"
    finally:
        result_sink.reset(token)
    if outcome.provider is None and outcome.results:
        outcome.provider = outcome.results[0].tool
    return outcome


class WaterfallRuns:
    """The waterfalls of one attempt: their step orders, the store's history, their tallies.

    ``tools`` and ``call_tool`` are the attempt's; ``ctx`` the play's context (code steps
    receive it). The history of the store's newest runs is read once, when a waterfall first
    runs; it decides the order of ``order="cheapest"`` and the order each waterfall's stats
    suggest.
    """

    def __init__(
        self,
        *,
        store: Store,
        run_id: str,
        events: EventLog,
        tools: Mapping[str, ToolSpec],
        call_tool: CallTool,
        ctx: object,
    ) -> None:
        self._store = store
        self._tools = tools
        self._run_id = run_id
        self._events = events
        self._call_tool = call_tool
        self._ctx = ctx
        # tallies (tallies.py): every waterfall this attempt ran, those of them no stored row
        # keeps (outside a dataset, in a hidden column), and the stored rows it reused
        # (completed in an earlier attempt)
        self.ran = Tallies()
        self.unstored = Tallies()
        self._reused = Tallies()
        self._orders: dict[Waterfall, tuple[Step, ...]] = {}  # the steps in the order run
        self._history: asyncio.Task[tuple[History, History]] | None = None

    def reused_row(self, record: RowRecord) -> None:
        """A row completed in an earlier attempt, reused as stored: its waterfalls count in
        ``ctx.waterfall_stats()`` as they are stored."""
        self._reused.add_rows((record,))

    def run(self, spec: Waterfall, input: Mapping[str, Any]) -> Awaitable[Any]:
        """The waterfall for one input, run when awaited. Its coroutine is made only then: a
        row the run stopped before it ran (a store that failed, a stop) leaves nothing that
        was never awaited."""
        return Deferred(self._run, spec, input)

    async def _run(self, spec: Waterfall, input: Mapping[str, Any]) -> Any:
        steps = self._orders.get(spec)
        if steps is None:
            self._check_tools(spec)
            steps = await self._order(spec)
        return await run_waterfall(
            spec, input, ctx=self._ctx, call_tool=self._call_tool, count=self._count, order=steps
        )

    def _count(self, provenance: dict[str, Any]) -> None:
        """A waterfall ran: count it for this attempt, and apart when no stored row will keep
        its provenance (outside a dataset, or a hidden column's cell that does not fail)."""
        self.ran.add(provenance)
        row = current_row.get()
        if row is None:
            self.unstored.add(provenance)
        elif row.column is not None and row.column.startswith("_"):
            fails = provenance["winner"] is None and any(
                step.get("status") == "failed" for step in provenance["steps"].values()
            )
            if not fails:  # a failed hidden cell is stored
                self.unstored.add(provenance)

    def _check_tools(self, spec: Waterfall) -> None:
        """Every tool the waterfall's steps call is the run's: else the run stops before any
        step is paid (a verifier without its key would fail only after a finder charged)."""
        for step in spec.steps:
            for tool in (step.tool,) if isinstance(step, ToolStep) else step.tools:
                try:
                    tool_spec(self._tools, tool)
                except PlayDefinitionError as exc:
                    raise PlayDefinitionError(
                        f"Waterfall {spec.id!r}, step {step.id!r}: {exc}"
                    ) from None

    async def _order(self, spec: Waterfall) -> tuple[Step, ...]:
        """The first rows of a waterfall wait for the store's history (one read per attempt),
        which decides the order of ``order="cheapest"``."""
        history, runs = (await self.history())[0]
        steps = self._orders.get(spec)
        if steps is not None:  # another row ordered it meanwhile
            return steps
        steps = tuple(spec.steps)
        if spec.order == "cheapest":
            ids = [s.id for s in spec.steps]
            advice = advise_order(ids, history.get(spec.id, {}), runs=runs[spec.id])
            if advice.order is not None:
                by_id = {s.id: s for s in spec.steps}
                steps = tuple(by_id[sid] for sid in advice.order)
                self._events.log(
                    f"Waterfall {spec.id!r} runs its steps cheapest first "
                    f"({', '.join(advice.order)}): {advice.note}, from {runs[spec.id]} "
                    "earlier run(s)."
                )
            else:
                self._events.log(
                    f"Waterfall {spec.id!r} runs its steps as declared: {advice.note}."
                )
        self._orders[spec] = steps
        return steps

    async def history(self) -> tuple[History, History]:
        """The store's history: of its newest runs, and of those other than this one."""
        if self._history is None:
            self._history = asyncio.get_running_loop().create_task(self._read_history())
        return await asyncio.shield(self._history)

    async def _read_history(self) -> tuple[History, History]:
        try:
            runs = await StoreIO(self._store)(self._store.list_runs, limit=HISTORY_RUNS)
        except PlaylineError as exc:  # no history: the waterfalls run as declared
            self._events.log(f"Could not read the store's waterfall history: {exc}")
            runs = []
        others = [run for run in runs if run.run_id != self._run_id]
        return step_history(runs), step_history(others)

    async def read_history(self) -> None:
        """Read the store's history (for the suggested orders) unless it was read already."""
        task = self._history
        if task is None or not task.done():
            await self.history()

    def stats(self) -> dict[str, WaterfallStats]:
        """The run's waterfall tallies as this attempt knows them (the rows it ran and those
        it reused), each with the step order the store's history and this run suggest (the
        history is read when the waterfall first runs)."""
        return self.advised(self.known())

    def known(self) -> Tallies:
        """The rows this attempt ran and those it reused as stored, each once."""
        return Tallies().merge(self._reused, self.ran)

    def advised(self, tallies: Tallies) -> dict[str, WaterfallStats]:
        """The run's ``tallies``, each with the step order that the history of the store's
        other runs and these tallies suggest."""
        task = self._history
        known: History = ({}, Counter())
        if task is not None and task.done() and not task.cancelled() and not task.exception():
            known = task.result()[1]
        return {wid: _advised(tally.snapshot(), known, wid) for wid, tally in tallies.by_id.items()}


def _advised(snap: WaterfallStats, known: History, wid: str) -> WaterfallStats:
    """``snap`` with the order its steps' tallies, added to the store's history, suggest."""
    earlier = known[0].get(wid, {})
    steps = {}
    for step in snap.steps:
        before = earlier.get(step.id) or StepRecord(id=step.id)
        steps[step.id] = StepRecord(
            id=step.id,
            attempts=before.attempts + step.attempts,
            hits=before.hits + step.hits,
            credits=before.credits + step.credits,
            cached=before.cached + step.cached,
        )
    advice = advise_order(list(steps), steps, runs=known[1][wid] + 1)
    return replace(snap, suggested_order=advice.order, order_note=advice.note)
