"""One simulator for the gateway suite, reset before every test (ledger, buckets, faults); the
runs use the store PLAYLINE_TEST_STORE names (memory, sqlite or postgres; by default sqlite),
a fresh one per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import playline as pl
from playline.sim import Simulator, serve


@pytest.fixture(autouse=True)
def _runs_use_the_test_store(default_store: str) -> None:
    """Runs that name no store use this test's."""


@pytest.fixture(scope="session")
def running_sim() -> Iterator[Simulator]:
    with serve(seed=7, latency_ms=0) as sim:
        yield sim


@pytest.fixture
def sim(running_sim: Simulator) -> Simulator:
    running_sim.reset()
    return running_sim


@pytest.fixture
def gateway(sim: Simulator) -> pl.tools.Gateway:
    """A client of the simulator, as a play author would make one (fresh: no cached specs)."""
    return pl.tools.Gateway(sim.url, token=sim.token)
