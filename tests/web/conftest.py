from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import playline as pl
from playline.sim import Simulator, serve
from playline.store import Store, open_store
from playline.tools import Gateway
from playline.web import UIConfig, create_app
from services import serve_asgi


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with serve(seed=7, latency_ms=0) as running:
        yield running


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory, sim: Simulator) -> Iterator[Any]:
    """A store holding one finished run of the demo play (50 people through the simulator)."""
    from playline.demo import enrich_people

    url = f"sqlite:///{tmp_path_factory.mktemp('web')}/demo.db"
    db = open_store(url)
    result = pl.run(enrich_people, {}, store=db, tools=[Gateway(sim.url, token=sim.token)])
    assert result.status == "completed"
    yield db, url, result.run_id
    db.close()


@pytest.fixture(scope="module")
def demo_ui(demo_store: tuple[Store, str, str]) -> Iterator[tuple[str, str, UIConfig]]:
    """The UI over the demo store on a free port: (base URL, run id, config)."""
    db, url, run_id = demo_store
    config = UIConfig(store=db, store_url=url)
    with serve_asgi(create_app(config)) as base:
        yield base, run_id, config


@pytest.fixture
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots and aria snapshots are kept (the session's temp dir)."""
    return tmp_path_factory.getbasetemp() / "ui-artifacts"
