"""The ctx.llm suite's fixtures: a fresh store and tool registry per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import playline as pl
from playline.store import Store, open_store


@pytest.fixture
def registry() -> pl.ToolRegistry:
    return pl.ToolRegistry()


@pytest.fixture
def store(default_store: str) -> Iterator[Store]:
    opened = open_store(default_store)
    yield opened
    opened.close()
