"""A waterfall order from evidence: the store's history of each step's hits and credits
suggests the cheapest order per hit, and ``order="cheapest"`` applies it once every step has
enough recorded attempts."""

from __future__ import annotations

import pytest

import playline as pl
from playline._engine.history import (
    MIN_STEP_ATTEMPTS,
    StepRecord,
    advise_order,
    expected_cost,
)
from playline.store import open_store

from .helpers import batch_tool, fresh_store, run, waterfall_play


def rows(n: int) -> list[dict[str, int]]:
    return [{"x": x} for x in range(n)]


def test_the_cheapest_order_puts_the_lowest_cost_per_hit_first() -> None:
    steps = {
        "dear": StepRecord(id="dear", attempts=100, hits=50, credits=200.0),  # 4 per hit
        "cheap": StepRecord(id="cheap", attempts=100, hits=50, credits=50.0),  # 1 per hit
        "never": StepRecord(id="never", attempts=100, hits=0, credits=0.0),
    }
    advice = advise_order(["never", "dear", "cheap"], steps, runs=3)
    assert advice.order == ("cheap", "dear", "never") and advice.changes
    # a row costs 0.5 + 0.5 * 2 = 1.5 credits for 0.75 hits; declared, 0 + 2 + 0.5 * 0.5
    assert advice.credits_per_hit == pytest.approx(1.5 / 0.75)
    assert advice.declared_credits_per_hit == pytest.approx(2.25 / 0.75)
    assert expected_cost(["cheap", "dear"], steps) == pytest.approx(2.0)


def test_ties_keep_their_declared_order_and_little_history_orders_nothing() -> None:
    same = {s: StepRecord(id=s, attempts=60, hits=30, credits=30.0) for s in ("b", "a")}
    assert advise_order(["b", "a"], same, runs=1).order == ("b", "a")
    few = {**same, "a": StepRecord(id="a", attempts=MIN_STEP_ATTEMPTS - 1, hits=1)}
    advice = advise_order(["b", "a"], few, runs=1)
    assert advice.order is None and not advice.changes
    assert (
        f"needs {MIN_STEP_ATTEMPTS} recorded attempts, some of them paid (now: a 49)" in advice.note
    )


def test_attempts_answered_from_receipts_count_for_hits_not_for_prices() -> None:
    rerun = StepRecord(id="a", attempts=100, hits=40, credits=60.0, cached=40)
    assert rerun.hit_rate == 0.4 and rerun.cost == 1.0  # 60 credits over 60 paid attempts
    free = {"a": StepRecord(id="a", attempts=100, hits=40, cached=100)}
    assert advise_order(["a"], free, runs=2).order is None  # no price known yet


def two_steps(
    registry: pl.ToolRegistry, calls: dict[str, list[list[int]]], order: str
) -> pl.Waterfall:
    """dear: every row, 2 credits a call; cheap: every other row, 1 credit a hit."""
    calls["t.dear"], calls["t.cheap"] = [], []
    batch_tool(registry, "t.dear", lambda x: {"v": x} if x % 2 == 0 else None, calls["t.dear"],
               cost=2)  # fmt: skip
    batch_tool(registry, "t.cheap", lambda x: {"v": x} if x % 4 in (1, 2) else None,
               calls["t.cheap"], cost=pl.Cost(1, charge="on_hit"))  # fmt: skip
    return pl.Waterfall(
        "pair",
        output="v",
        steps=[pl.ToolStep("dear", "t.dear"), pl.ToolStep("cheap", "t.cheap")],
        order=order,  # type: ignore[arg-type]
    )


def test_order_cheapest_applies_the_history_of_the_store(registry: pl.ToolRegistry) -> None:
    calls: dict[str, list[list[int]]] = {}
    store = fresh_store()
    spec = two_steps(registry, calls, "cheapest")
    first = run(waterfall_play(spec, rows(120)), tools=[registry], store=store)
    assert first.status == "completed", first.error
    # no history yet: as declared, and the log says why
    assert sorted(calls["t.dear"][0]) == list(range(120))
    logs = [e.preview for e in open_store(store).read_events(first.run_id, kinds=["log"])]
    assert any("runs its steps as declared: not enough history" in (m or "") for m in logs)
    stats = first.output["stats"]["pair"]
    assert stats["suggested_order"] == ["cheap", "dear"]  # this run is evidence enough
    assert "cheaper per hit than the declared order" in stats["order_note"]
    # the run's stats keep the steps' tallies: the store's history
    assert open_store(store).get_run(first.run_id).stats["waterfalls"]["pair"]["rows"] == 120

    for name in calls:
        calls[name].clear()
    second = run(waterfall_play(spec, rows(120)), tools=[registry], store=store)
    assert second.status == "completed", second.error
    steps = {s["id"]: s for s in second.output["stats"]["pair"]["steps"]}
    assert steps["cheap"]["attempts"] == 120  # cheap goes first now
    assert steps["dear"]["attempts"] == 60  # only for the rows cheap did not find
    # (receipts answer what the first run bought: only the new calls reach the tools)
    assert sorted(calls["t.cheap"][0]) == [x for x in range(120) if x % 2 == 0]
    assert calls["t.dear"] == []
    logs = [e.preview for e in open_store(store).read_events(second.run_id, kinds=["log"])]
    assert any("runs its steps cheapest first (cheap, dear)" in (m or "") for m in logs)
    assert second.output["values"] == first.output["values"]  # the same values, cheaper


def test_order_declared_never_reorders(registry: pl.ToolRegistry) -> None:
    calls: dict[str, list[list[int]]] = {}
    store = fresh_store()
    spec = two_steps(registry, calls, "declared")
    for _ in range(2):
        result = run(waterfall_play(spec, rows(120)), tools=[registry], store=store)
        assert result.status == "completed", result.error
        assert sorted(calls["t.dear"][-1]) == list(range(120))
    assert result.output["stats"]["pair"]["suggested_order"] == ["cheap", "dear"]


def test_an_unknown_order_is_refused() -> None:
    with pytest.raises(pl.PlayDefinitionError, match=r'order=.fastest. must be "declared"'):
        pl.Waterfall("w", output="v", steps=[pl.ToolStep("a", "t.a")], order="fastest")  # type: ignore[arg-type]
