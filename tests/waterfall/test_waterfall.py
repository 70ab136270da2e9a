"""Waterfalls over local tools (SEMANTICS.md 20-23): order, batching, values, provenance."""

from __future__ import annotations

import gc
import warnings
from typing import Any

import pytest

import playline as pl
from playline.store import open_store
from stores import full_after_first_block

from .helpers import batch_tool, cells, fresh_store, run, waterfall_play


def three_steps(registry: pl.ToolRegistry, calls: dict[str, list[list[int]]]) -> pl.Waterfall:
    """a finds even xs, b finds multiples of 3, c finds everything; a and b charge on a hit."""
    for tool_id in ("t.a", "t.b", "t.c"):
        calls[tool_id] = []
    batch_tool(
        registry,
        "t.a",
        lambda x: {"email": f"a{x}@x.io"} if x % 2 == 0 else None,
        calls["t.a"],
        cost=pl.Cost(1, charge="on_hit"),
    )
    batch_tool(
        registry,
        "t.b",
        lambda x: {"email": f"b{x}@x.io"} if x % 3 == 0 else None,
        calls["t.b"],
        cost=pl.Cost(1, charge="on_hit"),
    )
    batch_tool(registry, "t.c", lambda x: {"email": f"c{x}@x.io"}, calls["t.c"], cost=2)
    return pl.Waterfall(
        "three",
        output="email",
        steps=[pl.ToolStep("a", "t.a"), pl.ToolStep("b", "t.b"), pl.ToolStep("c", "t.c")],
    )


def rows(n: int) -> list[dict[str, int]]:
    return [{"x": x} for x in range(n)]


def test_a_later_step_is_never_called_for_a_row_an_earlier_step_satisfied(registry):
    calls: dict[str, list[list[int]]] = {}
    spec = three_steps(registry, calls)

    result = run(waterfall_play(spec, rows(12)), tools=[registry])

    assert result.status == "completed", result.error
    assert sorted(calls["t.a"][0]) == list(range(12))
    assert sorted(calls["t.b"][0]) == [1, 3, 5, 7, 9, 11]  # a's misses only
    assert sorted(calls["t.c"][0]) == [1, 5, 7, 11]  # a's and b's misses only
    assert result.output["values"] == [
        "a0@x.io", "c1@x.io", "a2@x.io", "b3@x.io", "a4@x.io", "c5@x.io",
        "a6@x.io", "c7@x.io", "a8@x.io", "b9@x.io", "a10@x.io", "c11@x.io",
    ]  # fmt: skip


def test_each_step_is_one_batched_pass_over_the_rows_still_unsatisfied(registry):
    calls: dict[str, list[list[int]]] = {}
    spec = three_steps(registry, calls)

    result = run(waterfall_play(spec, rows(30)), tools=[registry])

    assert {tool: len(batches) for tool, batches in calls.items()} == {
        "t.a": 1,
        "t.b": 1,
        "t.c": 1,
    }
    assert result.stats.tool_requests == 3
    assert result.stats.dispatch_passes == 3


def test_min_results_collects_across_steps_and_spreads_lists(registry):
    calls: dict[str, list[list[int]]] = {"t.1": [], "t.2": [], "t.3": []}
    batch_tool(registry, "t.1", lambda x: {"phone": [f"a{x}"]}, calls["t.1"])
    batch_tool(registry, "t.2", lambda x: {"phone": f"b{x}"}, calls["t.2"])
    batch_tool(registry, "t.3", lambda x: {"phone": f"c{x}"}, calls["t.3"])
    spec = pl.Waterfall(
        "phones",
        output="phone",
        min_results=2,
        steps=[pl.ToolStep("one", "t.1"), pl.ToolStep("two", "t.2"), pl.ToolStep("three", "t.3")],
    )
    store = fresh_store()

    result = run(waterfall_play(spec, rows(3)), tools=[registry], store=store)

    assert result.output["values"] == [["a0", "b0"], ["a1", "b1"], ["a2", "b2"]]
    assert calls["t.3"] == []  # step 3 skipped and never called
    meta = cells(result, store)[0]
    assert meta["waterfall"]["winner"] == "two"
    assert meta["waterfall"]["steps"]["three"] == {"status": "skipped"}
    assert meta["waterfall"]["steps"]["one"]["status"] == "completed"


def test_a_step_with_more_values_than_needed_satisfies_the_row_at_once(registry):
    calls: dict[str, list[list[int]]] = {"t.1": [], "t.2": []}
    batch_tool(registry, "t.1", lambda x: {"phone": ["p1", "", "p2", "p3"]}, calls["t.1"])
    batch_tool(registry, "t.2", lambda x: {"phone": "never"}, calls["t.2"])
    spec = pl.Waterfall(
        "many",
        output="phone",
        min_results=2,
        steps=[pl.ToolStep("one", "t.1"), pl.ToolStep("two", "t.2")],
    )

    result = run(waterfall_play(spec, rows(1)), tools=[registry])

    assert result.output["values"] == [["p1", "p2"]]
    assert calls["t.2"] == []


def test_blank_values_do_not_count(registry):
    blanks: list[Any] = [{"email": "   "}, {"email": []}, {"email": {}}, {"email": ["", " "]}, ""]
    calls: dict[str, list[list[int]]] = {"t.blank": [], "t.ok": []}
    batch_tool(registry, "t.blank", lambda x: blanks[x], calls["t.blank"])
    batch_tool(registry, "t.ok", lambda x: {"email": f"ok{x}"} if x else None, calls["t.ok"])
    spec = pl.Waterfall(
        "blanks", output="email", steps=[pl.ToolStep("blank", "t.blank"), pl.ToolStep("ok", "t.ok")]
    )
    store = fresh_store()

    result = run(waterfall_play(spec, rows(len(blanks))), tools=[registry], store=store)

    assert sorted(calls["t.ok"][0]) == [0, 1, 2, 3, 4]  # no blank satisfied a row
    assert result.output["values"] == [None, "ok1", "ok2", "ok3", "ok4"]
    first = cells(result, store)[0]
    assert first["status"] == "not_found"
    assert first["waterfall"]["winner"] is None
    assert "No step of waterfall 'blanks' found a value" in first["reason"]
    assert [s["status"] for s in first["waterfall"]["steps"].values()] == ["not_found"] * 2


def test_a_failing_step_fails_only_its_cells_and_the_waterfall_goes_on(registry):
    seen: list[int] = []

    @registry.tool("t.flaky")
    def flaky(input: dict[str, Any]) -> dict[str, Any]:
        seen.append(input["x"])
        if input["x"] % 2:
            raise pl.ToolError("t.flaky", "provider exploded", status=500, code="boom")
        return {"email": f"f{input['x']}"}

    calls: list[list[int]] = []
    batch_tool(registry, "t.backup", lambda x: {"email": f"b{x}"}, calls)
    spec = pl.Waterfall(
        "flaky",
        output="email",
        steps=[pl.ToolStep("flaky", "t.flaky"), pl.ToolStep("backup", "t.backup")],
    )
    store = fresh_store()

    result = run(waterfall_play(spec, rows(4)), tools=[registry], store=store)

    assert result.status == "completed"  # the rows did not fail: the waterfall went on
    assert result.output["values"] == ["f0", "b1", "f2", "b3"]
    assert calls == [[1, 3]]
    metas = cells(result, store)
    failed = metas[1]["waterfall"]["steps"]["flaky"]
    assert failed["status"] == "failed"
    assert "provider exploded" in failed["error"]
    assert metas[1]["status"] == "completed"
    assert metas[1]["waterfall"]["winner"] == "backup"
    assert metas[0]["waterfall"]["steps"]["flaky"]["status"] == "completed"
    stats = result.output["stats"]["flaky"]["steps"]
    assert (stats[0]["attempts"], stats[0]["hits"], stats[0]["failed"]) == (4, 2, 2)


def test_a_rerun_makes_no_calls_and_its_cells_are_cached(registry):
    calls: dict[str, list[list[int]]] = {}
    spec = three_steps(registry, calls)
    store = fresh_store()
    play = waterfall_play(spec, rows(12))
    first = run(play, tools=[registry], store=store)
    made = {tool: len(batches) for tool, batches in calls.items()}

    second = run(play, tools=[registry], store=store)

    assert second.run_id != first.run_id
    assert {tool: len(batches) for tool, batches in calls.items()} == made
    assert second.stats.tool_calls_live == 0
    assert second.stats.credits == 0
    assert second.output["values"] == first.output["values"]
    metas = cells(second, store)
    assert {m["status"] for m in metas} == {"cached"}
    assert all(step.get("cached", True) for m in metas for step in m["waterfall"]["steps"].values())
    assert second.output["stats"]["three"]["credits"] == 0


def test_accept_filters_values(registry):
    calls: dict[str, list[list[int]]] = {"t.guess": [], "t.sure": []}
    batch_tool(registry, "t.guess", lambda x: {"email": [f"bad{x}", f"good{x}"]}, calls["t.guess"])
    batch_tool(registry, "t.sure", lambda x: {"email": f"good-sure{x}"}, calls["t.sure"])
    spec = pl.Waterfall(
        "picky",
        output="email",
        accept=lambda value: value.startswith("good") and not value.endswith("1"),
        steps=[pl.ToolStep("guess", "t.guess"), pl.ToolStep("sure", "t.sure")],
    )
    store = fresh_store()

    result = run(waterfall_play(spec, rows(3)), tools=[registry], store=store)

    assert result.output["values"] == ["good0", None, "good2"]
    assert calls["t.sure"] == [[1]]
    assert cells(result, store)[1]["waterfall"]["steps"]["guess"]["rejected"] == 2


def test_accept_may_be_a_paid_verification_batched_across_rows(registry):
    verified: list[list[str]] = []

    @registry.tool("t.verify", batch=pl.Batch(max_size=100), cost=0.5)
    def verify(inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        verified.append(sorted(i["email"] for i in inputs))
        return [{"ok": i["email"].startswith("real")} for i in inputs]

    calls: dict[str, list[list[int]]] = {"t.find": [], "t.other": []}
    batch_tool(
        registry,
        "t.find",
        lambda x: {"email": f"real{x}" if x % 2 else f"fake{x}"},
        calls["t.find"],
        cost=1,
    )
    batch_tool(registry, "t.other", lambda x: {"email": f"real-other{x}"}, calls["t.other"])

    async def accept(value: str, ctx: pl.Context) -> bool:
        return bool((await ctx.tool("t.verify", {"email": value})).get("ok"))

    spec = pl.Waterfall(
        "verified",
        output="email",
        accept=accept,
        steps=[pl.ToolStep("find", "t.find"), pl.ToolStep("other", "t.other")],
    )
    store = fresh_store()

    result = run(waterfall_play(spec, rows(4)), tools=[registry], store=store)

    assert result.output["values"] == ["real-other0", "real1", "real-other2", "real3"]
    assert verified[0] == ["fake0", "fake2", "real1", "real3"]  # one batch for all rows
    assert len(verified) == 2  # then one for step 2's values
    metas = cells(result, store)
    assert metas[1]["waterfall"]["steps"]["find"]["cost"] == 1.5  # the find and its check
    assert metas[0]["waterfall"]["steps"]["find"]["rejected"] == 1
    assert metas[0]["cost"] == 1 + 0.5 + 0.5


def test_provenance_in_the_stored_cells(registry):
    calls: dict[str, list[list[int]]] = {}
    spec = three_steps(registry, calls)
    store = fresh_store()

    result = run(waterfall_play(spec, rows(4)), tools=[registry], store=store)

    metas = cells(result, store)
    assert metas[0]["status"] == "completed"
    assert metas[0]["provider"] == "t.a"
    assert metas[0]["cost"] == 1
    assert metas[0]["waterfall"]["winner"] == "a"
    assert metas[0]["waterfall"]["steps"] == {
        "a": {"status": "completed", "cost": 1.0, "provider": "t.a", "cached": False, "values": 1},
        "b": {"status": "skipped"},
        "c": {"status": "skipped"},
    }
    assert metas[1]["provider"] == "t.c"
    assert metas[1]["cost"] == 2
    assert {k: v["status"] for k, v in metas[1]["waterfall"]["steps"].items()} == {
        "a": "not_found",
        "b": "not_found",
        "c": "completed",
    }
    assert [v["cost"] for v in metas[1]["waterfall"]["steps"].values()] == [0, 0, 2]
    assert metas[3]["waterfall"]["winner"] == "b"


def test_waterfall_stats_per_step(registry):
    calls: dict[str, list[list[int]]] = {}
    spec = three_steps(registry, calls)

    result = run(waterfall_play(spec, rows(12)), tools=[registry])

    stats = result.output["stats"]["three"]
    assert (stats["rows"], stats["satisfied"], stats["credits"]) == (12, 12, 6 + 2 + 8)
    assert stats["credits_per_hit"] == pytest.approx(16 / 12)
    by_step = {s["id"]: s for s in stats["steps"]}
    assert by_step["a"] == {
        "id": "a",
        "attempts": 12,
        "hits": 6,
        "not_found": 6,
        "failed": 0,
        "skipped": 0,
        "credits": 6.0,
        "cached": 0,
        "credits_per_hit": 1.0,
    }
    assert (by_step["b"]["attempts"], by_step["b"]["hits"], by_step["b"]["skipped"]) == (6, 2, 6)
    assert (by_step["c"]["attempts"], by_step["c"]["hits"], by_step["c"]["credits"]) == (4, 4, 8)
    assert by_step["c"]["credits_per_hit"] == 2.0


def test_the_run_keeps_each_waterfalls_stats_in_its_step_trace(registry):
    calls: dict[str, list[list[int]]] = {}
    spec = three_steps(registry, calls)
    store = fresh_store()

    result = run(waterfall_play(spec, rows(12)), tools=[registry], store=store)

    (event,) = open_store(store).read_events(result.run_id, kinds=["waterfall"])
    assert event.data == result.output["stats"]["three"]


def test_code_steps_sync_and_async_and_their_tool_costs(registry):
    calls: dict[str, list[list[int]]] = {"t.lookup": []}
    batch_tool(registry, "t.lookup", lambda x: {"email": f"l{x}"}, calls["t.lookup"], cost=3)

    def guess(input: Any, ctx: pl.Context) -> Any:
        return {"email": "guessed"} if input["x"] == 0 else None

    async def lookup(input: Any, ctx: pl.Context) -> Any:
        return await ctx.tool("t.lookup", {"x": input["x"]})  # a ToolResult is read too

    spec = pl.Waterfall(
        "code",
        output="email",
        steps=[pl.CodeStep("guess", guess), pl.CodeStep("lookup", lookup)],
    )
    store = fresh_store()

    result = run(waterfall_play(spec, rows(3)), tools=[registry], store=store)

    assert result.output["values"] == ["guessed", "l1", "l2"]
    assert calls["t.lookup"] == [[1, 2]]  # the code step's calls are batched across rows
    metas = cells(result, store)
    assert metas[0]["waterfall"]["winner"] == "guess"
    assert "provider" not in metas[0]
    assert metas[1]["waterfall"]["steps"]["lookup"] == {
        "status": "completed",
        "cost": 3.0,
        "provider": "t.lookup",
        "cached": False,
        "values": 1,
    }
    assert metas[1]["provider"] == "t.lookup"


def test_map_input_shapes_the_call_and_none_skips_the_step(registry):
    seen: list[dict[str, Any]] = []

    @registry.tool("t.named")
    def named(input: dict[str, Any]) -> dict[str, Any]:
        seen.append(input)
        return {"email": f"{input['name']}@acme.io"}

    spec = pl.Waterfall(
        "mapped",
        output="email",
        steps=[
            pl.ToolStep(
                "named",
                "t.named",
                map_input=lambda i: {"name": i["first"].lower()} if i["first"] else None,
            )
        ],
    )
    store = fresh_store()
    play = waterfall_play(
        spec, [{"x": 0, "first": "Ada"}, {"x": 1, "first": ""}], make_input=lambda r: dict(r)
    )

    result = run(play, tools=[registry], store=store)

    assert result.output["values"] == ["ada@acme.io", None]
    assert seen == [{"name": "ada"}]
    step = cells(result, store)[1]["waterfall"]["steps"]["named"]
    assert step["status"] == "skipped"
    assert "map_input" in step["reason"]


def test_a_code_step_s_map_input_shapes_its_input_and_rows_no_step_can_read_are_counted(
    registry,
):
    """A code step skips a row its map_input gives nothing for, as a tool step does; rows
    no step had an input for are the waterfall's ``no_input`` and their reason says so."""
    seen: list[dict[str, Any]] = []

    def guess(input: dict[str, Any]) -> str:
        seen.append(dict(input))
        return f"{input['name']}@acme.io"

    step = pl.CodeStep(
        "guess", guess, map_input=lambda i: {"name": i["first"]} if i["first"] else None
    )
    spec = pl.Waterfall("mapped", output="email", steps=[step])
    store = fresh_store()
    play = waterfall_play(
        spec, [{"x": 0, "first": "ada"}, {"x": 1, "first": ""}], make_input=lambda r: dict(r)
    )

    result = run(play, tools=[registry], store=store)

    assert result.output["values"] == ["ada@acme.io", None]
    assert seen == [{"name": "ada"}]
    skipped = cells(result, store)[1]["waterfall"]
    assert skipped["steps"]["guess"]["status"] == "skipped"
    assert "had an input for this row" in skipped["reason"]
    tally = result.stats.waterfalls["mapped"]
    assert (tally["rows"], tally["satisfied"], tally["no_input"]) == (2, 1, 1)


def test_outside_a_column_a_waterfall_runs_directly(registry):
    calls: dict[str, list[list[int]]] = {}
    spec = three_steps(registry, calls)

    @pl.play
    async def direct(ctx: pl.Context, input: Any) -> Any:
        values = [await ctx.waterfall(spec, {"x": x}) for x in (1, 3)]
        return {"values": values, "stats": ctx.waterfall_stats()["three"].to_dict()}

    result = run(direct, tools=[registry])

    assert result.status == "completed", result.error
    assert result.output["values"] == ["c1@x.io", "b3@x.io"]
    assert calls["t.a"] == [[1], [3]] and calls["t.c"] == [[1]]
    assert result.output["stats"]["satisfied"] == 2


def test_a_registered_waterfall_is_called_by_name(registry):
    calls: dict[str, list[list[int]]] = {"t.reg": []}
    batch_tool(registry, "t.reg", lambda x: {"email": f"r{x}"}, calls["t.reg"])
    spec = pl.register_waterfall(
        pl.Waterfall("test_registered", output="email", steps=[pl.ToolStep("reg", "t.reg")])
    )
    assert pl.register_waterfall(spec) is spec  # registering the same spec again is fine

    result = run(waterfall_play("test_registered", rows(2)), tools=[registry])

    assert result.output["values"] == ["r0", "r1"]
    with pytest.raises(pl.PlayDefinitionError, match="already registered"):
        pl.register_waterfall(
            pl.Waterfall("test_registered", output="other", steps=[pl.ToolStep("r", "t.reg")])
        )


def test_an_unknown_waterfall_name_is_a_definition_error(registry):
    result = run(waterfall_play("work_emial", rows(1)), tools=[registry])

    assert result.status == "failed"
    assert isinstance(result.exception, pl.PlayDefinitionError)
    assert "Did you mean 'work_email'" in str(result.error)


def test_a_step_whose_tool_the_run_lacks_stops_it_before_any_step_is_paid(registry):
    """A tool step's tool and a code step's declared tools are checked when the waterfall
    first runs: a later step's missing tool is not found after an earlier step charged."""
    calls: dict[str, list[list[int]]] = {}
    three = three_steps(registry, calls)
    for last in (
        pl.ToolStep("d", "t.missing"),
        pl.CodeStep("d", lambda i: None, tools=["t.missing"]),
    ):
        spec = pl.Waterfall("four", output="email", steps=[*three.steps, last])

        result = run(waterfall_play(spec, rows(4)), tools=[registry])

        assert result.status == "failed"
        assert "Waterfall 'four', step 'd': Unknown tool 't.missing'" in str(result.error)
        assert calls == {"t.a": [], "t.b": [], "t.c": []}


def test_errors_other_than_tool_errors_stop_the_run(registry):
    calls: dict[str, list[list[int]]] = {}
    spec = three_steps(registry, calls)

    result = run(waterfall_play(spec, rows(12)), tools=[registry], max_credits=3)

    assert result.status == "failed"
    assert isinstance(result.exception, pl.BudgetExceeded)


def test_a_code_step_bug_fails_the_cell_not_the_step(registry):
    def broken(input: Any, ctx: pl.Context) -> Any:
        raise KeyError("domain")

    spec = pl.Waterfall("broken", output="email", steps=[pl.CodeStep("broken", broken)])
    store = fresh_store()

    result = run(waterfall_play(spec, rows(1)), tools=[registry], store=store)

    # the cell fails and the play goes on to its end; with every row failed, so does the run
    assert cells(result, store)[0]["status"] == "failed"
    assert result.output is not None
    assert result.status == "failed"
    assert result.error is not None and "All 1 rows failed" in result.error


# --- a run that stops before a row's waterfall ran ------------------------------------------


def _never_awaited(caught: list[warnings.WarningMessage]) -> list[str]:
    return [
        str(w.message)
        for w in caught
        if issubclass(w.category, RuntimeWarning) and "was never awaited" in str(w.message)
    ]


def test_a_waterfall_that_is_never_awaited_leaves_no_coroutine_behind(registry):
    calls: dict[str, list[list[int]]] = {}
    spec = three_steps(registry, calls)

    @pl.play
    async def dropped(ctx: pl.Context, input: Any) -> Any:
        ctx.waterfall(spec, {"x": 1})  # made, then dropped: nothing ran, nothing to warn of
        again = ctx.waterfall(spec, {"x": 3})
        value = await again
        with pytest.raises(RuntimeError, match="already awaited"):
            await again
        return value

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run(dropped, tools=[registry])
        gc.collect()

    assert result.status == "completed", result.error
    assert result.output == "b3@x.io"
    assert calls["t.a"] == [[3]]  # the dropped one asked nothing
    assert _never_awaited(caught) == []


def test_rows_a_full_disk_stopped_leave_no_waterfall_never_awaited(registry):
    """The store fails (a full disk) while the rows are being started: the event numbers it
    hands out in blocks cannot be reserved. The run stops before the started rows' waterfalls
    ran, and they leave no coroutine that was never awaited (one warning per row, before)."""
    batch_tool(registry, "t.find", lambda x: {"email": f"{x}@x.io"}, [])
    spec = pl.Waterfall("find", output="email", steps=[pl.ToolStep("find", "t.find")])
    store = open_store(fresh_store())
    reserved = full_after_first_block(store)

    @pl.play
    async def enrich(ctx: pl.Context, input: Any) -> Any:
        return await (
            ctx.dataset("rows", rows(500), key="x")
            .with_column("domain", lambda row: f"d{row['x']}.io")
            .with_column("value", lambda row, ctx: ctx.waterfall(spec, {"x": row["x"]}))
            .run()
        )

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(pl.StoreError, match="disk is full"):
            pl.run(enrich, None, tools=[registry], store=store, clock=pl.ManualClock())
        gc.collect()

    assert len(reserved) > 1  # the store failed
    assert _never_awaited(caught) == []
