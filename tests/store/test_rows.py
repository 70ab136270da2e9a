"""Rows of datasets: saved in batches, loaded by key, streamed in input order."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from playline._json import dumps
from playline.errors import PlayDefinitionError
from playline.store import RowPage, RowRecord, Store


def row(
    key: str, index: int, dataset: str = "people", run_id: str = "r1", **values: Any
) -> RowRecord:
    return RowRecord(
        run_id=run_id,
        dataset=dataset,
        key=key,
        index=index,
        status="completed",
        values={"key": key, **values},
        cells={"email": {"status": "completed", "provider": "sim", "cost": 1.5}},
        updated_at=float(index),
    )


def test_rows_save_load_and_iterate_in_index_order(store: Store) -> None:
    rows = [row(f"k{i}", i, email=f"{i}@x.io") for i in range(2500)]
    shuffled = rows[:]
    random.Random(3).shuffle(shuffled)
    for start in range(0, len(shuffled), 700):
        store.save_rows(shuffled[start : start + 700])
    assert list(store.iter_rows("r1", "people")) == rows
    assert list(store.iter_rows("r1", "nobody")) == []
    assert list(store.iter_rows("r2", "people")) == []
    loaded = store.load_rows("r1", "people", ["k7", "missing", "k2"])
    assert loaded == {"k7": rows[7], "k2": rows[2]}
    assert list(loaded) == ["k7", "k2"]
    assert store.load_rows("r1", "people", []) == {}


def test_load_rows_beyond_one_chunk(store: Store) -> None:
    rows = [row(f"k{i}", i) for i in range(1300)]
    store.save_rows(rows)
    keys = [f"k{i}" for i in reversed(range(1300))]
    assert list(store.load_rows("r1", "people", keys)) == keys


def test_rows_overwrite(store: Store) -> None:
    store.save_rows([row("a", 0), row("b", 1)])
    failed = RowRecord(
        run_id="r1",
        dataset="people",
        key="a",
        index=0,
        status="failed",
        values={},
        cells={"email": {"status": "failed", "error": "boom"}},
        error="boom",
        updated_at=9.0,
    )
    store.save_rows([failed])
    assert list(store.iter_rows("r1", "people")) == [failed, row("b", 1)]


def test_row_values_keep_their_column_order(store: Store) -> None:
    stored = row("a", 0, zeta=1, alpha=2, mid=3)
    store.save_rows([stored])
    [loaded] = store.iter_rows("r1", "people")
    assert list(loaded.values) == ["key", "zeta", "alpha", "mid"]


def test_iter_rows_pages_through_equal_indexes(store: Store) -> None:
    # Indexes are input positions, so they do not repeat; if they did, no row would be lost
    # or repeated across pages.
    rows = [row(f"k{i}", i // 1500) for i in range(3000)]
    store.save_rows(rows)
    got = list(store.iter_rows("r1", "people"))
    assert sorted(r.key for r in got) == sorted(r.key for r in rows)
    assert [r.index for r in got] == [r.index for r in rows]


def test_rows_may_be_written_while_iter_rows_runs(store: Store) -> None:
    # No read stays open between pages: writing (here, or from another process) neither
    # blocks nor breaks the iteration; whether a later page sees the new row is not promised.
    store.save_rows([row(f"k{i:05}", i) for i in range(1500)])
    seen = []
    for record in store.iter_rows("r1", "people"):
        if not seen:
            store.save_rows([row("late", 5000)])
        seen.append(record.key)
    assert seen[:1500] == [f"k{i:05}" for i in range(1500)]
    assert len(list(store.iter_rows("r1", "people"))) == 1501


def test_datasets_in_the_order_first_written(store: Store) -> None:
    store.save_rows([row("a", 0, dataset="people")])
    store.save_rows([row("a", 1, dataset="companies"), row("b", 2, dataset="people")])
    store.save_rows([row("a", 0, dataset="other", run_id="r2")])
    assert store.datasets("r1") == ["people", "companies"]
    assert store.datasets("r2") == ["other"]
    assert store.datasets("r3") == []


def test_values_that_are_not_json_raise_before_anything_is_written(store: Store) -> None:
    bad = RowRecord(
        run_id="r1", dataset="d", key="b", index=1, status="x", values={"s": {1, 2}}, cells={}
    )
    with pytest.raises(PlayDefinitionError, match="Row 'b' of dataset 'd' is not JSON"):
        store.save_rows([row("a", 0, dataset="d"), bad])
    assert list(store.iter_rows("r1", "d")) == []
    store.save_rows([])  # the store is still usable
    store.save_rows([row("a", 0, dataset="d")])
    assert len(list(store.iter_rows("r1", "d"))) == 1


def _with_cells(key: str, index: int, cells: dict[str, Any], **kw: Any) -> RowRecord:
    return RowRecord(
        run_id=kw.get("run_id", "r1"),
        dataset=kw.get("dataset", "people"),
        key=key,
        index=index,
        status="completed",
        values={"key": key},
        cells=cells,
        updated_at=float(index),
    )


def test_iter_cells_reads_only_the_rows_with_a_cell_holding_the_field(store: Store) -> None:
    provenance = {"id": "emails", "winner": "a", "steps": {"a": {"status": "completed"}}}
    plain = {"status": "completed"}
    rows = [_with_cells(f"k{i:04}", i, {"email": plain}) for i in range(2400)]
    held = {  # past one page (1,000 rows), in two datasets
        f"k{i:04}": {"email": {"status": "completed", "waterfall": provenance}}
        for i in range(0, 2400, 2)
    }
    rows = [_with_cells(r.key, r.index, held.get(r.key, r.cells)) for r in rows]
    rows.append(_with_cells("c", 0, {"site": {"waterfall": provenance}}, dataset="companies"))
    # a column named as the field, an error that quotes it: the text, but no such field
    rows.append(_with_cells("named", 5000, {"waterfall": plain}))
    rows.append(
        _with_cells("quoted", 5001, {"email": {"status": "failed", "error": '"waterfall":'}})
    )
    rows.append(_with_cells("other", 0, {"email": {"waterfall": provenance}}, run_id="r2"))
    store.save_rows(rows)
    found = {(dataset, key): cells for dataset, key, cells in store.iter_cells("r1", "waterfall")}
    assert found == {
        **{("people", key): cells for key, cells in held.items()},
        ("companies", "c"): {"site": {"waterfall": provenance}},
    }
    assert list(store.iter_cells("r1", "nothing")) == []
    assert list(store.iter_cells("r3", "waterfall")) == []


def test_a_later_row_of_a_key_in_one_save_replaces_the_earlier(store: Store) -> None:
    # SQLite writes 500 rows to a statement and the rest one by one: repeats inside a
    # statement, across statements and in the rest are all kept as written last
    rows = [row(f"k{i}", i, email="first") for i in range(1100)]
    repeats = [row(f"k{i}", i, email="again") for i in (3, 499, 700, 1099)]
    store.save_rows(
        [*rows[:10], repeats[0], *rows[10:600], repeats[1], *rows[600:], repeats[2], repeats[3]]
    )
    stored = {r.key: r.values["email"] for r in store.iter_rows("r1", "people")}
    assert len(stored) == 1100
    assert {k for k, email in stored.items() if email == "again"} == {
        "k3",
        "k499",
        "k700",
        "k1099",
    }


def test_a_row_saved_again_at_another_index_moves_there(store: Store) -> None:
    # a run whose input changed between attempts: its row keeps its key, not its place
    store.save_rows([row("a", 0), row("b", 1), row("c", 2)])
    store.save_rows([row("a", 5, email="moved")])
    store.save_rows([row("b", 1, email="moved"), row("b", 7, email="moved twice")])
    assert [(r.key, r.index) for r in store.iter_rows("r1", "people")] == [
        ("c", 2),
        ("a", 5),
        ("b", 7),
    ]
    assert store.load_rows("r1", "people", ["b"])["b"].values["email"] == "moved twice"
    assert store.count_rows("r1", "people") == 3


def page_of(records: list[RowRecord]) -> RowPage:
    """The records (completed, with the same cells, at one moment) as one page."""
    first = records[0]
    page = RowPage(
        run_id=first.run_id,
        dataset=first.dataset,
        cells_json=dumps(first.cells, ordered=True).decode(),
        updated_at=first.updated_at,
    )
    for record in records:
        page.add(record.key, record.index, dumps(record.values, ordered=True))
    return page


def plain(key: str, index: int, **values: Any) -> RowRecord:
    """A row as a page holds it: completed, the cells and the moment of the others."""
    return replace(row(key, index, **values), updated_at=7.0)


def test_a_page_of_rows_reads_back_as_their_records(store: Store) -> None:
    # past one statement (500 rows) and one read (1,000); its rows in a shuffled order
    records = [plain(f"k{i:04}", i, email=f"{i}@x.io", zeta=i, alpha=None) for i in range(1300)]
    shuffled = records[:]
    random.Random(5).shuffle(shuffled)
    store.save_rows([page_of(shuffled)])
    assert list(store.iter_rows("r1", "people")) == records
    assert [list(r.values) for r in store.iter_rows("r1", "people")][:1] == [
        ["key", "email", "zeta", "alpha"]
    ]
    assert store.load_rows("r1", "people", ["k1299", "k0007"]) == {
        "k1299": records[1299],
        "k0007": records[7],
    }
    assert store.row_window("r1", "people", offset=600, limit=2) == records[600:602]
    assert store.count_rows("r1", "people", state="completed") == 1300
    counts = store.row_counts("r1", "people")
    assert (counts.rows, counts.cells) == (1300, {"completed": 1300})
    assert store.datasets("r1") == ["people"]


def test_pages_and_records_of_a_key_in_one_save_keep_the_later(store: Store) -> None:
    waiting = replace(row("a", 0), status="waiting", cells={"email": {"status": "queued"}})
    failed = replace(row("b", 1), status="failed", error="boom")
    store.save_rows([row("c", 2)])  # stored before: a page's row replaces it
    store.save_rows([waiting, page_of([plain("a", 0), plain("b", 1), plain("c", 2)]), failed])
    stored = {r.key: r for r in store.iter_rows("r1", "people")}
    assert stored == {"a": plain("a", 0), "b": failed, "c": plain("c", 2)}
    assert store.row_counts("r1", "people").statuses == {"completed": 2, "failed": 1}
