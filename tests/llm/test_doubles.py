"""ctx.llm against the simulator's LLM doubles, through the real adapters
(``pl.providers.openai`` and ``pl.providers.anthropic`` over loopback HTTP) and a SQLite
store: receipts (a second run pays no token), what makes a new receipt, a schema answer as
the pydantic object, the doubles' invalid-JSON fault asked again with the error and, on
every answer, a failed cell with the raw answer after 3 paid attempts; a batch job; dollars
as the doubles charge them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

import playline as pl
from playline.sim import Simulator, serve
from playline.sim._doubles._llm import LlmDouble
from playline.sim._doubles._tokens import count
from playline.store import Store

KEY = "sk-sim-llm-0123456789abcdef"
GPT = "gpt-4o-mini"
CLAUDE = "claude-3-5-haiku-latest"


class Company(BaseModel):
    industry: str
    employees: int


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with serve(seed=7, latency_ms=0, token=KEY, providers=True) as running:
        yield running


@pytest.fixture
def doubles(sim: Simulator) -> Iterator[dict[str, LlmDouble]]:
    found = {name: sim.double(name) for name in ("openai", "anthropic")}
    for double in found.values():
        assert isinstance(double, LlmDouble)
        double.reset()
    yield found  # type: ignore[misc]
    for double in found.values():
        double.reset()


@pytest.fixture
def tools(sim: Simulator) -> list[Any]:
    return [
        pl.providers.openai(api_key=KEY, base_url=f"{sim.url}/openai", poll_interval=0.01),
        pl.providers.anthropic(api_key=KEY, base_url=f"{sim.url}/anthropic"),
    ]


def _requests(double: LlmDouble, mode: str = "live") -> int:
    return sum(int(row["requests"]) for row in double.snapshot()["llm"][mode].values())


def _tokens(double: LlmDouble) -> tuple[int, int]:
    rows = double.snapshot()["llm"]["live"].values()
    return sum(int(r["input_tokens"]) for r in rows), sum(int(r["output_tokens"]) for r in rows)


def _body(prompt: str = "Classify acme.com", **options: Any) -> Any:
    """A play asking one question in its body; it returns the answer's data and figures."""
    options.setdefault("model", GPT)

    async def play(ctx: pl.Context, input: Any) -> Any:
        result = await ctx.llm(prompt, **options)
        data = result.data
        return {
            "data": data.model_dump() if isinstance(data, BaseModel) else data,
            "type": type(data).__name__,
            "cost": result.cost,
            "usage": result.usage,
            "source": result.execution.source,
        }

    return play


def _run(play: Any, tools: list[Any], store: Store) -> pl.RunResult:
    return pl.run(play, tools=tools, store=store)


def test_a_second_run_pays_no_token(
    doubles: dict[str, LlmDouble], tools: list[Any], store: Store
) -> None:
    openai = doubles["openai"]

    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        rows = [{"domain": d} for d in ("acme.com", "globex.io", "initech.net")]
        return await (
            ctx.dataset("companies", rows, key="domain")
            .with_column("industry", lambda row, ctx: ctx.llm(
                f"Classify {row['domain']}", model=GPT, schema=Company))
            .run()
        )  # fmt: skip

    first = _run(play, tools, store)
    assert first.status == "completed", first.exception
    charged = openai.snapshot()["usd"]
    assert _requests(openai) == 3 and charged > 0
    ledger = store.read_ledger(first.run_id)
    assert sum(e.credits for e in ledger) == pytest.approx(charged)  # the double's dollars
    assert first.stats.usd == pytest.approx(charged, abs=1e-6)  # (rounded to a millionth)
    before = openai.snapshot()["llm"]

    second = _run(play, tools, store)
    assert openai.snapshot()["llm"] == before  # not a token more
    assert second.stats.usd == 0 and second.stats.tool_calls_cached == 3
    assert second.output.to_list() == first.output.to_list()
    assert all(set(r["industry"]) == {"industry", "employees"} for r in second.output.to_list())


def test_a_change_of_model_prompt_schema_or_temperature_is_a_new_receipt(
    doubles: dict[str, LlmDouble], tools: list[Any], store: Store
) -> None:
    openai = doubles["openai"]
    asks = [
        {},
        {"model": "gpt-4o"},
        {"prompt": "Classify globex.io"},
        {"schema": Company},
        {"temperature": 0.5},
        {"max_tokens": 30},
        {"system": "Answer in French."},
    ]
    for number, ask in enumerate(asks, 1):
        for _ in range(2):  # the second time, the receipt answers
            run = _run(_body(**ask), tools, store)
            assert run.status == "completed", run.exception
        assert _requests(openai) == number, ask
    # the double takes max_tokens=30 for the same question (it only cuts the answer)
    assert openai.snapshot()["duplicates"] == 1
    forced = _run(_body(force=True), tools, store)
    assert forced.output["source"] == "live" and _requests(openai) == len(asks) + 1


@pytest.mark.parametrize("model", [GPT, CLAUDE])
def test_a_schema_answer_is_the_pydantic_object(
    model: str, doubles: dict[str, LlmDouble], tools: list[Any], store: Store
) -> None:
    run = _run(_body(model=model, schema=Company), tools, store)
    assert run.status == "completed", run.exception
    out = run.output
    assert out["type"] == "Company"
    assert Company.model_validate(out["data"])
    double = doubles["anthropic" if model == CLAUDE else "openai"]
    tokens = _tokens(double)
    assert out["usage"] == {"input_tokens": tokens[0], "output_tokens": tokens[1], "attempts": 1}
    assert out["cost"] == pytest.approx(double.snapshot()["usd"])


def test_an_invalid_answer_is_asked_again_with_the_error(
    doubles: dict[str, LlmDouble], tools: list[Any], store: Store
) -> None:
    openai = doubles["openai"]
    clean = _run(_body(schema=Company), tools, store)
    alone, _ = _tokens(openai)  # the first request's prompt
    openai.reset()
    openai.configure({"invalid_json": 1})  # the next answer to a schema request is wrong

    run = _run(_body(schema=Company, force=True), tools, store)
    assert run.status == "completed", run.exception
    assert Company.model_validate(run.output["data"]) and clean.status == "completed"
    assert run.output["usage"]["attempts"] == 2
    snapshot = openai.snapshot()
    assert (_requests(openai), snapshot["llm"]["spoiled"], snapshot["duplicates"]) == (2, 1, 0)
    both, _ = _tokens(openai)
    # the second request held the first's prompt, the wrong answer and the error
    error = "Your answer did not match the schema: . Answer again with only the JSON object."
    assert both - 2 * alone > count(error)
    assert run.output["cost"] == pytest.approx(snapshot["usd"])  # both attempts


def test_an_answer_wrong_every_time_fails_the_cell_after_three_paid_attempts(
    doubles: dict[str, LlmDouble], tools: list[Any], store: Store
) -> None:
    openai = doubles["openai"]
    openai.configure({"invalid_json": 10})

    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        return await (
            ctx.dataset("companies", [{"domain": "acme.com"}], key="domain")
            .with_column("industry", lambda row, ctx: ctx.llm(
                f"Classify {row['domain']}", model=GPT, schema=Company))
            .run()
        )  # fmt: skip

    run = _run(play, tools, store)
    assert _requests(openai) == 3 and openai.snapshot()["llm"]["spoiled"] == 3
    (row,) = store.iter_rows(run.run_id, "companies")
    cell = row.cells["industry"]
    assert cell["status"] == "failed" and cell["code"] == "invalid_answer"
    assert "after 3 attempts" in cell["error"] and "The last answer:" in cell["error"]
    ledger = [e for e in store.read_ledger(run.run_id) if e.tool == "openai.chat"]
    assert len(ledger) == 3 and len({e.receipt_key for e in ledger}) == 3
    assert all(e.unit == "usd" and e.column == "industry" for e in ledger)
    assert sum(e.credits for e in ledger) == pytest.approx(openai.snapshot()["usd"])


def test_a_one_row_column_on_claude(
    doubles: dict[str, LlmDouble], tools: list[Any], store: Store
) -> None:
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        ds = ctx.dataset("companies", [{"name": "Acme", "domain": "acme.com"}], key="domain")
        return await ds.with_column("industry", lambda row, ctx: ctx.llm(
            f"In one word, the industry of {row['name']} ({row['domain']})?",
            model=CLAUDE, max_tokens=20)).run()  # fmt: skip

    run = _run(play, tools, store)
    assert run.status == "completed", run.exception
    (value,) = [r["industry"] for r in run.output.to_list()]
    assert isinstance(value, str) and value
    assert _requests(doubles["anthropic"]) == 1 and _requests(doubles["openai"]) == 0
    (row,) = store.iter_rows(run.run_id, "companies")
    assert row.cells["industry"]["provider"] == "anthropic.messages"
    assert row.cells["industry"]["cost"] == pytest.approx(doubles["anthropic"].snapshot()["usd"])


def test_a_batch_job_answers_at_half_the_price(
    doubles: dict[str, LlmDouble], tools: list[Any], store: Store
) -> None:
    openai = doubles["openai"]
    openai.configure({"batch_delay": 0})
    live = _run(_body(schema=Company), tools, store)
    batch = _run(_body(schema=Company, batch=True), tools, store)
    assert batch.status == "completed", batch.exception
    assert batch.output["data"] == live.output["data"]
    assert (_requests(openai, "live"), _requests(openai, "batch")) == (1, 1)
    assert batch.output["cost"] == pytest.approx(live.output["cost"] / 2)
