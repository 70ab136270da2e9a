"""Being told of what other processes changed in the store, instead of looking again and again.

A store that can announce changes (PostgreSQL, with LISTEN/NOTIFY) has a ``ChangeFeed``:
``store.changes()``. Two channels:

- ``RECEIPTS``: a receipt was completed, failed or released (the key is the receipt key);
- ``EVENTS``: an event was sent (the key is the event key).

The announcement goes out with the transaction that made the change, so whoever hears it
finds the change in the store. A waiter opens a ``Watch`` *before* it looks at the store, then
waits on it: what is announced after that is never missed (the watch stays set until it is
waited on). Announcements can still be lost (a connection that drops), so waiters keep looking
now and then; a store without a feed (SQLite, memory: ``changes()`` is None) is only looked
at, with backoff.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Protocol

from .._clock import Clock

__all__ = ["EVENTS", "RECEIPTS", "ChangeFeed", "Watch", "watch"]

RECEIPTS = "receipts"
EVENTS = "events"


class ChangeFeed(Protocol):
    def subscribe(
        self, channel: str, key: str | None, wake: Callable[[], None]
    ) -> Callable[[], None]:
        """Call ``wake`` (from any thread) whenever a change of ``key`` (None: of any key) is
        announced on ``channel``; returns the function that stops it."""
        ...


class Watch:
    """Announcements of changes, kept until they are waited for."""

    def __init__(self, feed: ChangeFeed | None) -> None:
        self.feed = feed
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()

    def wake(self) -> None:
        """Thread-safe: a change was announced."""
        with suppress(RuntimeError):  # its loop has closed: nobody waits any more
            self._loop.call_soon_threadsafe(self._changed.set)

    async def wait(self, clock: Clock, seconds: float) -> bool:
        """Until a change is announced (True; at once if one was since the last wait) or
        ``seconds`` of ``clock`` pass (False). Without a feed, ``wake`` still ends the wait
        (a worker told to stop while it waits for its next look)."""
        if not self._changed.is_set():
            timer = asyncio.ensure_future(clock.sleep(seconds))
            told = asyncio.ensure_future(self._changed.wait())
            try:
                await asyncio.wait((timer, told), return_when=asyncio.FIRST_COMPLETED)
            finally:
                timer.cancel()
                told.cancel()
        announced = self._changed.is_set()
        self._changed.clear()
        return announced


@contextmanager
def watch(feed: ChangeFeed | None, channel: str, key: str | None = None) -> Iterator[Watch]:
    """Watch ``channel`` (for ``key``, or any key) while the block runs."""
    watching = Watch(feed)
    stop = feed.subscribe(channel, key, watching.wake) if feed is not None else None
    try:
        yield watching
    finally:
        if stop is not None:
            stop()
