"""The simulator with every provider's double, once per module (the doubles are reset for
each test by the contract's ``double`` fixture)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from contract import KEY

from playline.sim import Simulator, serve


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with serve(seed=7, latency_ms=0, token=KEY, providers=True) as running:
        yield running
