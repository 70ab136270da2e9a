"""Batch(max_wait=...): a partial batch waits up to that long for more calls, trading
latency for fewer requests. Time is a VirtualClock: rows reach the bulk tool one virtual
second apart (after a single tool paced at 1 call a second), and waits overlap as they would
on a wall clock."""

from __future__ import annotations

from typing import Any

import pytest

import playline as pl

from virtual_clock import VirtualClock


def _run(max_wait: float | None) -> tuple[list[int], float]:
    registry = pl.ToolRegistry()
    sizes: list[int] = []

    @registry.tool("t.slow", rate=pl.Rate(per_second=1, burst=1))
    def slow(input: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True}

    @registry.tool("t.bulk", batch=pl.Batch(max_size=100, max_wait=max_wait))
    def bulk(inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        sizes.append(len(inputs))
        return [{"v": i["x"]} for i in inputs]

    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        return await (
            ctx.dataset("d", [{"x": i} for i in range(4)], key="x")
            .with_column("a", lambda row, ctx: ctx.tool("t.slow", {"x": row["x"]}))
            .with_column("b", lambda row, ctx: ctx.tool("t.bulk", {"x": row["x"]}))
            .run()
        )

    clock = VirtualClock()
    result = pl.run(pl.play(name="w")(play), store="memory://", tools=[registry], clock=clock)
    assert result.status == "completed", result.error
    return sizes, clock.elapsed


def test_a_partial_batch_waits_up_to_max_wait_for_more_calls() -> None:
    without, _ = _run(None)
    gathered, elapsed = _run(10)

    assert sum(without) == sum(gathered) == 4
    assert len(without) > 1  # each row's call went as it came
    assert gathered == [4]  # held up to 10 s: the four rows' calls in one request
    assert elapsed == pytest.approx(10, abs=1.5)  # the wait is what it cost


def test_max_wait_must_be_a_number_of_seconds() -> None:
    with pytest.raises(pl.PlayDefinitionError, match="max_wait"):
        pl.Batch(max_size=10, max_wait=-1)
