"""Resuming suspended runs when they are due, and sending the events they wait for."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ._clock import Clock, SystemClock
from ._engine.boundaries import check_event_key
from ._engine.events import Listener
from ._json import dumps
from ._limits import is_amount
from ._play import Play, get_play
from ._runner import RunResult, arun
from ._trace import WORKER_SKIPPED
from .errors import PlayDefinitionError, PlaylineError, RunHeld
from .store import Event, RunRecord, Store, open_store, use_store
from .store._changes import EVENTS, Watch, watch
from .triggers._schedules import fire_schedules

__all__ = ["Worker", "send_event"]

_BATCH = 100  # due runs taken per look
_RING_LOOK = 1000  # runs an event made due, looked at for runs on Temporal


def send_event(key: str, payload: Any = None, *, store: str | Store | None = None) -> bool:
    """Send the event ``key`` to whatever waits (or will wait) for it with
    ``ctx.wait_for_event(key)``. Returns False when ``key`` was sent before: an event is
    delivered once, and the first payload stands."""
    if not isinstance(key, str) or not key:
        raise PlayDefinitionError("send_event needs a non-empty event key.")
    check_event_key(key, "send_event")
    with use_store(store) as db:
        fresh = db.send_event(key, dumps(payload, what=f"The payload of event {key!r}"), now=_now())
        _ring_temporal(db, key)
    return fresh


def _ring_temporal(db: Store, key: str) -> None:
    """Runs on Temporal wait in their workflow, not for a worker polling the store: signal
    theirs (the event is in the store already, and is delivered from there)."""
    if not any(
        "temporal" in run.options and key in run.awaited_events
        for run in db.due_runs(now=0.0, limit=_RING_LOOK)  # 0: only runs an event made due
    ):
        return
    try:
        from .backends.temporal import ring  # needs the temporal extra, as those runs did

        ring(db, key)
    except Exception as exc:
        raise PlaylineError(
            f"Event {key!r} is recorded, but the Temporal workflow of a run waiting for it "
            f"could not be signalled ({type(exc).__name__}: {exc}). Send it again once the "
            "Temporal server is reachable: the run takes the event once, whenever it wakes."
        ) from None


def _now() -> float:
    return SystemClock().now()


Resolve = Callable[[RunRecord], tuple[Play, Iterable[Any] | None]]


class Worker:
    """Resumes suspended runs whose sleep is over or whose awaited event arrived, and runs
    whose process died mid-attempt once their lease has run out (interrupted).

    ``await worker.run(burst=True)`` returns once nothing is due (tests, cron); without
    ``burst`` it keeps going, checking every ``interval`` seconds, until ``stop()``; on a
    store that announces changes (PostgreSQL) an event sent from anywhere wakes it at once.
    Child plays are resumed by their parents, never on their own. A run whose play cannot
    be found is skipped (``worker.skipped`` says why) and the others go on.

    Each look first fires the store's schedules that are due (``pl.schedule``): their runs
    are queued, then started like the other due runs; a worker waiting wakes for the next
    fire time. A schedule that cannot fire is skipped too (``skipped["schedule NAME"]``).

    ``resolve(record) -> (play, tools)`` finds a run's play and tools; by default the play
    registered under the run's play name and the worker's ``tools``. ``on_skip(name, why)``
    is told each run or schedule skipped, when it is.

    ``with pl.Worker(store=url) as worker:`` (or ``worker.close()``) closes the store the
    worker opened from a URL; a store given open stays open, its opener's.
    """

    MIN_INTERVAL = 0.05  # seconds: the shortest pause between looks for due runs

    def __init__(
        self,
        *,
        store: str | Store | None = None,
        tools: Iterable[Any] | None = None,
        clock: Clock | None = None,
        listeners: Sequence[Listener] = (),
        interval: float = 1.0,
        resolve: Resolve | None = None,
        on_skip: Callable[[str, str], None] | None = None,
    ) -> None:
        if not is_amount(interval, positive=True) or interval < self.MIN_INTERVAL:
            raise PlayDefinitionError(
                f"Worker(interval={interval!r}): give the seconds between checks for due runs, "
                f"a number >= {self.MIN_INTERVAL:g}."
            )
        self.store = open_store(store)
        self._opened = self.store is not store  # from a URL: close() closes it
        self._tools = list(tools) if tools is not None else None
        self._clock = clock or SystemClock()
        self._listeners = listeners
        self._interval = interval
        self._resolve = resolve or (lambda record: (get_play(record.play), self._tools))
        self._stopping = False
        self._watching: Watch | None = None
        self.skipped: dict[str, str] = {}
        self._on_skip = on_skip

    def _skipped(self, name: str, why: str) -> None:
        """``name`` (a run, or ``schedule NAME``) is skipped: kept, and told once."""
        if self.skipped.get(name) != why:
            self.skipped[name] = why
            if self._on_skip is not None:
                self._on_skip(name, why)

    def close(self) -> None:
        """Close the store this worker opened from a URL (not one given open)."""
        if self._opened:
            self.store.close()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def due(self) -> list[RunRecord]:
        """Root runs that can go on now: suspended and due, or interrupted (an indexed query
        of the store)."""
        due = self.store.due_runs(now=self._clock.now(), limit=_BATCH + len(self.skipped))
        for run in due:
            temporal = run.options.get("temporal")
            if temporal and run.run_id not in self.skipped:
                self._skipped(
                    run.run_id,
                    f"it runs on Temporal ({temporal.get('target')}), whose workflow resumes it",
                )
        return [run for run in due if run.run_id not in self.skipped][:_BATCH]

    async def run(
        self,
        *,
        burst: bool = False,
        stop: asyncio.Event | None = None,
        report: Callable[[RunResult], None] | None = None,
    ) -> list[RunResult]:
        """Resume due runs; the results of every attempt made, in order, each also given to
        ``report`` as its attempt ends. Setting ``stop`` stops the attempt under way cleanly
        (the calls sent finish and are recorded; the run ends suspended, for the next
        worker) and returns."""
        results: list[RunResult] = []
        stopped = None if stop is None else asyncio.ensure_future(stop.wait())
        if stopped is not None:
            stopped.add_done_callback(lambda _: self.stop())
        # Watched from before the first look: an event sent after it is never missed.
        try:
            with watch(None if burst else self.store.changes(), EVENTS) as sent:
                self._watching = sent
                while not self._stopping:
                    self.fire()
                    due = self.due()
                    for record in due:
                        if stop is not None and stop.is_set():
                            break
                        result = await self._resume(record, stop)
                        if result is not None:
                            results.append(result)
                            if report is not None:
                                report(result)
                    if not due and burst:
                        break
                    if not due:
                        await sent.wait(self._clock, self._pause())
        finally:
            if stopped is not None:
                stopped.cancel()
        return results

    async def _resume(self, record: RunRecord, stop: asyncio.Event | None) -> RunResult | None:
        """An attempt of a due run; None when it is not this worker's to make: its play
        cannot be found (skipped, said in its log), or another worker took the run since the
        look (it moved on, or holds it now)."""
        if not self._still_due(record):
            return None
        try:
            play, tools = self._resolve(record)
        except PlaylineError as exc:
            self._skip(record, str(exc))
            return None
        try:
            return await arun(
                play,
                store=self.store,
                run_id=record.run_id,
                tools=tools,
                clock=self._clock,
                listeners=self._listeners,
                stop=stop,
            )
        except RunHeld:  # another worker claimed it between our look and our claim
            return None

    def _still_due(self, record: RunRecord) -> bool:
        """Whether the run is as the look found it: no attempt since (another worker's
        would have run it, maybe to its end), nor one holding it now."""
        now = self.store.get_run(record.run_id)
        return (
            now is not None
            and now.attempts == record.attempts
            and now.status is record.status
            and now.holder == record.holder
        )

    def _skip(self, record: RunRecord, why: str) -> None:
        """A run this worker cannot resume (its play cannot be found): skipped, the others go
        on, and said in the run's log (``playline show`` tells it beside what the run waits
        for), once: not again while its last log line says it already."""
        self._skipped(record.run_id, why)
        said = f"{WORKER_SKIPPED}: {' '.join(why.split())}"
        run_id, last = record.run_id, self.store.last_seq(record.run_id, kinds=["log"])
        before = self.store.read_events(run_id, after_seq=last - 1, kinds=["log"]) if last else []
        if not before or before[-1].preview != said:
            log = Event(kind="log", run_id=run_id, at=self._clock.now(), preview=said)
            self.store.append_events([log])

    def fire(self) -> list[str]:
        """Fire the schedules due now; the ids of the runs queued."""
        queued, failed = fire_schedules(self.store, clock=self._clock)
        for name, why in failed.items():
            self._skipped(f"schedule {name}", why)
        return queued

    def _pause(self) -> float:
        """Seconds until the next look: the interval, or less if a schedule fires sooner."""
        soonest = self.store.due_schedules(now=math.inf, limit=1)
        until = soonest[0].next_fire - self._clock.now() if soonest else 0.0
        # (one due already could not fire: it is tried again after the interval)
        return min(self._interval, until) if until > 0 else self._interval

    def stop(self) -> None:
        """Return from ``run`` after the attempt under way (at once if none is)."""
        self._stopping = True
        if self._watching is not None:
            self._watching.wake()
