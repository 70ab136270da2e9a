"""A call settles with what the store holds (SEMANTICS 7, 11): its result reaches the row only
once it is recorded, and a result another owner recorded first wins over ours."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import playline as pl
from playline._engine.receipts import auth_scope, receipt_key
from playline.errors import StoreError
from playline.store import Claim, Completion, ReceiptStatus, Store

from .helpers import dataset_play, rows_of, run_play

OTHER = "another-host/4242/worker"  # a worker on another machine: only its lease counts


def test_a_result_the_store_failed_to_record_never_reaches_the_row(registry, store):
    @registry.tool("t.answer")
    def answer(input: dict[str, Any]) -> dict[str, Any]:
        return {"v": input["x"]}

    write = store.write_receipts

    def write_receipts(**kwargs: Any) -> Any:  # claims go through; results do not
        if kwargs.get("completions"):
            raise StoreError("disk full: the results were not recorded")
        return write(**kwargs)

    store.write_receipts = write_receipts  # type: ignore[method-assign]
    seen: list[Any] = []

    async def resolve(row: dict[str, Any], ctx: pl.Context) -> Any:
        result = await ctx.tool("t.answer", {"x": row["x"]})
        seen.append(result.data)  # the row went on with the result
        return result.data

    result = run_play(dataset_play(rows_of(3), {"out": resolve}), tools=[registry], store=store)

    assert seen == []  # answered, but never recorded: no row saw it
    assert result.status == "failed"
    assert "disk full" in (result.error or "")
    stored = [row.values.get("out") for row in store.iter_rows(result.run_id, "rows")]
    assert all(value is None for value in stored)


def _key(tool: str, input: dict[str, Any]) -> str:
    return receipt_key(
        org="local", tool=tool, input=input, auth=auth_scope("local", "local", tool), version="1"
    )


def test_a_result_another_owner_recorded_first_wins_over_ours(
    registry: pl.ToolRegistry, store: Store, clock: pl.ManualClock
) -> None:
    key = _key("t.late", {"x": 1})
    theirs = (
        b'{"cost":0.0,"data":{"v":"theirs"},"source":"live","status":"completed","tool":"t.late"}'
    )

    @registry.tool("t.late")
    def late(input: dict[str, Any]) -> dict[str, Any]:
        # While we worked, our lease ran out: another worker took the call over (a repeat
        # under its key) and recorded its answer before ours.
        later = clock.now() + 3600
        store.claim_receipts(
            [Claim(key=key, tool="t.late", run_id="other-run", resend=True)],
            owner=OTHER,
            lease_until=later + 60,
            now=later,
        )
        store.complete_receipts([Completion(key, theirs)], owner=OTHER, now=later)
        return {"v": "ours"}

    @pl.play(name="late-play")
    async def play(ctx: pl.Context, input: Any) -> Any:
        return (await ctx.tool("t.late", {"x": 1})).data

    result = pl.run(play, store=store, clock=clock, tools=[registry])

    assert (result.status, result.output) == ("completed", {"v": "theirs"})
    receipt = store.find_receipts([key])[key]
    assert (receipt.status, receipt.owner, receipt.result) == (
        ReceiptStatus.COMPLETED,
        OTHER,
        theirs,
    )


@pytest.mark.timeout(30)  # the bugs this guards against are hangs: a call never settles
@pytest.mark.parametrize("again", ["after", "following"])
def test_a_call_made_again_when_its_first_waiter_gave_up_gets_its_result(registry, again):
    """A play cancels its wait for a call (``task.cancel()``, a sibling's failure in a task
    group). The same call made afterwards is not left following the cancelled one; one made
    while it was in flight (a follower) still gets its answer."""
    sent: list[Any] = []
    events: dict[str, asyncio.Event] = {}  # made on the run's loop

    @registry.tool("t.block")
    async def block(input: dict[str, Any]) -> dict[str, Any]:
        sent.append(input)
        events["entered"].set()
        await events["release"].wait()
        return {"x": input["x"]}

    @pl.play(name="cancel-play")
    async def play(ctx: pl.Context, input: Any) -> Any:
        entered = events["entered"] = asyncio.Event()
        release = events["release"] = asyncio.Event()
        first = asyncio.ensure_future(ctx.tool("t.block", {"x": 1}))
        following = again == "following"
        second = asyncio.ensure_future(ctx.tool("t.block", {"x": 1})) if following else None
        await entered.wait()
        first.cancel()
        release.set()
        if again == "following":
            assert second is not None
            return (await second).data
        return (await ctx.tool("t.block", {"x": 1})).data

    result = run_play(play, tools=[registry])

    assert (result.status, result.output) == ("completed", {"x": 1})
    if again == "following":
        assert sent == [{"x": 1}]  # never sent: it followed the first
    else:
        assert 1 <= len(sent) <= 2  # sent again, or answered by the first's receipt
