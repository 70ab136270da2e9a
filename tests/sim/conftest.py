from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from playline.sim import Simulator, serve


@pytest.fixture(scope="session")
def sim() -> Iterator[Simulator]:
    with serve(seed=7, latency_ms=0) as running:
        yield running


@pytest.fixture
def client(sim: Simulator) -> Iterator[httpx.Client]:
    sim.reset()
    with httpx.Client(base_url=sim.url, headers=sim.headers) as c:
        yield c
