"""The engine's modes: a plan (calls counted, not sent), retrying failed rows from their
stored row, refreshed columns, the cell size limit and the input total progress shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import playline as pl
from playline._plan import _seconds
from playline.store import MemoryStore


def email_play(rows: list[dict[str, Any]]) -> Any:
    finder = pl.Waterfall(
        "finder",
        output="email",
        steps=[pl.ToolStep("one", "m.one"), pl.ToolStep("two", "m.two")],
    )

    @pl.play(name="modes")
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        return await (
            ctx.dataset("people", rows, key="domain")
            .with_column(
                "company", lambda row, ctx: ctx.tool("m.company", {"domain": row["domain"]})
            )
            .with_column("email", lambda row, ctx: ctx.waterfall(finder, {"d": row["domain"]}))
            .run()
        )

    return play


@pytest.fixture
def tools(registry: pl.ToolRegistry) -> dict[str, list[str]]:
    calls: dict[str, list[str]] = {"company": [], "one": [], "two": []}

    @registry.tool("m.company", batch=pl.Batch(max_size=10), cost=pl.Cost(1, charge="on_hit"))
    def company(inputs: list[dict[str, Any]]) -> list[Any]:
        calls["company"].extend(i["domain"] for i in inputs)
        return [{"size": len(i["domain"])} for i in inputs]

    @registry.tool("m.one", batch=pl.Batch(max_size=4), cost=pl.Cost(1, charge="on_hit"))
    def one(inputs: list[dict[str, Any]]) -> list[Any]:
        calls["one"].extend(i["d"] for i in inputs)
        return [{"email": f"a@{i['d']}"} if i["d"].startswith("a") else None for i in inputs]

    @registry.tool("m.two", cost=pl.Cost(2), rate=pl.Rate(per_second=2, burst=1))
    def two(input: dict[str, Any]) -> Any:
        calls["two"].append(input["d"])
        return {"email": f"b@{input['d']}"}

    return calls


ROWS = [{"domain": d} for d in ("a1.io", "b1.io", "a2.io", "b2.io", "b3.io", "b1.io")]


def test_a_plan_counts_what_a_run_would_send_and_sends_nothing(
    registry: pl.ToolRegistry, tools: dict[str, list[str]], store: MemoryStore
) -> None:
    estimate = pl.plan(email_play(ROWS), {}, store=store, tools=[registry])
    assert estimate.status == "completed", estimate.error
    assert tools == {"company": [], "one": [], "two": []}  # no tool was called
    assert store.list_runs() == [] and store.receipt_stats() == {}  # nothing was written
    by_tool = {t.tool: t for t in estimate.tools}
    assert estimate.rows == 5  # the duplicate key is one row
    company = by_tool["m.company"]
    assert (company.calls, company.requests, company.credits_max) == (5, 1, 5.0)
    assert company.hit_rate == 0.5 and company.hit_rate_from == "assumed"  # no history
    assert company.credits_expected == pytest.approx(2.5)
    one, two = by_tool["m.one"], by_tool["m.two"]
    assert (one.calls, one.requests) == (5, 2)  # batches of 4
    assert (two.calls, two.requests, two.credits_max) == (5, 5, 10.0)  # every row could reach it
    assert two.expected_calls == pytest.approx(2.5)  # ... if step one missed (half the time)
    assert two.credits_expected == pytest.approx(5.0)
    assert two.seconds == pytest.approx(4 / (2 * 0.95), abs=1e-3)  # 5 at 2/s, 1 at once
    assert estimate.credits_max == 20 and estimate.credits_expected == pytest.approx(10.0)
    columns = {c.column: c for c in estimate.columns}
    assert columns["people.email"].calls == 10 and columns["people.company"].calls == 5

    run = pl.run(email_play(ROWS), {}, store=store, tools=[registry], clock=pl.ManualClock())
    assert run.status == "completed", run.error
    assert run.stats.credits == 5 + 2 + 3 * 2  # company hits, a1/a2 by one, b1-b3 by two
    again = pl.plan(email_play(ROWS), {}, store=store, tools=[registry])
    assert again.credits_max == 0 and again.calls == 0
    assert again.from_receipts == 5 + 5 + 3
    assert len(store.list_runs()) == 1  # still only the run


def test_a_plan_counts_the_waits_of_a_rate_window() -> None:
    """12 requests under 5 a minute: the 6th waits a minute, the 11th two."""
    windowed = pl.ToolSpec(id="w", transport=None, rate=pl.Rate(per_minute=5))  # type: ignore[arg-type]
    assert [_seconds(windowed, n) for n in (5, 6, 12)] == [0.0, 60.0, 120.0]
    both = pl.ToolSpec(id="b", transport=None, rate=pl.Rate(per_second=1, per_minute=500))  # type: ignore[arg-type]
    assert _seconds(both, 61) == pytest.approx(60 / 0.95)  # the pace binds before the window


def test_a_plan_learns_hit_rates_from_the_ledger(
    registry: pl.ToolRegistry, tools: dict[str, list[str]], store: MemoryStore
) -> None:
    many = [{"domain": f"{'a' if n % 4 == 0 else 'b'}{n}.io"} for n in range(40)]
    # m.two's pacing (2/s) is not the point: a manual clock lets its 30 calls out at once
    history = pl.run(email_play(many), {}, store=store, tools=[registry], clock=pl.ManualClock())
    assert history.ok
    estimate = pl.plan(email_play(ROWS), {}, store=store, tools=[registry])
    one = {t.tool: t for t in estimate.tools}["m.one"]
    assert one.hit_rate_from == "history (40 calls)" and one.hit_rate == 0.25


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_plan_inside_an_event_loop_says_to_await_aplan(
    registry: pl.ToolRegistry, tools: dict[str, list[str]]
) -> None:
    with pytest.raises(pl.PlayDefinitionError, match=r"await pl\.aplan"):
        pl.plan(email_play(ROWS), {}, store="memory://", tools=[registry])
    estimate = await pl.aplan(email_play(ROWS), {}, store="memory://", tools=[registry])
    assert estimate.calls == 15


def test_a_retried_row_goes_on_from_its_stored_cells(
    registry: pl.ToolRegistry, store: MemoryStore, tmp_path: Path
) -> None:
    flag = tmp_path / "broken"
    flag.touch()
    calls: list[str] = []

    @registry.tool("m.size", batch=pl.Batch(max_size=10))
    def size(inputs: list[dict[str, Any]]) -> list[Any]:
        calls.extend(i["d"] for i in inputs)
        return [{"n": len(i["d"])} if i["d"] != "none.io" else None for i in inputs]

    def fragile(row: Any) -> Any:
        if flag.exists() and row["d"] == "b.io":
            raise RuntimeError("not yet")
        return row["size"].found  # a ToolResult, also when it comes back from the store

    @pl.play(name="retry")
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        return await (
            ctx.dataset("rows", [{"d": d} for d in ("a.io", "b.io", "none.io")], key="d")
            .with_column("size", lambda row, ctx: ctx.tool("m.size", {"d": row["d"]}))
            .with_column("_hidden", lambda row: 1)
            .with_column("found", fragile)
            .with_column("twice", lambda row: row["found"] * 2)
            .run()
        )

    first = pl.run(play, store=store, tools=[registry])
    assert first.status == "completed_with_errors" and first.stats.rows_failed == 1
    flag.unlink()
    calls.clear()
    again = pl.run(play, store=store, tools=[registry], run_id=first.run_id, retry_failed=True)
    assert again.status == "completed", again.error
    assert calls == [] and again.stats.tool_calls_cached == 0  # size was kept, not asked
    assert (again.stats.rows_executed, again.stats.rows_reused) == (1, 2)
    rows = {r.key: r for r in store.iter_rows(first.run_id, "rows")}
    assert rows["b.io"].values == {"d": "b.io", "size": {"n": 4}, "found": True, "twice": 2}
    assert rows["b.io"].cells["size"]["result"] is True


def test_cell_limit_fails_the_cell_over_it_and_a_tool_result_over_it(
    registry: pl.ToolRegistry, store: MemoryStore
) -> None:
    @registry.tool("m.big")
    def big(input: dict[str, Any]) -> Any:
        return {"blob": "y" * input["n"]}

    @pl.play(name="big")
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        return await (
            ctx.dataset("rows", [{"n": n} for n in (10, 500)], key="n")
            .with_column("text", lambda row: "x" * row["n"])
            .with_column("blob", lambda row, ctx: ctx.tool("m.big", {"n": row["n"] // 2}))
            .run()
        )

    result = pl.run(play, store=store, tools=[registry], cell_limit=300)
    assert result.status == "completed_with_errors"
    rows = {r.key: r for r in store.iter_rows(result.run_id, "rows")}
    assert rows["10"].status == "completed"
    text, blob = rows["500"].cells["text"], rows["500"].cells["blob"]
    assert text["status"] == "failed" and "over the cell limit of 0.0003 MB" in text["error"]
    assert blob["status"] == "failed" and blob["code"] == "too_large"
    assert store.receipt_stats()["m.big"]["failed"] == 1  # paid for, not kept
    for bad in (0, 1.5, True):
        with pytest.raises(pl.PlayDefinitionError, match="cell_limit"):
            pl.run(play, store=store, tools=[registry], cell_limit=bad)


def test_refresh_takes_column_names_in_a_new_run(registry: pl.ToolRegistry) -> None:
    @pl.play(name="nothing")
    async def play(ctx: pl.Context, input: Any) -> int:
        return 1

    store = MemoryStore()
    with pytest.raises(pl.PlayDefinitionError, match="give column names"):
        pl.run(play, store=store, refresh=[1])  # type: ignore[list-item]
    done = pl.run(play, store=store, refresh="email")
    assert store.get_run(done.run_id).options["refresh"] == ["email"]
    with pytest.raises(pl.PlayDefinitionError, match="re-buys columns in a new run"):
        pl.run(play, store=store, run_id=done.run_id, refresh=["phone"])
    assert pl.run(play, store=store, run_id=done.run_id).ok  # its resume keeps refreshing


def test_a_refresh_of_a_column_no_dataset_has_is_a_warning_in_the_runs_log(
    store: MemoryStore,
) -> None:
    """As `playline run --refresh` warns: the run goes on, and the log says nothing was bought
    again for that name."""

    @pl.play(name="sizes")
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        return await (
            ctx.dataset("people", [{"d": "a.io"}], key="d")
            .with_column("size", lambda row: len(row["d"]))
            .with_column("_note", lambda row: 1)
            .run()
        )

    seen: list[pl.Event] = []
    result = pl.run(
        play,
        store=store,
        tools=[],
        refresh=["emial", "people.size", "_note"],
        listeners=[seen.append],
    )

    assert result.ok, result.error
    logs = [e for e in store.read_events(result.run_id, kinds=["log"]) if e.data]
    assert [(e.preview, e.data) for e in logs] == [
        (
            "warning: refresh 'emial' (--refresh): the run has no column 'emial' (its columns: "
            "_note, size); nothing was bought again for it.",
            {"refresh": "emial"},
        )
    ]  # the columns it has, a dataset's or hidden, are not warned about
    assert [e.seq for e in seen if e.kind == "log" and e.data] == [logs[0].seq]


def test_a_dataset_says_how_many_rows_its_input_holds(tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_text("n\n1\n2\n\n3\n", encoding="utf-8")
    seen: list[pl.Event] = []

    @pl.play(name="totals")
    async def play(ctx: pl.Context, input: Any) -> None:
        await ctx.dataset("listed", [{"n": 1}, {"n": 2}]).run()
        await ctx.dataset("file", ctx.csv(tmp_path / "in.csv")).run()
        await ctx.dataset("streamed", ({"n": n} for n in range(2))).run()

    assert pl.run(play, store="memory://", listeners=[seen.append]).ok
    totals = {
        e.dataset: (e.data or {}).get("total")
        for e in seen
        if e.kind == "dataset" and e.status == "running"
    }
    assert totals == {"listed": 2, "file": 3, "streamed": None}


def test_the_run_keeps_the_folder_it_started_in(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    @pl.play(name="where")
    async def play(ctx: pl.Context, input: Any) -> int:
        return len(ctx.csv("in.csv").to_list())

    (tmp_path / "in.csv").write_text("n\n1\n", encoding="utf-8")
    store = MemoryStore()
    monkeypatch.chdir(tmp_path)
    first = pl.run(play, store=store)
    assert first.output == 1 and store.get_run(first.run_id).options["cwd"] == str(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert pl.run(play, store=store, run_id=first.run_id).output == 1
