from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from playline.sim import Simulator, serve

from clihelp import LOCAL_PLAY, Cli


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PLAYLINE_GATEWAY_URL", raising=False)
    monkeypatch.delenv("PLAYLINE_GATEWAY_TOKEN", raising=False)
    monkeypatch.delenv("PLAYLINE_DEBUG", raising=False)
    monkeypatch.setenv("PLAYLINE_STORE", f"sqlite:///{tmp_path}/env.db")


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


@pytest.fixture
def local_play(cli: Cli) -> str:
    return cli.play(LOCAL_PLAY)


@pytest.fixture(scope="session")
def sim() -> Iterator[Simulator]:
    with serve(seed=7, latency_ms=0) as running:
        yield running


@pytest.fixture
def gateway(sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The simulator as the gateway of the environment, its ledger and idempotency keys
    forgotten (so calls an earlier test made are charged again here)."""
    sim.reset()
    monkeypatch.setenv("PLAYLINE_GATEWAY_URL", sim.url)
    monkeypatch.setenv("PLAYLINE_GATEWAY_TOKEN", sim.token)
    yield sim.url
