"""A large set's window index on PostgreSQL is built without holding its writers off (``CREATE
INDEX CONCURRENTLY``), and one a failed build left INVALID is built again
(``store/sql/_postgres.py``)."""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from typing import Any

import psycopg
from test_window_indexes import ROWS, _row

from playline.store import MemoryStore, RowRecord
from playline.store.sql import PostgresStore


def _index_name(set_id: int, kind: str, column: str) -> str:
    """The name ``_row_windows.py`` gives a set's index for a window."""
    return f"rows_w{set_id}_{kind}_{hashlib.sha256(column.encode()).hexdigest()[:16]}"


def _index(url: str, name: str) -> tuple[bool, str] | None:
    """Whether the index ``name`` is valid, and its definition; None: there is none."""
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = %s",
            (name,),
        ).fetchone()
    return None if found is None else (bool(found[0]), str(found[1]))


def _keys(rows: list[RowRecord]) -> list[str]:
    return [r.key for r in rows]


def test_an_index_a_failed_build_left_invalid_is_built_again(postgres_url: str) -> None:
    rows = [_row(i) for i in range(ROWS)]
    reference = MemoryStore()
    reference.save_rows(rows)
    with PostgresStore(postgres_url) as store:
        store.save_rows(rows)
        name = _index_name(1, "asc", "score")
        # a concurrent build that fails (duplicate keys) leaves its index INVALID
        failing = contextlib.suppress(psycopg.errors.UniqueViolation)
        with psycopg.connect(postgres_url, autocommit=True) as conn, failing:
            conn.execute(f"CREATE UNIQUE INDEX CONCURRENTLY {name} ON rows (set_id)")
        left = _index(postgres_url, name)
        assert left is not None and not left[0], left
        got = store.row_window("r1", "big", sort="score", limit=30)
        assert _keys(got) == _keys(reference.row_window("r1", "big", sort="score", limit=30))
        built = _index(postgres_url, name)
        assert built is not None and built[0] and "score" in built[1], built


def test_writers_go_on_while_a_window_index_is_built(postgres_url: str) -> None:
    """A reader's open transaction holds the concurrent build up (it waits for older
    snapshots to end); meanwhile another store writes rows to the same set."""
    rows = [_row(i) for i in range(ROWS)]
    with PostgresStore(postgres_url) as store, PostgresStore(postgres_url) as writer:
        store.save_rows(rows)
        reader = psycopg.connect(postgres_url)
        reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        reader.execute("SELECT count(*) FROM runs").fetchone()  # its snapshot is taken
        got: dict[str, Any] = {}

        def window() -> None:
            try:
                got["rows"] = store.row_window("r1", "big", sort="score", limit=ROWS + 10)
            except BaseException as exc:
                got["error"] = exc

        building = threading.Thread(target=window)
        building.start()
        try:
            _wait_for_build(postgres_url)
            more = [_row(ROWS + i, score=-1) for i in range(5)]  # first after the nulls
            writer.save_rows(more)  # a plain CREATE INDEX would hold this off
            assert writer.count_rows("r1", "big") == ROWS + 5
        finally:
            reader.rollback()
            reader.close()
            building.join()
        assert "error" not in got, got
        assert len(got["rows"]) >= ROWS
        reference = MemoryStore()
        reference.save_rows([*rows, *more])
        for args in ({"sort": "score"}, {"sort": "score", "offset": 900}):
            want = reference.row_window("r1", "big", limit=100, **args)
            assert _keys(store.row_window("r1", "big", limit=100, **args)) == _keys(want)
        built = _index(postgres_url, _index_name(1, "asc", "score"))
        assert built is not None and built[0]


def _wait_for_build(url: str) -> None:
    """Until a concurrent index build waits for another transaction (polled: a condition
    the server reports, not a sleep)."""
    deadline = time.monotonic() + 60
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            found = conn.execute(
                "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                "AND query LIKE 'CREATE INDEX CONCURRENTLY%' AND wait_event_type = 'Lock'"
            ).fetchone()
            if found:
                return
    raise AssertionError("no concurrent index build waited for the open transaction")
