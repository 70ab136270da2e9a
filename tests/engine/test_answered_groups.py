"""A group's calls answered from receipts together (SEMANTICS 10): the calls of the rows
started together are queued together and their receipts looked up once a pass; the rows
answered go on together, the others' calls are claimed and sent, none looked up twice."""

from __future__ import annotations

from typing import Any

import playline as pl
from playline.store import Store

from .helpers import dataset_play, rows_of, run_play


def bare(tool: str):
    """A resolver returning its call, as ``lambda row, ctx: ctx.tool(...)`` does."""
    return lambda row, ctx: ctx.tool(tool, {"x": row["x"]})


def counting(registry: pl.ToolRegistry, tool: str = "t.count") -> list[int]:
    sent: list[int] = []

    @registry.tool(tool)
    def count(input: dict[str, Any]) -> dict[str, Any]:
        sent.append(input["x"])
        return {"v": input["x"]}

    return sent


def watch(store: Store) -> dict[str, list[Any]]:
    """Record the keys of each ``find_answers`` and the calls of each claim of ``store``."""
    seen: dict[str, list[Any]] = {"lookups": [], "claims": []}
    find, claim = store.find_answers, store.write_receipts

    def find_answers(keys: Any) -> Any:
        seen["lookups"].append(list(keys))
        return find(keys)

    def write_receipts(**kwargs: Any) -> Any:
        seen["claims"].extend(kwargs.get("claims", ()))
        return claim(**kwargs)

    store.find_answers = find_answers  # type: ignore[method-assign]
    store.write_receipts = write_receipts  # type: ignore[method-assign]
    return seen


def test_a_rerun_answers_its_rows_from_receipts_and_claims_no_call(registry, store):
    sent = counting(registry)
    play = dataset_play(rows_of(300), {"out": bare("t.count")})
    first = run_play(play, tools=[registry], store=store)
    seen = watch(store)

    again = run_play(play, tools=[registry], store=store)

    assert first.status == again.status == "completed"
    assert len(sent) == 300  # the first run's
    looked_up = [key for keys in seen["lookups"] for key in keys]
    assert len(looked_up) == len(set(looked_up)) == 300  # each once, a pass's at a time
    assert len(seen["lookups"]) <= 2  # the group's calls go out in full passes
    assert seen["claims"] == []
    assert (again.stats.tool_calls_cached, again.stats.tool_calls_live) == (300, 0)
    assert again.output.to_list() == first.output.to_list()
    cells = {r.cells["out"]["status"] for r in store.iter_rows(again.run_id, "rows")}
    assert cells == {"cached"}


def test_calls_no_receipt_answers_are_queued_and_not_looked_up_again(registry, store):
    sent = counting(registry)
    run_play(dataset_play(rows_of(5), {"out": bare("t.count")}), tools=[registry], store=store)
    seen = watch(store)

    mixed = run_play(
        dataset_play(rows_of(12), {"out": bare("t.count")}), tools=[registry], store=store
    )

    assert mixed.status == "completed"
    assert sorted(sent) == [*range(5), *range(5, 12)]  # each bought once
    assert [len(keys) for keys in seen["lookups"]] == [12]  # the group's; no second for 7
    assert len(seen["claims"]) == 7
    assert (mixed.stats.tool_calls_cached, mixed.stats.tool_calls_live) == (5, 7)
    statuses = [r.cells["out"]["status"] for r in store.iter_rows(mixed.run_id, "rows")]
    assert statuses == ["cached"] * 5 + ["completed"] * 7
    assert [row["out"]["v"] for row in mixed.output.to_list()] == list(range(12))


def test_rows_of_a_group_asking_the_same_new_call_share_one_execution(registry):
    sent = counting(registry)
    rows = [{"x": 1, "n": n} for n in range(4)]

    result = run_play(dataset_play(rows, {"out": bare("t.count")}), tools=[registry])

    assert result.status == "completed"
    assert sent == [1]
    assert result.stats.tool_calls_live == 1 and result.stats.tool_calls_in_flight == 3


def test_the_answered_rows_go_on_with_their_next_columns_together(registry, store):
    counting(registry, "t.a")
    counting(registry, "t.b")
    columns = {
        "a": bare("t.a"),
        "b": lambda row, ctx: ctx.tool("t.b", {"x": row["a"].data["v"] + 100}),
        "c": lambda row: row["b"].data["v"] + 1,
    }
    first = run_play(dataset_play(rows_of(50), columns), tools=[registry], store=store)
    seen = watch(store)

    again = run_play(dataset_play(rows_of(50), columns), tools=[registry], store=store)

    assert first.status == again.status == "completed"
    assert [len(keys) for keys in seen["lookups"]] == [50, 50]  # a column, then the next
    assert [row["c"] for row in again.output.to_list()] == [x + 101 for x in range(50)]
    assert again.stats.tool_calls_cached == 100


def test_a_resolver_making_two_calls_sends_both_as_it_made_them(registry):
    sent = counting(registry)

    def two(row: Any, ctx: pl.Context) -> Any:
        ctx.tool("t.count", {"x": row["x"] + 10})
        return ctx.tool("t.count", {"x": row["x"]})

    result = run_play(dataset_play(rows_of(3), {"out": two}), tools=[registry])

    assert result.status == "completed"
    assert sorted(sent) == [0, 1, 2, 10, 11, 12]
    assert [row["out"]["v"] for row in result.output.to_list()] == [0, 1, 2]


def test_a_forced_call_is_not_answered_by_the_lookup(registry, store):
    sent = counting(registry)
    run_play(dataset_play(rows_of(3), {"out": bare("t.count")}), tools=[registry], store=store)
    forced = dataset_play(
        rows_of(3), {"out": lambda row, ctx: ctx.tool("t.count", {"x": row["x"]}, force=True)}
    )

    again = run_play(forced, tools=[registry], store=store)

    assert again.status == "completed"
    assert sorted(sent) == [0, 0, 1, 1, 2, 2]
    assert again.stats.tool_calls_live == 3


def test_a_lookup_the_store_fails_fails_the_run_and_sends_nothing(registry, store):
    sent = counting(registry)

    def broken(keys: Any) -> Any:
        raise pl.StoreError("the store is unreachable")

    store.find_answers = broken  # type: ignore[method-assign]
    result = run_play(
        dataset_play(rows_of(4), {"out": bare("t.count")}), tools=[registry], store=store
    )

    assert result.status == "failed"
    assert "the store is unreachable" in (result.error or "")
    assert sent == []


def test_after_a_lookup_finds_no_receipt_calls_are_claimed_until_a_claim_finds_one(registry, store):
    """A first run's pass found no receipt: the next passes' calls are claimed at once,
    with no lookup (the claims say which receipts there are). A claim that meets a receipt
    turns the lookups on again. Every row is answered from its receipt or bought, once."""
    sent = counting(registry)
    bought = [{"x": x} for x in range(20, 40)]
    run_play(dataset_play(bought, {"out": bare("t.count")}), tools=[registry], store=store)
    sent.clear()
    seen = watch(store)

    mixed = run_play(
        dataset_play(rows_of(40), {"out": bare("t.count")}),
        tools=[registry],
        store=store,
        row_window=10,
    )

    assert mixed.status == "completed"
    assert sorted(sent) == list(range(20))  # each new one bought once
    assert (mixed.stats.tool_calls_cached, mixed.stats.tool_calls_live) == (20, 20)
    statuses = [r.cells["out"]["status"] for r in store.iter_rows(mixed.run_id, "rows")]
    assert statuses == ["completed"] * 20 + ["cached"] * 20
    looked_up = [key for keys in seen["lookups"] for key in keys]
    assert len(looked_up) == len(set(looked_up))  # none looked up twice
    assert len(seen["lookups"][0]) == 10  # the first pass's: none found
    assert 10 < len(looked_up) < 40  # rows 10-19 claimed at once; the last ones looked up
    assert 20 < len(seen["claims"]) < 40  # some bought before met by claims, not all


def test_rows_that_go_on_together_keep_each_their_own_cells(registry, store):
    """Rows answered together share their cells' metadata where it says the same; a row whose
    cell says otherwise (another tool, not found, a cost, an earlier cell skipped) keeps its
    own, live and from receipts (a re-run), its calls' column the first or after another."""

    @registry.tool("t.a")
    def a(input: dict[str, Any]) -> dict[str, Any] | None:
        return None if input["x"] % 4 == 0 else {"v": input["x"]}

    registry.tool("t.b")(lambda input: {"v": input["x"]})
    registry.tool("t.paid", cost=pl.Cost(1))(lambda input: {"v": input["x"]})

    def tool_of(x: int) -> str:
        return "t.paid" if x % 5 == 0 else "t.a" if x % 2 == 0 else "t.b"

    def expected(x: int, *, cached: bool) -> dict[str, Any]:
        found = tool_of(x) != "t.a" or x % 4 != 0
        status = ("cached" if cached else "completed") if found else "not_found"
        meta = {"status": status, "provider": tool_of(x), "result": True}
        if tool_of(x) == "t.paid" and not cached:
            meta["cost"] = 1.0
        return meta

    async def play(ctx: pl.Context, layout: str) -> pl.Dataset:
        def resolver(row: Any, ctx: pl.Context) -> Any:  # each layout buys its own calls
            return ctx.tool(tool_of(row["x"]), {"x": row["x"], "layout": layout})

        builder = ctx.dataset("rows", rows_of(40))
        if layout == "second":  # the calls' column after two that some rows of each tool skip
            builder = builder.with_column("ran", lambda row: 1, when=lambda r: r["x"] % 3 != 1)
            builder = builder.with_column("also", lambda row: 2, when=lambda r: r["x"] % 3 != 2)
        builder = builder.with_column("out", resolver).with_column("next", lambda row: row["x"])
        return await builder.run()

    for layout in ("first", "second"):
        for cached in (False, True):
            result = run_play(play, layout, tools=[registry], store=store)
            assert result.status == "completed"
            stats = result.stats
            assert (stats.tool_calls_cached, stats.tool_calls_live) == (
                (40, 0) if cached else (0, 40)
            )
            rows = {r.values["x"]: r for r in store.iter_rows(result.run_id, "rows")}
            assert sorted(rows) == list(range(40))
            for x, row in rows.items():
                cells = {c: {k: v for k, v in m.items() if k != "updated_at"}
                         for c, m in row.cells.items()}  # fmt: skip
                assert cells["out"] == expected(x, cached=cached)
                assert cells["next"] == {"status": "completed"}
                assert row.values["next"] == x
                if layout == "second":
                    skipped = {1: "ran", 2: "also"}.get(x % 3)
                    for name in ("ran", "also"):
                        assert cells[name] == {
                            "status": "skipped" if name == skipped else "completed"
                        }
