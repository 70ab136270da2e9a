"""The one clock the engine reads: real in production, moved by hand in tests."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    """Wall time for records and buckets, monotonic time for pacing, and sleeps."""

    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class ManualClock:
    """A clock for tests: time moves only when told to.

    ``sleep(s)`` moves time forward by ``s`` at once (then yields to the event loop), so code
    that paces itself runs instantly while seeing exactly the time it asked for.
    """

    def __init__(self, start: float = 1_767_225_600.0) -> None:  # 2026-01-01T00:00:00Z
        self._now = start

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock only moves forward")
        self._now += seconds

    async def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._now += seconds
        await asyncio.sleep(0)
