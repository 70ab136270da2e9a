"""Dollars as a budget and a plan, for LLM calls against the simulator's OpenAI double
(the real adapter over loopback HTTP, a SQLite store): ``max_usd`` refuses a call whose
worst case could pass it, before it is sent, and a resume with a higher budget goes on with
nothing paid twice; a budget in credits never refuses a call paid in dollars; ``pl.plan``
counts an LLM column's tokens and dollars, at most each call's worst case and, once the store
has history, what its calls cost on average."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import playline as pl
from playline._money import dollars_text
from playline.llm import OPENAI_PRICES, PriceTable, worst_usd
from playline.sim import Simulator, serve
from playline.sim._doubles._llm import LlmDouble
from playline.store import Store

KEY = "sk-sim-llm-0123456789abcdef"
GPT = "gpt-4o-mini"
MAX_TOKENS = 200
DOMAINS = [f"company{n}.com" for n in range(40)]


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with serve(seed=7, latency_ms=0, token=KEY, providers=True) as running:
        yield running


@pytest.fixture
def openai(sim: Simulator) -> Iterator[LlmDouble]:
    double = sim.double("openai")
    assert isinstance(double, LlmDouble)
    double.reset()
    yield double
    double.reset()


@pytest.fixture
def tools(sim: Simulator) -> list[Any]:
    return [pl.providers.openai(api_key=KEY, base_url=f"{sim.url}/openai")]


def _prompt(domain: str) -> str:
    return f"In one line: what does {domain} sell?"


async def summaries(ctx: pl.Context, input: Any) -> pl.Dataset:
    rows = [{"domain": d} for d in DOMAINS]
    return await (
        ctx.dataset("companies", rows, key="domain")
        .with_column("summary", lambda row, ctx: ctx.llm(
            _prompt(row["domain"]), model=GPT, max_tokens=MAX_TOKENS))
        .run()
    )  # fmt: skip


def _worst(domain: str) -> float:
    """What the adapter holds for one call while it is in flight."""
    ask = {"model": GPT, "messages": [{"role": "user", "content": _prompt(domain)}]}
    table = PriceTable(OPENAI_PRICES, provider="openai")
    worst = worst_usd(table, {**ask, "temperature": 0, "max_tokens": MAX_TOKENS}, 1024)
    assert worst is not None
    return worst


def test_max_usd_stops_before_a_call_that_could_pass_it_and_a_resume_goes_on(
    openai: LlmDouble, tools: list[Any], store: Store
) -> None:
    # four calls' worst cases: what the calls really cost (far less) lets more go, up to it
    budget = 4 * _worst(DOMAINS[0])

    stopped = pl.run(summaries, tools=tools, store=store, max_usd=budget)

    assert isinstance(stopped.exception, pl.BudgetExceeded), stopped.status
    message = str(stopped.exception)
    assert f"Budget of {dollars_text(budget)} would be exceeded" in message
    assert "max_usd" in message and "e-0" not in message  # $0.00123, never $1.23e-03
    paid = openai.snapshot()["usd"]
    assert 0 < paid <= budget  # never past it, though what calls cost is known only after
    assert stopped.stats.usd == pytest.approx(paid)
    assert stopped.stats.tool_calls_not_sent > 0 and stopped.stats.rows_pending > 0
    sent = openai.snapshot()["llm"]["live"][GPT]["requests"]
    assert 4 < sent < len(DOMAINS)  # more than four: the real costs left room
    assert sum(e.unit == "usd" for e in store.read_ledger(stopped.run_id)) == sent

    resumed = pl.run(summaries, tools=tools, store=store, run_id=stopped.run_id, max_usd=1.0)

    assert resumed.status == "completed", resumed.exception
    snapshot = openai.snapshot()
    assert snapshot["llm"]["live"][GPT]["requests"] == len(DOMAINS)  # nothing asked twice
    ledger = store.read_ledger(stopped.run_id)
    assert len(ledger) == len(DOMAINS) and {e.unit for e in ledger} == {"usd"}
    assert sum(e.credits for e in ledger) == pytest.approx(snapshot["usd"])
    assert resumed.stats.usd == pytest.approx(snapshot["usd"])


def test_a_budget_in_credits_never_refuses_a_call_paid_in_dollars(
    openai: LlmDouble, tools: list[Any], store: Store
) -> None:
    result = pl.run(summaries, tools=tools, store=store, max_credits=0)

    assert result.status == "completed", result.exception
    assert result.stats.credits == 0 and result.stats.usd == pytest.approx(openai.snapshot()["usd"])


def test_a_plan_counts_tokens_and_dollars_from_worst_case_to_history(
    openai: LlmDouble, tools: list[Any], store: Store
) -> None:
    before = pl.plan(summaries, tools=tools, store=store)

    (tool,) = before.tools
    assert (tool.tool, tool.unit, tool.calls) == ("openai.chat", "usd", len(DOMAINS))
    assert before.credits_max == 0 and before.tokens == tool.tokens > 0
    assert before.usd_max == pytest.approx(sum(_worst(d) for d in DOMAINS))
    assert before.usd_expected == before.usd_max  # no history: each call at its worst
    assert before.to_dict()["usd"] == {"expected": before.usd_expected, "max": before.usd_max}
    assert openai.snapshot()["llm"]["live"] == {}  # a plan pays nothing

    ran = pl.run(summaries, tools=tools, store=store)
    assert ran.status == "completed", ran.exception
    again = pl.plan(summaries, tools=tools, store=store)
    assert again.calls == 0 and again.from_receipts == len(DOMAINS)  # receipts answer them all

    async def more(ctx: pl.Context, input: Any) -> Any:  # new questions, priced by history
        rows = [{"domain": f"other{n}.io"} for n in range(len(DOMAINS))]
        return await (
            ctx.dataset("others", rows, key="domain")
            .with_column("summary", lambda row, ctx: ctx.llm(
                _prompt(row["domain"]), model=GPT, max_tokens=MAX_TOKENS))
            .run()
        )  # fmt: skip

    learned = pl.plan(more, tools=tools, store=store)
    average = ran.stats.usd / len(DOMAINS)
    assert learned.usd_expected == pytest.approx(average * len(DOMAINS), rel=1e-3)
    assert learned.usd_expected < learned.usd_max
