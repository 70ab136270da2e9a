"""One attempt of a run: its parts wired together, and ``run_attempt()``.

``run_attempt(services, run_id, play, ...)`` is the one seam where an attempt runs: the local
runner (``pl.run``), a worker resuming a suspended run, a child play, or a Temporal activity
call it. Everything it needs to resume is in the store: it claims the run (a lease its
holder renews), runs the play from the start (receipts and boundaries make the replay
cheap), and writes how the attempt ended. An attempt ends completed, failed, or suspended
(with what it waits for: a wake time, events, or a stop).
"""

from __future__ import annotations

import asyncio
import inspect
import shlex
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._clock import Clock
from .._json import dumps
from .._play import Play
from ..errors import PlayDefinitionError, PlaylineError, RunHeld, StoreError
from ..store import (
    RowRecord,
    RunClaimOutcome,
    RunRecord,
    RunStatus,
    Store,
    StoreIO,
    display_url,
)
from ..store._owners import holding
from ..tools import Execution, ToolResult, ToolSpec
from ..tools._gates import ToolGates
from ..tools._spec import UNITS
from .boundaries import Boundaries
from .callmaking import CallMaker
from .calls import CallExecutor, CallStats, ToolCall
from .children import ChildPlays
from .collector import fewer_collections
from .datasets import DatasetStats
from .dispatch import Dispatcher
from .drain import BUDGET, EXITED, LEASE_LOST, STOPPED, Drain, escaped
from .events import EventLog, Listener, preview
from .governance import Governor, Lineage
from .ledger import Ledger
from .options import RunOptions
from .planning import Planner
from .supervise import Supervisor
from .suspension import Suspension
from .tallies import Tallies, stored_tallies
from .taskgroups import TaskSet, first_error
from .verdict import (
    Facts,
    RunStats,
    Status,
    StoredAs,
    Verdict,
    cell_causes,
    failed,
    json_or_error,
    verdict,
    write_end,
)
from .waterfalls import WaterfallRuns

__all__ = [
    "Attempt",
    "AttemptOutcome",
    "RunStats",
    "Services",
    "Status",
    "StoredAs",
    "check_same_input",
    "open_run",
    "run_attempt",
]


@dataclass(frozen=True, kw_only=True)
class Services:
    """What every attempt started by one caller shares, child plays included."""

    store: Store
    clock: Clock
    tools: Mapping[str, ToolSpec]
    gates: ToolGates
    context: Callable[[Attempt], object]  # the ``ctx`` a play sees (the facade's Context)
    listeners: Sequence[Listener] = ()
    org: str = "local"
    # run_attempt takes a budget apart: a child play shares these options, not the budget
    options: RunOptions = field(default_factory=RunOptions)
    planner: Planner | None = None  # a plan: calls are counted, not sent (planning.py)


@dataclass(frozen=True, kw_only=True)
class AttemptOutcome:
    """How an attempt ended. ``output`` is the play's value (live), ``stored`` as stored."""

    run_id: str
    status: Status
    output: Any
    stored: Any
    stats: RunStats
    error: str | None = None
    exception: BaseException | None = None
    waiting: dict[str, Any] | None = None


async def open_run(
    store: Store,
    clock: Clock,
    *,
    run_id: str,
    play: Play,
    input: Any,
    parent_run_id: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> RunRecord:
    """The run ``run_id``, created (not yet held) when it is new, with ``options``. A known run
    must belong to ``play``; it keeps its input (``check_same_input`` tells a person so)."""
    io = StoreIO(store)
    existing = await io(store.get_run, run_id)
    if existing is None:
        now = clock.now()
        record = RunRecord(
            run_id=run_id,
            play=play.name,
            status=RunStatus.RUNNING,
            input=json_or_error(input, "The play input"),
            created_at=now,
            updated_at=now,
            parent_run_id=parent_run_id,
            options=dict(options or {}),
        )
        if await io(store.create_run, record):
            return record
        existing = await io(store.get_run, run_id)  # created meanwhile by another process
        assert existing is not None
    if existing.play != play.name:
        raise PlayDefinitionError(
            f"Run {run_id!r} belongs to play {existing.play!r}, not {play.name!r}. Resume it "
            "with its own play, or start a new run."
        )
    return existing


def check_same_input(record: RunRecord, input: Any) -> None:
    """A run resumed by its id keeps the input it started with: a person (``pl.run``,
    ``playline run --run-id``) giving another one is told so, not silently ignored. (A child
    play resumed by its parent keeps its own, whatever the parent passes now.)"""
    if input is None or dumps(input, what="The play input") == dumps(record.input):
        return
    raise PlayDefinitionError(
        f"Run {record.run_id!r} exists with another input "
        f"({preview(dumps(record.input).decode())}), and a run keeps the "
        f"input it started with. Resume it without an input (`playline resume "
        f"{shlex.quote(record.run_id)}`, or pl.run(play, run_id={record.run_id!r})), or start "
        "a new run "
        "with this input (no run id)."
    )


@dataclass(slots=True)
class _Asked:
    """The datasets a play asked an attempt for: their columns, bare and dotted (what
    ``--refresh`` may name), and the coroutines of their runs (one never awaited fails it)."""

    columns: dict[str, None] = field(default_factory=dict)
    runs: list[tuple[str, Coroutine[Any, Any, Any]]] = field(default_factory=list)


class Attempt:
    """The parts of one attempt, wired together; the ``Context`` a play sees delegates here.

    Engine parts do not take the attempt whole: each gets what it uses (datasets take it as
    a ``DatasetHost``)."""

    ended = False  # its end is recorded: a ctx kept past it refuses to work

    def __init__(
        self,
        services: Services,
        *,
        record: RunRecord,
        play: Play,
        holder: str,
        drain: Drain,
        lineage: Lineage,
        ledger: Ledger,
    ) -> None:
        self.services = services
        self.record = record  # as claimed: the run's id, options and counters
        self.play = play
        self.holder = holder
        self.drain = drain
        self.lineage = lineage
        self.ledger = ledger
        self.governor = Governor(play.limits, record.counters.get("run"))
        self.events = EventLog(services.store, self.run_id, self.clock, services.listeners)
        self.tasks = TaskSet()
        self.executor = self._executor()
        self.dispatcher = Dispatcher(self.executor, self.tasks.spawn, self.clock)
        self.boundaries = Boundaries(
            run_id=self.run_id,
            store=self.store,
            clock=self.clock,
            foreground_sleep=services.options.foreground_sleep,
        )
        self.children = ChildPlays(
            run_id=self.run_id,
            play=play,
            store=self.store,
            boundaries=self.boundaries,
            events=self.events,
            governor=self.governor,
            lineage=lineage,
            start=self._start_child,
        )
        self.datasets: dict[str, DatasetStats | None] = {}
        self._asked = _Asked()  # the datasets the play asked for: columns, runs
        self.cell_errors: dict[str, tuple[int, str]] = {}
        self.calls = CallMaker(
            tools=services.tools,
            org=services.org,
            clock=self.clock,
            governor=self.governor,
            refuse=self.executor.refused_input,
            refresh=frozenset(record.options.get("refresh") or ()),
            fresh_since=record.created_at,
        )
        self.ctx = services.context(self)
        self.waterfalls = WaterfallRuns(
            store=self.store,
            run_id=self.run_id,
            events=self.events,
            tools=services.tools,
            call_tool=self.call_tool,
            ctx=self.ctx,
        )

    def _executor(self) -> CallExecutor:
        services = self.services
        return CallExecutor(
            store=self.store,
            clock=self.clock,
            gates=services.gates,
            governor=self.governor,
            ledger=self.ledger,
            events=self.events,
            tools=services.tools,
            owner=self.holder,
            drain=self.drain,
            options=services.options,
            planner=services.planner,
        )

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def play_name(self) -> str:
        return self.play.name

    @property
    def store(self) -> Store:
        return self.services.store

    @property
    def clock(self) -> Clock:
        return self.services.clock

    @property
    def options(self) -> RunOptions:
        return self.services.options

    @property
    def resuming(self) -> bool:
        return self.record.attempts > 1

    @property
    def workdir(self) -> str | None:
        """Where the run was started: relative input paths (``ctx.csv``) are read from there."""
        cwd = self.record.options.get("cwd")
        return cwd if isinstance(cwd, str) else None

    # datasets
    def reused_row(self, record: RowRecord) -> None:
        """A row completed in an earlier attempt, reused as stored: its waterfalls count in
        ``ctx.waterfall_stats()`` as they are stored."""
        self.waterfalls.reused_row(record)

    def dataset_asked(self, name: str, running: Coroutine[Any, Any, Any]) -> None:
        """``ctx.dataset(name)...run()`` was called: its coroutine, checked at the end."""
        self._asked.runs.append((name, running))

    def never_awaited(self) -> list[str]:
        """The datasets whose ``run()`` the play never awaited (closed now: nothing ran)."""
        names = []
        for name, running in self._asked.runs:
            if inspect.getcoroutinestate(running) == inspect.CORO_CREATED:
                running.close()
                names.append(name)
        return names

    def claim_dataset_name(self, name: str, columns: Sequence[str] = ()) -> None:
        if name in self.datasets:
            raise PlayDefinitionError(
                f"Play {self.play_name!r} already ran a dataset named {name!r} in this run. "
                "Give each ctx.dataset(...) its own name."
            )
        self.datasets[name] = None
        self._asked.columns.update({c: None for c in columns})
        self._asked.columns.update({f"{name}.{c}": None for c in columns})

    def refresh_warnings(self) -> dict[str, str]:
        """A warning for each ``refresh=`` name no dataset this attempt ran has: nothing was
        bought again for it (``playline run --refresh`` warns of them too)."""
        columns = ", ".join(sorted(c for c in self._asked.columns if "." not in c)) or "none"
        return {
            name: f"warning: refresh {name!r} (--refresh): the run has no column {name!r} "
            f"(its columns: {columns}); nothing was bought again for it."
            for name in sorted(self.calls.refresh)
            if name not in self._asked.columns
        }

    # tools
    def stored_result(self, tool: str | None, data: Any) -> ToolResult:
        """A tool result kept in a stored row, back as the resolver returned it (a retried
        row goes on from it): from the store, at no cost."""
        spec = self.services.tools.get(tool or "")
        return ToolResult(
            tool=tool or "",
            data=data,
            execution=Execution("cache"),
            outputs=spec.outputs if spec else None,
            lists=spec.lists if spec else None,
        )

    def call_tool(
        self,
        tool: str,
        input: Mapping[str, Any],
        *,
        label: str | None = None,
        force: bool = False,
        stale_after: int | None = None,
    ) -> Awaitable[ToolResult]:
        """Queue (inside a column) or prepare (outside) a tool call; await the result.

        Inside a column the call joins the dispatcher's queue at once, so several calls a
        resolver makes (``asyncio.gather``) go out in the same pass; while its row group
        collects them (``RowScope.made``), the group queues them as the resolver returns.
        """
        call = self.calls.make(tool, input, label=label, force=force, stale_after=stale_after)
        scope = call.scope
        if scope is None:
            return self._direct(call)
        if scope.made is not None:
            scope.made.append(call)
            return call.future
        return self.dispatcher.submit(call, scope)

    async def _direct(self, call: ToolCall) -> ToolResult:
        await self.executor.execute(call.spec, [call])
        return await call.future

    # child plays
    async def run_play(self, key: str, play: Play, input: Any) -> Any:
        """Run a child play; returns its output as stored (a dataset as its reference)."""
        return await self.children.run(key, play, input)

    async def _start_child(
        self, child_id: str, play: Play, input: Any, lineage: Lineage
    ) -> AttemptOutcome:
        await open_run(
            self.store,
            self.clock,
            run_id=child_id,
            play=play,
            input=input,
            parent_run_id=self.run_id,
        )
        return await run_attempt(
            self.services,
            child_id,
            play,
            holder=self.holder,
            drain=self.drain,
            lineage=lineage,
            parent_ledger=self.ledger,
        )

    # running
    async def execute(self, input: Any) -> tuple[Any, BaseException | None]:
        """Run the play; a stop lets the requests already sent finish, then ends it."""
        loop = asyncio.get_running_loop()
        play = loop.create_task(self._play(input))
        stop = loop.create_task(self.drain.wait())
        error: BaseException | None = None
        output: Any = None
        try:
            await asyncio.wait({play, stop}, return_when=asyncio.FIRST_COMPLETED)
            if not play.done() and self.drain.reason != BUDGET:
                # (over budget, the refused calls fail and the play ends on its own)
                await self.executor.settle_in_flight()
                play.cancel()
            try:
                output = await play
            except asyncio.CancelledError:
                if not self.drain.stopping:
                    raise
                error = self._stopped()
            except BaseExceptionGroup as group:
                error = first_error(group)
            except (Exception, Suspension) as exc:
                error = exc
        finally:
            stop.cancel()
            if not play.done():
                play.cancel()
            try:
                current = asyncio.current_task()
                if current is None or not current.cancelling():  # cancelled: it ends at once,
                    await self.executor.settle_in_flight()  # what is in flight stays in doubt
            finally:  # also when a cancel comes while the calls in flight settle
                await self.tasks.close()
                await self.executor.close()
        if self.tasks.error is not None and error is None:
            error = self.tasks.error
        if isinstance(error, PlaylineError) and self.drain.reason == BUDGET:
            error = self.drain.error or error
        elif self.drain.reason == EXITED:  # whatever it interrupted, the run fails with it
            error = self.drain.error
        return output, error

    async def _play(self, input: Any) -> Any:
        try:
            return await self.play.fn(self.ctx, input)
        except BaseException as exc:  # sys.exit() in a column or the play ends the run here
            raise escaped(self.drain, exc)  # noqa: B904 - the original is the drain's error

    def _stopped(self) -> BaseException:
        reason = self.drain.reason
        if reason in (BUDGET, EXITED) and self.drain.error is not None:
            return self.drain.error
        if reason == LEASE_LOST:
            return StoreError(
                f"Run {self.run_id} was taken over by another attempt (this one could not renew "
                "its lease in time); this attempt stopped. Its paid calls are kept."
            )
        return Suspension(stop=reason)

    def stats(self) -> RunStats:
        calls: CallStats = self.executor.stats
        totals: dict[str, int] = {}
        for ds in self.datasets.values():
            if ds is not None:
                for name, value in ds.to_dict().items():
                    totals[name] = totals.get(name, 0) + value
        return RunStats(
            **totals,
            tool_calls_live=calls.live,
            tool_calls_cached=calls.cached,
            tool_calls_in_flight=calls.in_flight,
            tool_calls_twins=calls.twins,
            tool_calls_failed=calls.failed,
            tool_calls_not_sent=calls.not_sent,
            tool_requests=calls.requests,
            dispatch_passes=self.dispatcher.passes,
            credits=round(self.ledger.spent, 6),
            credits_in_doubt=round(self.ledger.in_doubt, 6),
            usd=round(self.ledger.spent_usd, 9),  # dollars: LLM calls cost millionths
            usd_in_doubt=round(self.ledger.in_doubt_usd, 9),
            errors=calls.causes(),
            cell_errors=cell_causes(self.cell_errors),
            tools={tool: dict(counts) for tool, counts in calls.by_tool.items()},
            waterfalls=self.waterfalls.known().records(),
        )

    def describe(self) -> str:
        """What the attempt waits for: rows, calls, gates (for the stall report)."""
        parts = [
            f"{self.dispatcher.active_rows} rows active, {self.dispatcher.blocked_rows} "
            f"waiting on calls, {self.executor.in_flight} calls in flight"
        ]
        for tool, stats in self.services.gates.statistics().items():
            if stats["in_flight"] or stats["waiting"]:
                parts.append(
                    f"{tool}: {stats['in_flight']} sent, {stats['waiting']} waiting for its "
                    "rate limit or concurrency cap"
                )
            if stats.get("polling"):
                parts.append(f"{tool}: {stats['polling']} polls of its jobs sent")
        return "; ".join(parts) + "."


async def run_attempt(
    services: Services,
    run_id: str,
    play: Play,
    *,
    holder: str,
    drain: Drain | None = None,
    lineage: Lineage | None = None,
    parent_ledger: Ledger | None = None,
    max_credits: float | None = None,
    max_usd: float | None = None,
) -> AttemptOutcome:
    """Claim the run, run one attempt of ``play`` and record how it ended. ``max_credits``
    and ``max_usd`` override the budgets the run was started with (e.g. raised to go on after
    a budget stop).

    Raises ``RunHeld`` when another live attempt holds the run (nothing is done), and
    ``StoreError`` when the store cannot record; the play's own errors end the attempt
    ``failed`` and are returned, not raised.
    """
    budgets = {"max_credits": max_credits, "max_usd": max_usd}
    record = await _claim(services, run_id, holder=holder, budgets=budgets)
    root = lineage is None
    drain = drain or Drain()
    if lineage is None:
        lineage = Lineage.root(play, record.counters.get("tree"))
    attempt = Attempt(
        services,
        record=record,
        play=play,
        holder=holder,
        drain=drain,
        lineage=lineage,
        ledger=await _ledger(services, record, play, parent_ledger),
    )
    attempt.events.emit(
        "run",
        status="running",
        data={"play": play.name, "resumed": attempt.resuming, "attempt": record.attempts},
    )
    # written at once: an attempt killed before the first timed flush is still on record
    await attempt.events.flush()
    supervising = _supervise(attempt) if root else None
    with holding(holder), fewer_collections():
        try:
            output, error = await attempt.execute(record.input)
        except asyncio.CancelledError:
            # cancelled from outside (a parent play stopping): still record how it ended
            await _end(attempt, record, None, Suspension(stop=drain.reason or STOPPED), root=root)
            raise
        finally:
            if supervising is not None:
                supervising.cancel()
                await asyncio.gather(supervising, return_exceptions=True)
        return await _end(attempt, record, output, error, root=root)


async def _claim(
    services: Services, run_id: str, *, holder: str, budgets: dict[str, float | None]
) -> RunRecord:
    """The run, claimed for ``holder``; ``RunHeld`` when another live attempt holds it."""
    store = services.store
    now = services.clock.now()
    claim = await StoreIO(store)(
        store.claim_run,
        run_id,
        holder=holder,
        lease_until=now + services.options.lease,
        now=now,
        # a budget given now (raised to go on after a budget stop) stands from now on
        options={name: value for name, value in budgets.items() if value is not None} or None,
    )
    if claim.outcome is RunClaimOutcome.MISSING or claim.record is None:
        raise StoreError(
            f"Run {run_id} is not in the store {display_url(store.url)}: open it first."
        )
    record = claim.record
    if claim.outcome is RunClaimOutcome.HELD:
        raise RunHeld(run_id, holder=record.holder, lease_until=record.lease_until or 0.0)
    return record


async def _ledger(
    services: Services, record: RunRecord, play: Play, parent: Ledger | None
) -> Ledger:
    """The attempt's ledger: the run's budget, and on a resume what it spent and left in
    doubt (calls an earlier attempt sent with no record of their end may have been charged)."""
    store, clock, run_id = services.store, services.clock, record.run_id
    io = StoreIO(store)
    options, again = record.options, record.attempts > 1
    ledger = Ledger(
        run_id,
        clock,
        max_credits=options.get("max_credits", play.max_credits),
        max_usd=options.get("max_usd", play.max_usd),
        spent=await io(store.spent, run_id) if again else 0.0,
        spent_usd=await io(store.spent, run_id, "usd") if again else 0.0,
        parent=parent,
    )
    if again:
        doubtful = await io(store.doubtful_receipts, run_id, now=clock.now())
        tools = services.tools
        for unit in UNITS:  # a call's worst case known without its input: its tool's cost
            ledger.doubt({key: tools[tool].cost.credits for key, tool in doubtful.items()
                          if tool in tools and tools[tool].cost.unit == unit
                          and tools[tool].cost.credits}, unit)  # fmt: skip
    return ledger


def _supervise(attempt: Attempt) -> asyncio.Task[None]:
    """The root attempt's supervisor: it renews the lease and reports stalls."""
    options = attempt.options
    supervisor = Supervisor(
        store=attempt.store,
        clock=attempt.clock,
        holder=attempt.holder,
        run_id=attempt.run_id,
        drain=attempt.drain,
        events=attempt.events,
        progress=lambda: (
            attempt.executor.progress + attempt.dispatcher.passes + attempt.dispatcher.rows_ended
        ),
        describe=attempt.describe,
        stall_after=options.stall_after,
        lease=options.lease,
    )
    return asyncio.get_running_loop().create_task(supervisor.run())


async def _end(
    attempt: Attempt, record: RunRecord, output: Any, error: BaseException | None, *, root: bool
) -> AttemptOutcome:
    attempt.ended = True  # from here, its ctx refuses to work (one kept by the play's code)
    unawaited = attempt.never_awaited()
    if unawaited and error is None:
        error = PlayDefinitionError(
            f"The play never awaited the run of dataset(s) {', '.join(map(repr, unawaited))}: "
            "its rows never ran. Write `await ctx.dataset(...)...run()`."
        )
    stats = attempt.stats()
    stats.credits = await _recorded_credits(attempt, stats.credits)
    tallies = await _run_tallies(attempt)
    stats.waterfalls = tallies.records()
    facts = Facts(
        run_id=attempt.run_id,
        output=output,
        error=error,
        stats=stats,
        calls=attempt.executor.stats,
        cell_errors=attempt.cell_errors,
    )
    ended = await _tell_end(attempt, verdict(facts), stats, tallies)
    counters = {"run": dict(attempt.governor.counts)}
    if root:
        counters["tree"] = dict(attempt.lineage.tree.counts)
    if attempt.drain.reason != LEASE_LOST:  # the run is another attempt's now
        ended = await write_end(
            attempt.store, attempt.run_id, ended, holder=attempt.holder, stats=stats,
            counters=counters, now=attempt.clock.now(),
        )  # fmt: skip
    return AttemptOutcome(
        run_id=attempt.run_id,
        status=ended.status,
        output=output if ended.returned else None,
        stored=ended.stored,
        stats=stats,
        error=ended.message,
        exception=ended.error,
        waiting=ended.waiting,
    )


async def _tell_end(attempt: Attempt, ended: Verdict, stats: RunStats, tallies: Tallies) -> Verdict:
    """Log the end, with the waterfalls' step traces: an end that cannot be told (it holds
    a secret, the log cannot be written) fails the attempt, saying why."""
    events = attempt.events
    if tallies:  # the step order the history suggests needs it read
        await attempt.waterfalls.read_history()
    for name, warning in attempt.refresh_warnings().items():
        events.log(warning, refresh=name)
    try:
        for tally in attempt.waterfalls.advised(
            tallies
        ).values():  # the step trace: the run's, so far
            events.emit("waterfall", status="run", data=tally.to_dict())
        data = {**stats.to_dict(), "waiting": ended.waiting}
        events.emit("run", status=ended.status, error=ended.message, data=data)
    except PlayDefinitionError as exc:  # the end holds a secret: it is told to nobody
        ended = failed(ended, exc)
        events.emit("run", status=ended.status, error=ended.message)
    try:
        await events.flush()
    except PlaylineError as exc:  # the log could not be written: the end still is
        if ended.status != "failed":
            ended = failed(ended, exc)
    return ended


async def _run_tallies(attempt: Attempt) -> Tallies:
    """The run's waterfall tallies (``tallies.py``). A run's first attempt stored the rows it
    ran, each once: its own counts are the run's. A resume's are its stored rows, each once as
    stored (whichever attempt wrote it: a killed one's too, which never reported), and what
    this attempt ran that no row keeps; what the attempt counted when the store cannot say."""
    if not attempt.resuming:
        return attempt.waterfalls.known()
    try:
        stored = await StoreIO(attempt.store)(stored_tallies, attempt.store, attempt.run_id)
    except PlaylineError as exc:
        attempt.events.log(f"Could not read the run's rows for its waterfall tallies: {exc}")
        return attempt.waterfalls.known()
    return stored.merge(attempt.waterfalls.unstored)


async def _recorded_credits(attempt: Attempt, counted: float) -> float:
    """The run's credits as its ledger in the store has them: a receipt's generation is
    charged there once, however often its call went out (a failed call retried with its
    idempotency key is not charged again by the provider either). What the attempt counted
    when the store cannot say."""
    try:
        spent = await StoreIO(attempt.store)(attempt.store.spent, attempt.run_id)
    except PlaylineError:
        return counted
    return round(spent, 6)
