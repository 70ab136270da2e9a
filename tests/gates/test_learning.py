"""The learning rules (``tools/_learning.py``) as pure functions: a series of cuts tells 429s
about our pace from 429s for the provider's own reasons."""

from __future__ import annotations

import pytest

from playline.tools._learning import (
    JUDGE,
    NOISE_REST,
    SERIES_END,
    Seen,
    Tuning,
    climb,
    cut_cap,
    cut_rate,
)

NOW = 1000.0
DECLARED = Tuning(rate=19.0, cap=8)


def seen(throttled: int, answers: int = JUDGE, achieved: float = 1.0, clean: int = 0) -> Seen:
    return Seen(throttled / answers, (throttled, answers), achieved, clean)


def rate_step(tuning: Tuning, observed: Seen, now: float = NOW) -> tuple[Tuning, bool]:
    return cut_rate(tuning, observed, now, window=1.0, min_rate=0.2)


def started() -> Tuning:
    tuning, step = rate_step(DECLARED, seen(1, 1))
    assert step
    return tuning


def test_the_first_429_starts_a_series_and_cuts_nothing() -> None:
    tuning = started()
    assert (tuning.rate, tuning.cap) == (19.0, 8)
    assert (tuning.last_rate, tuning.last_cap, tuning.last_share) == (19.0, 8, 0.0)


def test_no_cut_before_the_answers_after_the_last_step_are_in() -> None:
    tuning, step = rate_step(started(), seen(3, JUDGE - 1), NOW + 2)
    assert not step and tuning.rate == 19.0


def test_the_next_429_halves_the_rate_but_not_below_what_was_achieved() -> None:
    tuning, step = rate_step(started(), seen(6), NOW + 2)
    assert step and tuning.rate == pytest.approx(9.5) and tuning.last_share == 0.5
    floored, _ = rate_step(started(), seen(6, achieved=12.0), NOW + 2)
    assert floored.rate == pytest.approx(12.0)


def test_429s_that_a_cut_does_not_thin_are_noise_and_the_series_is_undone() -> None:
    cut, _ = rate_step(started(), seen(6), NOW + 2)  # half of the answers were 429s
    undone, step = rate_step(cut, seen(6), NOW + 4)  # and still are at half the rate
    assert not step
    assert (undone.rate, undone.cap, undone.last_cap) == (19.0, 8, 0)
    assert undone.noise_until == NOW + 4 + NOISE_REST
    resting, step = rate_step(undone, seen(12), NOW + 5)
    assert not step and resting == undone


def test_429s_that_a_cut_thins_are_about_the_pace_and_the_next_429_cuts_again() -> None:
    cut, _ = rate_step(started(), seen(6), NOW + 2)  # 50% at 19/s
    again, step = rate_step(cut, seen(1), NOW + 4)  # 1 in 12 at 9.5/s: the pace it was
    assert step and again.rate == pytest.approx(4.75) and again.last_rate == 19.0


def test_a_429_naming_no_wait_halves_the_cap_first() -> None:
    tuning, step = cut_cap(DECLARED, seen(1, 1), NOW)
    assert step and tuning.cap == 8  # the series starts
    tuning, step = cut_cap(tuning, seen(6), NOW + 2)
    assert step and (tuning.cap, tuning.rate) == (4, 19.0)
    undone, _ = cut_cap(tuning, seen(6), NOW + 4)
    assert undone.cap == 8 and undone.noise_until > NOW


def test_a_long_clean_stretch_ends_a_series_and_the_rate_climbs() -> None:
    cut, _ = rate_step(started(), seen(6), NOW + 2)
    bounds = {"ceiling": 19.0, "declared_cap": 8}
    assert climb(cut, seen(0, clean=SERIES_END - 1), **bounds) == cut
    climbed = climb(cut, seen(0, clean=SERIES_END), **bounds)
    assert climbed.rate == pytest.approx(9.5 * 1.15) and climbed.last_cap == 0


def test_a_tool_without_a_rate_gets_one_as_a_series_starts() -> None:
    tuning, step = rate_step(Tuning(rate=0.0, cap=8), seen(1, 1, achieved=80.0))
    assert step and tuning.rate == tuning.last_rate == 80.0
