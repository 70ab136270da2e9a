"""Calling a store from the event loop without blocking it.

Stores are synchronous (``_protocol.py``). ``StoreIO`` runs each call on the store's own worker
threads (``Store.io_threads``; one for SQLite, whose connection serialises anyway), or inline
for a store that never blocks (``io_threads == 0``, the memory store). Calls from one caller
keep their order: each is awaited before the next is made.

A store with ``io_inline`` (SQLite) has its own methods called on the loop first, when none of
its calls is on its worker threads: it runs the call there unless it would wait for another
thread or process, and raises ``WouldWait`` before changing anything if it would; the call is
then made on a worker thread. A call on the loop costs no thread hand-over, and the store's
work does not queue for the interpreter lock behind the engine (live single calls, batch
calls and the pure map about 8% faster, cached re-runs 14%). A call is never made on the
loop while an earlier one is on the threads, so calls still run in the order they were made.
Anything else (a function making many store calls, such as a resume's tally of every stored
row) is made on the threads.

A store method whose connection went away before it wrote anything (``ConnectionLost``: a
PostgreSQL backend terminated, the server restarted) is made again on a new connection, after
growing pauses, for up to ``RECONNECT_WITHIN`` seconds; then it fails as it did. Claims make a
call made twice safe; a function of many store calls is not made again (it may have written).
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from ._protocol import ConnectionLost, Store, WouldWait

__all__ = ["RECONNECT_WITHIN", "StoreIO"]

RECONNECT_WITHIN = 60.0  # seconds a store method lost with its connection is made again

P = ParamSpec("P")
T = TypeVar("T")


class _Lane:
    """A store's worker threads, and how many calls are on them (queued or running)."""

    __slots__ = ("_lock", "busy", "pool")

    def __init__(self, threads: int) -> None:
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="playline-store")
        self.busy = 0
        self._lock = threading.Lock()  # loops in several threads may share a store

    def submit(self, call: Callable[[], T]) -> Future[T]:
        with self._lock:
            self.busy += 1
        try:
            future = self.pool.submit(call)
        except BaseException:
            self._done(None)
            raise
        future.add_done_callback(self._done)  # run or cancelled before it ran
        return future

    def _done(self, _: object) -> None:
        with self._lock:
            self.busy -= 1


_lanes: weakref.WeakKeyDictionary[Store, _Lane] = weakref.WeakKeyDictionary()


def _lane(store: Store) -> _Lane:
    lane = _lanes.get(store)
    if lane is None:
        lane = _lanes[store] = _Lane(store.io_threads)
    return lane


class StoreIO:
    """``await io(store.claim_receipts, claims, owner=...)``: a store call that never makes
    the loop wait."""

    __slots__ = ("_inline", "_lane", "store")

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lane = _lane(store) if store.io_threads > 0 else None
        self._inline = store.io_inline

    async def __call__(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        lane = self._lane
        if lane is None:
            return fn(*args, **kwargs)
        own = getattr(fn, "__self__", None) is self.store
        if self._inline and not lane.busy and own:
            try:
                with self.store.inline():
                    return fn(*args, **kwargs)
            except WouldWait:
                pass  # held by another thread or process: waited for off the loop
        call = functools.partial(fn, *args, **kwargs)
        if not own:
            return await asyncio.wrap_future(lane.submit(call))
        pause, deadline = 0.05, None
        while True:
            try:
                return await asyncio.wrap_future(lane.submit(call))
            except ConnectionLost:
                now = time.monotonic()
                deadline = deadline or now + RECONNECT_WITHIN
                if now + pause > deadline:
                    raise
            await asyncio.sleep(pause)  # the server may be starting again
            pause = min(2 * pause, 2.0)
