"""SEMANTICS 32 and 26: child plays share the store and receipts, under governance limits."""

from __future__ import annotations

from typing import Any

import playline as pl

from boundhelp import unique


def test_a_child_play_by_function_and_by_name_shares_receipts(store, clock):
    calls: list[str] = []
    registry = pl.ToolRegistry()

    @registry.tool("t.lookup")
    def lookup(input: dict[str, Any]) -> dict[str, Any]:
        calls.append(input["q"])
        return {"a": input["q"].upper()}

    child_name = unique("child")

    @pl.play(name=child_name)
    async def child(ctx: pl.Context, input: Any) -> Any:
        return (await ctx.tool("t.lookup", {"q": input})).data["a"]

    @pl.play(name=unique("parent"))
    async def parent(ctx: pl.Context, input: Any) -> Any:
        by_function = await ctx.run_play("one", child, "x")
        by_name = await ctx.run_play("two", child_name, "x")
        return [by_function, by_name]

    first = pl.run(parent, store=store, clock=clock, tools=[registry])
    second = pl.run(parent, store=store, clock=clock, tools=[registry])
    assert first.output == second.output == ["X", "X"]
    assert calls == ["x"]  # the second child call and the second run used the receipt
    children = store.child_runs(first.run_id)  # oldest first (by id, started in one instant)
    assert len(children) == 2
    trace = store.read_events(first.run_id, kinds=["child"])
    assert [(e.status, e.data["run_id"]) for e in trace] == [
        (status, child.run_id) for child in children for status in ("running", "completed")
    ]


def test_a_child_returning_a_dataset_gives_the_parent_a_dataset(run, worker, store):
    @pl.play(name=unique("rows-child"))
    async def child(ctx: pl.Context, input: Any) -> Any:
        return await ctx.dataset("items", input).with_column("n2", lambda r: r["value"] * 2).run()

    @pl.play(name=unique("rows-parent"))
    async def parent(ctx: pl.Context, input: Any) -> Any:
        items = await ctx.run_play("items", child, [1, 2, 3])
        await ctx.wait_for_event(f"{ctx.run_id}:go")
        return [row["n2"] for row in items]

    first = run(parent)
    pl.send_event(f"{first.run_id}:go", store=store)
    (resumed,) = worker()
    assert resumed.output == [2, 4, 6]


def test_a_failed_child_resumed_by_its_parent_keeps_its_own_input(run, store):
    attempts: list[int] = []

    @pl.play(name=unique("flaky-child"))
    async def child(ctx: pl.Context, input: Any) -> Any:
        if len(attempts) == 1:
            raise RuntimeError("not yet")
        return input

    @pl.play(name=unique("changing-parent"))
    async def parent(ctx: pl.Context, input: Any) -> Any:
        attempts.append(1)
        return await ctx.run_play("child", child, {"attempt": len(attempts)})

    first = run(parent)
    assert first.status == "failed" and "not yet" in first.error
    again = pl.run(parent, run_id=first.run_id, store=store, tools=[])
    assert again.status == "completed", again.error
    assert again.output == {"attempt": 1}  # the child's input as it started


def test_a_suspended_child_suspends_its_parent_until_both_resume(run, worker, store):
    @pl.play(name=unique("waiting-child"))
    async def child(ctx: pl.Context, input: Any) -> Any:
        return await ctx.wait_for_event("child-go")

    @pl.play(name=unique("waiting-parent"))
    async def parent(ctx: pl.Context, input: Any) -> Any:
        return {"child": await ctx.run_play("c", child, None)}

    first = run(parent)
    assert (first.status, first.waiting["events"]) == ("suspended", ["child-go"])
    pl.send_event("child-go", "ok", store=store)
    results = worker()
    assert [r.run_id for r in results] == [first.run_id]  # children resume through parents
    assert results[0].output == {"child": "ok"}


def test_recursion_is_refused(run):
    names = {"a": unique("rec-a"), "b": unique("rec-b")}

    @pl.play(name=names["a"])
    async def a(ctx: pl.Context, input: Any) -> Any:
        return await ctx.run_play("b", names["b"], None)

    @pl.play(name=names["b"])
    async def b(ctx: pl.Context, input: Any) -> Any:
        return await ctx.run_play("a", names["a"], None)

    result = run(a)
    assert isinstance(result.exception, pl.GovernanceError)
    assert f"Recursive play graph detected: {names['a']} -> {names['b']} -> {names['a']}" in (
        result.error
    )


def test_a_depth_of_7_is_refused(run):
    names = [unique(f"level{i}") for i in range(8)]
    plays = []
    for i, name in enumerate(names):

        async def level(ctx: pl.Context, input: Any, i: int = i) -> Any:
            if i + 1 == len(names):
                return i
            return await ctx.run_play("next", names[i + 1], None)

        plays.append(pl.play(name=name)(level))

    result = run(plays[0])
    assert isinstance(result.exception, pl.GovernanceError)
    assert result.exception.counter == "depth"
    assert "Play-call depth exceeded (7/6)" in result.error


def test_a_depth_of_6_is_allowed(run):
    names = [unique(f"ok{i}") for i in range(7)]
    plays = []
    for i, name in enumerate(names):

        async def level(ctx: pl.Context, input: Any, i: int = i) -> Any:
            if i + 1 == len(names):
                return i
            return await ctx.run_play("next", names[i + 1], None)

        plays.append(pl.play(name=name)(level))

    assert run(plays[0]).output == 6


def test_the_children_per_parent_limit(run):
    @pl.play(name=unique("leaf"))
    async def leaf(ctx: pl.Context, input: Any) -> Any:
        return input

    @pl.play(name=unique("fan-out"), limits={"children_per_parent": 3})
    async def fan_out(ctx: pl.Context, input: Any) -> Any:
        return [await ctx.run_play(f"c{i}", leaf, i) for i in range(4)]

    result = run(fan_out)
    assert isinstance(result.exception, pl.GovernanceError)
    assert result.exception.counter == "children_per_parent"


def test_a_child_replayed_by_each_attempt_counts_once_against_the_limits(run, clock):
    """Every attempt runs the parent from its start: its children, done, are replayed from
    their boundaries. They count when they first run, not again per attempt (a parent that
    slept after its one child failed at its 17th wake with "Child plays per parent")."""

    @pl.play(name=unique("kid"))
    async def kid(ctx: pl.Context, input: Any) -> Any:
        return {"ok": True}

    @pl.play(name=unique("waking-parent"), limits={"children_per_parent": 2, "child_plays": 2})
    async def parent(ctx: pl.Context, input: Any) -> Any:
        got = await ctx.run_play("k", kid, {})
        for _ in range(5):
            await ctx.sleep(60)
        return got

    result = run(parent)
    for _ in range(5):
        assert result.status == "suspended", result.error
        clock.advance(60)
        result = run(parent, run_id=result.run_id)

    assert result.status == "completed", result.error
    assert result.output == {"ok": True}


def test_a_parent_budget_stops_its_children_spending(store, clock):
    calls: list[int] = []
    registry = pl.ToolRegistry()

    @registry.tool("t.priced", cost=pl.Cost(1))
    def priced(input: dict[str, Any]) -> dict[str, Any]:
        calls.append(input["n"])
        return {"n": input["n"]}

    @pl.play(name=unique("spender"))
    async def spender(ctx: pl.Context, input: Any) -> Any:
        return [(await ctx.tool("t.priced", {"n": n})).data for n in range(10)]

    @pl.play(name=unique("frugal"), max_credits=4)
    async def frugal(ctx: pl.Context, input: Any) -> Any:
        return await ctx.run_play("spend", spender, None)

    result = pl.run(frugal, store=store, clock=clock, tools=[registry])

    assert isinstance(result.exception, pl.BudgetExceeded)
    assert "of the parent run" in result.error
    assert calls == [0, 1, 2, 3]
    child = next(r for r in store.list_runs() if r.parent_run_id == result.run_id)
    assert sum(e.credits for e in store.read_ledger(child.run_id)) == 4

    # resumed with a bigger budget, the parent pays only for what is left
    again = pl.run(
        frugal, store=store, clock=clock, tools=[registry], run_id=result.run_id, max_credits=10
    )
    assert again.status == "completed", again.error
    assert calls == list(range(10))
