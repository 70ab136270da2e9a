"""Token-aware rate limits (``tools/_tokens.py``): the sliding token windows' arithmetic on a
manual clock (a sleep moves it, nothing waits for real), the corrections after an answer,
the providers' token headers, and the declarations' checks."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

import playline as pl
from playline.errors import PlayDefinitionError, ToolError
from playline.tools._declared import WINDOW_MARGIN
from playline.tools._gates import ToolGate
from playline.tools._spec import ToolSpec
from playline.tools._tokens import (
    TokenBucket,
    TokenGate,
    heard,
    requests_said,
    reset_seconds,
    token_gate,
    tokens_said,
)

SPAN = 60.0 + WINDOW_MARGIN  # the time a token bucket takes to refill


class _Transport:
    """A transport that estimates a call's tokens from its input's ``n`` (and ``out``)."""

    inline = False

    def tokens(self, input: Mapping[str, Any]) -> Any:
        return input["n"] if "out" not in input else (input["n"], input["out"])

    async def call(self, spec: ToolSpec, inputs: Any, keys: Any = ()) -> list[Any]:
        return [None for _ in inputs]


def _gate(clock: pl.ManualClock, **rate: Any) -> TokenGate:
    spec = ToolSpec(id="llm.chat", transport=_Transport(), rate=pl.Rate(**rate))
    gate = token_gate(spec, clock)
    assert gate is not None
    return gate


def test_a_bucket_holds_its_limit_and_refills_it_every_span() -> None:
    bucket = TokenBucket(SPAN, 100)
    bucket.take(60, 0.0)
    bucket.take(30, 0.0)
    assert bucket.wait(10, 0.0) == 0.0
    assert bucket.wait(11, 0.0) == pytest.approx(SPAN / 100)  # one token's refill
    assert bucket.wait(40, 0.0) == pytest.approx(30 * SPAN / 100)
    assert bucket.used(SPAN / 2) == pytest.approx(40)  # half of the limit came back
    assert bucket.used(10 * SPAN) == 0  # never fuller than its limit
    assert bucket.wait(101, 0.0) == float("inf")


def test_calls_wait_their_turn_for_room_and_the_clock_moves_only_by_the_waits() -> None:
    clock = pl.ManualClock(start=1000.0)
    gate = _gate(clock, tokens_per_minute=100)

    async def main() -> list[float]:
        times = []
        for n in (70, 30, 50, 50, 1):
            spend = await gate.take([{"n": n}])
            spend.settle()  # the answer said nothing: the estimate stands
            times.append(clock.monotonic() - 1000.0)
        return times

    # 70 and 30 empty the bucket; each 50 waits for half of it to refill, and 1 more for one
    # token's refill
    assert asyncio.run(main()) == pytest.approx([0.0, 0.0, SPAN / 2, SPAN, SPAN + SPAN / 100])


def test_a_call_larger_than_the_whole_window_fails_at_once() -> None:
    gate = _gate(pl.ManualClock(), tokens_per_minute=100, output_tokens_per_minute=50)
    with pytest.raises(ToolError) as caught:
        asyncio.run(gate.take([{"n": 101}]))
    assert caught.value.code == "too_many_tokens" and caught.value.outcome == "fatal"
    assert "tokens_per_minute=100" in str(caught.value)
    with pytest.raises(ToolError, match="output_tokens_per_minute=50"):
        asyncio.run(gate.take([{"n": 1, "out": 51}]))
    with pytest.raises(ToolError, match="tokens_estimate"):
        asyncio.run(gate.take([{"n": -1}]))


def _spent(gate: TokenGate, n: int, status: int, used: Any) -> None:
    async def main() -> None:
        spend = await gate.take([{"n": n}])
        heard(status, used)  # what the transport reports while the call is sent
        spend.settle()

    asyncio.run(main())


def test_the_answer_corrects_the_estimate_down_and_up() -> None:
    clock = pl.ManualClock(start=0.0)
    gate = _gate(clock, tokens_per_minute=100)
    window = gate.buckets["tokens"]
    assert window is not None
    _spent(gate, 80, 200, (30, 0))
    assert window.used(0.0) == 30  # it used less: the rest goes back
    _spent(gate, 10, 200, (50, 0))
    assert window.used(0.0) == 80  # it used more: counted
    _spent(gate, 20, 200, None)
    assert window.used(0.0) == 100  # the answer said nothing: the estimate stands


def test_a_provider_that_keeps_its_estimate_is_never_corrected_down() -> None:
    gate = _gate(pl.ManualClock(start=0.0), tokens_per_minute=100, tokens_returned=False)
    window = gate.buckets["tokens"]
    assert window is not None
    _spent(gate, 80, 200, (30, 0))
    assert window.used(0.0) == 80
    _spent(gate, 10, 200, (15, 0))
    assert window.used(0.0) == 95


def test_a_429_counts_nothing_and_a_5xx_keeps_the_estimate() -> None:
    gate = _gate(pl.ManualClock(start=0.0), tokens_per_minute=100)
    window = gate.buckets["tokens"]
    assert window is not None
    _spent(gate, 40, 429, None)
    assert window.used(0.0) == 0
    _spent(gate, 40, 503, None)
    assert window.used(0.0) == 40


def test_input_and_output_go_to_their_own_buckets() -> None:
    clock = pl.ManualClock(start=0.0)
    gate = _gate(clock, tokens_per_minute=1000, output_tokens_per_minute=100)

    async def main() -> None:
        first = await gate.take([{"n": 10, "out": 100}, {"n": 5, "out": 0}])  # a bulk request
        assert first.tokens == (15, 100)
        heard(200, (15, 40))  # Anthropic gives back the output not used
        first.settle()
        await gate.take([{"n": 10, "out": 60}])
        assert clock.monotonic() == 0.0  # 40 + 60 fit the output bucket
        await gate.take([{"n": 10, "out": 1}])
        assert clock.monotonic() == pytest.approx(SPAN / 100)  # one output token's refill

    asyncio.run(main())


def test_a_cancelled_wait_takes_nothing() -> None:
    clock = pl.ManualClock(start=0.0)
    gate = _gate(clock, tokens_per_minute=100)
    window = gate.buckets["tokens"]
    assert window is not None

    async def main() -> None:
        await gate.take([{"n": 100}])
        waiting = asyncio.ensure_future(gate.take([{"n": 50}]))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        now = clock.monotonic()  # the cancelled wait may have slept: the refill counts
        assert window.used(now) == pytest.approx(max(0.0, 100 - now * 100 / SPAN))
        assert gate.waiting == 0

    asyncio.run(main())


def test_fewer_tokens_left_in_the_headers_lower_the_bucket_to_the_providers() -> None:
    """The provider's count (other processes spent too, an estimate fell short) is the
    bucket's from then on, less the requests in flight it has not counted yet; it refills
    as the provider's does, not all at once at the header's reset."""
    clock = pl.ManualClock(start=0.0)
    gate = _gate(clock, tokens_per_minute=1000)

    async def main() -> None:
        flying = await gate.take([{"n": 50}])  # sent, and not counted by the answer below
        spend = await gate.take([{"n": 100}])
        heard(200, None, tokens_said({"x-ratelimit-remaining-tokens": "150",
                                      "x-ratelimit-reset-tokens": "6s"}))  # fmt: skip
        spend.settle()
        await gate.take([{"n": 100}])  # what the provider said is left, less the 50 flying
        assert clock.monotonic() == 0.0
        flying.settle()
        await gate.take([{"n": 10}])  # past it: the refill's pace, 1000 tokens a SPAN
        assert clock.monotonic() == pytest.approx(10 * SPAN / 1000)

    asyncio.run(main())


def test_headers_of_a_kind_without_a_declared_limit_still_hold_the_gate() -> None:
    clock = pl.ManualClock(start=0.0)
    gate = _gate(clock)  # an estimate, no declared token limit

    async def main() -> None:
        gate.said("output", 10, 3.0)
        await gate.take([{"n": 5, "out": 10}])
        await gate.take([{"n": 5, "out": 1}])
        assert clock.monotonic() == pytest.approx(3.0 + WINDOW_MARGIN)

    asyncio.run(main())


def test_the_providers_headers_and_their_resets_are_read() -> None:
    now = 1_767_225_600.0  # 2026-01-01T00:00:00Z
    assert reset_seconds("6m0s") == 360.0
    assert reset_seconds("1s") == 1.0
    assert reset_seconds("120ms") == pytest.approx(0.12)
    assert reset_seconds("1h2m3.5s") == pytest.approx(3723.5)
    assert reset_seconds("2.5") == 2.5
    assert reset_seconds("2026-01-01T00:00:30Z", now) == pytest.approx(30.0)
    assert reset_seconds(str(now + 12), now) == pytest.approx(12.0)
    assert reset_seconds("Thu, 01 Jan 2026 00:01:00 GMT", now) == pytest.approx(60.0)
    assert reset_seconds("soon") is None and reset_seconds("") is None

    anthropic = {
        "anthropic-ratelimit-input-tokens-remaining": "2000",
        "anthropic-ratelimit-input-tokens-reset": "2026-01-01T00:00:10Z",
        "Anthropic-RateLimit-Output-Tokens-Remaining": "300",
        "anthropic-ratelimit-output-tokens-reset": "2026-01-01T00:00:20Z",
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-requests-reset": "2026-01-01T00:00:01Z",
    }
    assert sorted(tokens_said(anthropic, now=now)) == [
        ("output", 300, pytest.approx(20.0)),
        ("tokens", 2000, pytest.approx(10.0)),
    ]
    assert requests_said(anthropic, now) == (49, pytest.approx(1.0))
    openai = {"x-ratelimit-remaining-requests": "499", "x-ratelimit-reset-requests": "120ms",
              "x-ratelimit-remaining-tokens": "199000"}  # fmt: skip
    assert tokens_said(openai) == [("tokens", 199000, 60.0)]  # no reset: a minute
    assert requests_said(openai) == (499, pytest.approx(0.12))
    assert tokens_said({}) == [] and requests_said({}) is None


def test_declarations_are_checked() -> None:
    with pytest.raises(PlayDefinitionError, match="whole number >= 1"):
        pl.Rate(tokens_per_minute=0)
    with pytest.raises(PlayDefinitionError, match="whole number >= 1"):
        pl.Rate(output_tokens_per_minute=1.5)  # type: ignore[arg-type]
    with pytest.raises(PlayDefinitionError, match="tokens_returned"):
        pl.Rate(tokens_returned="no")  # type: ignore[arg-type]
    url = "https://llm.example/v1/chat"
    with pytest.raises(PlayDefinitionError, match="without tokens="):
        pl.HttpTool("llm.chat", "POST", url, rate=pl.Rate(tokens_per_minute=1000))
    with pytest.raises(PlayDefinitionError, match=r"tokens=\.\.\.\) is a function"):
        pl.HttpTool("llm.chat", "POST", url, tokens=5)  # type: ignore[arg-type]
    with pytest.raises(PlayDefinitionError, match="token_headers"):
        pl.HttpTool("llm.chat", "POST", url, tokens=len, token_headers={"in": [("a", "b")]})

    class Plain:  # a Python-declared transport without an estimate
        inline = True

    spec = ToolSpec(
        id="llm.local",
        transport=Plain(),  # type: ignore[arg-type]
        rate=pl.Rate(tokens_per_minute=10),
    )
    with pytest.raises(PlayDefinitionError, match="cannot estimate"):
        ToolGate(spec, pl.ManualClock())
    tool = pl.HttpTool(
        "llm.chat", "POST", url, tokens=lambda i: 1, token_headers={"tokens": [("a", "b")]}
    )
    assert ToolGate(tool.spec, pl.ManualClock()).tokens is not None


class _PerModel(_Transport):
    """As the LLM adapters: each model's tokens count against that model's limits."""

    def tokens_scope(self, input: Mapping[str, Any]) -> str:
        return str(input["model"])


def test_each_model_has_buckets_of_its_own() -> None:
    """OpenAI and Anthropic limit tokens per model: one model's traffic never waits on
    another's bucket, and what an answer's headers say holds only its own model."""
    clock = pl.ManualClock(start=0.0)
    spec = ToolSpec(id="llm.chat", transport=_PerModel(), rate=pl.Rate(tokens_per_minute=100))
    gate = token_gate(spec, clock)
    assert gate is not None

    async def main() -> None:
        (await gate.take([{"model": "small", "n": 100}])).settle()
        spend = await gate.take([{"model": "large", "n": 50}])
        assert clock.monotonic() == 0.0  # each model's bucket was full
        spend.heard(200, None, [("tokens", 0, 30.0)])  # large: the provider has none left
        spend.settle()
        (await gate.take([{"model": "small", "n": 1}])).settle()
        assert clock.monotonic() == pytest.approx(SPAN / 100)  # small's own refill
        (await gate.take([{"model": "large", "n": 40}])).settle()
        # large's bucket went down to the provider's 0 (not its own 50): 40 tokens' refill
        assert clock.monotonic() == pytest.approx(40 * SPAN / 100)

    asyncio.run(main())
