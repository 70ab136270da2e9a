"""SEMANTICS 27: every live call writes one ledger entry with its tool's cost rule."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import playline as pl
from playline.store import open_store

ROWS = 40


def _found(n: int) -> bool:
    return n % 3 != 0


calls: Counter[str] = Counter()


@pl.tool("ledger.on_hit", cost=pl.Cost(2, charge="on_hit"), batch=pl.Batch(max_size=8))
def on_hit(inputs: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    calls["ledger.on_hit"] += len(inputs)
    return [{"n": i["n"]} if _found(i["n"]) else None for i in inputs]


@pl.tool("ledger.per_call", cost=pl.Cost(0.5))
def per_call(input: dict[str, Any]) -> dict[str, Any] | None:
    calls["ledger.per_call"] += 1
    return {"n": input["n"]} if _found(input["n"]) else None


@pl.tool("ledger.bad", cost=pl.Cost(1))
def bad(input: dict[str, Any]) -> Any:
    calls["ledger.bad"] += 1
    return {"n": input["n"]} if input["n"] else {"n", "a set"}


@pl.play(name="ledger-play")
async def ledger_play(ctx: pl.Context, input: Any) -> pl.Dataset:
    return await (
        ctx.dataset("rows", [{"n": i} for i in range(ROWS)], key="n")
        .with_column("hit", lambda row, ctx: ctx.tool("ledger.on_hit", {"n": row["n"]}))
        .with_column("call", lambda row, ctx: ctx.tool("ledger.per_call", {"n": row["n"]}))
        .run()
    )


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    calls.clear()


HITS = sum(_found(n) for n in range(ROWS))
EXPECTED_CREDITS = 2 * HITS + 0.5 * ROWS


def test_each_live_call_writes_one_entry_with_its_cost_rule(store_url: str) -> None:
    url = store_url
    result = pl.run(ledger_play, store=url, tools=[on_hit, per_call])
    assert result.status == "completed", result.error
    assert result.stats.tool_calls_live == 2 * ROWS == sum(calls.values())
    ledger = open_store(url).read_ledger(result.run_id)

    assert len(ledger) == result.stats.tool_calls_live
    assert Counter(e.tool for e in ledger) == calls
    assert len({(e.tool, e.receipt_key) for e in ledger}) == len(ledger)  # one per call
    for entry in ledger:
        n = int(entry.row_key)  # type: ignore[arg-type]
        assert entry.run_id == result.run_id and entry.dataset == "rows"
        assert entry.found == _found(n)
        if entry.tool == "ledger.on_hit":  # charged only for a result found
            assert entry.credits == (2.0 if _found(n) else 0.0)
        else:  # charged for every call
            assert entry.credits == 0.5
    assert sum(e.credits for e in ledger) == result.stats.credits == EXPECTED_CREDITS
    stored = open_store(url).get_run(result.run_id)
    assert stored is not None and stored.stats["credits"] == EXPECTED_CREDITS


def test_cached_calls_write_no_entry(store_url: str) -> None:
    url = store_url
    first = pl.run(ledger_play, store=url, tools=[on_hit, per_call])
    assert first.status == "completed", first.error
    calls.clear()
    second = pl.run(ledger_play, store=url, tools=[on_hit, per_call])
    assert second.status == "completed", second.error
    assert sum(calls.values()) == 0
    assert second.stats.tool_calls_cached == 2 * ROWS
    assert open_store(url).read_ledger(second.run_id) == []
    assert second.stats.credits == 0
    # The first run's entries are unchanged by the second.
    assert sum(e.credits for e in open_store(url).read_ledger(first.run_id)) == EXPECTED_CREDITS


def test_cell_cost_matches_the_ledger(store_url: str) -> None:
    url = store_url
    result = pl.run(ledger_play, store=url, tools=[on_hit, per_call])
    store = open_store(url)
    charged: Counter[tuple[str, str]] = Counter()
    for entry in store.read_ledger(result.run_id):
        charged[(entry.row_key or "", entry.tool)] += entry.credits
    for row in store.iter_rows(result.run_id, "rows"):
        assert row.cells["hit"].get("cost", 0) == charged[(row.key, "ledger.on_hit")]
        assert row.cells["call"].get("cost", 0) == charged[(row.key, "ledger.per_call")]


def test_a_live_call_with_an_unstorable_result_is_still_in_the_ledger(store_url: str) -> None:
    @pl.play(name="ledger-bad")
    async def ledger_bad(ctx: pl.Context, input: Any) -> pl.Dataset:
        return await (
            ctx.dataset("rows", [{"n": i} for i in range(5)], key="n")
            .with_column("bad", lambda row, ctx: ctx.tool("ledger.bad", {"n": row["n"]}))
            .run()
        )

    url = store_url
    result = pl.run(ledger_bad, store=url, tools=[bad])
    assert result.status == "completed_with_errors"
    assert calls["ledger.bad"] == 5
    ledger = open_store(url).read_ledger(result.run_id)
    assert len(ledger) == 5
    assert result.stats.credits == 5


def test_a_failed_call_retried_with_its_key_is_counted_once_as_in_the_ledger(
    store_url: str,
) -> None:
    """A result that cannot be stored fails its cell but was paid; retrying the failed cells
    sends the call again with the same idempotency key (a provider answers it again for
    free), so the run's credits stay what its ledger holds."""

    @pl.tool(
        "ledger.sets",
        batch=pl.Batch(max_size=10),
        cost=pl.Cost(1, charge="on_hit"),
        in_doubt="resend",  # its provider answers a repeat of a key for free
    )
    def sets(inputs: list[dict[str, Any]]) -> list[Any]:
        return [{"v": {1, 2}} if i["n"] % 3 == 0 else {"v": i["n"]} for i in inputs]

    @pl.play(name="ledger-retry")
    async def retry(ctx: pl.Context, input: Any) -> pl.Dataset:
        return await (
            ctx.dataset("rows", [{"n": i} for i in range(6)], key="n")
            .with_column("r", lambda row, ctx: ctx.tool("ledger.sets", {"n": row["n"]}))
            .run()
        )

    first = pl.run(retry, store=store_url, tools=[sets])
    again = pl.run(retry, store=store_url, tools=[sets], run_id=first.run_id, retry_failed=True)

    store = open_store(store_url)
    recorded = sum(e.credits for e in store.read_ledger(first.run_id))
    assert first.stats.credits == recorded == 6
    assert again.stats.credits == recorded
    run = store.get_run(first.run_id)
    assert run is not None and run.stats["credits"] == recorded


def test_an_unusable_answer_retried_at_a_provider_that_ignores_keys_is_a_new_purchase(
    store_url: str,
) -> None:
    """A provider that does not recognise idempotency keys (``in_doubt="fail"``) charges a
    retry again: the retry goes out as a new generation and the ledger (and the budget)
    count it."""
    sent: list[int] = []

    @pl.tool("ledger.sets_nokeys", batch=pl.Batch(max_size=10), cost=pl.Cost(1), in_doubt="fail")
    def sets(inputs: list[dict[str, Any]]) -> list[Any]:
        sent.extend(i["n"] for i in inputs)
        return [{"v": {1, 2}} if i["n"] % 3 == 0 else {"v": i["n"]} for i in inputs]

    @pl.play(name="ledger-rebuy")
    async def rebuy(ctx: pl.Context, input: Any) -> pl.Dataset:
        return await (
            ctx.dataset("rows", [{"n": i} for i in range(6)], key="n")
            .with_column("r", lambda row, ctx: ctx.tool("ledger.sets_nokeys", {"n": row["n"]}))
            .run()
        )

    first = pl.run(rebuy, store=store_url, tools=[sets])
    again = pl.run(rebuy, store=store_url, tools=[sets], run_id=first.run_id, retry_failed=True)

    assert sorted(sent) == [0, 0, 1, 2, 3, 3, 4, 5]  # the two unusable answers bought again
    ledger = open_store(store_url).read_ledger(first.run_id)
    assert sorted(e.generation for e in ledger) == [1] * 6 + [2] * 2
    assert first.stats.credits == 6
    assert again.stats.credits == sum(e.credits for e in ledger) == 8
