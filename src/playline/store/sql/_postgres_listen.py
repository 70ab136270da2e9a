"""LISTEN/NOTIFY for the PostgreSQL store: its ``ChangeFeed`` (``store/_changes.py``).

Announcing: the transactions that complete, fail or release receipts and that send events
``NOTIFY`` on ``playline_receipts`` / ``playline_events`` with the keys they changed (a JSON
list, in payloads under PostgreSQL's 8000-byte limit). PostgreSQL delivers a notification at
commit, and only then: whoever hears it finds the change.

Listening: one connection of its own per store (outside the pool, opened when something first
subscribes) runs ``LISTEN`` on both channels in a daemon thread, which wakes the subscribers of
each key it hears of. When that connection drops, the thread reconnects (after a pause) and
wakes every subscriber once, since announcements were lost meanwhile; subscribers also keep
looking at the store now and then, so nothing waits forever on a lost announcement.

Channels are per database: stores in different schemas of one database hear each other's
announcements, which only makes their waiters look again.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from typing import Any

import psycopg

from .._changes import EVENTS, RECEIPTS
from ._cursor import Cursor

__all__ = ["CHANNELS", "Listener", "announce"]

CHANNELS = {RECEIPTS: "playline_receipts", EVENTS: "playline_events"}
_PAYLOAD = 7000  # bytes of keys per notification (PostgreSQL's limit is 8000)
_RECONNECT_S = 1.0
_POLL_S = 1.0  # how often the thread looks up from its connection (to stop)


def announce(cur: Cursor, channel: str, keys: Sequence[str]) -> None:
    """NOTIFY ``keys`` on ``channel`` within the caller's transaction (one round trip)."""
    payloads = list(_payloads(list(dict.fromkeys(keys))))
    if payloads:
        cur.execute(
            "SELECT pg_notify(?, p) FROM unnest(?::text[]) AS p", (CHANNELS[channel], payloads)
        )


def _payloads(keys: list[str]) -> Iterator[str]:
    batch: list[str] = []
    size = 2
    for key in keys:
        cost = len(json.dumps(key).encode()) + 1
        if batch and size + cost > _PAYLOAD:
            yield json.dumps(batch)
            batch, size = [], 2
        batch.append(key)
        size += cost
    if batch:
        yield json.dumps(batch)


class Listener:
    """The store's ``ChangeFeed``: one listening connection and a thread."""

    def __init__(self, conninfo: str, connect_kwargs: dict[str, Any], name: str) -> None:
        self._conninfo = conninfo
        self._connect_kwargs = connect_kwargs
        self._name = name
        self._lock = threading.Lock()
        self._subscribers: dict[tuple[str, str | None], list[Callable[[], None]]] = {}
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self.listening = threading.Event()  # set while LISTEN is in force

    def subscribe(
        self, channel: str, key: str | None, wake: Callable[[], None]
    ) -> Callable[[], None]:
        slot = (CHANNELS[channel], key)
        with self._lock:
            self._subscribers.setdefault(slot, []).append(wake)
            if self._thread is None and not self._stopping.is_set():
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()

        def stop() -> None:
            with self._lock:
                woken = self._subscribers.get(slot, [])
                if wake in woken:
                    woken.remove(wake)
                if not woken:
                    self._subscribers.pop(slot, None)

        return stop

    def close(self) -> None:
        self._stopping.set()

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                with psycopg.connect(
                    self._conninfo, autocommit=True, **self._connect_kwargs
                ) as conn:
                    for channel in CHANNELS.values():
                        conn.execute(f"LISTEN {channel}")
                    self._wake_all()  # what was announced before LISTEN (or while away)
                    self.listening.set()
                    while not self._stopping.is_set():
                        for notice in conn.notifies(timeout=_POLL_S):
                            self._heard(notice.channel, notice.payload)
            except psycopg.Error:
                self.listening.clear()
                self._stopping.wait(_RECONNECT_S)
        self.listening.clear()

    def _heard(self, channel: str, payload: str) -> None:
        try:
            keys = json.loads(payload)
        except ValueError:
            keys = None
        with self._lock:
            woken = list(self._subscribers.get((channel, None), ()))
            if isinstance(keys, list):
                for key in keys:
                    if isinstance(key, str):
                        woken.extend(self._subscribers.get((channel, key), ()))
            else:  # not ours: wake the channel's subscribers to look
                for (heard, _), wakes in self._subscribers.items():
                    if heard == channel:
                        woken.extend(wakes)
        _wake(woken)

    def _wake_all(self) -> None:
        with self._lock:
            woken = [wake for wakes in self._subscribers.values() for wake in wakes]
        _wake(woken)


def _wake(woken: list[Callable[[], None]]) -> None:
    for wake in woken:
        with suppress(Exception):  # one subscriber's failure must not silence the others
            wake()
