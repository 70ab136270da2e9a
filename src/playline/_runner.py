"""Running a play: the run record, its attempts, and the result."""

from __future__ import annotations

import asyncio
import os
import secrets
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from ._boundaries import Suspension
from ._clock import Clock, SystemClock
from ._context import Context
from ._dataset import Dataset
from ._events import EventLog, Listener
from ._json import dumps
from ._ledger import Ledger
from ._limits import ToolGates
from ._play import Play, PlayFn, get_play
from ._runtime import DEFAULT_FOREGROUND_SLEEP, DEFAULT_ROW_WINDOW, Lineage, Runtime, Settings
from ._taskgroups import first_error
from ._waterfall import waterfall_stats
from .errors import PlayDefinitionError, PlaylineError
from .store import RunRecord, RunStatus, Store, open_store, owner_id
from .tools import ToolSource, ToolSpec, default_registry

__all__ = ["RunResult", "RunStats", "arun", "resolve_tools", "run"]

Status = Literal["completed", "completed_with_errors", "failed", "suspended"]

# Every run on one event loop (and clock) shares one gate per tool; asyncio primitives
# cannot outlive their loop, so each loop has its own.
_gates_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, ToolGates]] = (
    weakref.WeakKeyDictionary()
)


@dataclass(frozen=True, kw_only=True)
class RunStats:
    rows: int = 0
    rows_executed: int = 0
    rows_reused: int = 0
    rows_failed: int = 0
    rows_duplicate: int = 0
    rows_waiting: int = 0
    tool_calls_live: int = 0
    tool_calls_cached: int = 0
    tool_calls_in_flight: int = 0
    tool_calls_failed: int = 0
    tool_requests: int = 0
    dispatch_passes: int = 0
    credits: float = 0.0

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class RunResult:
    run_id: str
    status: Status
    output: Any
    stats: RunStats
    error: str | None = None
    exception: BaseException | None = None
    waiting: dict[str, Any] | None = None  # a suspended run's wake time and awaited events

    @property
    def ok(self) -> bool:
        return self.status in ("completed", "completed_with_errors")


def resolve_tools(tools: Iterable[Any] | None) -> dict[str, ToolSpec]:
    """The tool table of a run from ``tools=`` (default: every @pl.tool plus the env gateway)."""
    sources: list[Any]
    if tools is None:
        sources = [default_registry]
        url = os.environ.get("PLAYLINE_GATEWAY_URL")
        if url:
            from .tools import Gateway

            sources.append(Gateway(url, token=os.environ.get("PLAYLINE_GATEWAY_TOKEN", "")))
    else:
        sources = list(tools)
    table: dict[str, ToolSpec] = {}
    for source in sources:
        spec = getattr(source, "__playline_tool__", source)
        if isinstance(spec, ToolSpec):
            table[spec.id] = spec
        elif isinstance(source, ToolSource):
            table.update((s.id, s) for s in source.specs())
        else:
            raise PlayDefinitionError(
                f"tools=[...] got {source!r}; pass @pl.tool functions, a pl.ToolRegistry or a "
                "pl.Gateway."
            )
    for spec in table.values():
        via = spec.batch.via if spec.batch else None
        if via is not None and (via not in table or table[via].batch is None):
            raise PlayDefinitionError(
                f"Tool {spec.id} sends its calls in bulk via {via!r}, which is not a batch "
                f"tool of this run. Define {via!r} with batch=pl.Batch(max_size=...) too."
            )
    return table


def _new_run_id(clock: Clock) -> str:
    return f"run_{int(clock.now() * 1000):012x}{secrets.token_hex(4)}"


def _gates(clock: Clock) -> ToolGates:
    by_clock = _gates_by_loop.setdefault(asyncio.get_running_loop(), {})
    gates = by_clock.get(id(clock))
    if gates is None:
        gates = by_clock[id(clock)] = ToolGates(clock)
    return gates


_SYSTEM_CLOCK = SystemClock()


async def arun(
    play: Play | PlayFn | str,
    input: Any = None,
    *,
    store: str | Store | None = None,
    run_id: str | None = None,
    tools: Iterable[Any] | None = None,
    max_credits: float | None = None,
    listeners: Sequence[Listener] = (),
    clock: Clock | None = None,
    row_window: int = DEFAULT_ROW_WINDOW,
    foreground_sleep: float = DEFAULT_FOREGROUND_SLEEP,
) -> RunResult:
    """Run ``play`` with ``input``; resume it when ``run_id`` names an existing run.

    Sleeps up to ``foreground_sleep`` seconds are waited out here; longer ones, and waits for
    events, end the attempt with status ``"suspended"`` (``RunResult.waiting`` says for what)
    until ``pl.Worker`` or ``playline worker`` resumes it.
    """
    target = get_play(play)
    if run_id is not None and (not isinstance(run_id, str) or not run_id.strip()):
        raise PlayDefinitionError("run_id must be a non-empty string (or None for a new run).")
    if not isinstance(row_window, int) or row_window < 1:
        raise PlayDefinitionError("row_window must be a whole number >= 1.")
    if not isinstance(foreground_sleep, int | float) or foreground_sleep < 0:
        raise PlayDefinitionError("foreground_sleep must be a number of seconds >= 0.")
    clock = clock or _SYSTEM_CLOCK
    settings = Settings(
        store=open_store(store),
        clock=clock,
        tools=resolve_tools(tools),
        gates=_gates(clock),
        listeners=listeners,
        row_window=row_window,
        foreground_sleep=foreground_sleep,
    )
    return await _run(
        settings,
        target,
        input,
        run_id=run_id or _new_run_id(clock),
        lineage=Lineage.root(target),
        max_credits=max_credits,
    )


async def _run(
    settings: Settings,
    target: Play,
    input: Any,
    *,
    run_id: str,
    lineage: Lineage,
    parent_run_id: str | None = None,
    max_credits: float | None = None,
    parent_ledger: Ledger | None = None,
) -> RunResult:
    """One attempt of a run (a root run or a child play's)."""
    db, clock = settings.store, settings.clock
    budget = max_credits if max_credits is not None else target.max_credits
    now = clock.now()
    existing = db.get_run(run_id)
    if existing is not None and existing.play != target.name:
        raise PlayDefinitionError(
            f"Run {run_id!r} belongs to play {existing.play!r}, not {target.name!r}. Resume it "
            "with its own play, or start a new run."
        )
    if existing is None:
        db.create_run(
            RunRecord(
                run_id=run_id,
                play=target.name,
                status=RunStatus.RUNNING,
                input=_json_or_error(input, "The play input"),
                created_at=now,
                updated_at=now,
                parent_run_id=parent_run_id,
            )
        )
    else:
        db.update_run(run_id, status=RunStatus.RUNNING, updated_at=now, error=None, waiting=None)
        input = existing.input if input is None else input
    spent = _tree_spent(db, run_id) if existing else 0.0
    events = EventLog(db, run_id, clock, settings.listeners)
    ledger = Ledger(run_id, clock, max_credits=budget, spent=spent, parent=parent_ledger)
    error: BaseException | None = None
    output: Any = None
    runtime: Runtime | None = None
    events.emit("run", status="running", data={"play": target.name, "resumed": bool(existing)})
    try:
        async with asyncio.TaskGroup() as tg:
            runtime = Runtime(
                settings,
                run_id=run_id,
                play=target,
                events=events,
                ledger=ledger,
                owner=owner_id(secrets.token_hex(6)),
                resuming=existing is not None,
                spawn=tg.create_task,
                lineage=lineage,
                run_child=_run,
            )
            runtime.ctx = Context(runtime)
            output = await target.fn(runtime.ctx, input)
    except BaseExceptionGroup as group:
        error = first_error(group)
    except (Exception, Suspension) as exc:  # the play's error fails the run; reported, not raised
        error = exc
    assert runtime is not None
    stats = _stats(runtime, ledger)
    suspension = error if isinstance(error, Suspension) else None
    status: Status
    if suspension is not None:
        status, error = "suspended", None
    elif error is not None:
        status = "failed"
    elif stats.rows_failed:
        status = "completed_with_errors"
    else:
        status = "completed"
    stored_output: Any = None
    if status != "failed" and suspension is None:
        try:
            stored_output = _stored_output(output, run_id)
        except PlaylineError as exc:
            error, status = exc, "failed"
    message = _message(error)
    waiting = suspension.waiting() if suspension else None
    for stats_of_waterfall in waterfall_stats(runtime).values():  # the step trace
        events.emit("waterfall", data=stats_of_waterfall.to_dict())
    events.emit("run", status=status, error=message, data={**stats.to_dict(), "waiting": waiting})
    events.flush()
    db.update_run(
        run_id,
        status=RunStatus(status),
        output=stored_output,
        error=message,
        stats=stats.to_dict(),
        updated_at=clock.now(),
        waiting=waiting,
    )
    return RunResult(
        run_id=run_id,
        status=status,
        output=output if status in ("completed", "completed_with_errors") else None,
        stats=stats,
        error=message,
        exception=error,
        waiting=waiting,
    )


def run(play: Play | PlayFn | str, input: Any = None, **options: Any) -> RunResult:
    """``arun`` for code that is not async: runs the play to its end and returns the result."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(arun(play, input, **options))
    raise PlayDefinitionError(
        "pl.run() was called inside a running event loop; use `await pl.arun(...)` there."
    )


def _tree_spent(db: Store, run_id: str) -> float:
    """Credits spent by a run and its child plays (their run ids extend the parent's)."""
    runs = [run_id] + [
        r.run_id for r in db.list_runs(limit=1_000_000) if r.run_id.startswith(run_id + "/")
    ]
    return sum(e.credits for rid in runs for e in db.read_ledger(rid))


def _json_or_error(value: Any, what: str) -> Any:
    dumps(value, what=what)
    return value


def _stored_output(output: Any, run_id: str) -> Any:
    if isinstance(output, Dataset):
        return {"$dataset": output.name, "run_id": run_id, "rows": len(output)}
    return _json_or_error(output, "The play's return value")


def _message(error: BaseException | None) -> str | None:
    if error is None:
        return None
    text = str(error) or type(error).__name__
    return text if isinstance(error, PlaylineError) else f"{type(error).__name__}: {text}"


def _stats(runtime: Runtime, ledger: Ledger) -> RunStats:
    calls = runtime.executor.stats
    totals: dict[str, int] = {}
    for ds in runtime.datasets.values():
        if ds is not None:
            for name, value in ds.to_dict().items():
                totals[name] = totals.get(name, 0) + value
    return RunStats(
        **totals,
        tool_calls_live=calls.live,
        tool_calls_cached=calls.cached,
        tool_calls_in_flight=calls.in_flight,
        tool_calls_failed=calls.failed,
        tool_requests=calls.requests,
        dispatch_passes=runtime.dispatcher.passes,
        credits=round(ledger.spent, 6),
    )


def gate_statistics() -> dict[str, dict[str, int]]:
    """Per tool, the calls in flight and those waiting on its rate limit, summed over the runs
    on the running event loop: what a progress display shows (``ToolGates.statistics()``).
    Call it from that loop, e.g. from a task beside ``pl.arun``."""
    merged: dict[str, dict[str, int]] = {}
    for gates in _gates_by_loop.get(asyncio.get_running_loop(), {}).values():
        for tool, stats in gates.statistics().items():
            into = merged.setdefault(tool, {"in_flight": 0, "waiting": 0})
            for name, value in stats.items():
                into[name] = into.get(name, 0) + value
    return merged
