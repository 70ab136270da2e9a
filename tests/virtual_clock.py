"""A discrete-event clock for measuring how long a run takes in virtual time.

``pl.ManualClock`` moves time forward by each sleep as it is asked for, so eight calls that
each wait out a 1 s ``Retry-After`` side by side add eight seconds, where the provider (and a
wall clock) would see one. Questions like "does a run with random 429s take more than 3x the
time of one without them" need time that passes for everyone at once: here a sleeper is
parked until virtual time reaches its deadline, and time jumps to the earliest deadline only
when the event loop has nothing else to do: no callback ran for a few loop turns and no call
is inside a tool's gate or polling a job (an HTTP request or its recording in flight, which
takes no virtual time). So the time a run takes is what its waits add up to along the way,
with concurrent waits overlapping, whatever the machine's speed.

Only for tests whose I/O is tool calls through the gates (a memory store: store calls run
inline).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

from playline._runner import gate_statistics

SETTLE_TURNS = 20  # loop turns without any activity before time may move
_IO_POLL = 0.0005  # real seconds between looks while a request is in flight


class VirtualClock:
    """``now()`` and ``monotonic()`` read virtual time; ``sleep(s)`` waits ``s`` of it."""

    def __init__(self, start: float = 1_767_225_600.0) -> None:
        self._now = start
        self.start = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._activity = 0
        self._driver: asyncio.Task[None] | None = None

    @property
    def elapsed(self) -> float:
        """Virtual seconds since the clock was made."""
        return self._now - self.start

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        self._activity += 1
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        wake: asyncio.Future[None] = loop.create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._order), wake))
        if self._driver is None or self._driver.done():
            self._driver = loop.create_task(self._drive())
        await wake

    async def _drive(self) -> None:
        while True:
            await self._settle()
            while self._sleepers and self._sleepers[0][2].done():  # cancelled sleepers
                heapq.heappop(self._sleepers)
            if not self._sleepers:
                return
            self._now = max(self._now, self._sleepers[0][0])
            while self._sleepers and self._sleepers[0][0] <= self._now:
                wake = heapq.heappop(self._sleepers)[2]
                if not wake.done():
                    wake.set_result(None)
            self._activity += 1

    async def _settle(self) -> None:
        """Return once the loop has been idle for ``SETTLE_TURNS`` turns with no call in
        flight through any tool gate."""
        quiet = 0
        while quiet < SETTLE_TURNS:
            seen = self._activity
            if _calls_in_flight():
                quiet = 0
                await asyncio.sleep(_IO_POLL)  # real time: the request is on the wire
                continue
            await asyncio.sleep(0)
            quiet = quiet + 1 if self._activity == seen else 0


def _calls_in_flight() -> bool:
    return any(stats["in_flight"] or stats.get("polling") for stats in gate_statistics().values())
