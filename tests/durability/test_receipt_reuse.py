"""SEMANTICS 10, 17: a new run resolves its tool calls from receipts; edited columns recompute."""

from __future__ import annotations

from typing import Any

import playline as pl
from playline.store import open_store

ROWS = 60
calls: list[int] = []


@pl.tool("reuse.lookup", batch=pl.Batch(max_size=10), cost=pl.Cost(1))
def lookup(inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    calls.extend(i["n"] for i in inputs)
    return [{"n": i["n"], "name": f"item-{i['n']}"} for i in inputs]


def _builder(ctx: pl.Context) -> pl.DatasetBuilder:
    return ctx.dataset("items", [{"n": i} for i in range(ROWS)], key="n").with_column(
        "lookup", lambda row, ctx: ctx.tool("reuse.lookup", {"n": row["n"]})
    )


@pl.play(name="reuse-play")
async def original(ctx: pl.Context, input: Any) -> int:
    ds = await _builder(ctx).with_column("label", lambda row: row["lookup"].get("name")).run()
    return len(ds)


def _edited() -> pl.Play:
    """The same play after an edit to its pure column (same name, same tool column)."""

    @pl.play(name="reuse-play")
    async def edited(ctx: pl.Context, input: Any) -> int:
        ds = await (
            _builder(ctx).with_column("label", lambda row: row["lookup"].get("name").upper()).run()
        )
        return len(ds)

    return edited


def _cells(store_url: str, run_id: str) -> dict[int, dict[str, Any]]:
    return {r.values["n"]: r.cells for r in open_store(store_url).iter_rows(run_id, "items")}


def test_new_run_makes_no_tool_calls(store_url: str) -> None:
    calls.clear()
    store = store_url
    first = pl.run(original, store=store, tools=[lookup])
    assert first.status == "completed", first.error
    assert first.stats.tool_calls_live == ROWS and sorted(calls) == list(range(ROWS))

    second = pl.run(original, store=store, tools=[lookup])
    assert second.status == "completed", second.error
    assert second.run_id != first.run_id
    assert len(calls) == ROWS  # no execution at all
    assert second.stats.tool_calls_live == 0
    assert second.stats.tool_calls_cached == ROWS
    assert second.stats.credits == 0
    assert second.stats.rows_executed == ROWS and second.stats.rows_reused == 0
    cells = _cells(store, second.run_id)
    assert {c["lookup"]["status"] for c in cells.values()} == {"cached"}
    assert {c["lookup"].get("cost", 0) for c in cells.values()} == {0}
    assert [r.values for r in open_store(store).iter_rows(second.run_id, "items")] == [
        r.values for r in open_store(store).iter_rows(first.run_id, "items")
    ]


def test_edited_pure_column_recomputes_while_calls_stay_cached(store_url: str) -> None:
    calls.clear()
    store = store_url
    first = pl.run(original, store=store, tools=[lookup])
    assert first.status == "completed", first.error

    edited = pl.run(_edited(), store=store, tools=[lookup])
    assert edited.status == "completed", edited.error
    assert len(calls) == ROWS
    assert edited.stats.tool_calls_live == 0 and edited.stats.tool_calls_cached == ROWS
    rows = {r.values["n"]: r for r in open_store(store).iter_rows(edited.run_id, "items")}
    assert {n: r.values["label"] for n, r in rows.items()} == {n: f"ITEM-{n}" for n in range(ROWS)}
    assert {r.cells["lookup"]["status"] for r in rows.values()} == {"cached"}
    assert {r.cells["label"]["status"] for r in rows.values()} == {"completed"}
