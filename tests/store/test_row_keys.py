"""What only the SQL stores do with rows: write them in order and index their keys later.

A store object keeps the keys of the rows it wrote last (its set's tail) in memory and writes
them to ``row_keys`` in sorted batches (``store/sql/_rows.py``). These tests pin what that
must never change: a key is one row, found by key from any store object, whoever wrote it and
whether it closed, died, or handed the run on.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from test_rows import row

import playline as pl
from playline.store import RowRecord, RunRecord, RunStatus, Store, open_store
from playline.store.sql import PostgresStore, SQLiteStore, SQLStore, _rows
from playline.store.sql._postgres_schema import MIGRATIONS as PG_MIGRATIONS
from playline.store.sql._postgres_schema import migrate
from playline.store.sql._schema import MIGRATIONS

from storehelp import FAR, FAR2, LEASE

_OLD_ROWS = [  # (run, dataset, key, index) as an older schema stored them
    ("r1", "people", "b", 1),
    ("r1", "people", "a", 1),
    ("r1", "people", "z", 0),
    ("r1", "firms", "a", 0),
    ("r2", "people", "a", 0),
]


def _opened(url: str) -> SQLStore:
    store = open_store(url)
    assert isinstance(store, SQLStore)
    return store


def _indexed(store: SQLStore, run_id: str = "r1") -> int:
    """How many of the run's rows ``row_keys`` holds."""
    with store._transaction("count", write=False) as cur:
        (count,) = cur.execute(
            "SELECT count(*) FROM row_keys JOIN row_sets USING (set_id) WHERE run_id = ?",
            (run_id,),
        ).fetchone()
    return int(count)


def _failed(key: str, index: int) -> RowRecord:
    return RowRecord(
        run_id="r1",
        dataset="people",
        key=key,
        index=index,
        status="failed",
        values={"key": key},
        cells={"email": {"status": "failed", "error": "boom"}},
        error="boom",
        updated_at=99.0,
    )


def _keys(store: Store) -> list[str]:
    return [r.key for r in store.iter_rows("r1", "people")]


def test_rows_one_store_object_wrote_are_read_by_key_from_another(durable_url: str) -> None:
    writer, reader = _opened(durable_url), _opened(durable_url)
    try:
        rows = [row(f"k{i}", i) for i in range(30)]
        writer.save_rows(rows)
        assert _indexed(reader) == 0  # the keys wait in the writer's memory
        assert reader.load_rows("r1", "people", ["k3", "k29", "nope"]) == {
            "k3": rows[3],
            "k29": rows[29],
        }
        assert writer.load_rows("r1", "people", ["k3"]) == {"k3": rows[3]}
        assert reader.count_rows("r1", "people") == 30
        writer.close()
        assert _indexed(reader) == 30  # indexed as the writer closed
        assert reader.load_rows("r1", "people", ["k3"]) == {"k3": rows[3]}
    finally:
        writer.close()
        reader.close()


def test_a_writer_that_died_leaves_rows_the_next_one_replaces_by_key(durable_url: str) -> None:
    gone = _opened(durable_url)  # never closed: as a killed process leaves its store
    gone.save_rows([row(f"k{i}", i) for i in range(20)])
    with _opened(durable_url) as store:
        store.save_rows([_failed("k4", 4), row("k20", 20)])
        assert store.load_rows("r1", "people", ["k4"])["k4"].status == "failed"
        assert _keys(store) == [f"k{i}" for i in range(21)]
    with _opened(durable_url) as store:
        assert store.load_rows("r1", "people", ["k4", "k20"]).keys() == {"k4", "k20"}
        assert store.count_rows("r1", "people") == 21
        assert _indexed(store) == 21
        gone.close()  # the set is another's now: its late close changes nothing
        assert _indexed(store) == 21


def test_a_long_tail_is_indexed_as_it_grows(
    durable_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_rows, "TAIL_ROWS", 10)
    with _opened(durable_url) as store, _opened(durable_url) as reader:
        rows = [row(f"k{i:02}", i) for i in range(25)]
        for start in range(0, 25, 4):
            store.save_rows(rows[start : start + 4])
        assert _indexed(reader) == 24  # indexed at 12 rows and at 24: the 25th waits
        store.save_rows([_failed("k02", 2), _failed("k23", 23)])  # one indexed, one in the tail
        for key in ("k02", "k23"):
            for looking in (store, reader):
                assert looking.load_rows("r1", "people", [key])[key].status == "failed"
        assert _keys(reader) == [f"k{i:02}" for i in range(25)]


def test_a_run_claimed_again_indexes_the_rows_its_last_holder_left(durable_url: str) -> None:
    first = _opened(durable_url)
    first.create_run(
        RunRecord(run_id="r1", play="p", status=RunStatus.RUNNING, holder=FAR, lease_until=LEASE)
    )
    first.save_rows([row(f"k{i}", i) for i in range(12)])  # and the holder dies
    with _opened(durable_url) as store:
        assert _indexed(store) == 0
        claim = store.claim_run("r1", holder=FAR2, lease_until=LEASE + 60, now=LEASE + 1)
        assert claim.record is not None and claim.record.holder == FAR2
        assert _indexed(store) == 12  # the resume finds them by key without a scan
        assert len(store.load_rows("r1", "people", [f"k{i}" for i in range(12)])) == 12
    first.close()


def test_an_attempt_that_ends_leaves_its_rows_indexed(durable_url: str) -> None:
    # pl.run keeps the store it opened (the result's dataset reads its rows from it)
    @pl.play(name="indexed")
    async def play(ctx: pl.Context, input: None) -> int:
        return len(await ctx.dataset("people", [{"n": i} for i in range(30)]).run())

    with _opened(durable_url) as store:
        result = pl.run(play, store=store, run_id="r1", tools=[])
        assert result.status == "completed" and result.output == 30
        assert _indexed(store) == 30


def test_a_version_7_sqlite_store_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "v7.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        for migration in MIGRATIONS[:7]:
            for statement in migration:
                conn.execute(statement)
        conn.execute("INSERT INTO meta VALUES ('schema_version', '7')")
        for run_id, dataset, key, idx in _OLD_ROWS:
            conn.execute(
                "INSERT INTO rows VALUES (?, ?, ?, ?, 'completed', ?, '{}', NULL, 1.0)",
                (run_id, dataset, key, idx, f'{{"key": "{key}"}}'),
            )
    with SQLiteStore(f"sqlite:///{path}") as store:
        assert store.schema_version_found == 7
        _old_rows_are_kept(store)


def test_a_version_4_postgres_store_keeps_its_rows(postgres_url: str) -> None:
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert migrate(conn, "db", PG_MIGRATIONS[:4]) == 0
        for run_id, dataset, key, idx in _OLD_ROWS:
            conn.execute(
                "INSERT INTO rows VALUES (%s, %s, %s, %s, 'completed', %s, '{}', NULL, 1.0)",
                (run_id, dataset, key, idx, f'{{"key": "{key}"}}'),
            )
    with PostgresStore(postgres_url) as store:
        assert store.schema_version_found == 4
        _old_rows_are_kept(store)


def _old_rows_are_kept(store: Store) -> None:
    """The rows of ``_OLD_ROWS``, migrated: read in order and by key, then written to."""
    assert _keys(store) == ["z", "a", "b"]
    assert [r.key for r in store.iter_rows("r1", "firms")] == ["a"]
    assert store.load_rows("r2", "people", ["a"])["a"].values == {"key": "a"}
    store.save_rows([_failed("a", 1), row("c", 2)])
    assert _keys(store) == ["z", "a", "b", "c"]
    assert store.load_rows("r1", "people", ["a"])["a"].status == "failed"
    assert store.datasets("r1") == ["firms", "people"]


def test_threads_saving_the_same_keys_at_once_leave_one_row_a_key(durable_url: str) -> None:
    """One store object used from several threads at once (the PostgreSQL pool's, or a UI
    beside a run): a writer that numbers a row and one that saves its key next never both
    number it, whichever commits first."""
    store = _opened(durable_url + ("&" if "?" in durable_url else "?") + "pool_size=4"
                    if durable_url.startswith("postgres") else durable_url)  # fmt: skip
    keys = [f"k{i}" for i in range(300)]
    start = threading.Barrier(4)
    store._tails.lock = _Yielding()  # the others get their turn as a writer learns its rows

    def save() -> None:  # each thread saves each key, in the same order: each new key races
        start.wait()
        for key in keys:
            store.save_rows([row(key, int(key[1:]))])

    threads = [threading.Thread(target=save) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.key for r in store.iter_rows("r1", "people")) == sorted(keys)
    store.close()
    assert sorted(r.key for r in _opened(durable_url).iter_rows("r1", "people")) == sorted(keys)


def test_a_row_is_found_by_key_the_moment_its_save_commits(durable_url: str) -> None:
    """A row drawer opened beside a run, on the run's store object: the row a save has just
    committed is found by key, even before the object has learnt the row's number."""
    store = _opened(durable_url)
    store.save_rows([row("a", 0)])  # the set's tail is this object's
    committed, go_on = threading.Event(), threading.Event()
    transaction = store._transaction

    @contextmanager
    def pausing(what: str, *, write: bool) -> Iterator[Any]:
        with transaction(what, write=write) as cur:
            yield cur
        if what.startswith("save"):  # committed, the tail not told yet
            committed.set()
            go_on.wait()

    store._transaction = pausing  # type: ignore[method-assign]
    store._tails.writing = _GoingOn(store._tails.writing, go_on)
    saving = threading.Thread(target=store.save_rows, args=([row("b", 1)],))
    saving.start()
    committed.wait()
    try:
        found = store.load_rows("r1", "people", ["b"])
    finally:
        go_on.set()
        saving.join()
    assert list(found) == ["b"]
    store.close()


def test_a_save_interrupted_after_its_commit_leaves_one_row_a_key(durable_url: str) -> None:
    """A save whose commit is followed at once by an interrupt (Ctrl-C in a notebook) has
    not told its store object what it wrote; the object's next saves of those keys still
    find their rows, and number no second one."""
    store = _opened(durable_url)
    store.save_rows([row("a", 0)])
    transaction = store._transaction

    @contextmanager
    def interrupted(what: str, *, write: bool) -> Iterator[Any]:
        with transaction(what, write=write) as cur:
            yield cur
        raise KeyboardInterrupt  # committed

    store._transaction = interrupted  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        store.save_rows([row("b", 1)])
    del store._transaction  # the store's own again
    store.save_rows([row("a", 0, n=2), row("b", 1, n=2), row("c", 2)])
    assert [(r.key, r.values.get("n")) for r in store.iter_rows("r1", "people")] == [
        ("a", 2),
        ("b", 2),
        ("c", None),
    ]
    assert sorted(store.load_rows("r1", "people", ["a", "b", "c"])) == ["a", "b", "c"]
    store.close()


class _GoingOn:
    """A save's lock: a reader about to wait for it lets the paused save go on."""

    def __init__(self, lock: threading.Lock, go_on: threading.Event) -> None:
        self._lock, self._go_on = lock, go_on

    def acquire(self, blocking: bool = True) -> bool:
        if blocking and self._lock.locked():
            self._go_on.set()
        return self._lock.acquire(blocking)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class _Yielding:
    """A lock that lets the other threads run before it is taken: the moment between a
    save's commit and what its store object learns of it is then one they all meet."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        time.sleep(0)  # a turn for the others, not a wait for anything
        self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
