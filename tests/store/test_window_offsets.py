"""A grid's windows far into a large set, its chips' counts, and the counts kept between
windows, on every store against the reference (MemoryStore): a window in input order skips
its offset in the set's index and reads a window near the end from the end; the chips count
from the rows' ``states`` without reading a cell; a kept count is counted again after a
commit of any connection (``store/sql/_row_windows.py``)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any

import pytest
from test_window_indexes import ROWS, _row

from playline.store import MemoryStore, Store, open_store
from playline.store.sql import PostgresStore, SQLiteStore
from playline.store.sql._tables import CELL_BITS

OFFSETS = (0, 7, 999, 1000, 4321, ROWS // 2, ROWS - 1500, ROWS - 100, ROWS - 25, ROWS - 1, ROWS)
STATES = (None, "waiting", "failed", "completed", "not_found")


@pytest.fixture
def big(store: Store) -> tuple[Store, Store]:
    """The store under test and the reference, holding the same large set (written in no
    order: a row's number is not its place in the window)."""
    reference = MemoryStore()
    rows = [_row(i) for i in range(ROWS)]
    for target in (store, reference):
        target.save_rows(rows[::-1])
    return store, reference


def test_deep_windows_in_input_order_are_the_references(big: tuple[Store, Store]) -> None:
    store, reference = big
    for state in STATES:
        total = reference.count_rows("r1", "big", state=state)
        assert store.count_rows("r1", "big", state=state) == total, state
        for offset in sorted({*OFFSETS, max(0, total - 30), max(0, total - 1)}):
            for descending in (False, True):
                args: dict[str, Any] = {"offset": offset, "state": state, "limit": 40}
                got = store.row_window("r1", "big", descending=descending, **args)
                want = reference.row_window("r1", "big", descending=descending, **args)
                assert [r.key for r in got] == [r.key for r in want], (args, descending)
                assert [r.cells for r in got] == [r.cells for r in want], (args, descending)


def test_chip_counts_are_the_references_without_reading_a_cell(
    big: tuple[Store, Store],
) -> None:
    store, reference = big
    want = reference.row_counts("r1", "big", cells=False)
    assert want.cells == {} and want.rows == ROWS
    everything = reference.row_counts("r1", "big")
    assert want.rows_with == everything.rows_with and want.statuses == everything.statuses
    assert store.row_counts("r1", "big") == everything
    _spoil_cells(store)  # a tally that read a cell would fail or count otherwise
    assert store.row_counts("r1", "big", cells=False) == want
    assert store.row_counts("r1", "nothing", cells=False).rows == 0


def test_chip_counts_leave_out_a_state_no_window_filters_on() -> None:
    store = MemoryStore()
    row = _row(1)
    row.cells["odd"] = {"status": "done"}
    store.save_rows([row])
    assert "done" in store.row_counts("r1", "big").rows_with
    assert "done" not in store.row_counts("r1", "big", cells=False).rows_with


def _spoil_cells(store: Store) -> None:
    """Overwrite every row's cells with text that is no JSON (their states stay)."""
    if isinstance(store, SQLiteStore):
        with closing(sqlite3.connect(store.path)) as conn, conn:
            conn.execute("UPDATE rows SET cells = 'not json'")
    elif isinstance(store, PostgresStore):
        import psycopg

        with psycopg.connect(store.url, autocommit=True) as pg:
            pg.execute("UPDATE rows SET cells = 'not json'")


def test_a_postgres_count_is_kept_until_any_connection_commits(postgres_url: str) -> None:
    """A filter's count is kept while the database's snapshot stays the same, and counted
    again once any connection commits, a plain one that is no store's included."""
    import psycopg

    with closing(open_store(postgres_url)) as store:
        assert isinstance(store, PostgresStore)
        store.save_rows([_row(i) for i in range(30)])
        assert store.count_rows("r1", "big", state="failed") == 4
        kept = dict(store._counted)
        assert [key[1:] for key in kept] == [("failed", None)]  # kept ...
        assert store.count_rows("r1", "big", state="failed") == 4
        assert store._counted == kept  # ... and found again, not counted anew
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(
                "UPDATE rows SET states = states | %s WHERE key = 'k00000'", (CELL_BITS["failed"],)
            )
        assert store.count_rows("r1", "big", state="failed") == 5
        assert store._counted != kept
