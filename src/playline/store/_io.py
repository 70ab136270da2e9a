"""Calling a store from the event loop without blocking it.

Stores are synchronous (``_protocol.py``). ``StoreIO`` runs each call on the store's own worker
threads (``Store.io_threads``; one for SQLite, whose connection serialises anyway), or inline
for a store that never blocks (``io_threads == 0``, the memory store). Calls from one caller
keep their order: each is awaited before the next is made.
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from ._protocol import Store

__all__ = ["StoreIO"]

P = ParamSpec("P")
T = TypeVar("T")

_executors: weakref.WeakKeyDictionary[Store, ThreadPoolExecutor] = weakref.WeakKeyDictionary()


def _executor(store: Store) -> ThreadPoolExecutor:
    pool = _executors.get(store)
    if pool is None:
        pool = _executors[store] = ThreadPoolExecutor(
            max_workers=store.io_threads, thread_name_prefix="playline-store"
        )
    return pool


class StoreIO:
    """``await io(store.claim_receipts, claims, owner=...)``: a store call off the loop."""

    __slots__ = ("_pool", "store")

    def __init__(self, store: Store) -> None:
        self.store = store
        self._pool = _executor(store) if store.io_threads > 0 else None

    async def __call__(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        if self._pool is None:
            return fn(*args, **kwargs)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))
