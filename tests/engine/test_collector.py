"""While a run's attempt runs, the young generation is collected less often; the thresholds
found are given back afterwards, and a user's own choice is left alone."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

import playline as pl
from playline._engine.collector import YOUNG_THRESHOLD, fewer_collections

from .helpers import run_play


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


def _watching() -> tuple[pl.Play, list[tuple[int, int, int]]]:
    seen: list[tuple[int, int, int]] = []

    @pl.play(name="watch-gc")
    async def watch(ctx: pl.Context, input: object) -> int:
        seen.append(gc.get_threshold())
        return 1

    return watch, seen


def test_a_run_collects_less_often_and_gives_the_thresholds_back() -> None:
    play, seen = _watching()

    assert run_play(play, tools=[]).status == "completed"

    assert seen == [(YOUNG_THRESHOLD, 10, 10)]
    assert gc.get_threshold() == (700, 10, 10)


def test_collection_turned_off_or_a_larger_threshold_is_left_as_it_is() -> None:
    play, seen = _watching()
    gc.set_threshold(0, 10, 10)
    run_play(play, tools=[])
    gc.set_threshold(YOUNG_THRESHOLD * 2, 5, 5)
    run_play(play, tools=[])

    assert seen == [(0, 10, 10), (YOUNG_THRESHOLD * 2, 5, 5)]
    assert gc.get_threshold() == (YOUNG_THRESHOLD * 2, 5, 5)


def test_nested_attempts_restore_once_the_last_ends() -> None:
    with fewer_collections():
        with fewer_collections():
            assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    assert gc.get_threshold() == (700, 10, 10)


def test_thresholds_changed_during_a_run_are_not_overwritten() -> None:
    with fewer_collections():
        gc.set_threshold(2_000, 20, 20)
    assert gc.get_threshold() == (2_000, 20, 20)
