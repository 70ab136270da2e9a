"""Fixtures for durable boundaries: a moving clock and a fresh store per test, of the kind
PLAYLINE_TEST_STORE names (memory, sqlite or postgres; by default sqlite)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import playline as pl
from playline.store import Store, open_store


@pytest.fixture
def clock() -> pl.ManualClock:
    return pl.ManualClock()


@pytest.fixture(autouse=True)
def _runs_use_the_test_store(default_store: str) -> None:
    """Runs that name no store use this test's."""


@pytest.fixture
def store(default_store: str) -> Iterator[Store]:
    opened = open_store(default_store)
    yield opened
    opened.close()


@pytest.fixture
def run(store: Store, clock: pl.ManualClock) -> Callable[..., pl.RunResult]:
    """``run(play, input, **options)`` on the test's store and clock, with no tools."""

    def go(play: Any, input: Any = None, **options: Any) -> pl.RunResult:
        options.setdefault("tools", [])
        return pl.run(play, input, store=store, clock=clock, **options)

    return go


@pytest.fixture
def worker(store: Store, clock: pl.ManualClock) -> Callable[..., list[pl.RunResult]]:
    """Resume every due run once (burst mode) and return the attempts made."""

    def go(**options: Any) -> list[pl.RunResult]:
        import asyncio

        options.setdefault("tools", [])
        return asyncio.run(pl.Worker(store=store, clock=clock, **options).run(burst=True))

    return go
