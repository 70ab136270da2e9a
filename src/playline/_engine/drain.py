"""Ending an attempt early without paying twice: no new paid call starts, the calls already
sent finish and are recorded, then the attempt ends.

Reasons: a budget that would be exceeded (the run fails with ``BudgetExceeded``), a stop asked
for by a person or a signal (``"stopped"``: the run is suspended until resumed by hand), a
worker shutting down (``"yield"``: another worker may continue at once), the run's lease
lost to another attempt, or play code that raised ``SystemExit``, ``KeyboardInterrupt`` or a
``BaseException`` of its own (``"exited"``: the run fails with it, see ``escaped``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import TypeVar

from ..errors import PlaylineError
from .suspension import Suspension

T = TypeVar("T")

__all__ = [
    "BUDGET",
    "EXITED",
    "LEASE_LOST",
    "STOP",
    "STOPPED",
    "YIELD",
    "Drain",
    "Escaped",
    "Stopped",
    "escaped",
]

BUDGET = "budget"
STOPPED = "stopped"
YIELD = "yield"
LEASE_LOST = "lease lost"
EXITED = "exited"


class Drain:
    """Shared by an attempt and its child plays; the first reason given wins."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.error: BaseException | None = None  # what the attempt fails with, if it fails
        self._stopped: asyncio.Event | None = None
        self._interrupts: set[Callable[[], None]] = set()

    @property
    def stopping(self) -> bool:
        return self.reason is not None

    def stop(self, reason: str, error: BaseException | None = None) -> None:
        if self.reason is None:
            self.reason = reason
            self.error = error
            if self._stopped is not None:
                self._stopped.set()
            for interrupt in list(self._interrupts):
                interrupt()

    async def until_stop(self, waiting: Awaitable[T]) -> T | Stopped:
        """``waiting``'s result, or ``STOP`` if the attempt stops first (the wait is
        cancelled, as ``asyncio.timeout`` cancels one: no task of its own)."""
        if self.reason is not None:
            if isinstance(waiting, Coroutine):
                waiting.close()
            return STOP
        task = asyncio.current_task()
        assert task is not None
        interrupted = False

        def interrupt() -> None:
            nonlocal interrupted
            interrupted = True
            task.cancel()

        self._interrupts.add(interrupt)
        try:
            return await waiting
        except asyncio.CancelledError:
            if interrupted and task.uncancel() == 0:
                return STOP
            raise
        finally:
            self._interrupts.discard(interrupt)

    async def wait(self) -> str:
        if self.reason is None:
            if self._stopped is None:
                self._stopped = asyncio.Event()
            await self._stopped.wait()
        assert self.reason is not None
        return self.reason


class Stopped:
    """What ``Drain.until_stop`` returns when the attempt stopped first."""


STOP = Stopped()


class Escaped(PlaylineError):
    """What a ``BaseException`` of play code goes on as where it was raised (a cell, a tool
    call fail with it) while the attempt stops; the run fails with the exception itself."""


def escaped(drain: Drain, error: BaseException) -> Exception:
    """``error``, raised by play code (a play's body, a column, a tool function), as the error
    the engine goes on with: an ``Exception`` as it is; ``SystemExit``, ``KeyboardInterrupt``
    or a ``BaseException`` of the play's own stops the attempt, which fails with it (asyncio
    would end the event loop with the first two, a task group would leave the run running),
    and goes on as ``Escaped``. The engine's own (a cancellation, a ``Suspension``, a
    generator closed) are raised again."""
    if isinstance(error, Exception):
        return error
    if isinstance(error, asyncio.CancelledError | Suspension | GeneratorExit):
        raise error
    drain.stop(EXITED, error)
    return Escaped(
        f"{type(error).__name__} raised by the play's code: the run stops and fails with it."
    )
