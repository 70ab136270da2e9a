"""SEMANTICS 11: a receipt another live worker holds is waited for; an expired one is taken."""

from __future__ import annotations

from typing import Any

import playline as pl
from playline._engine.receipts import auth_scope, receipt_key
from playline.store import Claim, ClaimOutcome, Completion, ReceiptStatus, Store, open_store

OTHER = "another-host/4242/worker"  # a worker on another machine: only its lease counts


def _setup(url: str) -> tuple[Store, pl.ManualClock, Any, list[int], str]:
    store, clock, calls = open_store(url), pl.ManualClock(), []
    registry = pl.ToolRegistry()

    @registry.tool("t.slow")
    def slow(input: dict[str, Any]) -> dict[str, Any]:
        calls.append(input["n"])
        return {"n": input["n"]}

    key = receipt_key(
        org="local",
        tool="t.slow",
        input={"n": 1},
        auth=auth_scope("local", "local", "t.slow"),
        version="1",
    )
    return store, clock, registry, calls, key


@pl.play(name="lease-play")
async def lease_play(ctx: pl.Context, input: Any) -> Any:
    return (await ctx.tool("t.slow", {"n": 1})).data


def test_a_receipt_held_by_a_live_worker_is_waited_for_then_a_clear_error(store_url: str):
    store, clock, registry, calls, key = _setup(store_url)
    store.claim_receipts(
        [Claim(key=key, tool="t.slow", run_id="other-run")],
        owner=OTHER,
        lease_until=clock.now() + 3600,
        now=clock.now(),
    )

    result = pl.run(lease_play, store=store, clock=clock, tools=[registry])

    assert result.status == "failed"
    assert isinstance(result.exception, pl.ReceiptWaitTimeout)
    assert "another worker" in result.error
    assert calls == []  # never executed while another worker held it
    held = store.find_receipts([key])[key]
    assert (held.status, held.owner) == (ReceiptStatus.RUNNING, OTHER)  # nothing written


def test_a_receipt_whose_lease_expires_while_waiting_is_taken_over(store_url: str):
    store, clock, registry, calls, key = _setup(store_url)
    store.claim_receipts(
        [Claim(key=key, tool="t.slow", run_id="other-run")],
        owner=OTHER,
        lease_until=clock.now() + 30,
        now=clock.now(),
    )

    result = pl.run(lease_play, store=store, clock=clock, tools=[registry])

    assert (result.status, result.output) == ("completed", {"n": 1})
    assert calls == [1]
    assert store.find_receipts([key])[key].status is ReceiptStatus.COMPLETED


def test_a_call_in_flight_is_held_against_another_worker(store_url: str):
    """Claimed under a lease that runs while the call does: another worker's claim of the
    same call is told to wait for it, not that it may be in doubt."""
    store, clock, registry, _, key = _setup(store_url)
    outcomes = []

    @registry.tool("t.slow")  # in place of _setup's: another worker claims it meanwhile
    def contested(input: dict[str, Any]) -> dict[str, Any]:
        claim = Claim(key=key, tool="t.slow", run_id="other-run")
        [result] = store.claim_receipts(
            [claim], owner=OTHER, lease_until=clock.now() + 60, now=clock.now()
        )
        outcomes.append(result.outcome)
        return {"n": input["n"]}

    result = pl.run(lease_play, store=store, clock=clock, tools=[registry])

    assert (result.status, result.output) == ("completed", {"n": 1})
    assert outcomes == [ClaimOutcome.HELD]


def test_a_receipt_taken_over_is_claimed_before_it_is_sent(store_url: str):
    """While the call runs, its receipt is this worker's, no longer the expired holder's:
    the take-over claims it before it sends (a third worker waits for it)."""
    store, clock, registry, _, key = _setup(store_url)
    store.claim_receipts(
        [Claim(key=key, tool="t.slow", run_id="other-run")],
        owner=OTHER,
        lease_until=clock.now() + 30,
        now=clock.now(),
    )
    holders = []

    @registry.tool("t.slow")  # in place of _setup's: it also says who holds the receipt
    def watched(input: dict[str, Any]) -> dict[str, Any]:
        holders.append(store.find_receipts([key])[key].owner)
        return {"n": input["n"]}

    result = pl.run(lease_play, store=store, clock=clock, tools=[registry])

    assert (result.status, result.output) == ("completed", {"n": 1})
    assert len(holders) == 1 and holders[0] not in (OTHER, None)


def test_a_receipt_completed_by_the_other_worker_meanwhile_is_used(store_url: str):
    store, clock, registry, calls, key = _setup(store_url)
    store.claim_receipts(
        [Claim(key=key, tool="t.slow", run_id="other-run")],
        owner=OTHER,
        lease_until=clock.now() + 3600,
        now=clock.now(),
    )
    stored = b'{"cost":0.0,"data":{"n":1},"source":"live","status":"completed","tool":"t.slow"}'
    real_sleep = clock.sleep

    async def sleep_then_finish(seconds: float) -> None:  # the other worker finishes
        await real_sleep(seconds)
        if store.find_receipts([key])[key].status is ReceiptStatus.RUNNING:
            store.complete_receipts([Completion(key, stored)], owner=OTHER, now=clock.now())

    clock.sleep = sleep_then_finish  # type: ignore[method-assign]
    result = pl.run(lease_play, store=store, clock=clock, tools=[registry])

    assert (result.status, result.output) == ("completed", {"n": 1})
    assert calls == []
    assert result.stats.tool_calls_cached == 1
