from __future__ import annotations

from collections.abc import Iterator

import pytest

import playline as pl
from playline.sim import Simulator, serve

EMAIL_TOOLS = ("sim.email.alpha", "sim.email.beta", "sim.email.gamma", "sim.email.verify")


@pytest.fixture
def registry() -> pl.ToolRegistry:
    """This test's own tools (kept out of the process-wide default registry)."""
    return pl.ToolRegistry()


@pytest.fixture(scope="session")
def sim_server() -> Iterator[Simulator]:
    with serve(seed=7, latency_ms=0) as running:
        yield running


@pytest.fixture
def sim(sim_server: Simulator) -> Simulator:
    """A fresh simulator ledger with the email tools' rate limits lifted (runs use a
    ManualClock, so the engine's own pacing takes no time either)."""
    sim_server.reset()
    sim_server.faults(
        tools={t: {"rate_per_second": 1_000_000, "burst": 1_000_000} for t in EMAIL_TOOLS}
    )
    return sim_server
