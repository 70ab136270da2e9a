"""Running a play: ``pl.run`` / ``pl.arun`` open the run, run an attempt, and report.

The attempt itself is the engine's (``_engine/attempt.py``: ``run_attempt``); this module
chooses the store, tools and clock, opens (or finds) the run record, and turns the outcome
into a ``RunResult``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import functools
import inspect
import os
import secrets
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast

from ._clock import Clock, SystemClock
from ._context import Context
from ._engine.attempt import (
    AttemptOutcome,
    RunStats,
    Services,
    Status,
    check_same_input,
    open_run,
    run_attempt,
)
from ._engine.drain import STOPPED, Drain
from ._engine.events import Listener
from ._engine.options import (
    DEFAULT_CELL_LIMIT,
    DEFAULT_FOREGROUND_SLEEP,
    DEFAULT_LEASE,
    DEFAULT_ROW_WINDOW,
    DEFAULT_STALL_AFTER,
    RunOptions,
    refresh_columns,
)
from ._notify import check_notify, ended
from ._notify import notify as send_notification
from ._play import Play, PlayFn, get_play
from ._run_id import check_new_run_id
from .errors import PlayDefinitionError
from .store import Store, StoreIO, owner_id, use_store
from .tools import ToolSource, ToolSpec, default_registry
from .tools._gates import ToolGates

__all__ = [
    "RunResult",
    "RunStats",
    "arun",
    "check_options",
    "gate_statistics",
    "options_checked",
    "resolve_tools",
    "run",
]

# Every run on one event loop (and clock) shares one gate per tool and provider account;
# asyncio primitives cannot outlive their loop, so each loop has its own. On a store that
# other processes use too, the gates of the tools that call providers are shared through
# that store, one set per store URL (the rest are the loop's local ones).
_gates_by_loop: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[int | tuple[int, str], ToolGates]
] = weakref.WeakKeyDictionary()


def check_options(called: str, fn: Callable[..., Any], options: Mapping[str, Any]) -> None:
    """Refuse a keyword ``fn`` does not take with a ``PlayDefinitionError`` that names the
    function the user called (``pl.run`` passes its options on to ``arun``, whose TypeError
    named that one) and the closest options it does take (``max_credit``: ``max_credits``)."""
    taken = [
        name
        for name, param in inspect.signature(fn).parameters.items()
        if param.kind in (param.KEYWORD_ONLY, param.POSITIONAL_OR_KEYWORD)
    ]
    unknown = [name for name in options if name not in taken]
    if not unknown:
        return
    name = unknown[0]
    close = difflib.get_close_matches(name, taken, n=3, cutoff=0.6)
    hint = (
        f"did you mean {' or '.join(close)}?"
        if close
        else "it takes " + ", ".join(n for n in taken if n not in ("play", "input")) + "."
    )
    raise PlayDefinitionError(f"{called}() has no option {name}=: {hint}")


_Async = TypeVar("_Async", bound=Callable[..., Awaitable[Any]])


def options_checked(called: str) -> Callable[[_Async], _Async]:
    """``fn`` (``arun``, ``aplan``) refusing an unknown keyword as ``check_options`` does."""

    def wrap(fn: _Async) -> _Async:
        @functools.wraps(fn)
        async def checked(*args: Any, **options: Any) -> Any:
            check_options(called, fn, options)
            return await fn(*args, **options)

        return cast(_Async, checked)

    return wrap


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
    """The tool table of a run from ``tools=`` (default: every @pl.tool, the tools of every
    provider whose key is set, and the env gateway)."""
    sources: list[Any]
    if tools is None:
        from . import providers

        sources = [default_registry, *providers.configured()]
        url = os.environ.get("PLAYLINE_GATEWAY_URL")
        if url:
            from .tools import Gateway

            sources.append(Gateway(url, token=os.environ.get("PLAYLINE_GATEWAY_TOKEN", "")))
    else:
        listed = _listed(tools)
        if listed is None:
            raise PlayDefinitionError(
                f"tools={tools!r}: pass a list of @pl.tool functions, pl.ToolRegistry objects "
                "and pl.Gateway objects, e.g. tools=[lookup, pl.Gateway(url)]."
            )
        sources = listed
    table: dict[str, ToolSpec] = {}
    for source in sources:
        spec = getattr(source, "__playline_tool__", source)
        if isinstance(spec, ToolSpec):
            specs: Iterable[ToolSpec] = [spec]
        elif isinstance(source, ToolSource):
            specs = source.specs()
        else:
            raise PlayDefinitionError(
                f"tools=[...] got {source!r}; pass @pl.tool functions, a pl.ToolRegistry or a "
                "pl.Gateway."
            )
        for spec in specs:
            known = table.setdefault(spec.id, spec)
            differ = _differences(known, spec)
            if differ:  # the same tool twice is fine
                where = (
                    "pass only one of them in tools="
                    if tools is not None
                    else "pass tools= to choose (by default a run has every @pl.tool of the "
                    "process, the tools of every provider whose key is set and those of the "
                    "gateway PLAYLINE_GATEWAY_URL names)"
                )
                raise PlayDefinitionError(
                    f"Two tools of this run are named {spec.id!r}, with different "
                    f"{', '.join(differ)}. Give one of them another id, or {where}."
                )
    for spec in table.values():
        via = spec.batch.via if spec.batch else None
        target = table.get(via) if via is not None else None
        if via is not None and (
            via == spec.id or target is None or target.batch is None or target.batch.via
        ):
            raise PlayDefinitionError(
                f"Tool {spec.id} sends its calls in bulk via {via!r}, which is not a batch "
                f"tool of this run. Define {via!r} with batch=pl.Batch(max_size=...) and no "
                "via= of its own."
            )
    return table


def _listed(value: Any) -> list[Any] | None:
    """``value`` as a list when it is a collection of items (not a text or a mapping)."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        return None
    return list(value)


def _differences(known: ToolSpec, spec: ToolSpec) -> list[str]:
    """What differs between two tools of one id: their settings, or their functions."""
    if known is spec:
        return []
    differ = [
        f.name
        for f in dataclasses.fields(ToolSpec)
        if f.compare and getattr(known, f.name) != getattr(spec, f.name)
    ]
    functions = [getattr(s.transport, "fn", None) for s in (known, spec)]
    if functions[0] is not functions[1]:
        differ.append("function")
    return differ


def _new_run_id(clock: Clock) -> str:
    return f"run_{int(clock.now() * 1000):012x}{secrets.token_hex(4)}"


def _gates(clock: Clock, store: Store) -> ToolGates:
    """The gates of a run: shared through ``store`` when other processes may use it (a file,
    a server), else this loop's local ones."""
    by_clock = _gates_by_loop.setdefault(asyncio.get_running_loop(), {})
    local = by_clock.get(id(clock))
    if local is None:
        local = by_clock[id(clock)] = ToolGates(clock)
    if not store.shared:
        return local
    shared = by_clock.get((id(clock), store.url))
    if shared is None:
        shared = by_clock[(id(clock), store.url)] = ToolGates(clock, store=store, local=local)
    return shared


_SYSTEM_CLOCK = SystemClock()


@options_checked("pl.arun")
async def arun(
    play: Play | PlayFn | str,
    input: Any = None,
    *,
    store: str | Store | None = None,
    run_id: str | None = None,
    tools: Iterable[Any] | None = None,
    max_credits: float | None = None,
    max_usd: float | None = None,
    listeners: Sequence[Listener] = (),
    clock: Clock | None = None,
    row_window: int = DEFAULT_ROW_WINDOW,
    foreground_sleep: float = DEFAULT_FOREGROUND_SLEEP,
    retry_in_doubt: bool = False,
    stall_after: float | None = DEFAULT_STALL_AFTER,
    lease: float = DEFAULT_LEASE,
    ledger: Literal["paid", "all"] = "paid",
    stop: asyncio.Event | None = None,
    cell_limit: int = DEFAULT_CELL_LIMIT,
    retry_failed: bool = False,
    refresh: Iterable[str] | None = None,
    notify: str | None = None,
) -> RunResult:
    """Run ``play`` with ``input``; resume it when ``run_id`` names an existing run.

    A new run's ``run_id`` (None: one is made) is letters, digits, ``.``, ``_``, ``-`` and
    ``:``, not starting with ``-``, at most 200 characters, and does not start with ``hook:``
    or ``sched-``, the ids webhooks and schedules give the runs they queue.

    Sleeps up to ``foreground_sleep`` seconds are waited out here; longer ones, and waits for
    events, end the attempt with status ``"suspended"`` (``RunResult.waiting`` says for what)
    until ``pl.Worker`` or ``playline worker`` resumes it. ``max_credits`` (the providers'
    credits) and ``max_usd`` (dollars: what LLM calls cost) stop the run before a call that
    could pass them (on a resume, each replaces the budget the run started with).

    ``store``: a URL (or None: ``PLAYLINE_STORE``, else ``sqlite:///.playline/playline.db``)
    is opened for the run and closed when it ends (a ``Dataset`` in the result reads its rows
    through the store opened again); a store given open is the caller's and stays open.

    ``stop``: set this event to stop the run cleanly: no new paid call starts, the calls
    already sent finish and are recorded, and the run ends ``"suspended"`` until resumed.
    ``retry_in_doubt`` buys again the calls whose requests may have reached their provider
    before a crash, when that provider would not recognise a repeat (by default they fail).
    ``stall_after`` seconds without progress write what the run waits for to its log.
    ``lease``: the run and the calls it has in flight are held under leases this process
    renews; if it dies on another machine, another process takes them over ``lease`` seconds
    later (on this machine, at once). ``ledger="all"`` writes a ledger row for every live
    call, also of tools that cost nothing (by default they leave none).

    ``cell_limit``: the most bytes (as JSON) one cell value or tool result may take in the
    store (default 5 MB); a larger one fails its cell, saying so, and the run goes on.
    ``retry_failed`` (resuming a run): its failed rows go on from their failed cell, the cells
    before it kept as stored (by default a failed row runs again from its first column).
    ``refresh`` (a new run): columns (``"email"`` or ``"dataset.email"``) whose tool calls are
    bought again once in this run instead of answered from older receipts; the other columns
    reuse their receipts. A resume of that run goes on refreshing them. A name no dataset of
    the run has is a warning in the run's log when the attempt ends (nothing was bought again
    for it).

    ``notify``: a URL (a Slack incoming webhook, or any receiver of JSON) that gets the run's
    summary when it ends or is stopped: status, rows, failed rows, credits per tool and the
    ``playline show`` command (see ``_notify.py`` for the body). A new run keeps it in its
    record, so a worker that resumes the run notifies too. A notification that fails is a
    warning in the run's log; the run's status stays what it was.

    A new run records the folder it was started in: relative paths given to ``ctx.csv`` are
    read from there, so resuming it from another folder reads the same files.

    Options are checked before anything runs: a wrong one raises ``PlayDefinitionError``
    naming it (``retry_in_doubt`` and ``retry_failed`` are ``True`` or ``False``: a text such
    as ``"no"`` is refused, not read as true).
    """
    target = get_play(play)
    notify = check_notify(notify)
    if run_id is not None and (not isinstance(run_id, str) or not run_id.strip()):
        raise PlayDefinitionError("run_id must be a non-empty string (or None for a new run).")
    options = RunOptions(
        max_credits=max_credits,
        max_usd=max_usd,
        row_window=row_window,
        foreground_sleep=foreground_sleep,
        retry_in_doubt=retry_in_doubt,
        stall_after=stall_after,
        lease=lease,
        ledger=ledger,
        cell_limit=cell_limit,
        retry_failed=retry_failed,
        refresh=tuple(refresh_columns(refresh)),
    )
    if clock is not None and not all(
        callable(getattr(clock, name, None)) for name in ("now", "monotonic", "sleep")
    ):
        raise PlayDefinitionError(
            f"clock={clock!r} is not a clock: give pl.ManualClock() (tests) or leave it out."
        )
    listening = _listed(listeners)
    if listening is None or not all(callable(f) for f in listening):
        raise PlayDefinitionError(
            f"listeners={listeners!r} must be a list of functions, each called with every "
            "event: listeners=[print]."
        )
    clock = clock or _SYSTEM_CLOCK
    with _store_for_run(store, clock) as (opened, gates):
        services = Services(
            store=opened,
            clock=clock,
            tools=resolve_tools(tools),
            gates=gates,
            context=Context,
            listeners=listening,
            options=options,
        )
        if run_id is not None and await StoreIO(opened)(opened.get_run, run_id) is None:
            check_new_run_id(run_id)  # an existing run resumes by its id, whatever it is
        run_id = run_id or _new_run_id(clock)
        stored: dict[str, Any] = {"cwd": os.getcwd()}  # the run record's options
        columns = list(options.refresh)
        if max_credits is not None:
            stored["max_credits"] = max_credits
        if max_usd is not None:
            stored["max_usd"] = max_usd
        if columns:
            stored["refresh"] = columns
        if notify is not None:
            stored["notify"] = notify
        record = await open_run(
            services.store,
            clock,
            run_id=run_id,
            play=target,
            input=input,
            options=stored,
        )
        check_same_input(record, input)
        if columns and sorted(record.options.get("refresh") or ()) != columns:
            raise PlayDefinitionError(
                f"Run {run_id} exists: refresh= (--refresh) re-buys columns in a new run. Start "
                f"a new run (no run_id) with refresh={columns!r}; its other columns reuse their "
                "receipts."
            )
        drain = Drain()
        watching = (
            None if stop is None else asyncio.get_running_loop().create_task(_watch(stop, drain))
        )
        try:
            outcome = await run_attempt(
                services,
                run_id,
                target,
                holder=owner_id(secrets.token_hex(6)),
                drain=drain,
                max_credits=options.max_credits,
                max_usd=options.max_usd,
            )
        finally:
            if watching is not None:
                watching.cancel()
        # Calls that finished and what was learned reach the store before the loop may end.
        await services.gates.flush()
        url = notify or record.options.get("notify")
        if url and ended(outcome.status, outcome.waiting):
            await send_notification(
                services.store,
                url,
                run_id=run_id,
                play=target.name,
                status=outcome.status,
                rows=outcome.stats.rows,
                failed=outcome.stats.rows_failed,
                error=outcome.error,
                waiting=outcome.waiting,
                now=clock.now(),
            )
        return _result(outcome)


@contextmanager
def _store_for_run(store: str | Store | None, clock: Clock) -> Iterator[tuple[Store, ToolGates]]:
    """The store a run uses (``use_store``: closed when the run ends if opened here from a
    URL), and its tools' gates, which go through it while the run goes on."""
    with use_store(store) as opened:
        gates = _gates(clock, opened)
        with gates.using(opened):
            yield opened, gates


async def _watch(stop: asyncio.Event, drain: Drain) -> None:
    await stop.wait()
    drain.stop(STOPPED)


def _result(outcome: AttemptOutcome) -> RunResult:
    return RunResult(
        run_id=outcome.run_id,
        status=outcome.status,
        output=outcome.output,
        stats=outcome.stats,
        error=outcome.error,
        exception=outcome.exception,
        waiting=outcome.waiting,
    )


def run(play: Play | PlayFn | str, input: Any = None, **options: Any) -> RunResult:
    """``arun`` for code that is not async: runs the play to its end and returns the result."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        check_options("pl.run", arun, options)
        return asyncio.run(arun(play, input, **options))
    raise PlayDefinitionError(
        "pl.run() was called inside a running event loop; use `await pl.arun(...)` there."
    )


def gate_statistics() -> dict[str, dict[str, int]]:
    """Per tool, the calls in flight, those waiting on its rate limit and its jobs' polls on
    the wire (``polling``, once it polled), summed over the runs on the running event loop:
    what a progress display shows (``ToolGates.statistics()``).
    Call it from that loop, e.g. from a task beside ``pl.arun``."""
    merged: dict[str, dict[str, int]] = {}
    for gates in _gates_by_loop.get(asyncio.get_running_loop(), {}).values():
        for tool, stats in gates.statistics().items():
            into = merged.setdefault(tool, {"in_flight": 0, "waiting": 0})
            for name, value in stats.items():
                into[name] = into.get(name, 0) + value
    return merged
