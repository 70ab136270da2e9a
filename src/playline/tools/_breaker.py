"""A circuit breaker: a tool that keeps failing is paused, then probed (see ``_gates.py``).

Each process keeps its own, also behind a shared gate: failures (5xx, timeouts, refused
connections) are about the way from this process to the provider as much as the provider.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["BREAK_AFTER", "BREAK_FIRST", "BREAK_MAX", "Breaker"]

BREAK_AFTER = 5  # failures in a row that open the breaker
BREAK_FIRST, BREAK_MAX = 10.0, 300.0  # seconds the breaker stays open


class Breaker:
    def __init__(self, monotonic: Callable[[], float]) -> None:
        self._monotonic = monotonic
        self._failures = 0
        self._open_until = 0.0
        self._open_for = BREAK_FIRST
        self._cause: str | None = None
        self._probing = False

    def succeeded(self) -> None:
        self._failures = 0
        self._probing = False
        self._open_until = 0.0
        self._open_for = BREAK_FIRST
        self._cause = None

    def failed(self, cause: str) -> None:
        """A call failed for the provider's reasons (after its retries)."""
        self._failures += 1
        self._cause = cause
        if self._probing or self._failures >= BREAK_AFTER:
            self._open_until = self._monotonic() + self._open_for
            self._open_for = min(BREAK_MAX, self._open_for * 2)
            self._probing = False

    def open_cause(self) -> str | None:
        """Why calls fail at once now (the breaker is open), else None; past the pause, the
        first caller is let through as the probe."""
        if self._open_until == 0.0:
            return None
        now = self._monotonic()
        if now < self._open_until or self._probing:
            wait = max(0.0, self._open_until - now)
            return f"keeps failing ({self._cause}); its calls are paused" + (
                f" for {wait:.0f} s more" if wait >= 1 else ""
            )
        self._probing = True
        return None
