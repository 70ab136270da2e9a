"""A grid's windows over a large set, on every store: the same rows in the same order as the
reference (MemoryStore), whatever the SQL stores read them through: the rows' ``states`` in
the index of a set's rows, and the indexes a large set gets for a sort or a column's filter,
which the database keeps current as rows change (``store/sql/_row_windows.py``)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from playline.store import CellMeta, MemoryStore, RowRecord, Store, open_store
from playline.store.sql import PostgresStore, SQLiteStore, SQLStore
from playline.store.sql._row_windows import INDEX_ROWS, MAX_INDEXES
from playline.store.sql._schema import MIGRATIONS
from playline.store.sql._tables import CELL_BITS, ROW_BITS, row_states

ROWS = INDEX_ROWS + 40  # a set large enough to get its own indexes
STATUSES = ("completed", "not_found", "completed", "failed", "cached", "completed", "skipped")


def _row(i: int, *, score: Any = "auto", email: str | None = None) -> RowRecord:
    """Row ``i``: ties in score and name, nulls and missing values, cells in every state."""
    values: dict[str, Any] = {"name": f"n{(i * 37) % 101:03d}", "it's?": i % 5}
    if i % 11:  # every 11th row has no score at all
        values["score"] = None if i % 7 == 0 else (i * 7919) % 23 if score == "auto" else score
    if score != "auto":
        values["score"] = score
    email = email or STATUSES[i % len(STATUSES)]
    cells: dict[str, CellMeta] = {"email": {"status": email}, "phone": {"status": "completed"}}
    if i % 5 == 0:
        cells["phone"] = {"status": "not_found", "waterfall": {"status": "failed"}}
    waiting = i % 97 == 0
    if waiting:
        cells["score"] = {"status": "queued"}
    return RowRecord(
        run_id="r1", dataset="big", key=f"k{i:05d}", index=i,
        status="waiting" if waiting else "failed" if email == "failed" else "completed",
        values=values, cells=cells,
    )  # fmt: skip


WINDOWS: list[dict[str, Any]] = [
    {},
    {"descending": True, "offset": 17},
    {"offset": ROWS - 30},
    {"state": "waiting"},
    {"state": "failed", "offset": 3},
    {"state": "not_found", "limit": 40},
    {"state": "not_found", "column": "email", "offset": 250},
    {"state": "not_found", "column": "phone"},
    {"state": "failed", "column": "phone"},  # the waterfall's step failed, not the cell
    {"sort": "score"},
    {"sort": "score", "descending": True},
    {"sort": "score", "offset": ROWS - 60},
    {"sort": "score", "descending": True, "offset": ROWS - 60},
    {"sort": "name", "offset": 1000},
    {"sort": "name", "descending": True, "state": "failed"},
    {"sort": "score", "state": "not_found", "column": "email"},
    {"sort": "score", "descending": True, "state": "waiting"},
    {"sort": "nothing", "state": "cached", "offset": 5},
    # a quote in the index's SQL, and a question mark (PostgreSQL's statements are written
    # with ``?`` for their parameters)
    {"sort": "it's?", "descending": True, "offset": 20},
]


def _same_windows(store: Store, reference: Store) -> None:
    for window in WINDOWS:
        args = {"limit": 25, **window}
        got = store.row_window("r1", "big", **args)
        want = reference.row_window("r1", "big", **args)
        assert [r.key for r in got] == [r.key for r in want], args
        assert [r.values for r in got] == [r.values for r in want], args
        if "sort" not in window and "offset" not in window:
            filtered = {"state": window.get("state"), "column": window.get("column")}
            assert store.count_rows("r1", "big", **filtered) == reference.count_rows(
                "r1", "big", **filtered
            ), filtered


@pytest.fixture
def big(store: Store) -> tuple[Store, Store]:
    """The store under test and the reference, holding the same large set."""
    reference = MemoryStore()
    rows = [_row(i) for i in range(ROWS)]
    for target in (store, reference):
        target.save_rows(rows[::-1])  # in no order: the windows' order is the rows' index
    return store, reference


def _indexes(store: Store) -> dict[str, str]:
    """The indexes made for windows, by name: their definitions."""
    if isinstance(store, SQLiteStore):
        with closing(sqlite3.connect(store.path)) as conn:
            found = conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND name LIKE 'rows_w%'"
            ).fetchall()
    elif isinstance(store, PostgresStore):
        import psycopg

        with psycopg.connect(store.url) as conn:
            found = conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE indexname LIKE 'rows_w%'"
            ).fetchall()
    else:
        return {}
    return dict(found)


def test_windows_over_a_large_set_are_the_references(big: tuple[Store, Store]) -> None:
    store, reference = big
    _same_windows(store, reference)
    made = _indexes(store)
    if isinstance(store, MemoryStore):
        return
    # one a direction for score and name, ascending for nothing, descending for it's?; one
    # for the cells of email and of phone
    kinds = sorted(name.split("_")[2] for name in made)
    assert kinds == ["asc", "asc", "asc", "cell", "cell", "desc", "desc", "desc"], made
    assert all("WHERE" in sql.upper() and "set_id" in sql for sql in made.values())


def test_a_row_that_changes_moves_in_the_sorted_and_filtered_windows(
    big: tuple[Store, Store],
) -> None:
    store, reference = big
    _same_windows(store, reference)  # the indexes are made
    changed = [
        _row(5, score=-1),  # first by score now
        _row(6, score=10**6, email="not_found"),  # last by score, and its email not found
        _row(ROWS - 1, email="failed"),
        _row(40, score=None, email="completed"),  # no longer failed, its score null
    ]
    changed.append(RowRecord(**{**_fields(_row(1)), "status": "waiting"}))
    for target in (store, reference):
        target.save_rows(changed)
    _same_windows(store, reference)
    first = store.row_window("r1", "big", sort="score", limit=ROWS)
    assert [r.key for r in first if r.values.get("score") == -1] == ["k00005"]
    last = store.row_window("r1", "big", sort="score", descending=True, limit=1)
    assert last[0].key == "k00006"
    email = store.row_window("r1", "big", state="not_found", column="email", limit=ROWS)
    assert "k00006" in {r.key for r in email}
    waiting = store.row_window("r1", "big", state="waiting", limit=ROWS)
    assert "k00001" in {r.key for r in waiting}
    failed = store.row_window("r1", "big", state="failed", limit=ROWS)
    assert "k00040" not in {r.key for r in failed}


def _fields(row: RowRecord) -> dict[str, Any]:
    return {
        "run_id": row.run_id, "dataset": row.dataset, "key": row.key, "index": row.index,
        "status": row.status, "values": row.values, "cells": row.cells,
    }  # fmt: skip


def test_a_set_holds_a_bounded_number_of_indexes(big: tuple[Store, Store]) -> None:
    store, reference = big
    names = [f"c{n}" for n in range(MAX_INDEXES + 3)]
    for name in names:  # a sort by each: past the bound, the rows are read as before
        for target in (store, reference):
            got = target.row_window("r1", "big", sort=name, limit=5)
            assert [r.key for r in got] == ["k00000", "k00001", "k00002", "k00003", "k00004"]
    assert len(_indexes(store)) == (0 if isinstance(store, MemoryStore) else MAX_INDEXES)
    assert [r.key for r in store.row_window("r1", "big", sort="score", limit=50)] == [
        r.key for r in reference.row_window("r1", "big", sort="score", limit=50)
    ]


def test_a_small_set_gets_no_index(store: Store) -> None:
    store.save_rows([_row(i) for i in range(50)])
    assert [r.key for r in store.row_window("r1", "big", sort="score", limit=3)] == [
        "k00000", "k00007", "k00011"
    ]  # fmt: skip
    assert _indexes(store) == {}


def test_a_read_only_store_reads_the_rows_without_an_index(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    rows = [_row(i) for i in range(ROWS)]
    with SQLiteStore(url) as writer:
        writer.save_rows(rows)
    reference = MemoryStore()
    reference.save_rows(rows)
    with SQLiteStore(url, read_only=True) as reader:
        _same_windows(reader, reference)
        assert _indexes(reader) == {}


def test_a_row_states_are_a_bit_a_cell_state_and_one_for_a_waiting_row() -> None:
    cells: dict[str, Any] = {
        "a": {"status": "completed"},
        "b": {"status": "not_found", "waterfall": {"status": "failed"}},  # not the cell's
        "c": {"status": "completed"},
        "d": "not a cell",
        "e": {"status": ["no"]},
        "f": {"status": "done"},  # no such state
    }
    assert row_states("completed", cells) == CELL_BITS["completed"] | CELL_BITS["not_found"]
    assert row_states("waiting", {}) == ROW_BITS["waiting"]
    assert row_states("failed", {"a": {"status": "failed"}}) == CELL_BITS["failed"]


def test_a_version_11_sqlite_store_gets_its_rows_states(tmp_path: Path) -> None:
    """The migration reads each row's cells into its ``states`` as ``row_states`` would."""
    path = tmp_path / "v11.db"
    rows = [_row(i) for i in range(300)]
    rows += [
        RowRecord(run_id="r1", dataset="big", key="odd", index=300, status="completed",
                  values={}, cells={"x": "text", "y": {"status": 3}})  # type: ignore[dict-item,typeddict-item]
    ]  # fmt: skip
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        for migration in MIGRATIONS[:11]:
            for statement in migration:
                conn.execute(statement)
        conn.execute("INSERT INTO meta VALUES ('schema_version', '11')")
        conn.execute("INSERT INTO row_sets (run_id, dataset) VALUES ('r1', 'big')")
        for n, row in enumerate(rows, start=1):
            conn.execute(
                "INSERT INTO rows VALUES (1, ?, ?, ?, ?, ?, ?, NULL, 1.0)",
                (n, row.key, row.index, row.status, _json(row.values), _json(row.cells)),
            )
        conn.execute("UPDATE row_sets SET keyed_through = ?", (len(rows),))
        conn.execute("INSERT INTO row_keys SELECT set_id, key, id FROM rows")
    reference = MemoryStore()
    reference.save_rows(rows[:-1])  # the odd row is in no state
    with SQLiteStore(f"sqlite:///{path}") as store:
        assert store.schema_version_found == 11
        for window in WINDOWS:
            if "sort" not in window and "state" in window:
                args = {"limit": 400, **window}
                got = store.row_window("r1", "big", **args)
                assert [r.key for r in got] == [
                    r.key for r in reference.row_window("r1", "big", **args)
                ], window
    with closing(sqlite3.connect(path)) as conn:
        stored: dict[str, int] = dict(conn.execute("SELECT key, states FROM rows").fetchall())
    assert stored == {row.key: row_states(row.status, row.cells) for row in rows}


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


def test_the_windows_sorts_and_filters_are_read_through_the_sets_indexes(
    big: tuple[Store, Store],
) -> None:
    """Each index serves the window it was made for: the same expression, in the same order
    (no sort left to do), in a query that names the set. (SQLite is told which index to read
    by: a query it cannot serve would not even prepare.)"""
    store, _ = big
    if not isinstance(store, SQLStore):
        return
    asked: list[tuple[dict[str, Any], str]] = [
        ({"sort": "score"}, "asc"),
        ({"sort": "score", "descending": True}, "desc"),
        ({"state": "not_found", "column": "email"}, "cell"),
    ]
    for window, kind in asked:
        store.row_window("r1", "big", **window)
        name = next(n for n in _indexes(store) if f"_{kind}_" in n)
        source = store._sql_indexed_by(name)
        if "sort" in window:
            value = store._sql_value_of("score")
            order = f"{value} {store._sql_order(bool(window.get('descending')))}, idx, key"
            sql = f"SELECT key FROM {source} WHERE set_id = 1 ORDER BY {order} LIMIT 10"
        else:
            cell = store._sql_cell_of("email")
            sql = f"SELECT key FROM {source} WHERE set_id = 1 AND {cell} = 'x' ORDER BY idx, key"
        plan = _plan(store, sql)
        assert name in plan and "TEMP B-TREE" not in plan and "Sort" not in plan, (window, plan)


def _plan(store: Store, sql: str) -> str:
    if isinstance(store, SQLiteStore):
        with closing(sqlite3.connect(store.path)) as conn:
            return str(conn.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall())
    import psycopg

    assert isinstance(store, PostgresStore)
    with psycopg.connect(store.url) as conn:
        conn.execute("SET enable_sort = off")  # a sort is what the index spares
        conn.execute("SET enable_seqscan = off")
        return str(conn.execute(f"EXPLAIN {sql}").fetchall())


def test_a_version_8_postgres_store_gets_its_rows_states(postgres_url: str) -> None:
    import psycopg

    from playline.store.sql._postgres_schema import MIGRATIONS as PG_MIGRATIONS
    from playline.store.sql._postgres_schema import migrate

    rows = [_row(i) for i in range(200)]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert migrate(conn, "db", PG_MIGRATIONS[:8]) == 0
        conn.execute("INSERT INTO row_sets (run_id, dataset) VALUES ('r1', 'big')")
        for n, row in enumerate(rows, start=1):
            conn.execute(
                "INSERT INTO rows VALUES (1, %s, %s, %s, %s, %s, %s, NULL, 1.0)",
                (n, row.key, row.index, row.status, _json(row.values), _json(row.cells)),
            )
    with PostgresStore(postgres_url) as store:
        assert store.schema_version_found == 8
        assert [r.key for r in store.row_window("r1", "big", state="waiting")] == [
            "k00000",
            "k00097",
            "k00194",
        ]
    with psycopg.connect(postgres_url) as conn:
        stored: dict[str, int] = dict(conn.execute("SELECT key, states FROM rows").fetchall())
    assert stored == {row.key: row_states(row.status, row.cells) for row in rows}


def test_a_count_kept_is_made_again_once_the_store_changes(durable_url: str) -> None:
    """A filter's count is kept while nothing is committed (SQLite), and counted again after
    a write of this store object or of another on the same store."""
    with closing(open_store(durable_url)) as store, closing(open_store(durable_url)) as other:
        store.save_rows([_row(i) for i in range(30)])
        assert store.count_rows("r1", "big", state="failed") == 4
        assert store.count_rows("r1", "big", state="failed") == 4
        other.save_rows([_row(30 + i, email="failed") for i in range(3)])
        assert store.count_rows("r1", "big", state="failed") == 7
        store.save_rows([_row(1, email="failed")])
        assert store.count_rows("r1", "big", state="failed") == 8
        assert store.count_rows("r1", "big", state="failed", column="email") == 8
        other.save_rows([_row(1, email="completed")])
        assert store.count_rows("r1", "big", state="failed", column="email") == 7
