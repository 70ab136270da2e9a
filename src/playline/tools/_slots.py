"""A concurrency cap that can move while callers wait (first come, first served)."""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["Slots"]


class Slots:
    """A concurrency cap that can move while callers wait (first come, first served).

    A caller asks for up to ``wanted`` slots and is given as many as are free, at least one.
    Slots given back go to the waiters in order, each getting what it asked for as far as
    they reach: a wave of calls that ends lets the next wave out whole, not one call per
    waiter (which would cut every later wave down to a single call).
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.in_use = 0
        self._waiters: deque[tuple[asyncio.Future[int], int]] = deque()

    async def acquire(self, wanted: int = 1) -> int:
        """Wait for a free slot, then take as many as are free, up to ``wanted``."""
        wanted = max(1, wanted)
        if self.in_use < self.cap and not self._waiters:
            granted = min(wanted, self.cap - self.in_use)
            self.in_use += granted
            return granted
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        entry = (waiter, wanted)
        self._waiters.append(entry)
        try:
            return await waiter  # handed its slots
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release(waiter.result())  # handed slots as it was cancelled: pass them on
            elif entry in self._waiters:
                self._waiters.remove(entry)
            raise

    def release(self, count: int = 1) -> None:
        self.in_use -= count
        self.wake()

    def wake(self) -> None:
        while self._waiters and self.in_use < self.cap:
            waiter, wanted = self._waiters.popleft()
            if waiter.done():
                continue
            granted = min(wanted, self.cap - self.in_use)
            self.in_use += granted
            waiter.set_result(granted)

    @property
    def waiting(self) -> int:
        return len(self._waiters)
