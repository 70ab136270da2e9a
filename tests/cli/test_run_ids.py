"""Run ids on the command line: a new run's id is refused unless it is safe to paste into a
shell and is none the runtime gives its own runs; a run that exists keeps its id, and every
command Playline prints names it quoted."""

from __future__ import annotations

import pytest

from playline.store import open_store
from playline.triggers import queue_run

from clihelp import Cli, one_error_line

WAITS = (
    "import playline as pl\n\n@pl.play\nasync def waits(ctx, input):\n"
    "    return await ctx.wait_for_event('approve-9')\n"
)


@pytest.mark.parametrize(
    ("run_id", "says"),
    [
        ("y;echo PWNED", "cannot name a new run: give letters, digits"),
        ("--help", "not starting with '-'"),
        ("r" * 201, "at most 200 characters"),
        ("hook:crm-signup:zz", "ids starting with 'hook:' are those of runs a webhook"),
        ("sched-weekly-20260105T080000Z", "ids starting with 'sched-' are those of runs a sch"),
    ],
)
def test_a_new_run_id_that_is_unsafe_or_reserved_is_a_usage_error_and_starts_nothing(
    cli: Cli, local_play: str, run_id: str, says: str
) -> None:
    line = one_error_line(cli("run", local_play, "--run-id", run_id), 2)
    assert says in line
    with open_store(cli.store) as db:
        assert db.list_runs() == []


def test_an_existing_run_with_an_unsafe_id_resumes_and_its_hints_are_quoted(cli: Cli) -> None:
    odd = "y;echo PWNED"  # as a store written before run ids were checked may hold
    play = cli.play(WAITS)
    with open_store(cli.store) as db:
        queue_run(db, run_id=odd, play="waits", origin={"kind": "test"})

    first = cli("run", play, "--run-id", odd)

    assert first.exit_code == 3, first.output  # resumed: it waits for its event
    assert "resume: playline resume 'y;echo PWNED'" in first.stdout
    assert "details: playline show 'y;echo PWNED'" in first.stdout
