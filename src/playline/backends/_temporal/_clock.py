"""The attempt's clock on Temporal: the workflow's time when it scheduled the attempt, moved on
by the time the attempt has run.

Not the worker's wall clock: a retried attempt must compute the same wake times as the first
(a sleep recorded at "now + a day" is due when the *workflow's* day has passed), and under
Temporal's time-skipping test server a day of play sleep must pass in no time. Pacing (rate
limits, backoff) still runs on this machine's monotonic clock.
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["TemporalClock"]


class TemporalClock:
    """``now()`` is ``start`` plus the monotonic time elapsed since the clock was made."""

    def __init__(self, start: float) -> None:
        self._start = start
        self._origin = time.monotonic()

    def now(self) -> float:
        return self._start + (time.monotonic() - self._origin)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))
