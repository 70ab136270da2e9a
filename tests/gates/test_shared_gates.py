"""SharedToolGate: processes on one store share a tool's rate, what is learned of it, and a
declared concurrency cap. Each ``ToolGates(clock, store=...)`` over its own store object
stands for a process; time is a ManualClock, so waits cost nothing and nothing sleeps."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import playline as pl
from playline.store import Store, open_store
from playline.tools import Rate, ToolSpec
from playline.tools._declared import JITTER
from playline.tools._gates import ToolGate, ToolGates, gate_key, shares_gate
from playline.tools._learning import CAP_REST, JUDGE, SERIES_END
from playline.tools._shared_gates import SharedToolGate


def spec(rate: Rate, *, tool: str = "t.mail", account: str = "acct") -> ToolSpec:
    return ToolSpec(id=tool, transport=None, rate=rate, auth_scope=account)  # type: ignore[arg-type]


DECLARED = spec(Rate(per_second=20, burst=12))  # paced to 19/s, bursts of 5 (shared_burst)


def processes(url: str, clock: pl.ManualClock, n: int = 2) -> list[ToolGates]:
    return [ToolGates(clock, store=open_store(url)) for _ in range(n)]


def shared(gates: ToolGates, tool: ToolSpec) -> SharedToolGate:
    gate = gates[tool]
    assert isinstance(gate, SharedToolGate)
    return gate


def store_of(gates: ToolGates) -> Store:
    assert gates.store is not None
    return gates.store


def run(make: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(make())  # type: ignore[arg-type]


async def take(gate: Any, calls: int, clock: pl.ManualClock, log: list[float]) -> None:
    for _ in range(calls):
        got = await gate.acquire(1)
        log.extend([clock.now()] * got)
        gate.release(got)


async def series_cut(
    gate: SharedToolGate, clock: pl.ManualClock, retry_after: float | None
) -> None:
    """A 429 starts a series of cuts; the answers after it, then a 429, make its first cut
    (``tools/_learning.py``)."""
    gate.release(await gate.acquire(1))
    gate.throttled(retry_after)
    await gate.flush()
    clock.advance(max(retry_after or 0.0, CAP_REST))
    for _ in range(JUDGE - 1):
        gate.succeeded()
    gate.throttled(retry_after)
    await gate.flush()


def most_in_any_window(log: list[float], start: float) -> float:
    """The largest number of calls by time t, less what the rate allowed by then."""
    return max(i + 1 - 19 * (t - start) for i, t in enumerate(sorted(log)))


def test_which_tools_share_a_gate() -> None:
    assert shares_gate(spec(Rate()))  # at a provider: its limit, declared or learned
    assert shares_gate(spec(Rate(per_second=2), account="local"))
    assert not shares_gate(spec(Rate(concurrency=2), account="local"))
    assert gate_key(spec(Rate(), account="a1")) != gate_key(spec(Rate(), account="a2"))


def rejected_by_provider(arrivals: list[float], rate: float, burst: int) -> int:
    """How many of the requests arriving at ``arrivals`` a provider's token bucket (``rate``
    a second, ``burst`` at most, full at first) answers 429."""
    tokens, stamp, rejected = float(burst), min(arrivals), 0
    for at in sorted(arrivals):
        tokens, stamp = min(burst, tokens + (at - stamp) * rate), at
        if tokens >= 1 - 1e-9:
            tokens -= 1
        else:
            rejected += 1
    return rejected


@settings(max_examples=60, deadline=None)
@given(
    rate=st.sampled_from([(5, 5), (20, 20), (20, 10), (50, 50), (1, 2)]),
    asks=st.lists(st.tuples(st.floats(0, 0.5), st.floats(0, JITTER)), min_size=1, max_size=80),
)
def test_requests_arriving_unevenly_within_the_jitter_find_the_provider_s_tokens(
    rate: tuple[int, int], asks: list[tuple[float, float]]
) -> None:
    """A gate lets requests out as its tokens come; each reaches the provider up to JITTER
    later (a process descheduled between its token and its send, a slower path), so some
    arrive closer together than they left. The provider's bucket, with the rate and burst
    the gate was told, answers none of them 429: the gate keeps JITTER seconds of tokens
    back from its burst (gate_burst; the contention bench saw 1-3 429s a run without). A
    provider whose burst holds less than that has only the pace (PACE) to absorb it."""
    per_second, burst = rate
    clock = pl.ManualClock()
    arrivals: list[float] = []

    async def go() -> None:
        gate = ToolGate(spec(Rate(per_second=per_second, burst=burst)), clock)
        for idle, delay in asks:
            await clock.sleep(idle)
            gate.release(await gate.acquire(1))
            arrivals.append(clock.now() + delay)

    run(go)
    assert rejected_by_provider(arrivals, per_second, burst) == 0


def test_two_processes_together_stay_within_one_bucket(gate_url: str) -> None:
    clock = pl.ManualClock()
    start = clock.now()
    log: list[float] = []

    async def both() -> None:
        a, b = processes(gate_url, clock)
        await asyncio.gather(take(a[DECLARED], 60, clock, log), take(b[DECLARED], 60, clock, log))

    run(both)
    assert len(log) == 120
    assert most_in_any_window(log, start) < 5.1  # the burst, and never a call more


WINDOWED = spec(Rate(per_minute=5, per_hour=8), tool="t.windowed")  # Apollo's, shrunk


def test_a_window_one_process_filled_holds_the_next(gate_url: str) -> None:
    """Process A sends 5 (the minute's limit); B's requests wait for the minute, then for
    the hour, which A's count in too."""
    clock = pl.ManualClock()
    log: list[float] = []

    async def one_then_other() -> None:
        a, b = processes(gate_url, clock)
        await take(a[WINDOWED], 5, clock, log)
        await take(b[WINDOWED], 4, clock, log)

    run(one_then_other)
    assert len(log) == 9
    for stamp in log:
        assert sum(stamp - 60 < other <= stamp for other in log) <= 5
        assert sum(stamp - 3600 < other <= stamp for other in log) <= 8
    assert log[5] - log[0] >= 60  # B waited for A's minute
    assert log[8] - log[0] >= 3600  # and for the hour


def test_a_process_whose_clock_is_late_does_not_wait_for_the_others_stamps(
    gate_url: str,
) -> None:
    """Machines' clocks differ: the bucket's stamp is written by whichever process took last.
    A process a minute behind goes on at the shared rate, not a minute later."""
    ahead, late = pl.ManualClock(), pl.ManualClock()
    ahead.advance(60)
    log: list[float] = []

    async def both() -> None:
        first = ToolGates(ahead, store=open_store(gate_url))
        await take(first[DECLARED], 20, ahead, [])  # stamps the bucket a minute ahead
        second = ToolGates(late, store=open_store(gate_url))
        await take(second[DECLARED], 19, late, log)

    start = late.now()
    run(both)
    assert late.now() - start < 2  # 19 calls at 19/s, not 60 s of waiting for the stamp
    assert most_in_any_window(log, log[0]) < 5.1


def test_local_gates_would_each_spend_the_whole_rate() -> None:
    """The contrast: two processes with a gate of their own send at twice the rate."""
    clock = pl.ManualClock()
    start = clock.now()
    log: list[float] = []
    declared = spec(Rate(per_second=20, burst=20))  # bursts of 18 each

    async def both() -> None:
        a, b = ToolGate(declared, clock), ToolGate(declared, clock)
        await asyncio.gather(take(a, 60, clock, log), take(b, 60, clock, log))

    run(both)
    assert most_in_any_window(log, start) > 10


def test_a_429_holds_every_call_of_a_local_gate_not_only_the_one_that_heard_it() -> None:
    """The provider's bucket is empty: the calls that did not hear the 429 wait too."""
    clock = pl.ManualClock()

    async def go() -> tuple[float, float]:
        gate = ToolGate(DECLARED, clock)
        gate.release(await gate.acquire(1))
        assert gate.throttled(2.0) == 2.0
        heard = clock.now()
        gate.release(await gate.acquire(1))  # another call, which heard nothing
        return heard, clock.now()

    heard, passed = run(go)
    assert passed >= heard + 2.0


def test_a_429_heard_by_one_process_holds_the_other(gate_url: str) -> None:
    clock = pl.ManualClock()

    async def go() -> tuple[float, float, float | None]:
        a, b = processes(gate_url, clock)
        ga, gb = shared(a, DECLARED), shared(b, DECLARED)
        ga.release(await ga.acquire(1))
        assert ga.throttled(2.0) == 2.0
        await ga.flush()
        heard = clock.now()
        gb.release(await gb.acquire(1))  # b never heard the 429
        return heard, clock.now(), gb.rate

    heard, passed, rate = run(go)
    assert passed >= heard + 2.0
    assert rate == pytest.approx(19)  # a series starts: nothing is cut before it is judged


def test_a_cut_is_made_once_for_every_process(gate_url: str) -> None:
    clock = pl.ManualClock()

    async def go() -> tuple[float | None, float | None]:
        a, b = processes(gate_url, clock)
        ga, gb = shared(a, DECLARED), shared(b, DECLARED)
        await series_cut(ga, clock, 1.0)
        clock.advance(2)
        gb.release(await gb.acquire(1))  # b never heard a 429
        return ga.rate, gb.rate

    rate_a, rate_b = run(go)
    assert rate_a is not None and rate_a < 19
    assert rate_b == pytest.approx(rate_a)


def test_a_rate_is_learned_once_for_every_process(gate_url: str) -> None:
    undeclared = spec(Rate())
    clock = pl.ManualClock()

    async def go() -> tuple[float | None, float | None, list[Any]]:
        a, b = processes(gate_url, clock)
        ga, gb = shared(a, undeclared), shared(b, undeclared)
        gb.release(await gb.acquire(3))  # unlimited: b trusts that for a while
        ga.release(await ga.acquire(1))
        ga.throttled(1.0)
        await ga.flush()
        clock.advance(5)  # past b's refresh and the pause
        gb.release(await gb.acquire(1))
        return ga.rate, gb.rate, store_of(a).read_gates(now=clock.now())

    rate_a, rate_b, gates = run(go)
    assert rate_a == rate_b == pytest.approx(50)  # LEARN_START: a series starts from it
    [gate] = gates
    assert (gate.key, gate.rate, gate.burst) == ("t.mail@acct", pytest.approx(50.0), 1)


def test_a_declared_cap_is_shared_by_every_process(gate_url: str) -> None:
    capped = spec(Rate(concurrency=2))
    clock = pl.ManualClock()

    async def go() -> tuple[int, int, int]:
        a, b = processes(gate_url, clock)
        ga, gb = shared(a, capped), shared(b, capped)
        assert await ga.acquire(5) == 2
        waiting = asyncio.get_running_loop().create_task(gb.acquire(1))
        await asyncio.sleep(0)
        assert not waiting.done()  # both slots are a's
        ga.release(2)
        await ga.flush()
        got = await waiting
        [gate] = store_of(a).read_gates(now=clock.now())
        gb.release(got)
        await gb.flush()
        [after] = store_of(a).read_gates(now=clock.now())
        return got, gate.in_flight, after.in_flight

    assert run(go) == (1, 1, 0)


class HeldStore:
    """A store whose leases wait until the test lets them go (the store is one of our own
    pluggable edges); everything else is the real store's."""

    io_inline = False  # its calls wait: never made on the event loop

    def __init__(self, store: Store) -> None:
        self._store = store
        self.leasing, self.go = threading.Event(), threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def lease_gate(self, *args: Any, **kwargs: Any) -> Any:
        self.leasing.set()
        assert self.go.wait(30)
        return self._store.lease_gate(*args, **kwargs)


def test_a_lease_cancelled_while_the_store_grants_it_gives_its_slots_back(tmp_path: Any) -> None:
    capped = spec(Rate(concurrency=4))
    store = open_store(f"sqlite:///{tmp_path}/s.db")
    held = HeldStore(store)
    clock = pl.ManualClock()

    async def go() -> None:
        gate = shared(ToolGates(clock, store=held), capped)  # type: ignore[arg-type]
        asking = asyncio.ensure_future(gate.acquire(3))
        assert await asyncio.to_thread(held.leasing.wait, 30)
        asking.cancel()  # while the store is granting
        held.go.set()
        with pytest.raises(asyncio.CancelledError):
            await asking
        await gate.flush()

    run(go)
    [gate] = store.read_gates(now=clock.now())
    assert gate.in_flight == 0


def test_a_429_naming_no_wait_halves_a_shared_cap_for_everyone(gate_url: str) -> None:
    capped = spec(Rate(per_second=50, concurrency=8))
    clock = pl.ManualClock()

    async def go() -> tuple[int, int]:
        a, b = processes(gate_url, clock)
        ga, gb = shared(a, capped), shared(b, capped)
        ga.release(await ga.acquire(1))
        await series_cut(ga, clock, None)
        gb.release(await gb.acquire(1))
        return ga.concurrency, gb.concurrency

    assert run(go) == (4, 4)


def test_a_clean_stretch_raises_a_cut_rate_for_everyone(gate_url: str) -> None:
    clock = pl.ManualClock()

    async def go() -> tuple[float | None, float | None]:
        a, b = processes(gate_url, clock)
        ga, gb = shared(a, DECLARED), shared(b, DECLARED)
        ga.release(await ga.acquire(1))
        await series_cut(ga, clock, 1.0)
        cut = ga.rate
        for _ in range(SERIES_END):  # a clean stretch long enough to end the series
            ga.succeeded()
        await ga.flush()
        clock.advance(2)
        gb.release(await gb.acquire(1))
        return cut, gb.rate

    cut, raised = run(go)
    assert cut is not None and cut < 19
    assert raised == pytest.approx(min(19.0, cut * 1.15))


def test_the_runner_shares_gates_through_durable_stores_only(tmp_path: Any) -> None:
    registry = pl.ToolRegistry()

    @registry.tool("t.rated", rate=pl.Rate(per_second=100))
    def rated(input: dict[str, Any]) -> dict[str, Any]:
        return input

    @registry.tool("t.free")
    def free(input: dict[str, Any]) -> dict[str, Any]:
        return input

    @pl.play(name="gated")
    async def play(ctx: pl.Context, input: Any) -> Any:
        await ctx.tool("t.rated", {"x": 1})
        await ctx.tool("t.free", {"x": 1})

    url = f"sqlite:///{tmp_path}/s.db"
    memory = open_store("memory://")
    assert pl.run(play, store=url, tools=[registry]).ok
    assert pl.run(play, store=memory, tools=[registry]).ok
    assert [g.key for g in open_store(url).read_gates(now=0)] == ["t.rated@local"]
    assert memory.read_gates(now=0) == []


def test_tokens_of_calls_not_sent_go_back_to_every_process(gate_url: str) -> None:
    """Processes running the same play race for each call: the losers' claims find it held
    and nothing is sent. Their tokens go back, so the winner's next calls wait for none."""
    clock = pl.ManualClock()

    async def go() -> tuple[float, list[float]]:
        a, b = processes(gate_url, clock)
        ga, gb = shared(a, DECLARED), shared(b, DECLARED)
        start = clock.now()
        lost = await ga.acquire(5)  # the bucket starts half full: all it has
        ga.release(lost)
        ga.refund(lost)  # its claims were held: nothing went out
        await ga.flush()
        log: list[float] = []
        await take(gb, lost, clock, log)
        return start, log

    start, log = run(go)
    assert log == [start] * len(log) and len(log) >= 2  # no wait for the tokens given back


def test_tokens_given_back_during_a_pause_are_not_spent_at_its_end(gate_url: str) -> None:
    """A 429 says the provider's bucket is empty: every process holds, then starts from an
    empty bucket. A call that took its token before the 429 and was not sent does not give
    it back into the pause, which would end it in a burst."""
    clock = pl.ManualClock()

    async def go() -> float:
        [a] = processes(gate_url, clock, 1)
        gate = shared(a, DECLARED)
        taken = await gate.acquire(1)
        gate.release(taken)
        gate.throttled(2.0)  # heard by another call
        await gate.flush()
        heard = clock.now()
        gate.refund(taken)  # this one was not sent
        await gate.flush()
        gate.release(await gate.acquire(1))
        return clock.now() - heard

    assert run(go) == pytest.approx(2.0 + 1 / 19)  # the pause, then a token earned after it


def test_a_local_gate_takes_back_the_tokens_of_calls_not_sent() -> None:
    clock = pl.ManualClock()

    async def go() -> float:
        gate = ToolGate(spec(Rate(per_second=1, burst=1)), clock)
        start = clock.now()
        gate.release(await gate.acquire(1))
        gate.refund(1)  # not sent
        gate.release(await gate.acquire(1))
        gate.refund(3)  # never past the burst
        gate.release(await gate.acquire(1))
        gate.release(await gate.acquire(1))
        return clock.now() - start

    assert run(go) == pytest.approx(1 / 0.95)  # one wait: the third call's token
