"""How a tool's requests go out (``_engine/calls.py``, the lanes): in waves as large as the
tool's concurrency allows whichever pass queued them, a request giving its slot back once
answered, and the results of one wave written with the claims of the next."""

from __future__ import annotations

import asyncio
from typing import Any

import playline as pl
from playline.store import Store
from playline.tools._slots import Slots

from .helpers import call_tool, rows_of, run_dataset


def test_a_woken_waiter_gets_the_slots_it_asked_for_in_turn() -> None:
    async def scenario() -> list[int]:
        slots = Slots(4)
        assert await slots.acquire(4) == 4
        first = asyncio.ensure_future(slots.acquire(3))
        second = asyncio.ensure_future(slots.acquire(3))
        await asyncio.sleep(0)  # both wait, in this order
        slots.release(4)
        return [await first, await second]

    assert asyncio.run(scenario()) == [3, 1]


def test_calls_from_many_rows_go_out_in_waves_of_half_the_concurrency(registry):
    """Not one wave per call: passes that queue calls while others are out join the lane."""

    @registry.tool("t.one", rate=pl.Rate(concurrency=8))
    def one(input: dict[str, Any]) -> dict[str, Any]:
        return {"x": input["x"]}

    waves: list[dict[str, Any]] = []
    result = run_dataset(
        rows_of(200),
        {"out": call_tool("t.one")},
        tools=[registry],
        listeners=[lambda e: waves.append(e.data) if e.kind == "batch" else None],
    )

    assert result.status == "completed"
    assert sum(w["size"] for w in waves) == 200
    assert [w.get("requests", 1) for w in waves] == [4] * 50


def test_a_slow_request_holds_back_neither_the_others_slots_nor_their_results(registry):
    """One input hangs until every other row has finished: a row goes on only with a result
    the store holds, so the other 19 were sent, answered and recorded meanwhile."""
    others_done = asyncio.Event()
    finished: set[str] = set()

    @registry.tool("t.slow", rate=pl.Rate(concurrency=4))
    async def slow(input: dict[str, Any]) -> dict[str, Any]:
        if input["x"] == 0:
            await asyncio.wait_for(others_done.wait(), 60)
        return {"x": input["x"]}

    def watch(event: pl.Event) -> None:
        if event.kind == "rows":
            finished.update(row["key"] for row in event.data["rows"])
        if len(finished) == 19:
            others_done.set()

    result = run_dataset(
        rows_of(20), {"out": call_tool("t.slow")}, tools=[registry], listeners=[watch]
    )

    assert result.status == "completed"
    assert others_done.is_set() and len(finished) == 20


def test_the_results_of_a_wave_are_written_with_the_claims_of_the_next(registry, store: Store):
    @registry.tool("t.one", rate=pl.Rate(concurrency=8))
    def one(input: dict[str, Any]) -> dict[str, Any]:
        return {"x": input["x"]}

    writes: list[tuple[int, int]] = []  # (results, claims) of each group commit
    write = store.write_receipts

    def spy(**parts: Any) -> Any:
        writes.append((len(parts["completions"]) + len(parts["failures"]), len(parts["claims"])))
        return write(**parts)

    store.write_receipts = spy  # type: ignore[method-assign]
    result = run_dataset(rows_of(100), {"out": call_tool("t.one")}, tools=[registry], store=store)

    assert result.status == "completed"
    assert sum(results for results, _ in writes) == sum(claims for _, claims in writes) == 100
    assert any(results and claims for results, claims in writes)
    assert len(writes) < 2 * 100 / 8  # fewer than a claim and a record per wave
