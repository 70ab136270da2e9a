"""The shared rate gates (GateStore): token leases, calls in flight per holder, tuning.

Every store computes a lease as ``GateState.take`` does (the SQL stores in one UPDATE), so a
random sequence of leases gives the same grants on memory, SQLite and PostgreSQL.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from playline.store import GateConfig, GateState, Store, open_store
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
) -> tuple[int, GateState]:
    grant = store.lease_gate(
        key, wanted, config=config, holder=holder, lease_until=now + 60, now=now
    )
    return grant.granted, grant.state


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
    st.tuples(st.integers(0, 30), st.floats(0, 2, allow_nan=False), st.booleans()),
    min_size=1,
    max_size=25,
)


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_steps, rate=st.sampled_from([0.0, 0.5, 3.0, 19.0]), burst=st.integers(1, 20))
def test_every_store_leases_as_the_reference_does(
    store: Store, steps: list[tuple[int, float, bool]], rate: float, burst: int
) -> None:
    key = f"prop-{next(_keys)}"
    config = GateConfig(ceiling=rate, burst=burst, cap=5)
    model: GateState | None = None  # made by the first lease
    in_use, now = 0, NOW
    for wanted, elapsed, done in steps:
        now += elapsed
        if done and in_use:
            store.release_gate(key, 1, holder=ME, lease_until=now + 60)
            in_use -= 1
        expected, model = (model or config.fresh(key, now)).take(wanted, now, in_use)
        granted, state = lease(store, wanted, key=key, config=config, now=now)
        assert granted == expected
        assert state.tokens == pytest.approx(model.tokens, abs=1e-9)
        in_use += granted


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
