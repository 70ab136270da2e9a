"""`playline resume` writes the `--out` file of the run it resumes again, with every row (not
the rows of the attempt that stopped), and says so; a resume's own `--out` wins. Against the
simulator: a budget stops the first attempt part way."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

import playline

from clihelp import Cli

PEOPLE = Path(playline.__file__).with_name("demo") / "people.csv"

# ten people; sim.email.gamma charges 2 credits a call, so --max-credits 9 stops after four
PLAY = f"""
import playline as pl
from playline.demo import domain_of

def email(row, ctx):
    return ctx.tool("sim.email.gamma", {{"first_name": row["First Name"],
                    "last_name": row["Last Name"], "domain": row["domain"]}})

@pl.play
async def emails(ctx, input):
    rows = list(ctx.csv({str(PEOPLE)!r}))[:10]
    return await (
        ctx.dataset("people", rows, key=["First Name", "Last Name"])
        .with_column("domain", lambda row: domain_of(row["Company Website"]))
        .with_column("email", email)
        .run()
    )
"""


@pytest.fixture
def stopped(cli: Cli, gateway: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run r1 started in tmp/sub with `--out enriched.csv` (a relative path) and stopped by
    its budget part way; the file it wrote (the rows done so far). The test goes on in tmp."""
    play = cli.play(PLAY)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    ran = cli("run", play, "--run-id", "r1", "--out", "enriched.csv", "--max-credits", "9")
    assert ran.exit_code == 1, ran.output  # the budget stopped it
    monkeypatch.chdir(tmp_path)  # a resume may start in another folder
    out = tmp_path / "sub" / "enriched.csv"
    assert 0 < _rows(out) < 10
    return out


def _rows(path: Path) -> int:
    with path.open(encoding="utf-8") as handle:
        return len(list(csv.DictReader(handle)))


def test_resume_writes_the_runs_out_file_again_with_every_row(cli: Cli, stopped: Path) -> None:
    resumed = cli("resume", "r1", "--max-credits", "100")
    assert resumed.exit_code == 0, resumed.output
    assert _rows(stopped) == 10
    said = " ".join(resumed.stdout.split())
    assert f"Wrote 10 rows of dataset 'people' to {stopped}" in said


def test_a_resumes_own_out_wins(cli: Cli, stopped: Path, tmp_path: Path) -> None:
    before = stopped.read_text(encoding="utf-8")
    mine = tmp_path / "mine.csv"
    resumed = cli("resume", "r1", "--max-credits", "100", "--out", str(mine))
    assert resumed.exit_code == 0, resumed.output
    assert _rows(mine) == 10
    assert stopped.read_text(encoding="utf-8") == before  # the run's own file is left alone


def test_a_resume_whose_out_folder_is_gone_warns_and_finishes(
    cli: Cli, stopped: Path, tmp_path: Path
) -> None:
    stopped.unlink()
    stopped.parent.rmdir()
    resumed = cli("resume", "r1", "--max-credits", "100")
    assert resumed.exit_code == 0, resumed.output
    assert "was started with --out" in resumed.stderr and "give another with --out" in (
        " ".join(resumed.stderr.split())
    )
    assert not stopped.exists()


def test_a_stopped_run_waits_for_a_resume_and_says_why() -> None:
    """It said "waiting for: nothing: it was stopped (stopped)"."""
    from playline.cli._report import waiting_for

    said = waiting_for({"stop": "stopped"})
    assert said.startswith("a resume: it was stopped (Ctrl-C, a signal, the UI's stop);")
    assert waiting_for({"stop": "lease lost"}).startswith("a resume: another process took")
    assert waiting_for({"stop": "drained"}).startswith("a resume: it was stopped (drained)")


def test_dollars_read_to_three_significant_digits_below_a_dollar() -> None:
    from playline.cli._report import dollars_text

    assert dollars_text(0) == "$0"
    assert dollars_text(4.474e-05) == "$0.0000447"  # an LLM call: not "$0.0000"
    assert dollars_text(0.5) == "$0.5" and dollars_text(0.0123) == "$0.0123"
    assert dollars_text(1234.5) == "$1,234.50"
