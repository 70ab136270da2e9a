"""Token buckets: the simulator's rate limits, enforced for real."""

from __future__ import annotations

import math
import time


class TokenBucket:
    """``burst`` tokens refilled at ``per_second``; a request takes one or is told how long to wait.

    Only touched from the server's event loop, so it needs no lock.
    """

    __slots__ = ("_stamp", "_tokens", "burst", "per_second")

    def __init__(self, per_second: float, burst: int) -> None:
        self.per_second = per_second
        self.burst = burst
        self._tokens = float(burst)
        self._stamp = time.monotonic()

    def take(self) -> float:
        """Take a token and return 0.0, or return the seconds until one is available."""
        now = time.monotonic()
        tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.per_second)
        self._stamp = now
        if tokens >= 1.0:
            self._tokens = tokens - 1.0
            return 0.0
        self._tokens = tokens
        return (1.0 - tokens) / self.per_second


def retry_after_header(wait: float) -> str:
    """``Retry-After`` is whole seconds: round the wait up, and never say 0."""
    return str(max(1, math.ceil(wait)))
