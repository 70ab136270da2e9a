from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from playline.store import MemoryStore, Store
from playline.store.sql import SQLiteStore


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """Every protocol test runs against both stores: the reference and the durable one."""
    opened: Store = (
        MemoryStore() if request.param == "memory" else SQLiteStore(f"sqlite:///{tmp_path}/s.db")
    )
    yield opened
    opened.close()


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/playline.db"
