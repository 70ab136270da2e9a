from __future__ import annotations

import pytest

import playline as pl
from playline.store import MemoryStore


@pytest.fixture
def registry() -> pl.ToolRegistry:
    """A registry of this test's own tools (kept out of the process-wide default one)."""
    return pl.ToolRegistry()


@pytest.fixture
def store() -> MemoryStore:
    """An in-memory store a test can share between runs and inspect afterwards."""
    return MemoryStore()


@pytest.fixture
def clock() -> pl.ManualClock:
    return pl.ManualClock()
