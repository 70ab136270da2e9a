"""Ending an attempt early without paying twice: no new paid call starts, the calls already
sent finish and are recorded, then the attempt ends.

Reasons: a budget that would be exceeded (the run fails with ``BudgetExceeded``), a stop asked
for by a person or a signal (``"stopped"``: the run is suspended until resumed by hand), a
worker shutting down (``"yield"``: another worker may continue at once), or the run's lease
lost to another attempt.
"""

from __future__ import annotations

import asyncio

__all__ = ["BUDGET", "LEASE_LOST", "STOPPED", "YIELD", "Drain"]

BUDGET = "budget"
STOPPED = "stopped"
YIELD = "yield"
LEASE_LOST = "lease lost"


class Drain:
    """Shared by an attempt and its child plays; the first reason given wins."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.error: BaseException | None = None  # what the attempt fails with, if it fails
        self._stopped: asyncio.Event | None = None

    @property
    def stopping(self) -> bool:
        return self.reason is not None

    def stop(self, reason: str, error: BaseException | None = None) -> None:
        if self.reason is None:
            self.reason = reason
            self.error = error
            if self._stopped is not None:
                self._stopped.set()

    async def wait(self) -> str:
        if self.reason is None:
            if self._stopped is None:
                self._stopped = asyncio.Event()
            await self._stopped.wait()
        assert self.reason is not None
        return self.reason
