"""Processes queued at a shared gate reserve their tokens: each sleeps until its token is due
instead of asking the store again each time one comes, so a token costs about one lease
however many wait, and the rate, a shared cap and a 429's pause hold as before.

Each ``ToolGates`` over its own store object stands for a process (``test_shared_gates.py``);
time is a ManualClock. ``Counted`` counts the gate transactions that take tokens or slots
(``lease_gate``, ``take_slots`` asked for some), the figure the scale bench reports as
leases a call."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from test_shared_gates import DECLARED, most_in_any_window, run, shared, spec, take

import playline as pl
from playline.store import GateConfig, GateGrant, GateState, Store, open_store
from playline.tools import Rate
from playline.tools._gates import ToolGates

CAPPED = spec(Rate(per_second=20, burst=12, concurrency=8), tool="t.capped")
PROCESSES, CALLS = 8, 12


class Counted:
    """A store that counts its gate leases and can act when a process looks at a gate it
    reserved a token of (the store is one of our pluggable edges); the rest is the real
    store's."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.leases = 0
        self.empty = 0  # leases that granted nothing
        self.looks = self.releases = 0
        self.on_look: Callable[[], None] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def lease_gate(self, *args: Any, **kwargs: Any) -> GateGrant:
        grant = self._store.lease_gate(*args, **kwargs)
        self.leases += 1
        self.empty += not grant.granted
        return grant

    def release_gate(self, *args: Any, **kwargs: Any) -> None:
        self.releases += 1
        self._store.release_gate(*args, **kwargs)

    def take_slots(self, key: str, wanted: int, **kwargs: Any) -> GateGrant:
        self.leases += wanted > 0
        self.looks += wanted == 0
        if self.on_look is not None:
            self.on_look()
        return self._store.take_slots(key, wanted, **kwargs)


def processes(url: str, clock: pl.ManualClock, n: int) -> list[tuple[ToolGates, Counted]]:
    open_store(url).close()  # the schema, once
    counted = [Counted(open_store(url)) for _ in range(n)]
    return [(ToolGates(clock, store=c), c) for c in counted]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("tool", "most"), [(DECLARED, 1.25), (CAPPED, 2.5)], ids=["rate", "rate and cap"]
)
def test_processes_queued_at_a_gate_spend_a_lease_a_token(
    gate_url: str, tool: Any, most: float
) -> None:
    """Eight processes take 12 calls each, one at a time, from a gate that lets 19 a second
    through: together within its bucket, for about one lease a call (under a shared cap,
    two: queued behind each other's reservations, they lease tokens alone and take their
    slots when they are due), few of which find nothing. When every waiting process asked
    for each token, they made 2.3-2.7 leases a call, 56-63% of them finding nothing."""
    clock = pl.ManualClock()
    start = clock.now()
    log: list[float] = []
    procs = processes(gate_url, clock, PROCESSES)

    async def all_of_them() -> None:
        await asyncio.gather(*(take(gates[tool], CALLS, clock, log) for gates, _ in procs))

    run(all_of_them)
    assert len(log) == PROCESSES * CALLS
    assert most_in_any_window(log, start) < 5.1  # the burst, and never a call more
    leases = sum(counted.leases for _, counted in procs)
    empty = sum(counted.empty for _, counted in procs)
    assert leases <= most * len(log), leases / len(log)
    assert empty <= 0.1 * leases, empty / leases


def test_a_pause_voids_a_token_reserved_before_it(gate_url: str) -> None:
    """Process B reserves a token behind others' reservations; before it is due another
    process hears a 429, which pauses the gate for 2 s and empties its bucket. B looks at
    the gate when its token is due, finds the pause, and waits it out: its call goes after
    the pause, on a token earned after it."""
    clock = pl.ManualClock()
    [(gates, counted)] = processes(gate_url, clock, 1)
    gate = shared(gates, DECLARED)
    config = GateConfig(ceiling=19.0, burst=5)  # what DECLARED declares (see shared_burst)
    heard: list[float] = []

    def another_process_hears_a_429() -> None:
        now = clock.now()
        heard.append(now)
        counted.on_look = None

        def paused(s: GateState) -> GateState:
            return replace(s, paused_until=now + 2, tokens=0.0, stamp=now + 2)

        open_store(gate_url).tune_gate(gate.key, paused)

    async def go() -> float:
        gate.release(await gate.acquire(3))  # the half-full bucket's tokens
        others = open_store(gate_url).lease_gate(
            gate.key, 4, config=config, holder="others", lease_until=clock.now() + 60,
            now=clock.now(), ahead=10.0, slots=False,
        )  # fmt: skip
        assert others.granted == 4  # reserved ahead of B
        counted.on_look = another_process_hears_a_429  # as B's token comes due
        gate.release(await gate.acquire(1))
        return clock.now()

    went = run(go)
    assert heard, "B never looked at the gate before its reserved call"
    assert went >= heard[0] + 2 + 1 / 19 - 1e-6


def test_tokens_given_back_while_others_are_reserved_go_to_nobody(gate_url: str) -> None:
    """Calls let out and not sent give their tokens back, but not while reservations are
    out: the tokens would go to a reservation made after those, due as early as they are
    (two reservations at once), and a provider's bucket that was full when the tokens came
    did not keep them."""
    clock = pl.ManualClock()
    [(gates, _)] = processes(gate_url, clock, 1)
    gate = shared(gates, DECLARED)
    config = GateConfig(ceiling=19.0, burst=5)  # what DECLARED declares (see shared_burst)
    store = open_store(gate_url)

    def reserve(wanted: int) -> GateGrant:
        return store.lease_gate(
            gate.key, wanted, config=config, holder="others", lease_until=clock.now() + 60,
            now=clock.now(), ahead=10.0, slots=False,
        )  # fmt: skip

    async def go() -> tuple[float, float]:
        gate.release(await gate.acquire(2))  # the half-full bucket's whole tokens
        first = reserve(3)
        gate.refund(2)  # two of the calls were not sent
        await gate.flush()
        return first.due, reserve(1).due

    first, second = run(go)
    assert second >= first + 1 / 19 - 1e-6


def test_a_reservation_behind_others_holds_a_quarter_second_of_tokens(gate_url: str) -> None:
    """Its calls go together when its last token is due: at 19 a second, 4 of the 8 the
    wave asks for (``SHARED_JITTER``), not the burst's 5."""
    clock = pl.ManualClock()
    [(gates, _)] = processes(gate_url, clock, 1)
    gate = shared(gates, DECLARED)
    config = GateConfig(ceiling=19.0, burst=5)  # what DECLARED declares (see shared_burst)

    async def go() -> int:
        gate.release(await gate.acquire(2))  # the half-full bucket's whole tokens
        open_store(gate_url).lease_gate(
            gate.key, 3, config=config, holder="others", lease_until=clock.now() + 60,
            now=clock.now(), ahead=10.0, slots=False,
        )  # fmt: skip
        got = await gate.acquire(8)
        gate.release(got)
        return got

    assert run(go) == 4


def test_calls_waiting_for_their_tokens_hold_no_slot_of_a_shared_cap(gate_url: str) -> None:
    """Behind others' reservations a process leases tokens alone; the cap counts its call
    only once its token is due (it would otherwise fill with calls not sent)."""
    clock = pl.ManualClock()
    [(gates, counted)] = processes(gate_url, clock, 1)
    gate = shared(gates, CAPPED)
    config = GateConfig(ceiling=19.0, burst=5, cap=8)
    in_flight_when_due: list[int] = []

    def look() -> None:
        [state] = open_store(gate_url).read_gates(now=clock.now())
        in_flight_when_due.append(state.in_flight)

    async def go() -> int:
        gate.release(await gate.acquire(2))
        await gate.flush()
        others = open_store(gate_url).lease_gate(
            gate.key, 5, config=config, holder="others", lease_until=clock.now() + 60,
            now=clock.now(), ahead=10.0, slots=False,
        )  # fmt: skip
        assert others.granted == 5
        counted.on_look = look
        got = await gate.acquire(1)
        [state] = open_store(gate_url).read_gates(now=clock.now())
        gate.release(got)
        return state.in_flight

    assert run(go) == 1  # its call, once due
    assert in_flight_when_due[:1] == [0]  # none while it waited


class Stopped(pl.ManualClock):
    """A clock whose sleeps last until they are cancelled: ``sleeping`` counts them."""

    def __init__(self) -> None:
        super().__init__()
        self.sleeping = 0

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        self.sleeping += 1
        try:
            await asyncio.get_running_loop().create_future()
        finally:
            self.sleeping -= 1


async def until(condition: Callable[[], bool]) -> None:
    while not condition():  # store calls on PostgreSQL run on threads: look again
        await asyncio.sleep(0)


def test_a_wave_waiting_for_a_full_cap_takes_the_slots_of_its_calls_as_they_end(
    gate_url: str,
) -> None:
    """Processes A and B hold a slot each of a cap of 2; A's next wave waits for one. When
    A's call ends, its slot goes to that wave: no write frees it in the store, no look finds
    it (under a full cap, those were most of the gates' transactions), one lease takes its
    token."""
    clock = Stopped()
    (a, counted), (b, _) = processes(gate_url, clock, 2)
    two = spec(Rate(per_second=100, burst=100, concurrency=2), tool="t.two")
    ga, gb = shared(a, two), shared(b, two)

    async def go() -> tuple[int, int, tuple[int, ...]]:
        assert await gb.acquire(1) == 1
        assert await ga.acquire(1) == 1
        waiting = asyncio.ensure_future(ga.acquire(1))
        await asyncio.wait_for(until(lambda: clock.sleeping == 1), 30)  # the cap is full
        before = (counted.leases, counted.looks, counted.releases)
        ga.release(1)
        try:
            await asyncio.wait_for(until(lambda: waiting.done() or counted.releases > 0), 30)
            after = (counted.leases, counted.looks, counted.releases)
            assert waiting.done(), f"a release was written: {after}"
        finally:
            waiting.cancel()
        got = waiting.result()
        [state] = open_store(gate_url).read_gates(now=clock.now())
        return got, state.in_flight, tuple(y - x for x, y in zip(before, after, strict=True))

    got, in_flight, made = run(go)
    assert got == 1 and in_flight == 2  # the slot went from the call to the wave
    assert made == (1, 0, 0)  # its token's lease; no look, no release
