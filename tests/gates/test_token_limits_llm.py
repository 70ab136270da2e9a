"""Token limits end to end: a ``pl.HttpTool`` for the simulator's OpenAI double
(``/openai/v1/chat/completions``) declared with ``tokens=``/``tokens_used=`` and the double's
TPM, run by the engine in virtual time (the double reads the run's clock: nothing sleeps).
Calls whose tokens fill the window several times over meet no 429 (the double's ledger
counts them), and a forced storm of 429s is recovered from."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import pytest

import playline as pl
from playline.sim import Simulator, serve
from playline.sim._doubles._llm import LlmDouble
from playline.sim._doubles._tokens import prompt_tokens
from playline.tools._outcomes import Answer

from virtual_clock import VirtualClock

KEY = "sk-sim-token-limits-0123456789abcdef"
TPM = 2_000  # the double's tokens a minute
MAX_TOKENS = 300  # each call asks for this much output (counted whole by OpenAI)


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with serve(seed=7, latency_ms=0, token=KEY, providers=True) as running:
        yield running


@pytest.fixture
def double(sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[LlmDouble]:
    double = sim.double("openai")
    assert isinstance(double, LlmDouble)
    before = double.clock
    double.reset()
    monkeypatch.setenv("SIM_OPENAI_KEY", KEY)
    answer = httpx.post(f"{sim.url}/openai/__double", json={"tpm": TPM, "rpm": 10_000})
    assert answer.status_code == 200, answer.text
    yield double
    double.clock = before
    double.reset()


def _estimate(input: Mapping[str, Any]) -> int:
    """What OpenAI counts against TPM: the prompt and ``max_tokens`` (the double's count)."""
    messages = [(m["role"], m["content"], False) for m in input["messages"]]
    return prompt_tokens(messages) + int(input["max_tokens"])


def _used(answer: Answer) -> int | None:
    usage = (answer.body or {}).get("usage")
    return None if usage is None else int(usage["total_tokens"])


def _tool(sim: Simulator) -> pl.HttpTool:
    return pl.HttpTool(
        "sim.chat",
        "POST",
        f"{sim.url}/openai/v1/chat/completions",
        auth=pl.Auth.bearer("SIM_OPENAI_KEY"),
        json={"model": "{model}", "messages": "{messages}", "max_tokens": "{max_tokens}"},
        result="choices",
        # OpenAI keeps its estimate (prompt + max_tokens) whatever the answer used
        rate=pl.Rate(tokens_per_minute=TPM, tokens_returned=False),
        tokens=_estimate,
        tokens_used=_used,
    )


def _input(n: int) -> dict[str, Any]:
    question = f"Describe company number {n} in one sentence, please."
    return {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": question}],
        "max_tokens": MAX_TOKENS,
    }


def _run(
    sim: Simulator, double: LlmDouble, rows: int, *, offset: int = 0
) -> tuple[pl.RunResult, float]:
    """The run of ``rows`` calls, and the virtual seconds it took."""

    async def ask(row: Mapping[str, Any], ctx: pl.Context) -> Any:
        return (await ctx.tool("sim.chat", _input(row["n"]))).data

    @pl.play(name="token-limits")
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        people = [{"n": offset + i} for i in range(rows)]
        return await ctx.dataset("rows", people, key="n").with_column("answer", ask).run()

    clock = VirtualClock()
    double.clock = clock.monotonic
    result = pl.run(play, {}, store="memory://", tools=[_tool(sim)], clock=clock)
    return result, clock.elapsed


def test_calls_past_the_tpm_window_many_times_over_meet_no_429(
    sim: Simulator, double: LlmDouble
) -> None:
    rows = 30  # about 30 x 320 tokens: nearly five windows of 2,000
    result, elapsed = _run(sim, double, rows)

    assert result.status == "completed", result.error
    assert not result.stats.rows_failed
    assert double.throttled == 0  # the double's ledger: not one 429
    live = double.snapshot()["llm"]
    assert sum(m["requests"] for m in live["live"].values()) == rows
    spent = sum(_estimate(_input(n)) for n in range(rows))
    assert spent > 4 * TPM
    # a bucket's worth at once, then the bucket's refill: at most TPM a minute after the first
    assert elapsed >= 60.0 * (spent - TPM) / TPM


def test_a_storm_of_429s_is_recovered_from(sim: Simulator, double: LlmDouble) -> None:
    double.storm = 6
    rows = 12
    result, _ = _run(sim, double, rows, offset=1000)

    assert result.status == "completed", result.error
    assert not result.stats.rows_failed
    assert double.storm == 0
    assert double.throttled == 6  # the storm's, and none of the tokens' own
