"""What a provider's remaining-budget headers say, as a budget for a tool's gate.

An answer that says ``RateLimit-Remaining: 3`` with ``RateLimit-Reset: 30`` (or Apollo's
``x-minute-requests-left``) says how much of the account's window is left, whoever spent the
rest (other processes, other programs with the same key). The gate then lets out at most
that many requests until the window resets (or a later answer says more), and holds once
they are spent, before the provider answers 429. It never lets out more than its own rate
and windows allow, and a window past its reset says nothing any more.
"""

from __future__ import annotations

from .._clock import Clock
from ._declared import WINDOW_MARGIN

__all__ = ["Remaining"]


class Remaining:
    """The requests the last remaining-budget headers left one gate (this process's)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._left = 0
        self._until = 0.0  # when the window the headers spoke of resets (monotonic)

    def said(self, left: int, reset: float) -> None:
        """``left`` requests remain for ``reset`` seconds. The window is taken to last
        ``WINDOW_MARGIN`` longer: a reset given in whole seconds may be rounded down, and a
        request leaving on the dot arrives after it."""
        self._left = max(0, left)
        self._until = self._clock.monotonic() + reset + WINDOW_MARGIN

    async def acquire(self, wanted: int) -> int:
        """Up to ``wanted`` requests the headers let out now (at least one: waits for it)."""
        while True:
            now = self._clock.monotonic()
            if now >= self._until:
                return wanted
            if self._left:
                taken = min(wanted, self._left)
                self._left -= taken
                return taken
            await self._clock.sleep(self._until - now)

    def refund(self, count: int) -> None:
        """Requests it let out that were not sent."""
        if count > 0 and self._until:
            self._left += count
