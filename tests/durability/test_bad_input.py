"""Bad stores and bad tool results fail clearly, touch nothing, and lose nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import playline as pl
from playline._trace import trace_of
from playline.store import open_store
from playline.store.sql import SQLiteStore

ROWS = 30
BAD = {7: {1, 2}, 19: object()}  # n -> a result that is not JSON-serialisable


@pl.play(name="bad-input-noop")
async def noop(ctx: pl.Context, input: Any) -> str:
    return "ok"


def _results_play(calls: list[int], credits: float = 0) -> tuple[pl.Play, Any]:
    @pl.tool("bad.lookup", batch=pl.Batch(max_size=10), cost=pl.Cost(credits))
    def lookup(inputs: list[dict[str, Any]]) -> list[Any]:
        calls.extend(i["n"] for i in inputs)
        return [BAD.get(i["n"], {"n": i["n"]}) for i in inputs]

    @pl.play(name="bad-results")
    async def bad_results(ctx: pl.Context, input: Any) -> pl.Dataset:
        return await (
            ctx.dataset("rows", [{"n": i} for i in range(ROWS)], key="n")
            .with_column("lookup", lambda row, ctx: ctx.tool("bad.lookup", {"n": row["n"]}))
            .run()
        )

    return bad_results, lookup


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(bytes(range(256)) * 64, id="random-bytes"),
        pytest.param(b"SQLite format 3\x00" + b"\xa5" * 8000, id="damaged-sqlite"),
    ],
)
def test_corrupt_store_file_is_refused_and_left_untouched(tmp_path: Path, garbage: bytes) -> None:
    path = tmp_path / "p.db"
    path.write_bytes(garbage)
    with pytest.raises(pl.StoreError) as caught:
        pl.run(noop, store=f"sqlite:///{path}")
    assert str(path) in str(caught.value)
    # a SQLite header over garbage is a damaged store: opened read-only, never written
    assert "not a SQLite database" in str(caught.value) or "is damaged" in str(caught.value)
    assert path.read_bytes() == garbage
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.db"]  # no -wal or -shm either


def test_foreign_sqlite_database_is_refused_and_left_untouched(tmp_path: Path) -> None:
    # Refused before the journal mode is switched to WAL, which would rewrite its header.
    path = tmp_path / "p.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("INSERT INTO customers VALUES (1, 'Ada')")
    db.close()
    before = path.read_bytes()
    with pytest.raises(pl.StoreError, match="not a Playline store") as caught:
        pl.run(noop, store=f"sqlite:///{path}")
    assert str(path) in str(caught.value)
    assert path.read_bytes() == before


def test_store_in_a_missing_folder_of_a_missing_folder(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "deeper" / "p.db"
    with pytest.raises(pl.StoreError) as caught:
        pl.run(noop, store=f"sqlite:///{path}")
    message = str(caught.value)
    assert str(path) in message and str(tmp_path / "missing") in message
    assert not (tmp_path / "missing").exists()  # nothing half-created


def test_store_in_one_missing_folder_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # as root, folders are created only in the working folder
    result = pl.run(noop, store=f"sqlite:///{tmp_path}/new/p.db")
    assert result.status == "completed" and (tmp_path / "new" / "p.db").is_file()


def test_non_json_result_fails_its_cell_and_loses_nothing(tmp_path: Path) -> None:
    calls: list[int] = []
    play, lookup = _results_play(calls)
    url = f"sqlite:///{tmp_path}/p.db"
    result = pl.run(play, store=url, tools=[lookup])
    assert result.status == "completed_with_errors", result.error
    assert result.stats.rows_failed == len(BAD)
    errors = {int(e.row_key): e for e in result.output.errors}
    assert set(errors) == set(BAD)
    for error in errors.values():
        assert error.column == "lookup" and error.tool == "bad.lookup"
        assert "JSON" in error.message and "bad.lookup" in error.message

    store = open_store(url)
    rows = {r.values["n"]: r for r in store.iter_rows(result.run_id, "rows")}
    assert len(rows) == ROWS  # every row was saved, the failed ones too
    for n, row in rows.items():
        if n in BAD:
            assert row.status == "failed" and row.cells["lookup"]["status"] == "failed"
        else:
            assert row.status == "completed" and row.values["lookup"] == {"n": n}
    # A bad result is never stored as if completed: its receipt failed, so it runs again.
    assert sorted(calls) == list(range(ROWS))
    calls.clear()
    again = pl.run(play, store=url, tools=[lookup])
    assert sorted(calls) == sorted(BAD)
    assert again.stats.tool_calls_cached == ROWS - len(BAD)
    lookups = {r.values["n"]: r.values.get("lookup") for r in store.iter_rows(again.run_id, "rows")}
    assert lookups == {n: None if n in BAD else {"n": n} for n in range(ROWS)}


@pytest.mark.parametrize("credits", [0, 1], ids=["free", "paid"])
def test_an_unusable_answer_is_a_live_call_that_failed_in_the_summary_and_in_show(
    tmp_path: Path, credits: float
) -> None:
    # The provider answered (and, for a paid tool, charged): the summary, the ledger and
    # `playline show` all count it as a live call, and it failed.
    play, lookup = _results_play([], credits)
    url = f"sqlite:///{tmp_path}/p.db"
    result = pl.run(play, store=url, tools=[lookup])
    assert result.stats.tool_calls_live == ROWS
    assert result.stats.tool_calls_failed == len(BAD)
    assert result.stats.tools["bad.lookup"]["live"] == ROWS
    assert result.stats.credits == ROWS * credits
    trace = trace_of(open_store(url), result.run_id)
    assert trace.tools["bad.lookup"].calls == trace.calls == ROWS
    assert [a.calls for a in trace.attempt_list] == [ROWS]
    assert trace.credits == ROWS * credits


def _hold_exclusive_lock(path: Path) -> sqlite3.Connection:
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    return locker


def test_locked_store_gives_a_clear_error_not_a_hang(tmp_path: Path) -> None:
    # The busy timeout is set through the store's constructor; pl.run accepts a Store.
    path = tmp_path / "p.db"
    url = f"sqlite:///{path}"
    assert pl.run(noop, store=url).status == "completed"  # an existing, valid store
    locker = _hold_exclusive_lock(path)
    try:
        with pytest.raises(pl.StoreError) as caught:
            pl.run(noop, store=SQLiteStore(url, busy_timeout=0.2))
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    message = str(caught.value)
    assert str(path) in message and "locked" in message
    # Nothing was written while it was locked: no second run exists.
    assert len(open_store(url).list_runs()) == 1


def test_locked_store_busy_timeout_from_the_url(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    url = f"sqlite:///{path}"
    assert pl.run(noop, store=url).status == "completed"
    locker = _hold_exclusive_lock(path)
    try:
        with pytest.raises(pl.StoreError) as caught:
            pl.run(noop, store=f"{url}?busy_timeout=0.2")
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert "locked" in str(caught.value) and "0.2 s" in str(caught.value)


@pytest.mark.parametrize("query", ["?busy=1", "?busy_timeout=soon", "?busy_timeout=-1"])
def test_a_bad_store_url_option_is_a_clear_error(tmp_path: Path, query: str) -> None:
    with pytest.raises(pl.StoreError) as caught:
        open_store(f"sqlite:///{tmp_path}/p.db{query}")
    assert "busy_timeout" in str(caught.value)
    assert not (tmp_path / "p.db").exists()


def test_a_nul_in_a_key_fails_its_row_and_a_nul_in_a_log_line_is_dropped(store_url: str) -> None:
    # PostgreSQL's text cannot hold U+0000: every store treats it alike, and no run fails
    # for one bad key or log line.
    @pl.play(name="nul-keys")
    async def nul_keys(ctx: pl.Context, input: Any) -> pl.Dataset:
        ctx.log("a line with a \x00 in it")
        return await (
            ctx.dataset("rows", [{"k": "a\x00b"}, {"k": "ok"}], key="k")
            .with_column("x", lambda row: "v\x00w")  # a value: stored as JSON, escaped
            .run()
        )

    result = pl.run(nul_keys, store=store_url, tools=[])
    assert result.status == "completed_with_errors", result.error
    assert result.stats.rows_failed == 1
    rows = {r.key: r for r in open_store(store_url).iter_rows(result.run_id, "rows")}
    (refused,) = [r for k, r in rows.items() if k.startswith("nul-")]
    assert refused.status == "failed" and "NUL character" in (refused.error or "")
    assert rows["ok"].values["x"] == "v\x00w" and rows["ok"].status == "completed"
    for define in (
        lambda: pl.play(name="bad\x00name")(nul_keys.fn),
        lambda: pl.run(_dataset_named("d\x00"), store=store_url, tools=[]).exception,
    ):
        try:
            raised = define()
        except pl.PlayDefinitionError as exc:
            raised = exc
        assert isinstance(raised, pl.PlayDefinitionError) and "NUL" in str(raised)


def _dataset_named(name: str) -> pl.Play:
    @pl.play(name="nul-dataset-name")
    async def play(ctx: pl.Context, input: Any) -> Any:
        return await ctx.dataset(name, [{"k": 1}]).with_column("x", lambda row: 1).run()

    return play
