"""Announced changes (LISTEN/NOTIFY on PostgreSQL): a waiter on one connection is woken by a
change committed on another, without looking at the store.

The waits use a clock that never lets time pass: only an announcement can end them (a real
timeout around each makes a missing one fail the test instead of hanging it).
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from playline.store import Store
from playline.store._changes import EVENTS, RECEIPTS, Watch, watch
from playline.store.sql import PostgresStore

from storehelp import FAR, ME, NOW, claim, complete, fail

SAFETY_S = 20.0  # a wait that is never announced fails after this, rather than hanging


class StoppedClock:
    """Time never passes: a wait ends only when a change is announced."""

    def now(self) -> float:
        return NOW

    def monotonic(self) -> float:
        return NOW

    async def sleep(self, seconds: float) -> None:
        await asyncio.Event().wait()


STOPPED = StoppedClock()


async def announced(changed: Watch) -> bool:
    return await asyncio.wait_for(changed.wait(STOPPED, 3600), SAFETY_S)


async def listening(store: PostgresStore, changed: Watch) -> None:
    """Until the store's feed listens; the wake it gives every watch on connecting is taken."""
    listener: Any = store.changes()
    assert await asyncio.to_thread(listener.listening.wait, SAFETY_S)
    assert await announced(changed)


def test_only_postgresql_announces_changes(store: Store) -> None:
    assert (store.changes() is None) == (not isinstance(store, PostgresStore))


def test_without_a_feed_a_watch_waits_out_the_clock() -> None:
    from playline import ManualClock

    clock = ManualClock()

    async def go() -> bool:
        with watch(None, RECEIPTS, "k") as changed:
            return await changed.wait(clock, 5.0)

    start = clock.now()
    assert asyncio.run(go()) is False
    assert clock.now() == start + 5.0


def test_a_completed_receipt_wakes_its_waiter_on_another_connection(postgres_url: str) -> None:
    async def go() -> None:
        with PostgresStore(postgres_url) as waiter, PostgresStore(postgres_url) as writer:
            claim(writer, "k", "other", owner=FAR)
            with (
                watch(waiter.changes(), RECEIPTS, "k") as mine,
                watch(waiter.changes(), RECEIPTS, "unrelated") as theirs,
            ):
                await listening(waiter, mine)
                await listening(waiter, theirs)
                await asyncio.to_thread(complete, writer, ("k", b"1"), owner=FAR)
                assert await announced(mine)
                assert waiter.find_receipts(["k"])["k"].result == b"1"
                # once told, a watch waits again until the next announcement
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(mine.wait(STOPPED, 3600), 0.2)
                await asyncio.to_thread(fail, writer, ("other", "no"), owner=FAR)
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(mine.wait(STOPPED, 3600), 0.2)

    asyncio.run(go())


def test_failed_and_released_receipts_are_announced(postgres_url: str) -> None:
    async def go() -> None:
        with PostgresStore(postgres_url) as waiter, PostgresStore(postgres_url) as writer:
            claim(writer, "failed", "released", owner=ME)
            with (
                watch(waiter.changes(), RECEIPTS, "failed") as failed,
                watch(waiter.changes(), RECEIPTS, "released") as released,
            ):
                await listening(waiter, failed)
                await listening(waiter, released)
                await asyncio.to_thread(fail, writer, ("failed", "no"), owner=ME)
                assert await announced(failed)
                await asyncio.to_thread(writer.release_receipts, ["released"], owner=ME)
                assert await announced(released)

    asyncio.run(go())


def test_a_sent_event_wakes_whoever_watches_events(postgres_url: str) -> None:
    async def go() -> None:
        with (
            PostgresStore(postgres_url) as waiter,
            PostgresStore(postgres_url) as writer,
            watch(waiter.changes(), EVENTS) as sent,
        ):
            await listening(waiter, sent)
            assert await asyncio.to_thread(writer.send_event, "go", b"1", now=NOW)
            assert await announced(sent)
            # sent twice: delivered once, announced once
            assert not await asyncio.to_thread(writer.send_event, "go", b"2", now=NOW)
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(sent.wait(STOPPED, 3600), 0.2)

    asyncio.run(go())


def test_a_batch_of_many_keys_is_announced_in_several_notifications(postgres_url: str) -> None:
    keys = [f"key-{i:04d}-" + "x" * 60 for i in range(400)]  # ~30 KB of keys

    async def go() -> None:
        with PostgresStore(postgres_url) as waiter, PostgresStore(postgres_url) as writer:
            claim(writer, *keys, owner=FAR)
            with (
                watch(waiter.changes(), RECEIPTS, keys[0]) as first,
                watch(waiter.changes(), RECEIPTS, keys[-1]) as last,
            ):
                await listening(waiter, first)
                await listening(waiter, last)
                await asyncio.to_thread(complete, writer, *((k, b"1") for k in keys), owner=FAR)
                assert await announced(first)
                assert await announced(last)

    asyncio.run(go())


def test_after_losing_its_connection_the_feed_listens_again(postgres_url: str) -> None:
    async def go() -> None:
        with PostgresStore(postgres_url) as waiter, PostgresStore(postgres_url) as writer:
            claim(writer, "k", owner=FAR)
            with watch(waiter.changes(), RECEIPTS, "k") as changed:
                await listening(waiter, changed)
                listener: Any = waiter.changes()
                with psycopg.connect(postgres_url, autocommit=True) as admin:
                    admin.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE query LIKE 'LISTEN %' AND datname = current_database()"
                    )
                # Announcements were lost meanwhile: reconnected, it wakes every watch once.
                assert await announced(changed)
                assert await asyncio.to_thread(listener.listening.wait, SAFETY_S)
                await asyncio.to_thread(complete, writer, ("k", b"1"), owner=FAR)
                assert await announced(changed)

    asyncio.run(go())
