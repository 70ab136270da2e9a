"""SEMANTICS 27: with max_credits a run stops before overspending, keeping what it paid for."""

from __future__ import annotations

from typing import Any

import pytest

import playline as pl
from playline.store import ReceiptStatus, Store, open_store

ROWS = 50
calls: list[int] = []


@pl.tool("budget.single", cost=pl.Cost(1))
def single(input: dict[str, Any]) -> dict[str, Any]:
    calls.append(input["n"])
    return {"n": input["n"]}


@pl.tool("budget.bulk", cost=pl.Cost(1), batch=pl.Batch(max_size=10))
def bulk(inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    calls.extend(i["n"] for i in inputs)
    return [{"n": i["n"]} for i in inputs]


async def _paid_rows(ctx: pl.Context, input: dict[str, Any]) -> pl.Dataset:
    return await (
        ctx.dataset("rows", [{"n": i} for i in range(ROWS)], key="n")
        .with_column("paid", lambda row, ctx: ctx.tool(input["tool"], {"n": row["n"]}))
        .run()
    )


capped = pl.play(name="budget-capped", max_credits=20)(_paid_rows)
uncapped = pl.play(name="budget-uncapped")(_paid_rows)


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    calls.clear()


def _assert_stopped_within(result: pl.RunResult, store: Store, limit: float) -> None:
    assert result.status == "failed"
    assert isinstance(result.exception, pl.BudgetExceeded)
    assert result.error is not None and "budget" in result.error.lower()
    assert 0 < result.stats.credits <= limit
    ledger = store.read_ledger(result.run_id)
    assert sum(e.credits for e in ledger) == result.stats.credits
    assert len(ledger) == len(calls) == result.stats.tool_calls_live  # one entry per paid call
    # What was paid for is kept: each paid call's receipt is completed.
    receipts = store.find_receipts([e.receipt_key for e in ledger])
    assert len(receipts) == len(ledger)
    assert {r.status for r in receipts.values()} == {ReceiptStatus.COMPLETED}


def test_play_max_credits_stops_the_run(store_url: str) -> None:
    url = store_url
    result = pl.run(capped, {"tool": "budget.single"}, store=url, tools=[single])
    _assert_stopped_within(result, open_store(url), 20)
    assert len(calls) == 20


def test_calls_the_budget_refused_are_counted_as_not_sent_not_failed(store_url: str) -> None:
    result = pl.run(capped, {"tool": "budget.single"}, store=store_url, tools=[single])
    stats = result.stats
    assert (stats.tool_calls_live, stats.tool_calls_failed) == (20, 0)
    assert stats.tool_calls_not_sent == ROWS - 20  # every row asked at once; 20 were sent
    assert stats.errors == {}  # failed calls by cause: none failed
    assert stats.tools["budget.single"].get("failed", 0) == 0
    assert stats.tools["budget.single"]["not_sent"] == ROWS - 20


def test_run_max_credits_overrides_the_play_for_a_batch_tool(store_url: str) -> None:
    url = store_url
    result = pl.run(capped, {"tool": "budget.bulk"}, store=url, tools=[bulk], max_credits=25)
    _assert_stopped_within(result, open_store(url), 25)
    # More than the play's own 20 was spent: the run's budget wins. Whether a batch that
    # does not fit is trimmed or refused whole, nothing past 25 is sent.
    assert 20 <= len(calls) == result.stats.credits <= 25
    assert result.exception.limit == 25  # type: ignore[union-attr]


def test_budget_on_run_without_one_on_the_play(store_url: str) -> None:
    url = store_url
    result = pl.run(uncapped, {"tool": "budget.single"}, store=url, tools=[single], max_credits=7)
    _assert_stopped_within(result, open_store(url), 7)


def test_new_run_with_a_higher_budget_pays_only_for_the_rest(store_url: str) -> None:
    url = store_url
    first = pl.run(capped, {"tool": "budget.single"}, store=url, tools=[single])
    assert first.status == "failed"
    second = pl.run(capped, {"tool": "budget.single"}, store=url, tools=[single], max_credits=30)
    assert second.status == "completed", second.error
    assert second.stats.tool_calls_cached == 20 and second.stats.tool_calls_live == 30
    assert second.stats.credits == 30
    assert sorted(calls) == list(range(ROWS))  # 50 distinct inputs, each paid once
    store = open_store(url)
    assert sum(e.credits for e in store.read_ledger(second.run_id)) == 30
    values = [r.values["paid"] for r in store.iter_rows(second.run_id, "rows")]
    assert values == [{"n": n} for n in range(ROWS)]


def test_resume_with_a_higher_budget_pays_only_for_the_rest(store_url: str) -> None:
    url = store_url
    first = pl.run(capped, {"tool": "budget.single"}, store=url, tools=[single])
    assert first.status == "failed"
    store = open_store(url)
    unpaid = [r for r in store.iter_rows(first.run_id, "rows") if "paid" not in r.values]
    assert all(r.status != "completed" for r in unpaid), "unpaid rows were saved as completed"

    # The budget counts the whole run: 20 already spent + 30 more fits in 50 exactly.
    again = pl.run(capped, store=url, run_id=first.run_id, tools=[single], max_credits=50)
    assert again.status == "completed", again.error
    assert again.stats.credits == 50
    assert sorted(calls) == list(range(ROWS))
    assert sum(e.credits for e in store.read_ledger(first.run_id)) == 50
    values = [r.values.get("paid") for r in store.iter_rows(first.run_id, "rows")]
    assert values == [{"n": n} for n in range(ROWS)]


@pl.tool("budget.tenth", cost=pl.Cost(0.1), batch=pl.Batch(max_size=3))
def tenth(inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    calls.extend(i["n"] for i in inputs)
    return [{"n": i["n"]} for i in inputs]


def test_a_budget_of_tenths_is_counted_exactly(store_url: str) -> None:
    """Requests of 0.3 credits reserved and given back leave nothing in flight: the budget's
    message says ``0 in flight``, not the float noise ``8.32667e-17 in flight``, and a budget
    of 1 holds exactly ten calls of 0.1."""
    url = store_url
    result = pl.run(uncapped, {"tool": "budget.tenth"}, store=url, tools=[tenth], max_credits=1)
    assert result.status == "failed"
    assert isinstance(result.exception, pl.BudgetExceeded)
    assert len(calls) == 10 and result.stats.credits == 1
    assert result.exception.spent == 1
    assert result.error is not None
    assert "Budget of 1 credits would be exceeded: 1 spent, 0 in flight, and " in result.error
    assert "e-" not in result.error, result.error  # no 8.32667e-17 anywhere
