"""Row windows for a grid, checked against every store: pages in input order or by a column,
filtered by state, counted by status; MemoryStore and SQLiteStore answer alike."""

from __future__ import annotations

from typing import Any

import pytest

from playline.errors import StoreError
from playline.store import CellMeta, Event, RowRecord, Store


def _row(index: int, status: str, values: dict[str, Any], cells: dict[str, str]) -> RowRecord:
    metas: dict[str, CellMeta] = {c: {"status": s} for c, s in cells.items()}
    return RowRecord(
        run_id="r1",
        dataset="people",
        key=f"k{index:03d}",
        index=index,
        status=status,
        values=values,
        cells=metas,
    )


ROWS = [
    _row(0, "completed", {"name": "c", "score": 3}, {"email": "completed", "size": "cached"}),
    _row(1, "failed", {"name": "a", "score": None}, {"email": "failed", "size": "completed"}),
    _row(2, "completed", {"name": "b", "score": 10}, {"email": "not_found", "size": "cached"}),
    _row(3, "waiting", {"name": "d", "score": 3}, {"email": "queued"}),
    _row(4, "completed", {"name": "e"}, {"email": "completed", "size": "skipped"}),
]


@pytest.fixture
def rows(store: Store) -> Store:
    store.save_rows(list(reversed(ROWS)))  # the order of writing does not matter
    return store


def keys(records: list[RowRecord]) -> list[str]:
    return [r.key for r in records]


def test_a_window_pages_in_input_order(rows: Store) -> None:
    assert keys(rows.row_window("r1", "people", limit=2)) == ["k000", "k001"]
    assert keys(rows.row_window("r1", "people", offset=2, limit=2)) == ["k002", "k003"]
    assert keys(rows.row_window("r1", "people", offset=4, limit=10)) == ["k004"]
    assert rows.row_window("r1", "people", offset=5) == []
    assert keys(rows.row_window("r1", "people", descending=True, limit=2)) == ["k004", "k003"]
    window = rows.row_window("r1", "people", offset=1, limit=1)[0]
    assert window.values == {"name": "a", "score": None} and window.cells["email"] == {
        "status": "failed"
    }


def test_a_window_sorted_by_a_column_keeps_ties_in_input_order(rows: Store) -> None:
    by_name = rows.row_window("r1", "people", sort="name")
    assert keys(by_name) == ["k001", "k002", "k000", "k003", "k004"]
    # null and missing first, then numbers; equal scores in input order, both ways
    assert keys(rows.row_window("r1", "people", sort="score")) == [
        "k001", "k004", "k000", "k003", "k002"
    ]  # fmt: skip
    assert keys(rows.row_window("r1", "people", sort="score", descending=True)) == [
        "k002", "k000", "k003", "k001", "k004"
    ]  # fmt: skip
    assert keys(rows.row_window("r1", "people", sort="score", offset=3, limit=1)) == ["k003"]


def test_a_state_keeps_the_rows_with_a_cell_in_it_or_the_waiting_rows(rows: Store) -> None:
    assert keys(rows.row_window("r1", "people", state="failed")) == ["k001"]
    assert keys(rows.row_window("r1", "people", state="cached")) == ["k000", "k002"]
    assert keys(rows.row_window("r1", "people", state="completed")) == ["k000", "k001", "k004"]
    assert keys(rows.row_window("r1", "people", state="waiting")) == ["k003"]
    assert keys(rows.row_window("r1", "people", state="cached", sort="score", limit=1)) == ["k000"]
    assert rows.count_rows("r1", "people") == 5
    assert rows.count_rows("r1", "people", state="cached") == 2
    assert rows.count_rows("r1", "people", state="running") == 0


def test_a_state_scoped_to_a_column_keeps_the_rows_whose_cell_of_it_is_in_it(
    rows: Store,
) -> None:
    """ "email: not found" isolates the rows whose email was not found, not those with any
    cell not found; "size: cached" those whose size came from a receipt."""
    rows.save_rows(
        [_row(5, "completed", {"name": "f"}, {"email": "completed", "size": "not_found"})]
    )
    assert keys(rows.row_window("r1", "people", state="not_found")) == ["k002", "k005"]
    assert keys(rows.row_window("r1", "people", state="not_found", column="email")) == ["k002"]
    assert keys(rows.row_window("r1", "people", state="not_found", column="size")) == ["k005"]
    assert rows.count_rows("r1", "people", state="not_found", column="email") == 1
    assert keys(rows.row_window("r1", "people", state="cached", column="size")) == ["k000", "k002"]
    assert keys(
        rows.row_window("r1", "people", state="cached", column="size", sort="score", limit=1)
    ) == ["k000"]
    assert rows.count_rows("r1", "people", state="completed", column="nothing") == 0


def test_a_column_scope_takes_any_column_name(store: Store) -> None:
    names = ('size (in")', "back\\slash", "a.b", "it's")
    statuses = ["not_found", "completed", "not_found"]
    store.save_rows(
        [_row(n, "completed", {}, dict.fromkeys(names, s)) for n, s in enumerate(statuses)]
    )
    for name in names:
        found = store.row_window("r1", "people", state="not_found", column=name)
        assert keys(found) == ["k000", "k002"], name
        assert store.count_rows("r1", "people", state="completed", column=name) == 1


def test_a_column_scope_needs_a_cell_state(rows: Store) -> None:
    for state in (None, "waiting"):
        with pytest.raises(StoreError, match="needs the column's name and a cell state"):
            rows.row_window("r1", "people", state=state, column="email")
        with pytest.raises(StoreError, match="needs the column's name and a cell state"):
            rows.count_rows("r1", "people", state=state, column="email")
    with pytest.raises(StoreError, match="needs the column's name"):
        rows.row_window("r1", "people", state="failed", column="")


def test_counts_by_row_status_cell_status_and_state(rows: Store) -> None:
    counts = rows.row_counts("r1", "people")
    assert counts.rows == 5
    assert counts.statuses == {"completed": 3, "failed": 1, "waiting": 1}
    assert counts.cells == {
        "completed": 3, "failed": 1, "cached": 2, "not_found": 1, "queued": 1, "skipped": 1
    }  # fmt: skip
    assert counts.rows_with["completed"] == 3 and counts.rows_with["cached"] == 2
    assert counts.rows_with["waiting"] == 1
    assert rows.row_counts("r1", "nothing").rows == 0


def test_other_runs_and_datasets_stay_out(rows: Store) -> None:
    other = RowRecord(
        run_id="r2", dataset="people", key="k000", index=0, status="completed", values={}, cells={}
    )
    rows.save_rows([other])
    assert rows.count_rows("r1", "people") == 5
    assert rows.count_rows("r2", "people") == 1
    assert rows.row_window("r1", "companies") == []


def test_a_window_the_grid_never_asks_for_is_refused(rows: Store) -> None:
    with pytest.raises(StoreError, match="use one of"):
        rows.row_window("r1", "people", state="done")
    with pytest.raises(StoreError, match="offset >= 0"):
        rows.row_window("r1", "people", offset=-1)
    with pytest.raises(StoreError, match="needs the column's name"):
        rows.row_window("r1", "people", sort="")


def test_a_window_sorts_by_a_column_whose_name_no_json_path_can_hold(store: Store) -> None:
    names = ('size (in")', "back\\slash")
    store.save_rows([_row(n, "completed", {name: 3 - n for name in names}, {}) for n in range(3)])
    for name in names:
        window = store.row_window("r1", "people", sort=name)
        assert [r.values[name] for r in window] == [1, 2, 3]


def test_last_seq_is_the_newest_event_of_the_run_and_kinds(store: Store) -> None:
    assert store.last_seq("r1") == 0
    first = store.reserve_seqs(4)
    store.append_events(
        [
            Event(kind="row", run_id="r1", at=1.0, seq=first),
            Event(kind="log", run_id="r1", at=1.0, seq=first + 1),
            Event(kind="row", run_id="r2", at=1.0, seq=first + 2),
        ]
    )
    store.append_events([Event(kind="source", run_id="r1", at=1.0)])  # numbered on writing
    assert store.last_seq("r1") > first + 3
    assert store.last_seq("r1", kinds=["row", "log"]) == first + 1
    assert store.last_seq("r1", kinds=["row"]) == first
    assert store.last_seq("r2") == first + 2
