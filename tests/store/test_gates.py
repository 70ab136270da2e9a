"""The shared rate gates (GateStore): token leases, calls in flight per holder, tuning.

Every store computes a lease as ``GateState.take`` does (the SQL stores in one UPDATE), so a
random sequence of leases gives the same grants on memory, SQLite and PostgreSQL.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from playline.store import GateConfig, GateGrant, GateState, Store, open_store
from playline.store._owners import holding

from storehelp import FAR, FAR2, ME, NOW, OTHER, dead_owner

RATE = GateConfig(ceiling=4.0, burst=10)
CAPPED = GateConfig(ceiling=100.0, burst=100, cap=4)
_keys = itertools.count()  # hypothesis runs its examples on one store: a gate each


def lease(
    store: Store,
    wanted: int,
    *,
    key: str = "t@acct",
    config: GateConfig = RATE,
    holder: str = ME,
    now: float = NOW,
    ahead: float = 0.0,
    slots: bool = True,
) -> tuple[int, GateState]:
    grant = store.lease_gate(
        key,
        wanted,
        config=config,
        holder=holder,
        lease_until=now + 60,
        now=now,
        ahead=ahead,
        slots=slots,
    )
    return grant.granted, grant.state


def reserve(
    store: Store, wanted: int, *, ahead: float, now: float = NOW, holder: str = ME, **kw: Any
) -> GateGrant:
    return store.lease_gate(
        "t@acct", wanted, holder=holder, lease_until=now + 60, now=now, ahead=ahead, **kw
    )


def test_with_no_token_a_lease_reserves_those_due_within_ahead(store: Store) -> None:
    """The bucket goes into debt: each reservation is due after those made before it, and a
    lease finds no token until the debt is paid (4 tokens a second here)."""
    assert lease(store, 5)[0] == 5  # all the new gate holds
    first = reserve(store, 3, ahead=0.5, config=RATE)
    assert (first.granted, first.due) == (2, pytest.approx(NOW + 0.5))  # 2 in 0.5 s
    assert first.state.tokens == pytest.approx(-2.0)
    behind = reserve(store, 3, ahead=0.8, config=RATE)  # the next is due at NOW + 0.75
    assert (behind.granted, behind.due) == (1, pytest.approx(NOW + 0.75))
    assert reserve(store, 3, ahead=0.8, config=RATE).granted == 0  # NOW + 1.0: too far
    assert lease(store, 3, now=NOW + 0.7)[0] == 0  # no token before the debt is paid
    now = reserve(store, 1, ahead=0.5, config=RATE, now=NOW + 1.0)
    assert (now.granted, now.due) == (1, 0.0)  # one earned: granted at once, not reserved


def test_a_reservation_never_exceeds_the_burst_nor_comes_in_a_pause(store: Store) -> None:
    lease(store, 5)
    assert reserve(store, 50, ahead=100.0, config=RATE).granted == 10  # the burst
    store.tune_gate("t@acct", lambda s: replace(s, paused_until=NOW + 200, stamp=NOW + 200))
    assert reserve(store, 1, ahead=1000.0, config=RATE, now=NOW + 1).granted == 0


def test_a_gate_with_windows_reserves_nothing(store: Store) -> None:
    """A window counts a request when it is let out: none is let out ahead of its time."""
    windowed = GateConfig(ceiling=4.0, burst=10, windows=((60.0, 50),))
    assert lease(store, 5, config=windowed)[0] == 5
    assert reserve(store, 1, ahead=10.0, config=windowed).granted == 0


def test_under_a_cap_only_the_next_token_is_reserved_with_its_slots(store: Store) -> None:
    """The first in line reserves the next token and its slot (it waits one token's time at
    most); behind it, a lease reserves tokens alone: their slots are taken when due."""
    config = GateConfig(ceiling=4.0, burst=4, cap=4)
    with holding(ME), holding(OTHER):
        assert lease(store, 2, config=config)[0] == 2  # what the new gate holds
        store.release_gate("t@acct", 2, holder=ME, lease_until=NOW + 60)
        first = reserve(store, 3, ahead=10.0, config=config)
        assert (first.granted, first.slots, first.due) == (1, 1, pytest.approx(NOW + 0.25))
        behind = reserve(store, 3, ahead=10.0, config=config, holder=OTHER)
        assert (behind.granted, behind.slots, behind.due) == (3, 0, pytest.approx(NOW + 1.0))
        assert behind.state.in_flight == 1  # the first's slot, none for the 3 behind it
        assert reserve(store, 3, ahead=0.0, config=config).granted == 0  # none to reserve


def test_tokens_leased_alone_take_no_slot_until_they_are_due(store: Store) -> None:
    """Under a shared cap, ``slots=False`` leases tokens alone (queued behind others'
    reservations, a process must not hold the cap while it waits); ``take_slots`` takes
    their slots when they are due, as many as the calls in flight leave free."""
    with holding(ME), holding(OTHER):
        assert lease(store, 2, config=CAPPED, holder=OTHER)[0] == 2
        grant = store.lease_gate(
            "t@acct", 9, config=CAPPED, holder=ME, lease_until=NOW + 60, now=NOW, slots=False
        )
        assert grant.granted == 9 and grant.state.in_flight == 0  # 4 free slots ignored
        look = store.take_slots("t@acct", 0, **_at(CAPPED))
        assert (look.granted, look.state.in_flight) == (0, 2)  # a look takes nothing
        took = store.take_slots("t@acct", 9, **_at(CAPPED))
        assert (took.granted, took.state.in_flight) == (2, 4)
        assert store.take_slots("t@acct", 1, **_at(CAPPED)).granted == 0  # full
        store.release_gate("t@acct", 1, holder=ME, lease_until=NOW + 60)
        assert store.take_slots("t@acct", 3, **_at(CAPPED)).granted == 1
        [gate] = store.read_gates(now=NOW)
        assert gate.in_flight == 4


def test_take_slots_answers_a_pause_and_takes_nothing_in_it(store: Store) -> None:
    lease(store, 1, config=CAPPED)
    store.tune_gate("t@acct", lambda s: replace(s, paused_until=NOW + 2, stamp=NOW + 2))
    seen = store.take_slots("t@acct", 2, **_at(CAPPED, now=NOW + 1))
    assert seen.granted == 0 and seen.state.paused_until == NOW + 2
    assert store.take_slots("t@acct", 2, **_at(RATE, now=NOW + 1)).granted == 0  # no cap


def _at(config: GateConfig, *, now: float = NOW) -> dict[str, Any]:
    return {"config": config, "holder": ME, "lease_until": now + 60, "now": now}


def test_windows_let_out_at_most_their_limit_in_any_span_of_their_length(store: Store) -> None:
    """500 a minute and 2,000 a day, shrunk: 5 a minute and 7 an hour (no per-second rate).
    A full window answers how long until its oldest request leaves it."""
    windows = GateConfig(windows=((60.0, 5), (3600.0, 7)))

    def take(wanted: int, at: float) -> tuple[int, float]:
        grant = store.lease_gate(
            "w@acct", wanted, config=windows, holder=ME, lease_until=at + 60, now=at
        )
        return grant.granted, grant.wait

    assert take(3, NOW) == (3, 0.0)
    assert take(3, NOW + 10) == (2, 0.0)  # the minute holds 5
    assert take(1, NOW + 20) == (0, pytest.approx(40.0))  # until the first 3 leave it
    assert take(9, NOW + 60.5) == (2, 0.0)  # the minute has room for 3; the hour for 2
    granted, wait = take(1, NOW + 200)
    assert granted == 0 and wait == pytest.approx(3400.0)  # the hour: until NOW + 3600


def test_a_new_gate_starts_half_full_and_grants_what_it_holds(store: Store) -> None:
    assert lease(store, 2)[0] == 2
    granted, state = lease(store, 20)
    assert granted == 3
    assert (state.tokens, state.rate, state.burst) == (0.0, 4.0, 10)
    granted, state = lease(store, 1)
    assert granted == 0
    assert state.wait(NOW) == pytest.approx(0.25)


def test_a_gate_declared_to_start_full_does(store: Store) -> None:
    """A shared bucket of an LLM's tokens starts full (``GateConfig.start``)."""
    full = replace(RATE, start=1.0)
    granted, state = lease(store, 20, config=full)
    assert granted == 10 and state.tokens == 0.0
    assert state.declared_as(RATE)  # the share a gate starts with is not a declaration


def test_tokens_come_back_at_the_rate_up_to_the_burst(store: Store) -> None:
    assert lease(store, 10)[0] == 5
    assert lease(store, 10, now=NOW + 0.5)[0] == 2
    assert lease(store, 10, now=NOW + 0.7)[0] == 0  # 0.8 of a token
    assert lease(store, 10, now=NOW + 0.75)[0] == 1
    assert lease(store, 100, now=NOW + 3600)[0] == 10


def test_a_gate_without_a_declared_rate_lets_everything_through(store: Store) -> None:
    config = GateConfig()
    assert lease(store, 500, config=config)[0] == 500
    granted, state = lease(store, 500, config=config)
    assert granted == 500 and state.rate == 0 and state.wait(NOW) == 0


def test_gates_are_apart_by_key(store: Store) -> None:
    lease(store, 10, key="t@one")
    assert lease(store, 10, key="t@two")[0] == 5
    assert lease(store, 10, key="t@one")[0] == 0


def test_a_pause_holds_every_lease_until_it_ends(store: Store) -> None:
    lease(store, 1)
    paused = store.tune_gate(
        "t@acct",
        lambda s: replace(s, paused_until=NOW + 2, tokens=0.0, stamp=NOW + 2),
    )
    assert paused is not None and paused.paused_until == NOW + 2
    granted, state = lease(store, 5, now=NOW + 1)
    assert granted == 0 and state.wait(NOW + 1) == pytest.approx(1.25)
    assert lease(store, 5, now=NOW + 2.1)[0] == 0
    assert lease(store, 5, now=NOW + 2.25)[0] == 1  # one token earned since the pause ended


def test_a_pause_holds_a_gate_without_a_rate_until_it_ends(store: Store) -> None:
    """A 429 from a limit nobody declared pauses every process, rate or none."""
    config = GateConfig()
    lease(store, 1, config=config)
    store.tune_gate("t@acct", lambda s: replace(s, paused_until=NOW + 2, tokens=0.0, stamp=NOW + 2))
    assert lease(store, 5, config=config, now=NOW + 1)[0] == 0
    assert lease(store, 5, config=config, now=NOW + 2)[0] == 5


def test_tune_answers_the_gate_as_it_is_and_none_for_an_unknown_gate(store: Store) -> None:
    assert store.tune_gate("nope", lambda s: s) is None
    lease(store, 1)
    cut = store.tune_gate("t@acct", lambda s: replace(s, rate=s.rate * 0.5, cut_until=NOW + 1))
    assert cut is not None and (cut.rate, cut.cut_until) == (2.0, NOW + 1)
    same = store.tune_gate("t@acct", lambda s: None)
    assert same is not None and same.rate == 2.0
    # a later lease sees the cut: it keeps its learned rate
    assert lease(store, 1)[1].rate == 2.0


def test_a_gate_declared_otherwise_starts_again(store: Store) -> None:
    lease(store, 10)
    store.tune_gate("t@acct", lambda s: replace(s, rate=1.0))
    granted, state = lease(store, 10, config=GateConfig(ceiling=8.0, burst=10))
    assert granted == 5 and state.rate == 8.0 and state.ceiling == 8.0


def test_a_shared_cap_counts_the_calls_in_flight_of_every_holder(store: Store) -> None:
    with holding(ME), holding(OTHER):  # live attempts of this process
        assert lease(store, 3, config=CAPPED, holder=ME)[0] == 3
        granted, state = lease(store, 5, config=CAPPED, holder=OTHER)
        assert granted == 1 and state.in_flight == 4
        assert lease(store, 5, config=CAPPED, holder=OTHER)[0] == 0
        store.release_gate("t@acct", 2, holder=ME, lease_until=NOW + 60)
        assert lease(store, 5, config=CAPPED, holder=OTHER)[0] == 2
        [gate] = store.read_gates(now=NOW)
        assert gate.in_flight == 4 and gate.cap == 4


def test_a_dead_holders_calls_stop_counting(store: Store) -> None:
    dead = dead_owner()
    assert lease(store, 4, config=CAPPED, holder=dead)[0] == 4
    assert lease(store, 4, config=CAPPED, holder=ME)[0] == 4  # its pid is gone: at once
    # On another host only the lease counts.
    assert lease(store, 4, config=CAPPED, holder=FAR, key="far")[0] == 4
    assert lease(store, 4, config=CAPPED, holder=FAR2, key="far")[0] == 0
    assert store.renew_gates(FAR, lease_until=NOW + 120) == 1
    assert lease(store, 4, config=CAPPED, holder=FAR2, key="far", now=NOW + 100)[0] == 0
    assert lease(store, 4, config=CAPPED, holder=FAR2, key="far", now=NOW + 121)[0] == 4


def test_read_gates_lists_every_gate(store: Store) -> None:
    assert store.read_gates(now=NOW) == []
    lease(store, 1, key="b")
    lease(store, 1, key="a", config=GateConfig())
    assert [(g.key, g.rate, g.in_flight) for g in store.read_gates(now=NOW)] == [
        ("a", 0.0, 0),
        ("b", 4.0, 0),
    ]


_steps = st.lists(
    st.tuples(
        st.integers(0, 30),
        st.floats(0, 2, allow_nan=False),
        st.booleans(),
        st.sampled_from([0.0, 0.0, 0.05, 0.3, 2.0]),  # how far ahead it may reserve
        st.booleans(),  # whether it takes slots
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_steps, rate=st.sampled_from([0.0, 0.5, 3.0, 19.0]), burst=st.integers(1, 20))
def test_every_store_leases_as_the_reference_does(
    store: Store, steps: list[tuple[int, float, bool, float, bool]], rate: float, burst: int
) -> None:
    key = f"prop-{next(_keys)}"
    config = GateConfig(ceiling=rate, burst=burst, cap=5)
    model: GateState | None = None  # made by the first lease
    in_use, now = 0, NOW
    for wanted, elapsed, done, ahead, slots in steps:
        now += elapsed
        if done and in_use:
            store.release_gate(key, 1, holder=ME, lease_until=now + 60)
            in_use -= 1
        expected = (model or config.fresh(key, now)).lease(
            wanted, now, in_use, ahead=ahead, slots=slots
        )
        model = expected.state
        grant = store.lease_gate(
            key, wanted, config=config, holder=ME, lease_until=now + 60, now=now,
            ahead=ahead, slots=slots,
        )  # fmt: skip
        assert (grant.granted, grant.slots) == (expected.granted, expected.slots)
        assert grant.state.tokens == pytest.approx(model.tokens, abs=1e-9)
        assert grant.due == pytest.approx(expected.due, abs=1e-6)
        in_use += grant.slots


def test_leases_from_many_connections_never_grant_more_than_the_bucket(durable_url: str) -> None:
    """Threads with a store object each (a connection each) lease one token at a time from a
    bucket that does not refill: together they get exactly the burst."""
    config = GateConfig(ceiling=1e-9, burst=120)
    open_store(durable_url).close()  # the schema, once
    stores = [open_store(durable_url) for _ in range(4)]
    got = [0] * len(stores)

    def take(i: int) -> None:
        for _ in range(30):
            grant = stores[i].lease_gate(
                "race", 1, config=config, holder=ME, lease_until=NOW + 60, now=NOW
            )
            got[i] += grant.granted

    threads = [threading.Thread(target=take, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for opened in stores:
        opened.close()
    assert sum(got) == 60
