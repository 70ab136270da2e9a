"""A concurrency cap that can move while callers wait (first come, first served)."""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["Slots"]


class Slots:
    """A concurrency cap that can move while callers wait (first come, first served).

    A caller asks for up to ``wanted`` slots and gets at least one. A waiter is handed one
    slot when it is its turn and, when it runs, takes more up to ``wanted`` from the slots
    free then that no waiter behind it is owed: calls given back one by one (a wave whose
    requests answer in turn) let the next wave out whole, not one call per wake-up.
    """

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
        else:
            self.in_use += 1
        spare = self.cap - self.in_use - len(self._waiters)  # each waiter is owed one
        more = max(0, min(wanted - 1, spare))
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
