"""One attempt of a run as a Temporal activity: ``run_attempt()`` with Temporal's clock, its
heartbeats and its shutdown.

The activity finds the run in the store and its play through the worker's ``resolve``, runs
one attempt (the engine's ``run_attempt``: receipts and boundaries make it resume where the
last one stopped), and returns how it ended as a value. Only trouble outside the play raises:
the store unreachable or the run held by another live attempt (Temporal retries), a run or
play this worker cannot find (not retried: the workflow fails and says why).

- **Clock**: the workflow's time when it scheduled the attempt (``_clock.py``).
- **Heartbeats**: after every batch of calls and every batch of finished rows, with the
  progress in the details (what ``temporal workflow describe`` shows), and on a timer while a
  batch takes long, so a slow provider does not look like a dead worker.
- **Drain**: when the worker shuts down (or the workflow is cancelled) the attempt stops
  starting paid calls, lets those in flight finish and be recorded, and ends ``yield`` (or
  ``stopped``): another worker continues at once, paying for nothing twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from ..._context import Context
from ..._engine.attempt import AttemptOutcome, Services, run_attempt
from ..._engine.drain import LEASE_LOST, STOPPED, YIELD, Drain
from ..._engine.options import (
    DEFAULT_FOREGROUND_SLEEP,
    DEFAULT_ROW_WINDOW,
    DEFAULT_STALL_AFTER,
    RunOptions,
)
from ..._play import Play
from ..._runner import resolve_tools
from ...errors import RunHeld
from ...store import (
    Event,
    RunClaimOutcome,
    RunEnd,
    RunRecord,
    RunStatus,
    Store,
    StoreIO,
    display_url,
    owner_id,
)
from ...store._protocol import ConnectionLost
from ...tools._gates import ToolGates
from ._clock import TemporalClock
from ._messages import (
    ACTIVITY,
    RUN_HELD,
    STORE_LOST,
    AttemptInput,
    AttemptResult,
)
from ._messages import LEASE_LOST as LEASE_LOST_ERROR
from ._schedules import record_new_run, unrunnable

__all__ = ["AttemptActivity", "AttemptSettings", "Ended", "Resolve"]

Resolve = Callable[[RunRecord], tuple[Play, Iterable[Any] | None]]
_MAX_TICK = 10.0  # seconds between heartbeats while nothing else sends one
_CANCEL_AGAIN = 0.2  # seconds an attempt being stopped at once gets before the next cancel


@dataclass(frozen=True, kw_only=True)
class AttemptSettings:
    """How this worker runs attempts (the engine's knobs, as ``pl.arun`` has them)."""

    foreground_sleep: float = DEFAULT_FOREGROUND_SLEEP
    row_window: int = DEFAULT_ROW_WINDOW
    stall_after: float | None = DEFAULT_STALL_AFTER
    lease: float = 30.0
    retry_in_doubt: bool = False


@dataclass(frozen=True, kw_only=True)
class Ended:
    """What a worker reports about an attempt it ran."""

    run_id: str
    attempt: int
    status: str
    seconds: float
    rows: int
    credits: float
    waiting: dict[str, Any] | None = None
    error: str | None = None


class Heartbeats:
    """A listener on the attempt's events: a heartbeat after each batch sent and each group of
    rows finished, carrying the progress so far (the SDK throttles what reaches the server)."""

    def __init__(self, run_id: str, attempt: int) -> None:
        self.details: dict[str, Any] = {
            "run_id": run_id,
            "attempt": attempt,
            "batches": 0,
            "rows": 0,
        }

    def __call__(self, event: Event) -> None:
        if event.kind == "batch":  # one event for the requests sent together: a beat each
            for _ in range(int((event.data or {}).get("requests", 1))):
                self.details["batches"] += 1
                self.beat()
            return
        if event.kind == "rows":
            self.details["rows"] += len((event.data or {}).get("rows", ()))
        elif event.kind == "row":
            self.details["rows"] += 1
        else:
            return
        self.beat()

    def beat(self) -> None:
        activity.heartbeat(dict(self.details))


class AttemptActivity:
    """The attempt activity of one worker: ``activities=[AttemptActivity(...).attempt]``."""

    def __init__(
        self,
        *,
        store: Store,
        resolve: Resolve,
        gates: ToolGates,
        settings: AttemptSettings,
        identity: str,
        on_end: Callable[[Ended], None] | None = None,
    ) -> None:
        self._store = store
        self._io = StoreIO(store)
        self._resolve = resolve
        self._gates = gates
        self._settings = settings
        self._identity = identity
        self._on_end = on_end
        self._drains: set[Drain] = set()
        self._tasks: dict[Drain, asyncio.Task[AttemptOutcome]] = {}
        self._stopping: set[asyncio.Task[None]] = set()

    @property
    def running(self) -> int:
        """Attempts in progress in this worker."""
        return len(self._drains)

    def drain(self, reason: str = YIELD) -> None:
        """Stop every attempt in progress cleanly: no new paid call, the calls in flight
        finish and are recorded, each attempt ends suspended with ``reason``."""
        for drain in list(self._drains):
            drain.stop(reason)

    def abort(self) -> None:
        """Stop every attempt in progress at once: its calls in flight stay in doubt (a
        resume sends them again with their idempotency keys)."""
        loop = asyncio.get_running_loop()
        for task in list(self._tasks.values()):
            stopping = loop.create_task(_stop_now(task))
            self._stopping.add(stopping)  # kept until done (the loop holds tasks weakly)
            stopping.add_done_callback(self._stopping.discard)

    @activity.defn(name=ACTIVITY)
    async def attempt(self, inp: AttemptInput) -> AttemptResult:
        info = activity.info()
        started = time.monotonic()
        record = await self._io(self._store.get_run, inp.run_id)
        if inp.new_run is not None:  # a workflow Temporal started itself (a schedule's fire)
            record, settled = await record_new_run(self._store, inp, record)
            if settled is not None:
                return settled
        if record is None:
            raise unrunnable(
                f"Run {inp.run_id} is not in this worker's store "
                f"({display_url(self._store.url)}). Start the workers with the store the run "
                "was submitted to (--store)."
            )
        try:
            play, sources = await asyncio.to_thread(self._resolve, record)
            tools = await asyncio.to_thread(resolve_tools, sources)
        except Exception as exc:  # the play file missing, not importable, or not a play
            why = (
                f"Worker {self._identity} cannot run {inp.run_id} (play {record.play!r}): "
                f"{' '.join(str(exc).split())}"
            )
            await self._io(self._fail_unrunnable, inp.run_id, why)
            raise unrunnable(why) from None
        heartbeats = Heartbeats(inp.run_id, inp.attempt)
        # as the store counts it (`playline show`): a retried activity is an attempt too
        number = record.attempts + 1
        # The later of the two: a retried activity is scheduled after the workflow's ``now``.
        scheduled = info.current_attempt_scheduled_time.timestamp()
        clock = TemporalClock(max(inp.now, scheduled))
        services = Services(
            store=self._store,
            clock=clock,
            tools=tools,
            gates=self._gates,
            context=Context,
            listeners=[heartbeats],
            options=RunOptions(
                row_window=self._settings.row_window,
                foreground_sleep=self._settings.foreground_sleep,
                retry_in_doubt=self._settings.retry_in_doubt,
                stall_after=self._settings.stall_after,
                lease=self._settings.lease,
            ),
        )
        await self._io(
            self._store.append_events,
            [
                Event(
                    kind="log",
                    run_id=inp.run_id,
                    at=clock.now(),
                    preview=f"Attempt {number} on Temporal worker {self._identity} "
                    f"(workflow attempt {inp.attempt}, try {info.attempt}).",
                    data={"temporal": {"worker": self._identity, "attempt": number}},
                )
            ],
        )
        drain = Drain()
        self._drains.add(drain)
        try:
            outcome = await self._run(services, inp, play, drain, heartbeats, info)
        except RunHeld as held:
            now = await self._io(self._store.get_run, inp.run_id)
            raise ApplicationError(
                str(held), type=RUN_HELD, next_retry_delay=_until(now, clock)
            ) from None
        finally:
            self._drains.discard(drain)
        if drain.reason == LEASE_LOST:
            raise ApplicationError(
                f"Attempt {inp.attempt} of {inp.run_id} lost its lease to another attempt.",
                type=LEASE_LOST_ERROR,
            )
        if outcome.status == "failed" and isinstance(outcome.exception, ConnectionLost):
            raise ApplicationError(  # trouble outside the play: the next attempt resumes it
                f"Attempt {inp.attempt} of {inp.run_id} lost its store: {outcome.error}",
                type=STORE_LOST,
            )
        result = await self._result(outcome, clock)
        if self._on_end is not None:
            self._on_end(
                Ended(
                    run_id=inp.run_id,
                    attempt=number,
                    status=outcome.status,
                    seconds=time.monotonic() - started,
                    rows=outcome.stats.rows,
                    credits=outcome.stats.credits,
                    waiting=outcome.waiting,
                    error=outcome.error,
                )
            )
        return result

    def _fail_unrunnable(self, run_id: str, why: str) -> None:
        """Record a run its workflow gives up on (``UNRUNNABLE``) as failed, saying why: it
        would be shown queued for good, waiting for a worker that never comes."""
        now = time.time()
        holder = owner_id(secrets.token_hex(6))
        claim = self._store.claim_run(run_id, holder=holder, lease_until=now + 60, now=now)
        if claim.outcome is RunClaimOutcome.OWNED:
            end = RunEnd(status=RunStatus.FAILED, error=why)
            self._store.end_attempt(run_id, holder=holder, end=end, now=now)

    async def _run(
        self,
        services: Services,
        inp: AttemptInput,
        play: Play,
        drain: Drain,
        heartbeats: Heartbeats,
        info: activity.Info,
    ) -> AttemptOutcome:
        """Run the attempt beside its heartbeat timer and its shutdown watch.

        A cancelled activity drains its attempt: the workflow was cancelled (a person stopped
        the run: ``stopped``), or the worker is shutting down (``yield``). A cancel that comes
        while it drains already (the worker's grace period ran out), or a second one, stops
        it at once: its calls in flight stay in doubt, to be sent again with their keys."""
        loop = asyncio.get_running_loop()
        holder = owner_id(secrets.token_hex(6))
        running = loop.create_task(
            run_attempt(
                services,
                inp.run_id,
                play,
                holder=holder,
                drain=drain,
                max_credits=inp.max_credits,
                max_usd=inp.max_usd,
            )
        )
        self._tasks[drain] = running
        helpers = [
            loop.create_task(_tick(heartbeats, info.heartbeat_timeout)),
            loop.create_task(_on_shutdown(drain)),
        ]
        try:
            try:
                return await asyncio.shield(running)
            except asyncio.CancelledError:
                if running.done():
                    raise
                if not drain.stopping:
                    drain.stop(YIELD if activity.is_worker_shutdown() else STOPPED)
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.shield(running)
                await _stop_now(running)
                raise
        finally:
            self._tasks.pop(drain, None)
            for helper in helpers:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)

    async def _result(self, outcome: AttemptOutcome, clock: TemporalClock) -> AttemptResult:
        waiting = outcome.waiting or {}
        events = list(waiting.get("events") or [])
        wake_at = waiting.get("wake_at")
        ready = False
        if outcome.status == "suspended" and not waiting.get("stop"):
            # An event sent while this attempt ran may have found the run still running, so
            # nobody rang for it: the store says whether one is there (it was written first).
            ready = wake_at is not None and wake_at <= clock.now()
            if not ready and events:
                arrived = await self._io(self._store.waiting_events, events)
                ready = bool(arrived)
        return AttemptResult(
            status=outcome.status,
            error=outcome.error,
            wake_at=wake_at,
            events=events,
            stop=waiting.get("stop"),
            ready=ready,
        )


async def _tick(heartbeats: Heartbeats, heartbeat_timeout: timedelta | None) -> None:
    """Heartbeat on a timer too: a batch waiting on a slow provider is alive, not dead."""
    every = _MAX_TICK
    if heartbeat_timeout is not None:
        every = min(_MAX_TICK, heartbeat_timeout.total_seconds() / 3)
    while True:
        heartbeats.beat()
        await asyncio.sleep(every)


async def _stop_now(running: asyncio.Task[AttemptOutcome]) -> None:
    """Cancel an attempt until it ends. A stopping attempt waits for its calls in flight
    (each cancel ends one such wait), then records how it ended."""
    while not running.done():
        running.cancel()
        await asyncio.wait({running}, timeout=_CANCEL_AGAIN)


async def _on_shutdown(drain: Drain) -> None:
    await activity.wait_for_worker_shutdown()
    drain.stop(YIELD)


def _until(record: RunRecord | None, clock: TemporalClock) -> timedelta | None:
    """How long until a held run's lease runs out (a retry before that is held again)."""
    if record is None or record.lease_until is None:
        return None
    return timedelta(seconds=min(60.0, max(1.0, record.lease_until - clock.now() + 0.5)))
