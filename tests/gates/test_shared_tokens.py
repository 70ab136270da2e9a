"""Token limits shared by every process on one store (``tools/_shared_tokens.py``): each
``ToolGates`` over its own store object on one URL stands for a process (memory, SQLite and
PostgreSQL: ``gate_url``); time is a ManualClock, so waits cost nothing and nothing sleeps.
The shared bucket is read back from the store (``read_gates``) as another process sees it."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from test_reserved_tokens import Counted
from test_token_limits_llm import TPM, double, sim  # noqa: F401 (fixtures)
from test_token_limits_llm import _estimate as llm_estimate
from test_token_limits_llm import _input as llm_input
from test_token_limits_llm import _tool as llm_tool

import playline as pl
from playline.errors import ToolError
from playline.sim import Simulator
from playline.sim._doubles._llm import LlmDouble
from playline.store import GateState, Store, open_store
from playline.tools._gates import ToolGate, ToolGates
from playline.tools._shared_gates import SharedToolGate
from playline.tools._shared_tokens import SPAN, SharedTokenGate, tokens_key
from playline.tools._spec import ToolSpec
from playline.tools._tokens import TokenGate, heard, tokens_said

LIMIT = 600  # tokens a minute: refilled at LIMIT every SPAN (61 s), 10 tokens in 1.017 s
RATE = LIMIT / SPAN
START = LIMIT  # a new shared bucket of tokens starts full (bucket_config)


class _Transport:
    """Estimates a call's tokens from its input's ``n`` (and ``out``); its scope (the model)
    is the input's ``model``, if any."""

    inline = False

    def tokens(self, input: Mapping[str, Any]) -> Any:
        return input["n"] if "out" not in input else (input["n"], input["out"])

    def tokens_scope(self, input: Mapping[str, Any]) -> str:
        return str(input.get("model", ""))

    async def call(self, spec: ToolSpec, inputs: Any, keys: Any = ()) -> list[Any]:
        return [None for _ in inputs]


def llm(**rate: Any) -> ToolSpec:
    return ToolSpec(id="llm.chat", transport=_Transport(), rate=pl.Rate(**rate), auth_scope="acct")


CHAT = llm(tokens_per_minute=LIMIT)
KEY = tokens_key("llm.chat@acct", "", "tokens")


def process(url: str, clock: pl.ManualClock, spec: ToolSpec = CHAT) -> SharedToolGate:
    gate = ToolGates(clock, store=open_store(url))[spec]
    assert isinstance(gate, SharedToolGate) and isinstance(gate.tokens, SharedTokenGate)
    return gate


def tokens(gate: SharedToolGate | ToolGate) -> TokenGate:
    assert gate.tokens is not None
    return gate.tokens


def bucket(url: str, now: float, key: str = KEY) -> GateState | None:
    """The shared bucket ``key`` as another process reads it from the store."""
    store: Store = open_store(url)
    return next((g for g in store.read_gates(now=now) if g.key == key), None)


def level(url: str, now: float, key: str = KEY) -> float:
    state = bucket(url, now, key)
    assert state is not None
    return state.available(now)


async def send(
    gate: TokenGate, n: int, clock: pl.ManualClock, log: list[tuple[float, int]]
) -> None:
    """One call of ``n`` tokens: logged when its tokens let it go; the answer says nothing."""
    spend = await gate.take([{"n": n}])
    log.append((clock.now(), n))
    spend.settle()


def most_over(log: list[tuple[float, int]], start: float, start_tokens: float) -> float:
    """The most tokens sent beyond what a bucket of LIMIT at RATE, holding ``start_tokens``
    at ``start``, allowed: by any time since ``start``, and in any span between two sends."""
    log = sorted(log)
    worst, total = -float("inf"), 0
    for at, n in log:
        total += n
        worst = max(worst, total - start_tokens - RATE * (at - start))
    for i, (first, _) in enumerate(log):
        within = 0
        for at, n in log[i:]:
            within += n
            worst = max(worst, within - LIMIT - RATE * (at - first))
    return worst


def test_two_processes_together_stay_within_one_bucket(gate_url: str) -> None:
    """Two processes send 20 calls of 100 tokens each, at once: together they take what one
    bucket of 600 a minute allows, no more, and no slower (each call goes when its tokens
    are due, however many wait)."""
    clock = pl.ManualClock()
    start = clock.now()
    log: list[tuple[float, int]] = []

    async def both() -> None:
        a, b = process(gate_url, clock), process(gate_url, clock)

        async def calls(gate: SharedToolGate) -> None:
            for _ in range(20):
                await send(tokens(gate), 100, clock, log)

        await asyncio.gather(calls(a), calls(b))
        await asyncio.gather(a.flush(), b.flush())

    asyncio.run(both())
    assert len(log) == 40
    assert most_over(log, start, START) <= 1e-6
    least = (40 * 100 - START) / RATE  # the least time the bucket allows
    assert least <= clock.now() - start <= least * 1.02


def test_two_local_token_gates_would_each_spend_the_whole_limit() -> None:
    """The contrast: a gate each (as on ``memory://``), both send a full bucket at once."""
    clock = pl.ManualClock()
    start = clock.now()
    log: list[tuple[float, int]] = []

    async def both() -> None:
        a, b = ToolGate(CHAT, clock), ToolGate(CHAT, clock)

        async def calls(gate: ToolGate) -> None:
            for _ in range(20):
                await send(tokens(gate), 100, clock, log)

        await asyncio.gather(calls(a), calls(b))

    asyncio.run(both())
    assert most_over(log, start, LIMIT) >= LIMIT - 1


def test_a_correction_in_one_process_is_seen_by_the_other(gate_url: str) -> None:
    clock = pl.ManualClock()

    async def main() -> None:
        a, b = process(gate_url, clock), process(gate_url, clock)
        spend = await tokens(a).take([{"n": 200}])  # 600 -> 400
        heard(200, (50, 0))  # it used less: 150 go back
        spend.settle()
        await a.flush()
        assert level(gate_url, clock.now()) == pytest.approx(550)
        await send(tokens(b), 550, clock, [])  # B finds them: it goes at once
        assert level(gate_url, clock.now()) == pytest.approx(0, abs=1e-3)
        more = await tokens(a).take([{"n": 0}])  # estimated at nothing, used 120:
        heard(200, (120, 0))
        more.settle()
        await a.flush()
        assert level(gate_url, clock.now()) == pytest.approx(-120)  # the bucket owes
        before = clock.now()
        await send(tokens(b), 60, clock, [])  # B waits for the debt and its own 60
        assert clock.now() - before == pytest.approx(180 / RATE)

    asyncio.run(main())


def test_a_call_takes_what_the_bucket_holds_and_waits_for_the_rest(gate_url: str) -> None:
    clock = pl.ManualClock()

    async def main() -> None:
        a, b = process(gate_url, clock), process(gate_url, clock)
        await send(tokens(a), 550, clock, [])  # 600 -> 50
        before = clock.now()
        await send(tokens(b), 200, clock, [])  # 50 now, 150 reserved: due in 150 tokens' time
        assert clock.now() - before == pytest.approx(150 / RATE)
        assert level(gate_url, clock.now()) == pytest.approx(0, abs=1e-3)

    asyncio.run(main())


def test_a_debt_deeper_than_a_reservation_reaches_is_waited_out(gate_url: str) -> None:
    """A call that used twelve times the limit leaves the bucket owing more than a lease may
    reserve ahead (RESERVE): the next call waits until its tokens are within reach, then
    reserves them all at once, due when the debt and they are refilled."""
    clock = pl.ManualClock()
    open_store(gate_url).close()  # the schema, once
    counted = Counted(open_store(gate_url))

    async def main() -> None:
        a = process(gate_url, clock)
        b = ToolGates(clock, store=counted)[CHAT]  # type: ignore[arg-type]
        spend = await tokens(a).take([{"n": 0}])
        heard(200, (12 * LIMIT, 0))
        spend.settle()
        await a.flush()
        assert level(gate_url, clock.now()) == pytest.approx(-11 * LIMIT)
        before = clock.now()
        await send(tokens(b), 100, clock, [])
        assert clock.now() - before == pytest.approx((11 * LIMIT + 100) / RATE)

    asyncio.run(main())
    assert (counted.leases, counted.empty) == (2, 1)  # none within reach, then all reserved


def test_a_process_whose_clock_is_late_does_not_wait_for_the_others_stamps(
    gate_url: str,
) -> None:
    """Machines' clocks differ: a bucket's stamp is written by whichever process took last.
    A process a minute behind waits for its tokens' refill, not a minute more."""
    ahead, late = pl.ManualClock(), pl.ManualClock()
    ahead.advance(60)

    async def both() -> None:
        await send(tokens(process(gate_url, ahead)), LIMIT, ahead, [])  # empty, stamped ahead
        second = tokens(process(gate_url, late))
        for _ in range(2):
            before = late.now()
            await send(second, 100, late, [])
            assert late.now() - before == pytest.approx(100 / RATE)

    asyncio.run(both())


def test_a_provider_that_keeps_its_estimate_gives_nothing_back(gate_url: str) -> None:
    clock = pl.ManualClock()
    spec = llm(tokens_per_minute=LIMIT, tokens_returned=False)

    async def main() -> None:
        a = process(gate_url, clock, spec)
        spend = await tokens(a).take([{"n": 200}])
        heard(200, (50, 0))
        spend.settle()
        await a.flush()
        assert level(gate_url, clock.now()) == pytest.approx(400)

    asyncio.run(main())


def test_a_429_gives_the_estimate_back_to_every_process(gate_url: str) -> None:
    clock = pl.ManualClock()

    async def main() -> None:
        a = process(gate_url, clock)
        spend = await tokens(a).take([{"n": 200}])
        heard(429, None)
        spend.settle()
        await a.flush()
        assert level(gate_url, clock.now()) == pytest.approx(START)

    asyncio.run(main())


def test_the_providers_remaining_tokens_lower_the_shared_bucket(gate_url: str) -> None:
    """Another program spent the account's tokens: the provider says 50 are left, and both
    processes hold to it, less the tokens of the requests in flight it has not counted."""
    clock = pl.ManualClock()

    async def main() -> None:
        a, b = process(gate_url, clock), process(gate_url, clock)
        flying = await tokens(a).take([{"n": 20}])  # sent; the answer below does not count it
        spend = await tokens(a).take([{"n": 100}])  # 600 -> 480
        said = tokens_said({"x-ratelimit-remaining-tokens": "50", "x-ratelimit-reset-tokens": "6s"})
        heard(200, None, said)
        spend.settle()
        await a.flush()
        assert level(gate_url, clock.now()) == pytest.approx(30)  # 50 less the 20 in flight
        before = clock.now()
        await send(tokens(b), 60, clock, [])  # B waits for 30 more
        assert clock.now() - before == pytest.approx(30 / RATE)
        flying.settle()
        heard(200, None, [("tokens", 10_000, 1.0)])  # more left than the bucket holds:
        await a.flush()
        assert level(gate_url, clock.now()) == pytest.approx(0, abs=1e-3)  # unchanged

    asyncio.run(main())


class _Held(pl.ManualClock):
    """A clock whose sleeps never end (until cancelled): a call that reserved its tokens
    stays before their due time. ``sleeping`` is set once one sleeps."""

    def __init__(self) -> None:
        super().__init__()
        self.sleeping = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        self.sleeping.set()
        await asyncio.Event().wait()


async def asleep(clock: _Held, call: asyncio.Future[Any]) -> None:
    """Until ``call`` sleeps (its tokens reserved); it must not have gone without."""
    sleeping = asyncio.ensure_future(clock.sleeping.wait())
    await asyncio.wait((sleeping, call), return_when=asyncio.FIRST_COMPLETED)
    sleeping.cancel()
    assert not call.done(), "the call went without waiting for its tokens"


def test_a_header_counts_the_reservations_not_sent_yet(gate_url: str) -> None:
    """In debt, the bucket's debt is reservations the provider has not counted: a provider
    that says fewer are left than the calls in flight and those need deepens the debt."""
    clock = _Held()

    async def main() -> None:
        a = process(gate_url, clock)
        flying = await tokens(a).take([{"n": 20}])  # sent, not counted by the answer below
        spend = await tokens(a).take([{"n": 580}])  # 600 -> 0
        waiting = asyncio.ensure_future(tokens(a).take([{"n": 100}]))
        await asleep(clock, waiting)  # reserved: -100, due in 100 tokens' time
        assert level(gate_url, clock.now()) == pytest.approx(-100)
        spend.heard(200, None, [("tokens", 0, 60.0)])  # none left: 20 flying, 100 reserved
        spend.settle()
        await a.flush()
        assert level(gate_url, clock.now()) == pytest.approx(-120)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        flying.settle()
        await a.flush()
        assert level(gate_url, clock.now()) == pytest.approx(-20)  # the 100 went back

    asyncio.run(main())


def test_a_call_cancelled_while_its_tokens_are_reserved_gives_them_back(gate_url: str) -> None:
    clock = _Held()

    async def main() -> None:
        a = process(gate_url, clock)
        await send(tokens(a), 550, clock, [])  # 600 -> 50
        waiting = asyncio.ensure_future(tokens(a).take([{"n": 200}]))
        await asleep(clock, waiting)  # 50 taken, 150 reserved
        assert level(gate_url, clock.now()) == pytest.approx(-150)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await a.flush()
        assert level(gate_url, clock.now()) == pytest.approx(50)
        assert tokens(a).waiting == 0

    asyncio.run(main())


def test_an_estimate_over_the_whole_limit_fails_at_once_and_takes_nothing(gate_url: str) -> None:
    clock = pl.ManualClock()

    async def main() -> None:
        a = process(gate_url, clock, llm(tokens_per_minute=LIMIT, output_tokens_per_minute=50))
        with pytest.raises(ToolError) as caught:
            await tokens(a).take([{"n": LIMIT + 1}])
        assert caught.value.code == "too_many_tokens" and caught.value.outcome == "fatal"
        with pytest.raises(ToolError, match="output_tokens_per_minute=50"):
            await tokens(a).take([{"n": 1, "out": 51}])
        assert clock.now() == pl.ManualClock().now()

    asyncio.run(main())
    assert bucket(gate_url, pl.ManualClock().now()) is None


def test_each_model_and_kind_has_a_shared_bucket_of_its_own(gate_url: str) -> None:
    clock = pl.ManualClock()
    spec = llm(tokens_per_minute=LIMIT, output_tokens_per_minute=100)

    async def main() -> None:
        a, b = process(gate_url, clock, spec), process(gate_url, clock, spec)
        (await tokens(a).take([{"model": "small", "n": 300, "out": 100}])).settle()
        (await tokens(b).take([{"model": "large", "n": 300, "out": 100}])).settle()
        assert clock.now() == pl.ManualClock().now()  # each model's buckets were there
        (await tokens(b).take([{"model": "small", "n": 1, "out": 10}])).settle()
        # small's output bucket (100, emptied by A) waits for 10 output tokens' refill
        assert clock.now() - pl.ManualClock().now() == pytest.approx(10 * SPAN / 100)

    asyncio.run(main())
    now = clock.now()
    for model in ("small", "large"):
        assert bucket(gate_url, now, tokens_key("llm.chat@acct", model, "tokens")) is not None
        assert bucket(gate_url, now, tokens_key("llm.chat@acct", model, "output")) is not None


def test_a_tool_without_a_declared_token_limit_keeps_its_tokens_local(gate_url: str) -> None:
    """An estimate and no limit: only what the provider says, heard by this process."""
    clock = pl.ManualClock()

    async def main() -> None:
        gate = ToolGates(clock, store=open_store(gate_url))[llm()]
        assert type(gate.tokens) is TokenGate
        gate.tokens.said("tokens", 10, 3.0)
        (await gate.tokens.take([{"n": 10}])).settle()
        (await gate.tokens.take([{"n": 1}])).settle()
        assert clock.now() - pl.ManualClock().now() >= 3.0

    asyncio.run(main())
    assert bucket(gate_url, clock.now()) is None


def test_a_run_on_a_shared_store_spends_the_shared_bucket(
    sim: Simulator,  # noqa: F811 (the fixtures of test_token_limits_llm)
    double: LlmDouble,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The engine's calls through a shared gate: their estimates are leased from the store's
    bucket, the answers' usage and headers correct it, and past the double's TPM many times
    over, not one 429."""
    rows = 30
    url = f"sqlite:///{tmp_path}/playline.db"

    async def ask(row: Mapping[str, Any], ctx: pl.Context) -> Any:
        return (await ctx.tool("sim.chat", llm_input(row["n"]))).data

    @pl.play(name="shared-tokens")
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        people = [{"n": 500 + i} for i in range(rows)]
        return await ctx.dataset("rows", people, key="n").with_column("answer", ask).run()

    clock = pl.ManualClock()
    double.clock = clock.monotonic
    result = pl.run(play, {}, store=url, tools=[llm_tool(sim)], clock=clock)
    assert result.status == "completed", result.error
    assert double.throttled == 0
    spent = sum(llm_estimate(llm_input(500 + i)) for i in range(rows))
    assert spent > 4 * TPM
    keys = [g.key for g in open_store(url).read_gates(now=clock.now())]
    assert [k for k in keys if "|tokens|" in k] == [f"{keys[0]}|tokens||tokens"]
