"""Tasks of an attempt, and errors out of task groups as the error that happened."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any

from ..errors import PlaylineError

__all__ = ["TaskSet", "first_error", "unwrapped"]


class TaskSet:
    """Tasks an attempt starts from callbacks (a dispatch pass, a batch held for its rate
    gate) that must outlive the code that started them but not the attempt: ``close()``
    cancels what is left and waits for it. A task that fails unexpectedly is kept as
    ``error`` (the attempt fails with it) instead of vanishing."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self.error: BaseException | None = None

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
        """Run ``coro`` as a task of the set; None once the set is closed: what a late
        callback (a timer's dispatch pass) starts after the attempt ended is dropped, its
        coroutine closed, instead of a task nobody waits for or cancels."""
        if self._closed:
            coro.close()
            return None
        try:
            task = asyncio.get_running_loop().create_task(coro)
        except BaseException:  # no loop to run it on: it never starts
            coro.close()
            raise
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and self.error is None:
            self.error = task.exception()

    async def close(self) -> None:
        while self._tasks:  # what a cancelled task starts as it ends is cancelled in turn
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        self._closed = True


def first_error(error: BaseException) -> BaseException:
    """The most telling leaf of an exception group: a Playline error if there is one."""
    if not isinstance(error, BaseExceptionGroup):
        return error
    leaves = [first_error(e) for e in error.exceptions]
    return next((e for e in leaves if isinstance(e, PlaylineError)), leaves[0])


@asynccontextmanager
async def unwrapped() -> AsyncIterator[None]:
    """Re-raise an exception group coming out of the block as its most telling error."""
    try:
        yield
    except BaseExceptionGroup as group:
        raise first_error(group) from None
