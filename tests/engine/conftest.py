"""The engine suite's fixtures. Its runs use the store PLAYLINE_TEST_STORE names (memory,
sqlite or postgres; by default sqlite): ``store`` is an open one for the test, and runs given
no store (``run_play``, ``pl.run``) use the same, through PLAYLINE_STORE."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import playline as pl
from playline.store import Store, open_store


@pytest.fixture(autouse=True)
def _runs_use_the_test_store(default_store: str) -> None:
    """Runs that name no store use this test's (a fresh one)."""


@pytest.fixture
def registry() -> pl.ToolRegistry:
    """A registry of this test's own tools (kept out of the process-wide default one)."""
    return pl.ToolRegistry()


@pytest.fixture
def store(default_store: str) -> Iterator[Store]:
    """The test's store, open, to share between runs and inspect afterwards."""
    opened = open_store(default_store)
    yield opened
    opened.close()


@pytest.fixture
def clock() -> pl.ManualClock:
    return pl.ManualClock()
