"""The dispatcher: queues tool calls from all rows and sends them out together.

Flush policy (SEMANTICS.md 3): a tool's queue goes out when every active row is waiting on
queued work, when it reaches the tool's maximum batch size, or after a short linger for rows
still busy in their own code; a partial batch waits for more calls when its tool asks for it
(``Batch(max_wait=...)``). Requests are formed when the tool's rate gate lets them out
(``calls.py``), so under a binding rate each carries every call queued by then. There is no
polling loop.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Coroutine
from typing import Any

from .._clock import Clock
from ..tools import ToolResult, ToolSpec
from .calls import CallExecutor, ToolCall
from .scope import RowScope

__all__ = ["Dispatcher"]

Spawn = Callable[[Coroutine[Any, Any, None]], object]


class Dispatcher:
    def __init__(
        self, executor: CallExecutor, spawn: Spawn, clock: Clock, *, linger: float = 0.002
    ) -> None:
        self._executor = executor
        self._spawn = spawn
        self._clock = clock
        self._holding: set[str] = set()  # tools whose partial batch waits (Batch.max_wait)
        self._linger = linger
        self._queues: dict[str, list[ToolCall]] = {}
        self._since: dict[str, float] = {}  # by tool: when its oldest queued call came
        self._sizes: dict[str, int] = {}  # by tool: how many queued calls make a full pass
        self._timer: asyncio.TimerHandle | None = None
        self.active_rows = 0
        self.blocked_rows = 0
        self.passes = 0  # flushes that sent work
        self.rows_ended = 0  # rows that left (progress too, for rows that make no call)

    # rows tell the dispatcher when they start and end
    def enter_row(self) -> None:
        self.active_rows += 1

    def enter_rows(self, count: int) -> None:
        self.active_rows += count

    def exit_row(self) -> None:
        self.exit_rows(1)

    def exit_rows(self, count: int) -> None:
        self.active_rows -= count
        self.rows_ended += count
        self._check()

    def hold_rows(self, count: int) -> None:
        """Rows whose calls are being looked up before they queue (``datasets.py``): they
        wait as rows with queued calls do, so what other rows queued goes out meanwhile."""
        self.blocked_rows += count
        self._check()

    def release_rows(self, count: int) -> None:
        self.blocked_rows -= count

    def submit(self, call: ToolCall, scope: RowScope) -> asyncio.Future[ToolResult]:
        """Queue a call made by a row; the returned future settles with its result. When the
        row's last queued call settles, its ``then`` is called (the row's own way to learn
        it, with no callback scheduled on the future)."""
        scope.pending += 1
        if scope.pending == 1:
            self.blocked_rows += 1
        # called as the call settles, before any row resumes: counts are exact when rows go on
        call.on_settle = self._unblock
        tool = call.spec.id
        queue = self._queues.get(tool)
        if queue is None:
            queue = self._queues[tool] = []
            self._since[tool] = self._clock.monotonic()
        queue.append(call)
        size = self._sizes.get(tool)
        if size is None:
            size = self._sizes[tool] = _pass_size(call.spec)
        if len(queue) >= size:
            self._flush_full(tool)
        if self._timer is None or self.blocked_rows >= self.active_rows:
            self._check()  # otherwise a flush is due already and none is to be made now
        return call.future

    def _unblock(self, call: ToolCall) -> None:
        scope = call.scope
        assert scope is not None  # submit queues a row's calls only
        scope.pending -= 1
        if scope.pending == 0:
            self.blocked_rows -= 1
            then = scope.then
            if then is not None:
                scope.then = None
                then()

    def _check(self) -> None:
        if not self._queues:
            return
        if self.blocked_rows >= self.active_rows:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._linger, self.flush)

    def _flush_full(self, tool: str) -> None:
        queue = self._queues[tool]
        size = _pass_size(queue[0].spec)
        full = len(queue) - len(queue) % size
        batch, self._queues[tool] = queue[:full], queue[full:]
        self._since[tool] = self._clock.monotonic()  # the rest came after the full batch
        if not self._queues[tool]:
            del self._queues[tool]
        self.passes += 1
        self._send(batch)

    def flush(self) -> None:
        """Send what is queued, one executor task per tool; a partial batch of a tool with
        ``Batch(max_wait=...)`` is held that long for more calls. (A partial batch whose
        rate gate is shut needs no holding here: its lane packs the requests that queue
        while the gate is shut when it opens, ``calls._repack``.)"""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        sent = False
        for tool, batch in list(self._queues.items()):
            if tool in self._holding:
                continue
            spec = batch[0].spec
            if spec.max_batch > 1 and len(batch) < spec.max_batch:
                wait = self._gathering(tool, spec)
                if wait > 0:
                    self._hold(tool, wait)
                    continue
            del self._queues[tool]
            self._send(batch)
            sent = True
        if sent:
            self.passes += 1

    def _gathering(self, tool: str, spec: ToolSpec) -> float:
        """Seconds a partial batch still waits for more calls (``Batch(max_wait=...)``)."""
        max_wait = spec.batch.max_wait if spec.batch else None
        if not max_wait:
            return 0.0
        return max_wait - (self._clock.monotonic() - self._since.get(tool, -math.inf))

    def _hold(self, tool: str, wait: float) -> None:
        self._holding.add(tool)

        async def release() -> None:
            await self._clock.sleep(wait)
            self._holding.discard(tool)
            batch = self._queues.pop(tool, None)
            if batch:
                self.passes += 1
                self._send(batch)

        self._spawn(release())

    def _send(self, batch: list[ToolCall]) -> None:
        self._spawn(self._executor.execute(batch[0].spec, batch))


SINGLE_PASS = 256  # calls of a tool without a batch operation sent out in one pass


def _pass_size(spec: ToolSpec) -> int:
    """How many queued calls make a full pass: a batch tool's batch size; for single calls a
    pass of many (their claims and results are written together, their requests sent at
    once up to the tool's concurrency)."""
    return spec.max_batch if spec.batch else SINGLE_PASS
