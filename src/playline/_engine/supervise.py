"""Keeping an attempt's claims alive, and saying so when it stops moving.

While an attempt runs, its ``Supervisor`` renews the leases of everything its holder holds
(the run, its child plays, the receipts of calls in flight or async jobs being polled) every
third of a lease, so no other worker takes them over while this one lives; it hands a stop
that someone asked for through the store (``playline`` UI, another process) to the drain; and
when nothing has settled for ``stall_after`` seconds it writes to the log what the attempt
waits for, once per stall.

It runs on real time (``time.monotonic``), not the engine's clock: renewing is I/O, not play.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from .._clock import Clock
from ..store import Store, StoreIO
from .drain import LEASE_LOST, STOPPED, Drain
from .events import EventLog

__all__ = ["DEFAULT_LEASE", "Supervisor"]

DEFAULT_LEASE = 60.0  # seconds; renewed every third of it
_TICK = 1.0
STOP_EVERY = 2.0  # seconds between looks for a stop asked through the store (the web UI)


class Supervisor:
    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        holder: str,
        run_id: str,
        drain: Drain,
        events: EventLog,
        progress: Callable[[], int],
        describe: Callable[[], str],
        stall_after: float | None,
        lease: float = DEFAULT_LEASE,
    ) -> None:
        self._store = store
        self._io = StoreIO(store)
        self._clock = clock
        self._holder = holder
        self._run_id = run_id
        self._drain = drain
        self._events = events
        self._progress = progress
        self._describe = describe
        self._stall_after = stall_after
        self._lease = lease
        self._tick = min(_TICK, lease / 3)

    async def run(self) -> None:
        renewed = checked = time.monotonic()
        moved, seen, reported = time.monotonic(), self._progress(), False
        while True:
            await asyncio.sleep(self._tick)
            now = time.monotonic()
            if now - renewed >= self._lease / 3:
                renewed = checked = now
                await self._renew()
            elif now - checked >= STOP_EVERY:  # renewing says it too, but only every lease / 3
                checked = now
                await self._check_stop()
            progress = self._progress()
            if progress != seen:
                moved, seen, reported = now, progress, False
            elif (
                self._stall_after is not None and not reported and now - moved >= self._stall_after
            ):
                reported = True
                self._events.log(
                    f"No progress for {now - moved:.0f} s. {self._describe()}",
                    stalled=True,
                )

    async def _check_stop(self) -> None:
        run = await self._io(self._store.get_run, self._run_id)
        if run is not None and run.stop_requested:
            self._drain.stop(STOPPED)

    async def _renew(self) -> None:
        lease_until = self._clock.now() + self._lease
        runs = await self._io(self._store.renew_runs, self._holder, lease_until=lease_until)
        await self._io(self._store.renew_receipts, self._holder, lease_until=lease_until)
        mine = {run.run_id: run for run in runs}
        root = mine.get(self._run_id)
        if root is None:
            self._drain.stop(LEASE_LOST)
        elif any(run.stop_requested for run in runs):
            self._drain.stop(STOPPED)
