"""The conformance suite's stores: every test that takes ``store`` runs against memory, SQLite
and PostgreSQL (PLAYLINE_TEST_STORE restricts it to one); ``durable_url`` gives a fresh URL of
each durable store, for what takes several processes or a reopened store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from playline.store import MemoryStore, Store
from playline.store.sql import PostgresStore, SQLiteStore
from stores import durable_kinds, store_kinds, url_for


@pytest.fixture(params=store_kinds())
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh, empty store of each kind: the reference (memory) and the durable ones."""
    url = url_for(request.param, request, tmp_path)
    opened: Store
    if request.param == "memory":
        opened = MemoryStore(url)
    elif request.param == "sqlite":
        opened = SQLiteStore(url)
    else:
        opened = PostgresStore(url)
    yield opened
    opened.close()


@pytest.fixture(params=durable_kinds())
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return url_for(request.param, request, tmp_path)


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/playline.db"
