"""The end verdict, decided from the facts alone: no play runs here."""

from __future__ import annotations

from typing import Any

from playline._engine.calls import CallStats
from playline._engine.suspension import Suspension
from playline._engine.verdict import Facts, RunStats, verdict
from playline.errors import BudgetExceeded, PlaylineError


def _facts(
    *,
    output: Any = None,
    error: BaseException | None = None,
    stats: RunStats | None = None,
    calls: CallStats | None = None,
    cell_errors: dict[str, tuple[int, str]] | None = None,
) -> Facts:
    return Facts(
        run_id="run_1",
        output=output,
        error=error,
        stats=stats or RunStats(),
        calls=calls or CallStats(),
        cell_errors=cell_errors or {},
    )


def test_a_returned_play_completes_and_keeps_its_output() -> None:
    ended = verdict(_facts(output={"n": 1}, stats=RunStats(rows=2)))
    assert (ended.status, ended.stored, ended.returned, ended.message) == (
        "completed", {"n": 1}, True, None
    )  # fmt: skip


def test_some_failed_rows_complete_with_errors() -> None:
    ended = verdict(_facts(output=1, stats=RunStats(rows=2, rows_failed=1)))
    assert ended.status == "completed_with_errors" and ended.error is None


def test_every_row_failed_fails_the_run_naming_the_top_cause_but_keeps_the_output() -> None:
    calls = CallStats(errors={"503 from sim": 4})
    cells = {"KeyError in column 'email'": (3, "'emial'")}
    ended = verdict(_facts(output=1, stats=RunStats(rows=3, rows_failed=3), calls=calls,
                           cell_errors=cells))  # fmt: skip
    assert ended.status == "failed" and ended.returned and ended.stored == 1
    assert ended.message == "All 3 rows failed: 4 calls failed with 503 from sim."
    cells = {"KeyError in column 'email'": (5, "'emial'")}
    ended = verdict(_facts(stats=RunStats(rows=5, rows_failed=5), cell_errors=cells))
    assert ended.message == "All 5 rows failed: 5 x KeyError in column 'email': 'emial'."


def test_a_tool_refused_for_every_call_fails_the_run_with_the_fix() -> None:
    calls = CallStats(errors={"401 unauthorized": 2})
    calls.by_tool["t"] = {"refused": 2, "failed": 2}
    ended = verdict(_facts(output=None, calls=calls))
    assert ended.status == "failed"
    assert ended.message is not None and ended.message.startswith("Tool t refused every call (2)")
    assert "check the token" in ended.message


def test_an_output_that_cannot_be_stored_fails_the_run_and_is_not_kept() -> None:
    ended = verdict(_facts(output={1, 2}))
    assert ended.status == "failed" and not ended.returned and ended.stored is None
    assert ended.message is not None and "return value" in ended.message


def test_a_suspension_suspends_with_what_it_waits_for_and_no_error() -> None:
    ended = verdict(_facts(error=Suspension(stop="stopped")))
    assert (ended.status, ended.error, ended.message) == ("suspended", None, None)
    assert ended.waiting == Suspension(stop="stopped").waiting()


def test_an_error_fails_the_run_and_a_budget_stop_says_what_it_left() -> None:
    ended = verdict(_facts(error=PlaylineError("broken")))
    assert (ended.status, ended.message, ended.returned) == ("failed", "broken", False)
    ended = verdict(
        _facts(
            error=BudgetExceeded("Over budget.", spent=5, limit=5), stats=RunStats(rows_pending=7)
        )
    )
    assert ended.message is not None and ended.message.endswith(
        "The cap left 7 rows unenriched; the rows paid for are kept."
    )


def test_an_exit_from_the_play_fails_the_run_saying_so() -> None:
    ended = verdict(_facts(error=SystemExit(3)))
    assert ended.status == "failed"
    assert ended.message is not None and "raised by the play's code" in ended.message
