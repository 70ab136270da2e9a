"""RunOptions: a run's options, checked once where they come in (pl.arun's keywords)."""

from __future__ import annotations

from typing import Any

import pytest

from playline._engine.options import RunOptions, refresh_columns
from playline.errors import PlayDefinitionError


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"row_window": 0}, "row_window must be a whole number >= 1."),
        ({"foreground_sleep": -1}, "foreground_sleep must be a number of seconds >= 0."),
        ({"lease": 0}, "lease must be a number of seconds > 0."),
        ({"stall_after": float("nan")}, "stall_after=nan must be a number of seconds > 0"),
        ({"ledger": "some"}, 'ledger=\'some\': use "paid" (the default) or "all".'),
        ({"max_credits": True}, "max_credits=True must be a number >= 0."),
        ({"retry_in_doubt": "no"}, "retry_in_doubt='no' must be True or False."),
        ({"retry_failed": 1}, "retry_failed=1 must be True or False."),
        ({"cell_limit": 2.5}, "cell_limit=2.5 must be a whole number of bytes >= 1"),
        ({"refresh": ("b", "a")}, "refresh=('b', 'a'): give sorted, unique column names"),
    ],
)
def test_a_wrong_option_is_refused_naming_it(given: dict[str, Any], message: str) -> None:
    with pytest.raises(PlayDefinitionError) as raised:
        RunOptions(**given)
    assert str(raised.value).startswith(message)


def test_the_defaults_are_valid_and_ledger_all_reads_the_mode() -> None:
    assert not RunOptions().ledger_all
    assert RunOptions(ledger="all", stall_after=None, max_credits=0).ledger_all


def test_refresh_columns_are_sorted_unique_and_stripped() -> None:
    assert refresh_columns(None) == []
    assert refresh_columns("email") == ["email"]
    assert refresh_columns([" b", "a", "b"]) == ["a", "b"]
    with pytest.raises(PlayDefinitionError, match="give column names"):
        refresh_columns(["email", ""])
