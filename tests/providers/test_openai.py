"""OpenAI's adapter (``openai.chat``, ``openai.batch``) against the simulator's OpenAI double,
through ``pl.run`` of a tiny play: the answer's shape, structured output, dollars in the
ledger equal to the double's usage x price, a storm of 429s, a wrong key, an account out of
credits, the Batch API as one job (polled in the run's time), a batch job on the receipts
polled by a resumed run and never submitted again, and batches that expire or fail."""

from __future__ import annotations

import asyncio
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
from playline.errors import PlayDefinitionError, ToolError
from playline.llm import OPENAI_PRICES, PriceTable, estimate_tokens, usd
from playline.providers import named
from playline.providers.openai import OpenAIBatch, duration
from playline.sim import Simulator
from playline.sim._doubles._answers import validate
from playline.sim._doubles.openai import OpenAIDouble
from stores import wait_for_jobs

MODEL = "gpt-4o-mini"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "industry": {"type": "string", "enum": ["saas", "hardware", "services", "retail"]},
        "employees": {"type": "integer", "minimum": 1, "maximum": 5000},
        "b2b": {"type": "boolean"},
    },
    "required": ["industry", "employees", "b2b"],
    "additionalProperties": False,
}


@pytest.fixture
def double(sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIDouble]:
    found = sim.double("openai")
    assert isinstance(found, OpenAIDouble)
    found.reset()
    found.clock = pl.ManualClock().monotonic
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("PLAYLINE_OPENAI_URL", f"{sim.url}/openai/v1")
    monkeypatch.delenv("PLAYLINE_LLM_PRICES", raising=False)
    yield found
    found.reset()


def ask(n: int, **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"One line on company number {n}, please."}],
        "system": "You answer in one short line.",
        "temperature": 0,
        **extra,
    }


def run_llm(
    tool: str,
    inputs: list[dict[str, Any]],
    *,
    double: OpenAIDouble | None = None,
    tools: Any = None,
    store: str = "memory://",
    **options: Any,
) -> pl.RunResult:
    """A run of one column calling ``tool`` with each input; its cells are ``{"data",
    "cost"}`` (the ledger's figure of the call); the double counts in the run's time."""

    async def call(row: Mapping[str, Any], ctx: pl.Context) -> Any:
        result = await ctx.tool(tool, dict(row["ask"]))
        return {"data": result.data, "cost": result.cost}

    @pl.play(name="llm-openai")
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        rows = [{"n": n, "ask": a} for n, a in enumerate(inputs)]
        return await ctx.dataset("rows", rows, key="n").with_column("out", call).run()

    clock = options.setdefault("clock", pl.ManualClock())
    if double is not None:
        double.clock = clock.monotonic
    return pl.run(play, {}, store=store, tools=[tools or named("openai").tools()], **options)


def ledger(sim: Simulator) -> dict[str, Any]:
    doc = httpx.get(f"{sim.url}/openai/__double").json()["llm"]
    assert isinstance(doc, dict)
    return doc


def cells(result: pl.RunResult) -> list[Any]:
    assert result.output is not None, result.error
    return [row["out"] for row in result.output]


def test_an_answer_has_the_contract_s_shape_and_costs_the_double_s_usage_at_the_price(
    sim: Simulator, double: OpenAIDouble
) -> None:
    result = run_llm("openai.chat", [ask(n) for n in range(6)], double=double)

    assert result.status == "completed", result.error
    price = OPENAI_PRICES[MODEL]
    for out in cells(result):
        data = out["data"]
        assert set(data) == {"text", "model", "finish_reason", "usage", "usd"}
        assert data["text"] and data["model"] == MODEL and data["finish_reason"] == "stop"
        used = data["usage"]
        assert used["input_tokens"] > 0 and used["output_tokens"] > 0
        assert data["usd"] == pytest.approx(
            (used["input_tokens"] * price.input + used["output_tokens"] * price.output) / 1e6
        )
        assert out["cost"] == pytest.approx(data["usd"])  # the ledger's figure
    books = ledger(sim)
    live = books["live"][MODEL]
    assert live["requests"] == 6 and books["batch"] == {}
    assert sum(out["cost"] for out in cells(result)) == pytest.approx(books["usd"])
    assert live["usd"] == pytest.approx(
        usd(MODEL, int(live["input_tokens"]), int(live["output_tokens"]))
    )
    assert result.stats.usd == pytest.approx(books["usd"], abs=1e-5)  # the stats round
    assert double.duplicates == 0


def test_the_request_is_what_openai_documents(double: OpenAIDouble) -> None:
    """System first, ``max_tokens`` (``max_completion_tokens`` and no temperature for an
    o-series model), the schema as a strict ``json_schema`` when it meets strict mode."""
    from playline.llm._adapter import read_call
    from playline.providers.openai import chat_body

    body = chat_body(read_call("openai.chat", ask(1, schema=SCHEMA, schema_name="a b!"), 1024))
    assert body["messages"][0] == {"role": "system", "content": "You answer in one short line."}
    assert body["max_tokens"] == 1024 and body["temperature"] == 0
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "a_b", "schema": SCHEMA, "strict": True},
    }
    loose = {"type": "object", "properties": {"x": {"type": "string"}}}
    reasoning = chat_body(read_call("openai.chat", {**ask(1), "model": "o4-mini",
                                                    "schema": loose}, 64))  # fmt: skip
    assert reasoning["max_completion_tokens"] == 64 and "max_tokens" not in reasoning
    assert "temperature" not in reasoning
    assert reasoning["response_format"]["json_schema"]["strict"] is False
    assert duration("6m0s") == 360 and duration("1.5s") == 1.5 and duration("12ms") == 0.012


def test_with_a_schema_the_text_is_json_that_validates(double: OpenAIDouble) -> None:
    result = run_llm("openai.chat", [ask(n, schema=SCHEMA) for n in range(4)], double=double)

    assert result.status == "completed", result.error
    for out in cells(result):
        answer = orjson.loads(out["data"]["text"])
        assert validate(SCHEMA, answer) == [], answer


def test_a_storm_of_429s_is_waited_out_and_every_row_answers(double: OpenAIDouble) -> None:
    double.storm = 5

    result = run_llm("openai.chat", [ask(n) for n in range(8)], double=double)

    assert result.status == "completed", result.error
    assert double.storm == 0 and double.throttled >= 5
    assert all(out["data"]["text"] for out in cells(result))
    assert double.duplicates == 0


def test_the_tokens_a_call_reserves_are_its_prompt_and_max_tokens(double: OpenAIDouble) -> None:
    """The estimate is never below what the double counts (so the token gate at the limit
    meets no 429), and not far above it."""
    chat = named("openai").tools()["chat"]
    assert chat.tokens is not None
    for n in (1, 12, 400):
        input = ask(n, schema=SCHEMA, max_tokens=50)
        input["messages"][0]["content"] *= n % 7 + 1
        counted = double.prompt_tokens(
            {"model": MODEL, "messages": [{"role": "system", "content": input["system"]},
                                          *input["messages"]],
             "response_format": {"type": "json_schema",
                                 "json_schema": {"name": "a", "schema": SCHEMA}}}
        )  # fmt: skip
        assert counted <= estimate_tokens(input) <= counted * 1.6
        assert chat.tokens(input) == estimate_tokens(input) + 50


@pytest.mark.parametrize("tool", ["openai.chat", "openai.batch"])
def test_a_wrong_key_fails_the_cells_with_openai_s_words(
    double: OpenAIDouble, monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-0123456789abcdef")

    result = run_llm(tool, [ask(n) for n in range(2)], double=double)

    assert result.output is not None and result.stats.rows_failed == 2
    assert all("Incorrect API key provided" in e.message for e in result.output.errors)
    assert double.calls["batches"] == 0 and double.charged == 0  # its upload was refused


def test_an_account_out_of_credits_stops_its_calls(double: OpenAIDouble) -> None:
    double.credits = 0.0

    result = run_llm("openai.chat", [ask(n) for n in range(10)], double=double)

    assert result.output is not None
    failed = result.output.errors
    assert len(failed) == 10
    assert all(e.code == "insufficient_credits" or "out of credits" in e.message for e in failed)
    assert double.calls["chat"] < 10  # the account's other calls were not sent
    assert double.refused["credits"] >= 1


def test_a_model_without_a_price_fails_saying_how_to_give_one(double: OpenAIDouble) -> None:
    result = run_llm("openai.chat", [ask(1, model="my-finetune")], double=double)

    assert result.output is not None
    (error,) = result.output.errors
    assert "No price for the model 'my-finetune'" in error.message and "prices=" in error.message
    assert error.code == "invalid_input" and "request function failed" not in error.message
    assert double.calls["chat"] == 0
    # the run's summary says why, not only "exception from openai.chat"
    assert "No price for the model 'my-finetune'" in str(result.error)
    assert "No price for the model" in "".join(result.stats.errors)
    priced = pl.providers.openai(prices={"my-finetune": (1.0, 2.0)})
    again = run_llm("openai.chat", [ask(1, model="my-finetune")], double=double, tools=priced)
    assert again.status == "completed", again.error
    data = cells(again)[0]["data"]
    used = data["usage"]
    assert data["usd"] == pytest.approx((used["input_tokens"] + 2 * used["output_tokens"]) / 1e6)


def test_prices_come_from_code_or_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert usd("gpt-4o-mini-2024-07-18", 1_000_000, 1_000_000) == pytest.approx(0.75)
    assert usd("gpt-4o-mini", 1_000_000, 1_000_000, batch=True) == pytest.approx(0.375)
    assert usd("claude-3-5-haiku-20241022", 1_000_000, 0) == pytest.approx(0.80)
    file = tmp_path / "prices.toml"
    file.write_text('"local-model" = [0.5, 1.5]\n[gpt-4o-mini]\ninput = 1\noutput = 2\n')
    monkeypatch.setenv("PLAYLINE_LLM_PRICES", str(file))
    assert usd("local-model", 1_000_000, 1_000_000) == pytest.approx(2.0)
    assert usd("gpt-4o-mini", 1_000_000, 0) == pytest.approx(1.0)
    table = PriceTable(OPENAI_PRICES, {"gpt-4o-mini": (3, 4), "*": (0, 0)}, provider="openai")
    assert table.usd("gpt-4o-mini", 1_000_000, 0) == pytest.approx(3.0)
    assert table.usd("anything", 10, 10) == 0
    with pytest.raises(PlayDefinitionError, match="US dollars per million"):
        pl.providers.openai(prices={"gpt-4o": "cheap"})
    monkeypatch.setenv("PLAYLINE_LLM_PRICES", str(tmp_path / "missing.json"))
    with pytest.raises(PlayDefinitionError, match="cannot read the price file"):
        pl.providers.openai()


def test_a_compatible_server_has_its_own_prefix_key_and_address(
    sim: Simulator, double: OpenAIDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(PlayDefinitionError, match="PLAYLINE_OLLAMA_URL"):
        pl.providers.openai(name="ollama")
    tools = pl.providers.openai(
        KEY, base_url=f"{sim.url}/openai/v1", name="ollama", prices={"*": (0, 0)}
    )
    assert [spec.id for spec in tools.specs()] == ["ollama.chat", "ollama.batch"]

    result = run_llm("ollama.chat", [ask(1, model="llama3.1")], double=double, tools=tools)

    assert result.status == "completed", result.error
    assert cells(result)[0]["data"]["usd"] == 0


# -- the Batch API ----------------------------------------------------------------------------


def test_fifty_rows_are_one_batch_polled_to_its_end_at_half_the_price(
    sim: Simulator, double: OpenAIDouble
) -> None:
    inputs = [ask(n) for n in range(50)]

    result = run_llm("openai.batch", inputs, double=double)

    assert result.status == "completed", result.error
    assert double.calls["files"] == 1 and double.calls["batches"] == 1
    assert double.calls["batch"] >= 2  # polled until it completed (600 s of the run's time)
    books = ledger(sim)
    batch = books["batch"][MODEL]
    assert batch["requests"] == 50 and books["live"] == {}
    assert sum(out["cost"] for out in cells(result)) == pytest.approx(books["usd"])
    assert books["usd"] == pytest.approx(
        usd(MODEL, int(batch["input_tokens"]), int(batch["output_tokens"]), batch=True)
    )
    # each row has its own answer (matched by custom_id): the one chat gives its prompt
    live = run_llm("openai.chat", inputs, double=double)
    assert [out["data"]["text"] for out in cells(result)] == [
        out["data"]["text"] for out in cells(live)
    ]
    for batched, now in zip(cells(result), cells(live), strict=True):
        assert batched["cost"] == pytest.approx(now["cost"] / 2)


CHILD = textwrap.dedent(
    """
    import sys
    import playline as pl

    @pl.play(name="llm-openai")
    async def play(ctx, input):
        async def call(row, ctx):
            result = await ctx.tool("openai.batch", dict(row["ask"]))
            return {{"data": result.data, "cost": result.cost}}

        rows = [{{"n": n, "ask": a}} for n, a in enumerate({inputs!r})]
        return await ctx.dataset("rows", rows, key="n").with_column("out", call).run()

    # the system clock: after its submit the run waits a minute for its first poll
    pl.run(play, {{}}, store=sys.argv[1], tools=[pl.providers.openai()], run_id="run-batch")
    """
)


def test_a_batch_on_the_receipts_is_polled_by_a_resumed_run_never_submitted_again(
    sim: Simulator, double: OpenAIDouble, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    double.clock = lambda: 1_000.0  # the double's time stands still until advanced
    inputs = [ask(n) for n in range(5)]
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
    double.advance(double.batch_delay + 1)  # the batch completes meanwhile

    result = run_llm("openai.batch", inputs, store=store, run_id="run-batch")

    assert result.status == "completed", result.error
    assert double.calls["batches"] == 1 and double.calls["files"] == 1  # polled, not resent
    assert all(out["data"]["text"] for out in cells(result))
    assert sum(out["cost"] for out in cells(result)) == pytest.approx(ledger(sim)["usd"])


def test_an_expired_batch_fails_its_calls_with_batch_expired(double: OpenAIDouble) -> None:
    double.batch_delay = 25 * 3600  # past the 24 h window: it expires
    tools = pl.providers.openai(poll_interval=1800)

    result = run_llm("openai.batch", [ask(n) for n in range(3)], double=double, tools=tools)

    assert result.output is not None
    assert [e.code for e in result.output.errors] == ["batch_expired"] * 3
    assert "--retry-failed" in result.output.errors[0].message
    assert double.charged == 0 and result.stats.usd == 0


def test_a_batch_that_fails_validation_fails_its_calls_with_its_errors(
    sim: Simulator, double: OpenAIDouble
) -> None:
    """A batch created elsewhere with a line without ``custom_id``: polled by the tool, its
    calls fail with the batch's own errors, nothing charged."""
    headers = {"Authorization": f"Bearer {KEY}"}
    bad = b'{"method": "POST", "url": "/v1/chat/completions", "body": {}}\n'
    uploaded = httpx.post(
        f"{sim.url}/openai/v1/files",
        headers=headers,
        data={"purpose": "batch"},
        files={"file": ("b.jsonl", bad)},
    ).json()
    batch = httpx.post(
        f"{sim.url}/openai/v1/batches",
        headers=headers,
        json={"input_file_id": uploaded["id"], "endpoint": "/v1/chat/completions",
              "completion_window": "24h"},
    ).json()  # fmt: skip
    double.advance(double.batch_delay)
    tool = named("openai").tools()["batch"]
    assert isinstance(tool, OpenAIBatch)
    job = {"batches": [{"id": batch["id"], "model": MODEL}]}

    state = asyncio.run(tool.poll_bulk(tool.spec, job, {0: ask(0)}))

    assert state.done
    error = state.result[0]
    assert isinstance(error, ToolError) and error.code == "batch_failed"
    assert "custom_id" in error.provider_message
