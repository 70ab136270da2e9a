"""A concurrency cap that can move while callers wait (first come, first served)."""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["Slots"]


class Slots:
    """A concurrency cap that can move while callers wait (first come, first served)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.in_use = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self, wanted: int = 1) -> int:
        """Wait for a free slot, then take as many as are free, up to ``wanted``."""
        if self.in_use >= self.cap or self._waiters:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter  # handed one slot
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self.release()  # handed a slot as it was cancelled: pass it on
                elif waiter in self._waiters:
                    self._waiters.remove(waiter)
                raise
            more = 0
        else:
            self.in_use += 1
            more = 0
        if not self._waiters:
            more = max(0, min(wanted - 1, self.cap - self.in_use))
            self.in_use += more
        return 1 + more

    def release(self, count: int = 1) -> None:
        self.in_use -= count
        self.wake()

    def wake(self) -> None:
        while self._waiters and self.in_use < self.cap:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_use += 1
                waiter.set_result(None)

    @property
    def waiting(self) -> int:
        return len(self._waiters)
