"""The dispatcher: queues tool calls from all rows and sends them out together.

Flush policy (SEMANTICS.md 3): a tool's queue goes out when every active row is waiting on
queued work, when it reaches the tool's maximum batch size, or after a short linger for rows
still busy in their own code. There is no polling loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from ._calls import CallExecutor, ToolCall
from ._scope import RowScope
from .tools import ToolResult

__all__ = ["Dispatcher"]

Spawn = Callable[[Coroutine[Any, Any, None]], object]


class Dispatcher:
    def __init__(self, executor: CallExecutor, spawn: Spawn, *, linger: float = 0.002) -> None:
        self._executor = executor
        self._spawn = spawn
        self._linger = linger
        self._queues: dict[str, list[ToolCall]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self.active_rows = 0
        self.blocked_rows = 0
        self.passes = 0  # flushes that sent work

    # rows tell the dispatcher when they start and end
    def enter_row(self) -> None:
        self.active_rows += 1

    def exit_row(self) -> None:
        self.active_rows -= 1
        self._check()

    def submit(self, call: ToolCall, scope: RowScope) -> asyncio.Future[ToolResult]:
        """Queue a call made by a row; the returned future settles with its result."""
        scope.pending += 1
        if scope.pending == 1:
            self.blocked_rows += 1
        # called as the call settles, before any row resumes: counts are exact when rows go on
        call.on_settle = lambda: self._unblock(scope)
        queue = self._queues.setdefault(call.spec.id, [])
        queue.append(call)
        if len(queue) >= call.spec.max_batch:
            self._flush_full(call.spec.id)
        self._check()
        return call.future

    def _unblock(self, scope: RowScope) -> None:
        scope.pending -= 1
        if scope.pending == 0:
            self.blocked_rows -= 1

    def _check(self) -> None:
        if not self._queues:
            return
        if self.blocked_rows >= self.active_rows:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._linger, self.flush)

    def _flush_full(self, tool: str) -> None:
        queue = self._queues[tool]
        size = queue[0].spec.max_batch
        full = len(queue) - len(queue) % size
        batch, self._queues[tool] = queue[:full], queue[full:]
        if not self._queues[tool]:
            del self._queues[tool]
        self.passes += 1
        self._send(batch)

    def flush(self) -> None:
        """Send everything queued, one executor task per tool."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        queues, self._queues = self._queues, {}
        if queues:
            self.passes += 1
        for batch in queues.values():
            self._send(batch)

    def _send(self, batch: list[ToolCall]) -> None:
        self._spawn(self._executor.execute(batch[0].spec, batch))
