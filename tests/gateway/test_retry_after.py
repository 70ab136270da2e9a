"""``Retry-After``: delay-seconds or an HTTP date; 1 s when absent or unusable."""

from __future__ import annotations

import email.utils

import pytest

from playline.tools import parse_retry_after

NOW = email.utils.parsedate_to_datetime("Wed, 21 Oct 2015 07:27:55 GMT").timestamp()


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("3", 3.0), ("0.5", 0.5), ("120", 120.0), ("Wed, 21 Oct 2015 07:28:00 GMT", 5.0)],
)
def test_parses_seconds_and_dates(header: str, seconds: float) -> None:
    assert parse_retry_after(header, now=NOW) == pytest.approx(seconds)


def test_a_date_in_the_past_means_retry_now() -> None:
    assert 0 <= parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now=NOW) < 0.01


@pytest.mark.parametrize("header", [None, "", "  ", "soon", "Wed, 99 Foo 2015", "3 seconds"])
def test_absent_or_garbage_means_one_second(header: str | None) -> None:
    assert parse_retry_after(header, now=NOW) == 1.0


@pytest.mark.parametrize("header", ["inf", "nan", "-inf"])
def test_non_finite_numbers_mean_one_second(header: str) -> None:
    # "inf" taken at face value would pause the tool's gate forever
    assert parse_retry_after(header, now=NOW) == 1.0
