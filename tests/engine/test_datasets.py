"""Datasets (SEMANTICS 1, 5, 6, 16-19): rows, columns, identity, errors, streaming, resume."""

from __future__ import annotations

import asyncio
import gc
import operator
import warnings
from collections.abc import Iterator
from typing import Any

import numpy
import pytest
from hypothesis import given
from hypothesis import strategies as st

import playline as pl
from playline._engine.rows import row_key_function
from playline.store import RowPage, open_store
from stores import full_after_first_block

from .helpers import (
    Gauge,
    call_tool,
    dataset_play,
    json_text,
    json_values,
    row_reports,
    rows_of,
    run_dataset,
    run_play,
    yield_a_few_times,
)


def row_keys(store, result: pl.RunResult, dataset: str = "rows") -> list[str]:
    return [record.key for record in store.iter_rows(result.run_id, dataset)]


# --- rows and columns -------------------------------------------------------------------


def test_rows_run_concurrently():
    active = Gauge()

    async def resolve(row):
        with active:
            await yield_a_few_times()
        return row["x"]

    result = run_dataset(rows_of(5), {"y": resolve}, tools=[])

    assert result.status == "completed"
    assert active.peak == 5


def test_a_rows_columns_run_in_order_and_each_sees_the_earlier_ones():
    seen: dict[str, list[str]] = {}

    def column(name, value):
        def resolve(row):
            seen.setdefault(name, sorted(row))
            return value(row)

        return resolve

    columns = {
        "a": column("a", lambda row: row["x"] + 1),
        "b": column("b", lambda row: row["a"] * 10),
        "c": column("c", lambda row: f"{row['x']}-{row['a']}-{row['b']}"),
    }
    result = run_dataset([{"x": 1}, {"x": 2}], columns, tools=[])

    assert seen == {"a": ["x"], "b": ["a", "x"], "c": ["a", "b", "x"]}
    assert result.output.to_list() == [
        {"x": 1, "a": 2, "b": 20, "c": "1-2-20"},
        {"x": 2, "a": 3, "b": 30, "c": "2-3-30"},
    ]


def sync_row(row):
    return row["x"] + 1


def sync_row_ctx(row, ctx):
    return f"{ctx.play_name}:{row['x'] + 1}"


async def async_row(row):
    await asyncio.sleep(0)
    return row["x"] + 1


async def async_row_ctx(row, ctx):
    await asyncio.sleep(0)
    return f"{ctx.play_name}:{row['x'] + 1}"


@pytest.mark.parametrize(
    ("resolver", "expected"),
    [
        (sync_row, 2),
        (sync_row_ctx, "play:2"),
        (async_row, 2),
        (async_row_ctx, "play:2"),
        (lambda row, ctx=None: row["x"] + 1 if ctx is None else "got ctx", "got ctx"),
    ],
    ids=["sync", "sync-ctx", "async", "async-ctx", "optional-ctx"],
)
def test_resolvers_take_row_or_row_and_ctx_sync_or_async(resolver, expected):
    result = run_dataset([{"x": 1}], {"y": resolver}, tools=[])

    assert result.output.to_list() == [{"x": 1, "y": expected}]


def test_resolvers_get_the_runs_context():
    run_ids: list[str] = []
    result = run_dataset([{"x": 1}], {"y": lambda row, ctx: run_ids.append(ctx.run_id)}, tools=[])

    assert run_ids == [result.run_id]


def test_the_row_a_resolver_gets_is_read_only():
    outcomes: list[str] = []

    def resolve(row):
        try:
            row["x"] = 99
        except TypeError:
            outcomes.append("TypeError")
        else:
            outcomes.append("assigned")
        return row["x"]

    result = run_dataset([{"x": 1}], {"y": resolve}, tools=[])

    assert outcomes == ["TypeError"]
    assert result.output.to_list() == [{"x": 1, "y": 1}]


def test_hidden_columns_are_seen_by_later_columns_but_left_out_of_the_output(store):
    columns = {"_secret": lambda row: row["x"] * 7, "shown": lambda row: row["_secret"] + 1}

    result = run_dataset([{"x": 1}], columns, tools=[], store=store)

    assert result.output.to_list() == [{"x": 1, "shown": 8}]
    (record,) = store.iter_rows(result.run_id, "rows")
    assert set(record.cells) == {"shown"}


def test_a_failed_hidden_cell_fails_its_row_and_a_retry_runs_it_again(store):
    """A hidden helper column that fails fails its row (its later columns never ran), as a
    shown one does, and a retry of the failed rows runs it again with what is fixed."""
    fixed: list[bool] = []

    def domain(row):
        return row["email"].split("@")[1] if not fixed else row["email"].partition("@")[2]

    columns = {"_domain": domain, "upper": lambda row: row["_domain"].upper()}
    rows = [{"email": "a@x.io"}, {"email": "bad-no-at"}]
    first = run_dataset(rows, columns, tools=[], key="email", store=store)

    assert first.status == "completed_with_errors" and first.stats.rows_failed == 1
    (error,) = first.output.errors
    assert (error.row_key, error.column) == ("bad-no-at", "_domain")
    failed = store.load_rows(first.run_id, "rows", ["bad-no-at"])["bad-no-at"]
    assert failed.status == "failed" and "upper" not in failed.cells
    fixed.append(True)
    again = run_dataset(
        rows, columns, tools=[], key="email", store=store, run_id=first.run_id, retry_failed=True
    )
    assert again.status == "completed"
    assert again.output.to_list() == [{"email": "a@x.io", "upper": "X.IO"},
                                      {"email": "bad-no-at", "upper": ""}]  # fmt: skip


def test_items_that_are_not_dicts_become_value_rows():
    result = run_dataset(["a", 2, None], {"y": lambda row: repr(row["value"])}, tools=[])

    assert result.output.to_list() == [
        {"value": "a", "y": "'a'"},
        {"value": 2, "y": "2"},
        {"value": None, "y": "None"},
    ]


def test_when_false_skips_the_cell_with_its_else_value_and_never_calls_the_resolver(store):
    called: list[Any] = []

    def resolve(row):
        called.append(row["x"])
        return "computed"

    async def play(ctx, input):
        return await (
            ctx.dataset("rows", rows_of(2))
            .with_column("y", resolve, when=lambda row: row["x"] > 0, else_value="fallback")
            .run()
        )

    result = run_play(play, tools=[], store=store)

    assert called == [1]
    assert result.output.to_list() == [{"x": 0, "y": "fallback"}, {"x": 1, "y": "computed"}]
    statuses = [r.cells["y"]["status"] for r in store.iter_rows(result.run_id, "rows")]
    assert statuses == ["skipped", "completed"]


def test_rows_run_together_keep_each_their_own_cells(store, registry):
    """Rows that run in one pass share their plain cells' encoding; a row of the same pass
    whose cell holds a tool's result (a play-level call's, returned by a plain resolver) or
    was skipped keeps its own metadata in the store."""

    @registry.tool("t.one", cost=pl.Cost(1))
    def one(input):
        return {"n": input["n"]}

    async def play(ctx, input):
        bought = await ctx.tool("t.one", {"n": 1})
        return await (
            ctx.dataset("rows", rows_of(6))
            .with_column("y", lambda row: bought if row["x"] % 3 == 0 else row["x"])
            .with_column("z", lambda row: "z", when=lambda row: row["x"] % 3 != 1)
            .run()
        )

    result = run_play(play, tools=[one], store=store)

    assert result.status == "completed"
    for stored in store.iter_rows(result.run_id, "rows"):
        x, y, z = stored.values["x"], stored.cells["y"], stored.cells["z"]
        if x % 3 == 0:
            assert (y["status"], y.get("provider"), y.get("result")) == ("completed", "t.one", True)
        else:
            assert (y["status"], y.get("provider")) == ("completed", None)
        assert z["status"] == ("skipped" if x % 3 == 1 else "completed")


def test_a_when_predicate_that_raises_is_a_row_error():
    async def play(ctx, input):
        return await (
            ctx.dataset("rows", [{"flag": True}, {"other": 1}])
            .with_column("y", lambda row: "ran", when=lambda row: row["flag"])
            .run(on_row_error="record")
        )

    result = run_play(play, tools=[])

    assert result.status == "completed_with_errors"
    assert result.stats.rows_failed == 1


async def _is_a(row):
    return row["k"] == "a"


@pytest.mark.parametrize(
    ("when", "says"),
    [
        (_is_a, "when= is an async function"),
        (lambda row: _is_a(row), "when= returned an awaitable"),
        (lambda row, ctx: True, "when= must take fn(row)"),
    ],
)
def test_a_when_that_cannot_decide_from_the_row_runs_no_column_and_pays_nothing(when, says):
    """An async condition's coroutine is always true: every row ran (and paid for) the
    column it was meant to skip."""
    registry, paid = pl.ToolRegistry(), []

    @registry.tool("t.paid", cost=pl.Cost(1))
    def buy(input):
        paid.append(input["k"])
        return {"k": input["k"]}

    async def play(ctx, input):
        return await (
            ctx.dataset("rows", [{"k": "a"}, {"k": "b"}], key="k")
            .with_column("y", lambda row, ctx: ctx.tool("t.paid", {"k": row["k"]}), when=when)
            .run()
        )

    result = run_play(play, tools=[registry])

    assert result.status == "failed" and says in (result.error or ""), result.error
    assert paid == []


def test_a_resume_of_a_play_that_gained_a_column_is_refused_before_mixing_its_rows(store):
    """Rows an earlier attempt completed are reused as stored: with a column added between a
    stop and a resume, they would lack it while the rest have it."""
    clock = pl.ManualClock()

    def play_with(**columns):
        async def play(ctx, input):
            ds = ctx.dataset("rows", rows_of(2))
            for name, resolve in columns.items():
                ds = ds.with_column(name, resolve)
            done = await ds.run()
            await ctx.sleep(60)
            return len(done)

        return play

    first = run_play(play_with(a=lambda row: 1), tools=[], store=store, clock=clock)
    assert first.status == "suspended", first.error
    clock.advance(60)

    mixed = run_play(play_with(a=lambda row: 1, b=lambda row: 2), tools=[], store=store,
                     clock=clock, run_id=first.run_id)  # fmt: skip
    assert mixed.status == "failed"
    assert "column(s) 'b' are new" in (mixed.error or "")
    assert "Start a new run instead" in (mixed.error or "")

    hidden = run_play(play_with(a=lambda row: 1, _h=lambda row: 3), tools=[], store=store,
                      clock=clock, run_id=first.run_id)  # fmt: skip
    assert hidden.status == "completed", hidden.error  # a hidden column is never stored


def test_pandas_timestamps_and_missing_values_returned_by_a_column_are_stored(store):
    """A Timestamp is a datetime (stored as ISO text); NA and NaT are missing (null): each
    failed its cell as "returned a Timestamp, which cannot be stored"."""
    pd = pytest.importorskip("pandas")
    columns = {
        "at": lambda row: pd.Timestamp("2026-01-05 08:00"),
        "na": lambda row: pd.NA,
        "nat": lambda row: pd.NaT,
    }

    result = run_play(dataset_play(rows_of(1), columns), tools=[], store=store)

    assert result.status == "completed", result.error
    assert result.output.to_list() == [
        {"x": 0, "at": "2026-01-05T08:00:00", "na": None, "nat": None}
    ]


def test_pandas_missing_values_are_no_keys(store):
    pd = pytest.importorskip("pandas")

    async def play(ctx, input):
        rows = [{"k": pd.NaT}, {"k": pd.NA}, {"k": "ok"}]  # not the key "null", twice
        return await ctx.dataset("rows", rows, key="k", on_bad_key="skip").run()

    skipped = run_play(play, tools=[], store=store)

    assert skipped.stats.rows_set_aside == 2 and skipped.output.to_list() == [{"k": "ok"}]


def test_numpy_numbers_and_booleans_are_stored_as_the_python_ones_they_hold(store):
    """A pandas row holds numpy.int64, numpy.float64 and numpy.bool_; a column computing
    with NumPy returns them: they are stored, and read back, as plain JSON numbers."""
    columns = {
        "mean": lambda row: numpy.float64(row["x"]) / 2,
        "count": lambda row: numpy.int64(row["x"]),
        "big": lambda row: numpy.uint8(200),
        "flag": lambda row: numpy.bool_(row["x"] > 0),
        "seen": lambda row: {"n": numpy.int32(7), "all": numpy.array([1, 2])},
    }

    result = run_dataset([{"x": 3}], columns, key="x", tools=[], store=store)

    assert result.status == "completed", result.error
    expected = {"x": 3, "mean": 1.5, "count": 3, "big": 200, "flag": True,
                "seen": {"n": 7, "all": [1, 2]}}  # fmt: skip
    (stored,) = store.iter_rows(result.run_id, "rows")
    assert stored.values == expected
    assert [type(stored.values[k]) for k in ("count", "flag")] == [int, bool]
    assert result.output.to_list() == [expected]


# --- row identity -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("email", ["a@x.io", "b@x.io"]),
        (["email", "n"], ['["a@x.io",1]', '["b@x.io",2]']),
        (lambda row, index: f"{index}:{row['n']}", ["0:1", "1:2"]),
        (lambda row: row["email"].upper(), ["A@X.IO", "B@X.IO"]),
    ],
    ids=["column", "columns", "fn-row-index", "fn-row"],
)
def test_explicit_keys_name_the_rows(store, key, expected):
    rows = [{"email": "a@x.io", "n": 1}, {"email": "b@x.io", "n": 2}]

    result = run_dataset(rows, {"y": lambda row: 1}, key=key, tools=[], store=store)

    assert result.status == "completed"
    assert row_keys(store, result) == expected


@pytest.mark.parametrize(
    ("key", "numpys"),
    [
        ("n", [numpy.int64(1), numpy.int64(2)]),
        (["n"], [numpy.int32(1), numpy.int32(2)]),
        (lambda row: row["n"], [numpy.uint8(1), numpy.uint8(2)]),
    ],
    ids=["column", "columns", "fn"],
)
def test_a_numpy_key_names_its_row_as_the_python_number_does(store, key, numpys):
    python = run_dataset([{"n": 1}, {"n": 2}], {"y": lambda row: 1}, key=key, tools=[],
                         store=store)  # fmt: skip
    rows = [{"n": n} for n in numpys]

    result = run_dataset(rows, {"y": lambda row: 1}, key=key, tools=[], store=store)

    assert result.status == "completed", result.error
    assert row_keys(store, result) == row_keys(store, python)


def test_a_numpy_nan_key_is_a_missing_key():
    rows = [{"n": numpy.float32(1)}, {"n": numpy.float32("nan")}]
    result = run_dataset(rows, {"y": lambda row: 1}, key="n", tools=[])
    assert isinstance(result.exception, pl.PlayDefinitionError)
    assert "row 2: key 'n' is NaN" in (result.error or "")


def test_a_key_is_its_text_and_a_key_of_another_kind_its_json(store):
    """The rule docs/guide/plays-and-datasets.md states (row keys): 1 and "1" are one row,
    1 and 1.0 are two; with several key columns the types are kept."""
    rows = [{"id": 1}, {"id": "1"}, {"id": 1.0}, {"id": True}, {"id": "true"}, {"id": "1.0"}]

    one = run_dataset(rows, {"y": lambda row: 1}, key="id", tools=[], store=store)
    several = run_dataset(
        [{"a": "x", "id": 1}, {"a": "x", "id": "1"}, {"a": "x", "id": 1.0}],
        {"y": lambda row: 1},
        key=["a", "id"],
        tools=[],
        store=store,
    )

    assert row_keys(store, one) == ["1", "1.0", "true"]
    assert one.stats.rows_duplicate == 3
    assert row_keys(store, several) == ['["x",1]', '["x","1"]', '["x",1.0]']


def test_a_builtin_callable_is_a_valid_key(store):
    rows = [{"email": "a@x.io"}]
    key = operator.itemgetter("email")

    result = run_dataset(rows, {"y": lambda row: 1}, key=key, tools=[], store=store)

    assert row_keys(store, result) == ["a@x.io"]


def test_without_a_key_a_row_is_named_by_its_input_content(store):
    first = run_dataset([{"a": 1, "b": "x"}], {"out": lambda row: 1}, tools=[], store=store)
    reordered = run_dataset([{"b": "x", "a": 1}], {"out": lambda row: 1}, tools=[], store=store)
    other = run_dataset([{"a": 2, "b": "x"}], {"out": lambda row: 1}, tools=[], store=store)

    assert row_keys(store, first) == row_keys(store, reordered)
    assert row_keys(store, first) != row_keys(store, other)


def test_a_row_that_already_holds_an_output_column_keeps_its_identity(store):
    fresh = run_dataset([{"a": 1}], {"out": lambda row: 1}, tools=[], store=store)
    exported = run_dataset([{"a": 1, "out": 1}], {"out": lambda row: 1}, tools=[], store=store)

    assert row_keys(store, fresh) == row_keys(store, exported)


@given(row=st.dictionaries(json_text, json_values, max_size=5))
def test_content_identity_ignores_key_order_and_output_columns(row):
    row = {k: v for k, v in row.items() if k != "out"}
    key_of = row_key_function("rows", None, ["out"])

    key = key_of(dict(row), 0)

    assert key_of(dict(reversed(list(row.items()))), 5) == key
    assert key_of({**row, "out": "anything"}, 0) == key


def test_a_rows_content_key_is_fixed():
    """A row's content key names it across versions (a resume of an older run finds it)."""
    key_of = row_key_function("rows", None, ["out"])

    assert key_of({"n": 12345}, 0) == "9d8bbf4234496b3f1e197ad4db75ff15"
    assert key_of({"website": "https://c1.example.com/", "name": "Company 1", "out": 2}, 7) == (
        "014f0ac6f5a931c3c2223ad9bcbb3212"
    )


def test_a_row_whose_content_cannot_name_it_is_refused_naming_the_row():
    key_of = row_key_function("leads", None, ["out"])

    with pytest.raises(pl.PlayDefinitionError, match="Row 3 of dataset 'leads'"):
        key_of({"tags": {"a", "b"}}, 3)


def test_duplicate_keys_execute_once_and_are_counted():
    called: list[str] = []
    rows = [{"id": "a"}, {"id": "b"}, {"id": "a"}, {"id": "a"}]

    result = run_dataset(rows, {"y": lambda row: called.append(row["id"])}, key="id", tools=[])

    assert sorted(called) == ["a", "b"]
    assert result.stats.rows == 2
    assert result.stats.rows_duplicate == 2
    assert result.output.stats.rows_duplicate == 2
    assert len(result.output) == 2


# --- definition errors ------------------------------------------------------------------


async def dataset_in_a_column(ctx, input):
    def resolve(row, ctx):
        ctx.dataset("inner", [{"a": 1}])

    return await ctx.dataset("outer", [{"a": 1}]).with_column("c", resolve).run()


async def empty_dataset_name(ctx, input):
    return await ctx.dataset(" ", [{"a": 1}]).run()


async def reused_dataset_name(ctx, input):
    await ctx.dataset("leads", [{"a": 1}]).run()
    return await ctx.dataset("leads", [{"a": 2}]).run()


def play_with(rows, *, key=None, resolver=lambda row: 1, on_row_error="record"):
    return dataset_play(rows, {"c": resolver}, name="leads", key=key, on_row_error=on_row_error)


@pytest.mark.parametrize(
    ("play", "fragments"),
    [
        (dataset_in_a_column, ["'inner'", "inside a column"]),
        (empty_dataset_name, ["non-empty name"]),
        (reused_dataset_name, ["'leads'", "already ran"]),
        (play_with([{"email": "a"}, {"name": "b"}], key="email"), ["'leads'", "row 2", "email"]),
        (play_with([{"email": "a"}, {"email": "  "}], key="email"), ["'leads'", "row 2"]),
        (play_with([{"a": 1}, {"a": 2}], key=lambda r: None), ["'leads'", "row 1", "row 2"]),
        (play_with([{"a": 1}], key=5), ["'leads'", "key=5"]),
        (play_with([{"a": 1}], key=[]), ["'leads'", "key=[]"]),
        (play_with([{"a": 1}], resolver="constant"), ["'leads'", "column 'c'", "function"]),
        (play_with([{"a": 1}], resolver=lambda row, ctx, x: 1), ["'leads'", "3 arguments"]),
        (play_with([{"a": 1}], on_row_error="ignore"), ["on_row_error='ignore'"]),
    ],
    ids=[
        "dataset-in-column",
        "empty-name",
        "reused-name",
        "missing-key",
        "blank-key",
        "key-fn-returns-none",
        "key-not-a-key",
        "key-empty-list",
        "resolver-not-callable",
        "resolver-three-args",
        "bad-on-row-error",
    ],
)
def test_misuse_fails_the_run_with_a_play_definition_error(play, fragments):
    result = run_play(play, tools=[])

    assert result.status == "failed"
    assert isinstance(result.exception, pl.PlayDefinitionError)
    for fragment in fragments:
        assert fragment in result.error


def explode_on_b(row):
    if row["id"] == "b":
        raise ValueError("no good")
    return "fine"


def test_on_row_error_raise_fails_the_run_naming_dataset_row_and_column():
    rows = [{"id": "a"}, {"id": "b"}, {"id": "c"}]

    result = run_play(
        play_with(rows, key="id", resolver=explode_on_b, on_row_error="raise"), tools=[]
    )

    assert result.status == "failed"
    error = result.exception
    assert isinstance(error, pl.RowFailed)
    assert (error.dataset, error.row_key, error.column) == ("leads", "b", "c")
    for fragment in ("'leads'", "'b'", "'c'", "no good"):
        assert fragment in result.error


def test_on_row_error_record_keeps_going_and_counts_the_failed_rows():
    rows = [{"id": "a"}, {"id": "b"}, {"id": "c"}]

    result = run_play(play_with(rows, key="id", resolver=explode_on_b), tools=[])

    assert result.status == "completed_with_errors"
    assert result.stats.rows_failed == 1
    assert [row["c"] for row in result.output] == ["fine", None, "fine"]
    (error,) = result.output.errors
    assert (error.row_key, error.column) == ("b", "c")
    assert "no good" in error.message


# --- persistence and resume (SEMANTICS 16-18) --------------------------------------------


def test_rows_that_never_wait_are_written_while_the_dataset_runs(store):
    """A pure column over many rows: the first rows are stored long before the last one
    runs, so memory holds a bounded window of rows, not the whole dataset."""
    stored_when_late_row_ran: list[bool] = []

    def watch(row, ctx):
        if row["x"] == 11_999:
            early = store.load_rows(ctx.run_id, "rows", ["0", "999"])
            stored_when_late_row_ran.append(len(early) == 2)
        return row["x"] * 2

    result = run_dataset(rows_of(12_000), {"double": watch}, key="x", tools=[], store=store)

    assert result.status == "completed"
    assert stored_when_late_row_ran == [True]
    assert sum(1 for _ in store.iter_rows(result.run_id, "rows")) == 12_000


def test_finished_rows_reach_the_store_while_a_slow_call_holds_the_dataset(registry, store):
    """Fewer finished rows than a write batch are stored within about a second, not at the
    dataset's end: a kill then keeps them, and a live grid opened meanwhile shows them."""
    saved: list[str] = []
    nine_saved = asyncio.Event()
    loop: list[asyncio.AbstractEventLoop] = []
    save_rows = store.save_rows

    def spy(rows):  # runs off the event loop
        save_rows(rows)
        saved.extend(
            key for row in rows for key in (row.keys if isinstance(row, RowPage) else [row.key])
        )
        if len(saved) >= 9:
            loop[0].call_soon_threadsafe(nine_saved.set)

    store.save_rows = spy

    @registry.tool("t.slow")
    async def slow(input):
        loop[:] = [asyncio.get_running_loop()]
        if input["x"] == 9:  # answers once the other nine rows are in the store
            await asyncio.wait_for(nine_saved.wait(), 60)
        return {"x": input["x"]}

    columns = {"out": call_tool("t.slow")}
    result = run_dataset(rows_of(10), columns, key="x", tools=[registry], store=store)

    assert result.status == "completed", result.error
    assert sorted(saved[:9]) == [str(x) for x in range(9)] and saved[9:] == ["9"]


def test_rows_are_stored_with_values_and_cell_metadata(registry, store, clock):
    @registry.tool("t.priced", cost=pl.Cost(2))
    def priced(input):
        return {"v": input["x"]}

    async def resolve(row, ctx):
        if row["x"] == 1:
            raise ValueError("bad row")
        return await ctx.tool("t.priced", {"x": row["x"]})

    result = run_dataset(
        rows_of(2),
        {"half": lambda row: row["x"] / 2, "out": resolve},
        key="x",
        tools=[registry],
        store=store,
        clock=clock,
    )

    good, bad = store.iter_rows(result.run_id, "rows")
    assert (good.status, good.values) == ("completed", {"x": 0, "half": 0, "out": {"v": 0}})
    assert (
        good.cells["out"].items()
        >= {"status": "completed", "provider": "t.priced", "cost": 2}.items()
    )
    assert good.cells["out"]["updated_at"] == clock.now()
    assert good.cells["half"]["status"] == "completed"
    assert (bad.status, bad.values) == ("failed", {"x": 1, "half": 0.5, "out": None})
    assert bad.cells["out"]["status"] == "failed"
    assert "bad row" in bad.cells["out"]["error"]
    assert "updated_at" in bad.cells["out"]
    assert store.get_run(result.run_id).play == "play"


def test_resuming_a_run_reuses_completed_rows_and_reexecutes_failed_ones(registry, store):
    broken = {1}
    calls: list[int] = []

    @registry.tool("t.flaky")
    def flaky(input):
        calls.append(input["x"])
        if input["x"] in broken:
            raise RuntimeError("provider down")
        return {"v": input["x"]}

    play = dataset_play(rows_of(3), {"out": call_tool_x("t.flaky")}, key="x")
    first = run_play(play, tools=[registry], store=store)
    assert (first.status, first.stats.rows_failed) == ("completed_with_errors", 1)

    broken.clear()
    calls.clear()
    resumed = run_play(play, tools=[registry], store=store, run_id=first.run_id)

    assert resumed.run_id == first.run_id
    assert resumed.status == "completed"
    assert calls == [1]
    assert (resumed.stats.rows_reused, resumed.stats.rows_executed) == (2, 1)
    assert [row["out"] for row in resumed.output] == [{"v": 0}, {"v": 1}, {"v": 2}]


def test_rows_stopped_by_a_failing_run_are_executed_on_resume(store):
    fail = {"on": True}

    async def resolve(row):
        await asyncio.sleep(0)
        if fail["on"]:
            if row["id"] == "bad":
                raise ValueError("boom")
            await asyncio.Event().wait()  # still busy when the run stops
        return "ok"

    play = play_with(
        [{"id": "bad"}, {"id": "x"}, {"id": "y"}], key="id", resolver=resolve, on_row_error="raise"
    )
    first = run_play(play, tools=[], store=store)
    assert first.status == "failed"

    fail["on"] = False
    resumed = run_play(play, tools=[], store=store, run_id=first.run_id)

    assert resumed.status == "completed"
    assert resumed.stats.rows_executed == 3
    assert [row["c"] for row in resumed.output] == ["ok", "ok", "ok"]


def call_tool_x(tool):
    async def resolve(row, ctx):
        return await ctx.tool(tool, {"x": row["x"]})

    return resolve


# --- streaming and the fast path (SEMANTICS 5, 6) ----------------------------------------


def test_rows_stream_through_a_bounded_window():
    active = Gauge()

    async def resolve(row):
        with active:
            await yield_a_few_times()
        return row["x"] * 2

    result = run_dataset(rows_of(1000), {"y": resolve}, tools=[], row_window=10)

    assert result.status == "completed"
    assert active.peak == 10
    assert len(result.output) == 1000


def test_a_generator_of_rows_is_consumed_lazily():
    window = 10
    pulled = 0
    pulled_at_first_resolve: list[int] = []

    def generate() -> Iterator[dict[str, int]]:
        nonlocal pulled
        for i in range(500):
            pulled += 1
            yield {"x": i}

    async def resolve(row):
        if not pulled_at_first_resolve:
            pulled_at_first_resolve.append(pulled)
        return row["x"]

    result = run_dataset(generate(), {"y": resolve}, tools=[], row_window=window)

    assert result.stats.rows == 500
    assert pulled_at_first_resolve[0] <= 2 * window


def test_plain_sync_resolvers_take_the_fast_path_and_still_report_progress():
    events: list[pl.Event] = []
    n = 10_000
    columns = {"double": lambda row: row["x"] * 2, "label": lambda row: f"#{row['double']}"}

    result = run_dataset(rows_of(n), columns, tools=[], listeners=[events.append])

    assert result.status == "completed"
    assert result.stats.dispatch_passes == 0
    rows = result.output.to_list()
    assert len(rows) == n
    assert all(row == {"x": i, "double": 2 * i, "label": f"#{2 * i}"} for i, row in enumerate(rows))
    # rows that never wait report their cells with their row, many rows to an event
    assert not [e for e in events if e.kind == "cell"]
    reports = row_reports(events)
    assert len(reports) == n
    assert len([e for e in events if e.kind == "rows"]) <= n // 100
    both = {"double": "completed", "label": "completed"}
    assert all(status == "completed" and d["cells"] == both for _, status, d in reports)
    # ... with their values, so a live view needs nothing else
    assert [d["values"] for _, _, d in reports] == [
        {"double": 2 * i, "label": f"#{2 * i}"} for i in range(n)
    ]


def test_output_rows_keep_the_input_columns_then_the_computed_ones_in_order(store):
    rows = [{"zeta": 1, "alpha": 2}]
    columns = {"mid": lambda row: 3, "aaa": lambda row: 4}

    result = run_dataset(rows, columns, tools=[], store=store)

    (row,) = result.output.to_list()
    assert list(row) == ["zeta", "alpha", "mid", "aaa"]


@pytest.mark.timeout(60)  # before the fix the feeder spun without yielding: a hang
def test_a_store_failing_while_the_row_window_is_full_fails_the_run(registry):
    """The receipts cannot be written (a full disk) while the window is full of rows waiting
    for their calls: the run fails with the store's error, where the feeder spun for ever."""
    registry.tool("t.one")(lambda input: {"v": input["x"]})
    store = open_store("memory://")

    def full(*args, **kwargs):
        raise pl.StoreError("database or disk is full")

    store.write_receipts = full  # type: ignore[method-assign]
    result = run_dataset(
        rows_of(50), {"y": call_tool("t.one")}, tools=[registry], store=store, row_window=10
    )

    assert result.status == "failed" and "disk is full" in (result.error or "")


def test_rows_a_failing_store_stops_leave_no_resolver_never_awaited(registry):
    """The store fails (a full disk: event numbers cannot be reserved) while rows wait on an
    ``async def`` resolver: the run fails, and the resolvers it never ran are closed (a
    'coroutine was never awaited' warning each, before)."""
    registry.tool("t.one")(lambda input: {"v": input["x"]})
    store = open_store("memory://")
    reserved = full_after_first_block(store)

    async def resolve(row, ctx):
        return (await ctx.tool("t.one", {"x": row["x"]})).data

    columns = {"a": lambda row: row["x"], "y": resolve}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(pl.StoreError, match="disk is full"):
            run_dataset(rows_of(1500), columns, tools=[registry], store=store)
        gc.collect()

    assert len(reserved) > 1  # the store failed
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
