"""Which stores the suites run against, and a fresh store URL for a test.

``PLAYLINE_TEST_STORE=memory|sqlite|postgres`` restricts the store conformance suite
(tests/store) to one store (unset: all three) and picks the store behind the ``store_url``
fixture (unset: sqlite), which the engine suites use: ``default_store`` makes it the store of
every run and ``open_store()`` that names none (PLAYLINE_STORE), ``durable_store_url`` is the
chosen store, or SQLite when that is memory (for what spans processes). PostgreSQL is the
throwaway server of services.py, a fresh database per test; it starts only when a test asks
for it (under pytest-xdist: one server per worker).

``pytest --every-store-in=FOLDER`` (make test) runs that folder's store tests on every chosen
store in one session, as one pass per store would, so that xdist balances all of them.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

import playline as pl
from playline.store import Store
from playline.store._memory import MemoryStore
from playline.store.sql._base import SQLStore

__all__ = [
    "DURABLE_KINDS",
    "STORE_KINDS",
    "default_store",
    "durable_kinds",
    "durable_store_url",
    "every_store",
    "full_after_first_block",
    "lose_receipts",
    "store_kind",
    "store_kinds",
    "store_url",
    "wait_for_jobs",
]

STORE_KINDS = ("memory", "sqlite", "postgres")
DURABLE_KINDS = ("sqlite", "postgres")
_ENV = "PLAYLINE_TEST_STORE"
_memory_names = itertools.count()


def _chosen() -> str | None:
    chosen = os.environ.get(_ENV) or None
    if chosen is not None and chosen not in STORE_KINDS:
        raise pytest.UsageError(f"{_ENV}={chosen!r}: use one of {', '.join(STORE_KINDS)}.")
    return chosen


def store_kinds() -> list[str]:
    """The stores the conformance suite runs against."""
    chosen = _chosen()
    return [chosen] if chosen else list(STORE_KINDS)


def durable_kinds() -> list[str]:
    """The stores a durable-only test (several processes, reopening) runs against: the chosen
    one, or SQLite when only the memory store was chosen."""
    return [kind for kind in store_kinds() if kind in DURABLE_KINDS] or ["sqlite"]


def url_for(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty store of ``kind`` for the requesting test."""
    if kind == "memory":
        return f"memory://test-{os.getpid()}-{next(_memory_names)}"
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/playline.db"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def store_kind() -> str:
    """The kind of store behind ``store_url``: the chosen one, or SQLite. ``--every-store-in``
    parametrizes it instead (see conftest.py)."""
    return _chosen() or "sqlite"


@pytest.fixture
def store_url(store_kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store URL of the store named by PLAYLINE_TEST_STORE (default: sqlite)."""
    return url_for(store_kind, request, tmp_path)


@pytest.fixture
def durable_store_url(store_kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store URL that outlives a process: the test's store, or SQLite when that is
    memory (a test about other processes or a reopened store)."""
    return url_for(store_kind if store_kind in DURABLE_KINDS else "sqlite", request, tmp_path)


def every_store(metafunc: pytest.Metafunc, suites: list[str]) -> None:
    """Run a test of one of ``suites`` (folders) on each store it can use, in one session.

        The same (test, store) pairs as one pass per PLAYLINE_TEST_STORE value: a test using
        ``store_url`` runs on every chosen store, one using only ``durable_store_url`` on the
        durable ones (memory means SQLite there), and a test using neither (or marked ``own_store``:
    it names its own store) runs once.
    """
    path = metafunc.definition.path
    root = metafunc.config.rootpath
    if not any(path.is_relative_to(root / suite) for suite in suites):
        return
    names = metafunc.fixturenames
    if "store_kind" not in names or metafunc.definition.get_closest_marker("own_store"):
        return
    kinds = store_kinds() if "store_url" in names else durable_kinds()
    metafunc.parametrize("store_kind", kinds, ids=kinds)


@pytest.fixture
def default_store(store_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs, workers and ``open_store()`` that name no store use this test's."""
    monkeypatch.setenv("PLAYLINE_STORE", store_url)
    return store_url


def full_after_first_block(store: Store) -> list[int]:
    """Make ``store`` fail as a full disk once the run's first block of event numbers is
    used: rows are started while the store fails. Returns the sizes of the blocks asked for
    (more than one: the store failed)."""
    reserve, reserved = store.reserve_seqs, []

    def full(count: int) -> int:
        reserved.append(count)
        if len(reserved) > 1:  # the first block numbers the run's first events
            raise pl.StoreError("database or disk is full")
        return reserve(count)

    store.reserve_seqs = full  # type: ignore[method-assign]
    return reserved


def lose_receipts(store: Store) -> None:
    """Delete every receipt of ``store``, as a store restored from a backup older than them
    has none: unlike ``cache clear``, which keeps each as a tombstone, nothing says they were
    ever bought."""
    if isinstance(store, MemoryStore):
        store._receipts.clear()
        return
    assert isinstance(store, SQLStore), store
    with store._transaction("lose the receipts", write=True) as cur:
        cur.execute("DELETE FROM receipts")


def _jobs_on_receipts(path: Path) -> int:
    if not path.exists():
        return 0
    with contextlib.closing(sqlite3.connect(path)) as db:
        try:
            return int(
                db.execute("SELECT count(*) FROM receipts WHERE job IS NOT NULL").fetchone()[0]
            )
        except sqlite3.OperationalError:  # not created yet
            return 0


def wait_for_jobs(path: Path, child: subprocess.Popen[Any], count: int) -> None:
    """Until a child process's run has an async job on ``count`` receipts of the SQLite store
    at ``path`` (an observable state of its, polled): a call still being submitted would be
    in doubt when the child is killed."""
    deadline = time.monotonic() + 60
    while _jobs_on_receipts(path) < count:
        assert child.poll() is None, child.communicate()[1]
        assert time.monotonic() < deadline, f"the child recorded {count} jobs in 60 s"
        time.sleep(0.01)
