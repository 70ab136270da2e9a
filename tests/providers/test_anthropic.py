"""Anthropic's adapter (``anthropic.messages``, ``anthropic.batch``) against the simulator's
Anthropic double, through ``pl.run`` of a tiny play: the answer's shape, structured output as
a forced tool, dollars in the ledger equal to the double's usage x price, 429s and 529s
waited out, a wrong key, an account out of credits, a Message Batch of many rows at half the
price (and one on the receipts polled by a resumed run), and an expired batch."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from contract import KEY

import playline as pl
from playline.llm import ANTHROPIC_PRICES, estimate_tokens, usd
from playline.llm._adapter import read_call
from playline.providers import named
from playline.providers.anthropic import TOOL_PROMPT, messages_body
from playline.sim import Simulator
from playline.sim._doubles._answers import validate
from playline.sim._doubles.anthropic import AnthropicDouble
from stores import wait_for_jobs

MODEL = "claude-3-5-haiku-20241022"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "industry": {"type": "string", "enum": ["saas", "hardware", "services", "retail"]},
        "employees": {"type": "integer", "minimum": 1, "maximum": 5000},
    },
    "required": ["industry", "employees"],
}


@pytest.fixture
def double(sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[AnthropicDouble]:
    found = sim.double("anthropic")
    assert isinstance(found, AnthropicDouble)
    found.reset()
    found.clock = pl.ManualClock().monotonic
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("PLAYLINE_ANTHROPIC_URL", f"{sim.url}/anthropic")
    monkeypatch.delenv("PLAYLINE_LLM_PRICES", raising=False)
    yield found
    found.reset()


def ask(n: int, **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"One line on company number {n}, please."}],
        "system": "You answer in one short line.",
        "temperature": 0,
        "max_tokens": 200,
        **extra,
    }


def run_llm(
    tool: str,
    inputs: list[dict[str, Any]],
    *,
    double: AnthropicDouble | None = None,
    tools: Any = None,
    store: str = "memory://",
    **options: Any,
) -> pl.RunResult:
    async def call(row: Mapping[str, Any], ctx: pl.Context) -> Any:
        result = await ctx.tool(tool, dict(row["ask"]))
        return {"data": result.data, "cost": result.cost}

    @pl.play(name="llm-anthropic")
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        rows = [{"n": n, "ask": a} for n, a in enumerate(inputs)]
        return await ctx.dataset("rows", rows, key="n").with_column("out", call).run()

    clock = options.setdefault("clock", pl.ManualClock())
    if double is not None:
        double.clock = clock.monotonic
    return pl.run(play, {}, store=store, tools=[tools or named("anthropic").tools()], **options)


def ledger(sim: Simulator) -> dict[str, Any]:
    doc = httpx.get(f"{sim.url}/anthropic/__double").json()["llm"]
    assert isinstance(doc, dict)
    return doc


def cells(result: pl.RunResult) -> list[Any]:
    assert result.output is not None, result.error
    return [row["out"] for row in result.output]


def test_an_answer_has_the_contract_s_shape_and_costs_the_double_s_usage_at_the_price(
    sim: Simulator, double: AnthropicDouble
) -> None:
    result = run_llm("anthropic.messages", [ask(n) for n in range(6)], double=double)

    assert result.status == "completed", result.error
    price = ANTHROPIC_PRICES["claude-3-5-haiku"]
    for out in cells(result):
        data = out["data"]
        assert set(data) == {"text", "model", "finish_reason", "usage", "usd"}
        assert data["text"] and data["model"] == MODEL and data["finish_reason"] == "stop"
        used = data["usage"]
        assert data["usd"] == pytest.approx(
            (used["input_tokens"] * price.input + used["output_tokens"] * price.output) / 1e6
        )
        assert out["cost"] == pytest.approx(data["usd"])
    books = ledger(sim)
    assert books["live"][MODEL]["requests"] == 6
    assert sum(out["cost"] for out in cells(result)) == pytest.approx(books["usd"])
    assert result.stats.usd == pytest.approx(books["usd"], abs=1e-5)  # the stats round


def test_a_schema_is_a_forced_tool_whose_input_is_the_answer(double: AnthropicDouble) -> None:
    body = messages_body(read_call("anthropic.messages", ask(1, schema=SCHEMA), 1024))
    assert body["system"] == "You answer in one short line." and body["max_tokens"] == 200
    assert body["tools"][0]["name"] == "answer" and body["tools"][0]["input_schema"] == SCHEMA
    assert body["tool_choice"] == {"type": "tool", "name": "answer"}
    input = ask(1, schema=SCHEMA)
    counted = double.input_tokens(body)
    tool = named("anthropic").tools()["messages"]
    assert tool.tokens is not None
    estimated, most = tool.tokens(input)
    assert counted <= estimated <= counted * 1.6 and most == 200
    assert estimated > estimate_tokens(input) + TOOL_PROMPT  # the tool's name, description

    result = run_llm("anthropic.messages", [ask(n, schema=SCHEMA) for n in range(4)],
                     double=double)  # fmt: skip

    assert result.status == "completed", result.error
    for out in cells(result):
        assert out["data"]["finish_reason"] == "stop"
        assert validate(SCHEMA, orjson.loads(out["data"]["text"])) == []


def test_429s_and_529s_are_waited_out_and_every_row_answers(double: AnthropicDouble) -> None:
    double.storm = 3
    double.down = 2  # 529 overloaded_error

    result = run_llm("anthropic.messages", [ask(n) for n in range(6)], double=double)

    assert result.status == "completed", result.error
    assert double.storm == 0 and double.down == 0 and double.throttled >= 3
    assert double.duplicates == 0


@pytest.mark.parametrize("tool", ["anthropic.messages", "anthropic.batch"])
def test_a_wrong_key_fails_the_cells_with_anthropic_s_words(
    double: AnthropicDouble, monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-wrong-0123456789abcdef")

    result = run_llm(tool, [ask(n) for n in range(2)], double=double)

    assert result.output is not None and result.stats.rows_failed == 2
    assert all("invalid x-api-key" in e.message for e in result.output.errors)
    assert double.charged == 0
    if tool == "anthropic.batch":  # its creation refused once, not tried again
        assert double.calls["batches"] == 1


def test_an_account_out_of_credits_stops_its_calls(double: AnthropicDouble) -> None:
    double.credits = 0.0

    result = run_llm("anthropic.messages", [ask(n) for n in range(10)], double=double)

    assert result.output is not None
    failed = result.output.errors
    assert len(failed) == 10
    assert all(e.code == "insufficient_credits" or "out of credits" in e.message for e in failed)
    assert double.calls["messages"] < 10


def test_many_rows_are_one_message_batch_at_half_the_price(
    sim: Simulator, double: AnthropicDouble
) -> None:
    inputs = [ask(n) for n in range(50)]

    result = run_llm("anthropic.batch", inputs, double=double)

    assert result.status == "completed", result.error
    assert double.calls["batches"] == 1 and double.calls["results"] == 1
    books = ledger(sim)
    batch = books["batch"][MODEL]
    assert batch["requests"] == 50
    assert sum(out["cost"] for out in cells(result)) == pytest.approx(books["usd"])
    assert books["usd"] == pytest.approx(
        usd(MODEL, int(batch["input_tokens"]), int(batch["output_tokens"]), batch=True)
    )
    live = run_llm("anthropic.messages", inputs, double=double)
    assert [out["data"]["text"] for out in cells(result)] == [
        out["data"]["text"] for out in cells(live)
    ]


CHILD = textwrap.dedent(
    """
    import sys
    import playline as pl

    @pl.play(name="llm-anthropic")
    async def play(ctx, input):
        async def call(row, ctx):
            result = await ctx.tool("anthropic.batch", dict(row["ask"]))
            return {{"data": result.data, "cost": result.cost}}

        rows = [{{"n": n, "ask": a}} for n, a in enumerate({inputs!r})]
        return await ctx.dataset("rows", rows, key="n").with_column("out", call).run()

    pl.run(play, {{}}, store=sys.argv[1], tools=[pl.providers.anthropic()], run_id="run-batch")
    """
)


def test_a_batch_on_the_receipts_is_polled_by_a_resumed_run_never_submitted_again(
    double: AnthropicDouble, tmp_path: Path
) -> None:
    double.clock = lambda: 1_000.0
    inputs = [ask(n) for n in range(4)]
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(inputs=inputs))
    store = f"sqlite:///{tmp_path}/s.db"
    child = subprocess.Popen([sys.executable, str(script), store], stderr=subprocess.PIPE)
    try:
        wait_for_jobs(tmp_path / "s.db", child, len(inputs))
    finally:
        child.kill()
        child.communicate()
    assert double.calls["batches"] == 1
    double.advance(double.batch_delay + 1)

    result = run_llm("anthropic.batch", inputs, store=store, run_id="run-batch")

    assert result.status == "completed", result.error
    assert double.calls["batches"] == 1
    assert all(out["data"]["text"] for out in cells(result))


def test_an_expired_batch_fails_its_calls_with_batch_expired(double: AnthropicDouble) -> None:
    double.batch_delay = 25 * 3600
    tools = pl.providers.anthropic(poll_interval=1800)

    result = run_llm("anthropic.batch", [ask(n) for n in range(3)], double=double, tools=tools)

    assert result.output is not None
    assert [e.code for e in result.output.errors] == ["batch_expired"] * 3
    assert double.charged == 0
