"""`playline run` and `playline resume`, driven as a user would, with their exit codes."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

from playline.store import open_store

from clihelp import Cli, one_error_line


def test_run_completes_and_prints_the_summary(cli: Cli, local_play: str) -> None:
    result = cli("run", local_play, "--run-id", "r1")
    assert result.exit_code == 0, result.output
    assert "completed run r1" in result.stdout
    assert "3 rows: 3 run, 0 reused, 0 failed" in result.stdout
    assert "2 credits" in result.stdout
    again = cli("run", local_play)
    assert again.exit_code == 0
    assert "0 live" in again.stdout and "0 credits" in again.stdout  # receipts: paid once


def test_run_json_prints_one_object_per_event_and_a_result(cli: Cli, local_play: str) -> None:
    result = cli("run", local_play, "--json", "--run-id", "rj")
    assert result.exit_code == 0, result.output
    lines = cli.json_lines(result.stdout)
    kinds = {line["kind"] for line in lines}
    assert {"run", "dataset", "rows", "batch", "log", "result"} <= kinds
    final = lines[-1]
    assert final["kind"] == "result" and final["status"] == "completed"
    assert final["run_id"] == "rj"
    assert final["stats"]["rows"] == 3
    assert final["output"] == {"$dataset": "names", "rows": 3}


def test_run_json_shows_numpy_numbers_as_the_numbers_stored(cli: Cli) -> None:
    play = cli.play(
        "import numpy\nimport playline as pl\n\n@pl.play\nasync def nums(ctx, input):\n"
        "    return await ctx.dataset('d', [{'x': 1}], key='x').with_column(\n"
        "        'n', lambda row: numpy.int64(row['x']) * 2).run()\n"
    )
    result = cli("run", play, "--json")
    assert result.exit_code == 0, result.output
    (rows,) = [line for line in cli.json_lines(result.stdout) if line["kind"] == "rows"]
    assert rows["data"]["rows"][0]["values"] == {"n": 2}  # a number, not the text "2"


def test_inputs_from_i_and_input_json(cli: Cli, tmp_path: Path) -> None:
    echo = cli.play(
        "import playline as pl\n\n@pl.play\nasync def echo(ctx, input):\n    return input\n"
    )
    (tmp_path / "in.json").write_text('{"a": 1, "b": "x"}')
    result = cli(
        "run", echo, "--json", "--input-json", f"@{tmp_path / 'in.json'}",
        "-i", "b=text", "-i", "n:=[1, 2]", "--input", "s=a=b",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert cli.json_lines(result.stdout)[-1]["output"] == {
        "a": 1,
        "b": "text",
        "n": [1, 2],
        "s": "a=b",
    }


def test_out_writes_the_play_dataset(cli: Cli, local_play: str, tmp_path: Path) -> None:
    out = tmp_path / "rows.csv"
    result = cli("run", local_play, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "Wrote 3 rows of dataset 'names'" in result.stdout
    rows = list(csv.DictReader(out.open()))
    assert [r["name"] for r in rows] == ["ada", "alan", "nobody"]
    assert rows[0]["loud"] == '{"name":"ADA"}' and rows[2]["loud"] == ""


def test_failed_run_exits_1_and_resume_finishes_it(cli: Cli, tmp_path: Path) -> None:
    flag = tmp_path / "flag"
    source = (
        "import pathlib\nimport playline as pl\n\n@pl.play\nasync def flaky(ctx, input):\n"
        f"    if not pathlib.Path({str(flag)!r}).exists():\n"
        "        raise RuntimeError('not yet')\n"
        "    return {'ok': True}\n"
    )
    play = cli.play(source)
    failed = cli("run", play, "--run-id", "rf")
    assert failed.exit_code == 1
    assert "failed run rf" in failed.stdout and "RuntimeError: not yet" in failed.stdout
    assert "playline resume rf" in failed.stdout
    assert "a resume runs the play's code again, with the same input" in failed.stdout
    flag.touch()
    resumed = cli("resume", "rf", "--json")
    assert resumed.exit_code == 0, resumed.output
    final = cli.json_lines(resumed.stdout)[-1]
    assert final["status"] == "completed" and final["output"] == {"ok": True}


TYPO_PLAY = """
import playline as pl


@pl.play
async def domains(ctx, input):
    people = [{{"email": "ada@x.io"}}, {{"emial": "alan@y.io"}}, {{"emial": "bob@z.io"}}]
    return await ctx.dataset("people", people).with_column(
        "domain", lambda row: {email}.split("@")[1]
    ).run()
"""


def test_cells_the_play_failed_are_named_with_the_fix_and_retried_after_it(cli: Cli) -> None:
    """Some rows fail in the play's own code: the summary names the error, says to fix the
    play before retrying, and a retry after the fix finishes them."""
    play = cli.play(TYPO_PLAY.format(email='row["email"]'))
    first = cli("run", play, "--run-id", "typo")
    assert first.exit_code == 0, first.output  # completed with errors
    assert "failed: 2 x KeyError in column 'domain': 'email'" in first.stdout
    assert "fix the play where the errors above say, then retry" in first.stdout
    cli.play(TYPO_PLAY.format(email='row.get("email") or row["emial"]'))  # fixed
    again = cli("resume", "typo", "--retry-failed", "--json")
    assert again.exit_code == 0, again.output
    final = cli.json_lines(again.stdout)[-1]
    assert final["status"] == "completed" and final["stats"]["rows_failed"] == 0


def test_resume_reuses_finished_rows_and_the_recorded_budget(cli: Cli, local_play: str) -> None:
    first = cli("run", local_play, "--run-id", "rb", "--max-credits", "1")
    assert first.exit_code == 1  # two hits cost 2 credits: the budget stops the run
    assert "Budget of 1 credits" in first.stdout
    again = cli("resume", "rb")
    assert again.exit_code == 1  # the recorded --max-credits still applies
    done = cli("resume", "rb", "--max-credits", "10", "--json")
    assert done.exit_code == 0, done.output
    assert cli.json_lines(done.stdout)[-1]["stats"]["credits"] >= 1


BUDGET_PLAY = """
import playline as pl

@pl.tool("clitest.paid", batch=pl.Batch(max_size=10), cost=pl.Cost(1))
def paid(inputs):
    return [{"n": i["n"]} for i in inputs]

@pl.play
async def pay(ctx, input):
    return await (
        ctx.dataset("rows", [{"n": n} for n in range(5)], key="n")
        .with_column("paid", lambda row, ctx: ctx.tool("clitest.paid", {"n": row["n"]}))
        .run()
    )
"""


def test_a_budget_raised_on_resume_stands_for_the_resumes_after_it(cli: Cli) -> None:
    play = cli.play(BUDGET_PLAY)
    first = cli("run", play, "--run-id", "rr", "--max-credits", "2")
    assert first.exit_code == 1 and "Budget of 2 credits" in first.stdout
    raised = cli("resume", "rr", "--max-credits", "3")
    assert raised.exit_code == 1 and "Budget of 3 credits" in raised.stdout
    again = cli("resume", "rr")  # no --max-credits: the raised budget, not the first one
    assert again.exit_code == 1 and "Budget of 3 credits" in again.stdout, again.stdout
    done = cli("resume", "rr", "--max-credits", "10", "--json")
    assert done.exit_code == 0, done.output
    assert cli.json_lines(done.stdout)[-1]["stats"]["credits"] == 5


def test_the_summary_counts_the_calls_the_budget_refused_as_calls_not_sent(cli: Cli) -> None:
    """Beside "0 failed" rows (they are pending), "failed: 3 x BudgetExceeded" counted calls
    as if they were rows that failed."""
    first = cli("run", cli.play(BUDGET_PLAY), "--run-id", "cap", "--max-credits", "2")
    assert first.exit_code == 1, first.output
    out = " ".join(first.stdout.split())
    # run: to their end (2), not started (5): the 3 pending are not counted twice
    assert "5 rows: 2 run, 0 reused, 0 failed, 3 pending (a resume runs them)" in out
    said = "calls not sent: 3 x BudgetExceeded: raise the budget the run's error names"
    assert said in out and "--max-usd for the dollars of LLM calls" in out
    assert "failed: 3 x" not in out
    shown = " ".join(cli("show", "cap").stdout.split())
    assert "2 rows run, 0 reused, 0 failed" in shown  # each attempt's line says so too


FAILING_CALLS_PLAY = """
import asyncio
import playline as pl

@pl.tool("clitest.picky")
def picky(input):
    if input["n"] % 5 == 0:
        raise pl.ToolError("clitest.picky", "no such record", status=422, code="invalid")
    return {"n": input["n"]}

async def both(row, ctx):  # two calls a row: a failed row has two failed calls
    found = await asyncio.gather(
        *(ctx.tool("clitest.picky", {"n": row["n"], "side": side}) for side in "ab")
    )
    return [result.data for result in found]

@pl.play
async def picky_pairs(ctx, input):
    return await (
        ctx.dataset("rows", [{"n": n} for n in range(10)], key="n").with_column("ab", both).run()
    )
"""


def test_the_summary_counts_failed_calls_as_calls_beside_the_failed_rows(cli: Cli) -> None:
    """2 rows failed, with 4 failed calls: "failed: 4 x 422" beside "2 failed" read as rows;
    a retry of the failed rows said the same."""
    first = cli("run", cli.play(FAILING_CALLS_PLAY), "--run-id", "picky")
    assert first.exit_code == 0, first.output  # completed with errors
    out = " ".join(first.stdout.split())
    assert "10 rows: 10 run, 0 reused, 2 failed" in out
    assert "calls failed: 4 x 422 from clitest.picky (invalid)" in out
    again = cli("resume", "picky", "--retry-failed")
    assert again.exit_code == 0, again.output
    out = " ".join(again.stdout.split())
    assert "10 rows: 2 run, 8 reused, 2 failed" in out
    assert "calls failed: 4 x 422 from clitest.picky (invalid)" in out


def test_a_run_id_of_a_run_with_another_input_is_refused(cli: Cli, local_play: str) -> None:
    first = cli("run", local_play, "--run-id", "ri", "--input-json", '{"names": ["ada"]}')
    assert first.exit_code == 0, first.output
    other = cli("run", local_play, "--run-id", "ri", "--input-json", '{"names": ["alan"]}')
    line = one_error_line(other, 2)
    assert "exists with another input" in line and '{"names":["ada"]}' in line
    same = cli("run", local_play, "--run-id", "ri", "--input-json", '{"names": ["ada"]}')
    assert same.exit_code == 0 and "1 reused" in same.stdout
    assert cli("run", local_play, "--run-id", "ri").exit_code == 0  # no input: the run's own


def test_missing_play_file_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    line = one_error_line(cli("run", str(tmp_path / "nope.py")), 2)
    assert "Play file" in line and "not found" in line


def test_a_folder_given_as_the_play_file_is_named_a_folder(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "plays").mkdir()
    line = one_error_line(cli("run", str(tmp_path / "plays")), 2)
    assert "is a folder. Give the path of a .py file in it" in line, line
    (tmp_path / "plays" / "enrich.py").write_text("", encoding="utf-8")
    line = one_error_line(cli("run", str(tmp_path / "plays")), 2)
    assert f"e.g. `playline run {tmp_path / 'plays' / 'enrich.py'}`" in line, line


def test_resume_of_a_run_whose_play_file_moved_says_to_put_it_back(
    cli: Cli, local_play: str, tmp_path: Path
) -> None:
    """A resume takes no path: 'give the path of a .py file' told what it cannot do."""
    assert cli("run", local_play, "--run-id", "mv", "--max-credits", "1").exit_code == 1
    moved = tmp_path / "elsewhere.py"
    Path(local_play).rename(moved)

    line = one_error_line(cli("resume", "mv"), 2)

    assert f"Run mv's play file {local_play} is not there any more" in line, line
    assert "Put it back at that path and resume again" in line
    assert "`playline run PATH.py:shout --run-id mv` resumes the run" in line
    assert "Give the path" not in line
    # as it says: the run goes on with the file where it is now
    done = cli("run", f"{moved}:shout", "--run-id", "mv", "--max-credits", "10")
    assert done.exit_code == 0, done.output
    assert "1 reused" in done.stdout


def test_file_without_a_play_is_a_usage_error(cli: Cli) -> None:
    play = cli.play("import playline as pl\n\nasync def helper(ctx, input):\n    return 1\n")
    assert "defines no play" in one_error_line(cli("run", play), 2)


def test_several_plays_need_a_function_name(cli: Cli) -> None:
    source = (
        "import playline as pl\n\n@pl.play\nasync def one(ctx, input):\n    return 1\n\n"
        "@pl.play\nasync def two(ctx, input):\n    return 2\n"
    )
    play = cli.play(source)
    line = one_error_line(cli("run", play), 2)
    assert "several plays (one, two)" in line and ":FUNCTION" in line
    picked = cli("run", f"{play}:two", "--json")
    assert picked.exit_code == 0
    assert cli.json_lines(picked.stdout)[-1]["output"] == 2
    assert "no play named 'three'" in one_error_line(cli("run", f"{play}:three"), 2)


def test_a_file_that_does_not_import_is_a_usage_error(cli: Cli) -> None:
    play = cli.play("import playline as pl\n\ndef broken(:\n")
    assert "Cannot import" in one_error_line(cli("run", play), 2)


def test_a_sync_play_is_a_usage_error_that_ends_its_sentences_once(cli: Cli) -> None:
    play = cli.play("import playline as pl\n\n@pl.play\ndef enrich(ctx, input):\n    return 1\n")
    line = one_error_line(cli("run", play), 2)
    assert "@pl.play needs an async function" in line
    assert line.endswith("write `async def enrich(ctx, input): ...`. Fix the file and try again.")


def test_bad_input_syntax_is_a_usage_error(cli: Cli, local_play: str) -> None:
    assert "is not key=value" in one_error_line(cli("run", local_play, "-i", "novalue"), 2)
    assert "is not key=value" in one_error_line(cli("run", local_play, "-i", "=x"), 2)
    assert "not valid JSON" in one_error_line(cli("run", local_play, "-i", "n:={"), 2)
    assert "not valid JSON" in one_error_line(cli("run", local_play, "--input-json", "{x"), 2)
    line = one_error_line(cli("run", local_play, "--input-json", "[1]"), 2)
    assert "must be a JSON object" in line


def test_nan_infinity_and_a_number_too_large_are_not_valid_json(
    cli: Cli, local_play: str, tmp_path: Path
) -> None:
    """Python's json reads them; stored, each reached the play as null with no word."""
    for value in ("NaN", "-Infinity", "1e400", "[1, -1e999]"):
        line = one_error_line(cli("run", local_play, "-i", f"n:={value}"), 2)
        assert "not valid JSON" in line, line
        line = one_error_line(cli("run", local_play, "--input-json", f'{{"n": {value}}}'), 2)
        assert "not valid JSON" in line, line
    line = one_error_line(cli("run", local_play, "-i", "n:=NaN"), 2)
    assert "NaN is not a JSON number: JSON has no NaN or infinity" in line
    line = one_error_line(cli("run", local_play, "-i", "n:=1e400"), 2)
    assert "1e400 is too large a number: the largest is about 1.8e308" in line
    (tmp_path / "payload.json").write_text('{"ok": Infinity}', encoding="utf-8")
    line = one_error_line(cli("event", "send", "k", "--data", f"@{tmp_path / 'payload.json'}"), 2)
    assert "--data is not valid JSON (Infinity is not a JSON number" in line
    assert not (tmp_path / "cli.db").exists()  # no run was started, no event parked


def test_bad_out_suffix_is_a_usage_error(cli: Cli, local_play: str) -> None:
    assert ".csv or .jsonl" in one_error_line(cli("run", local_play, "--out", "x.xlsx"), 2)


def test_unreachable_gateway_fails_with_exit_1(cli: Cli, local_play: str) -> None:
    line = one_error_line(cli("run", local_play, "--gateway", "http://127.0.0.1:1"), 1)
    assert "Cannot reach the gateway at http://127.0.0.1:1" in line


def test_resume_of_an_unknown_run_fails_with_exit_1(cli: Cli) -> None:
    open_store(cli.store).close()
    assert "No run 'nope'" in one_error_line(cli("resume", "nope"), 1)


def test_resume_of_a_run_not_started_by_the_cli_says_how(cli: Cli) -> None:
    import playline as pl

    @pl.play
    async def api_play(ctx: pl.Context, input: object) -> int:
        return 1

    pl.run(api_play, store=cli.store, run_id="from-api", tools=[])
    assert "was not started by `playline run`" in one_error_line(cli("resume", "from-api"), 1)


def test_wrong_play_for_an_existing_run_id_is_a_usage_error(cli: Cli, local_play: str) -> None:
    assert cli("run", local_play, "--run-id", "rx").exit_code == 0
    other = cli.play(
        "import playline as pl\n\n@pl.play\nasync def other(ctx, input):\n    return 1\n"
    )
    assert "belongs to play 'shout'" in one_error_line(cli("run", other, "--run-id", "rx"), 2)


def test_suspended_run_exits_3_and_an_event_resumes_it(cli: Cli) -> None:
    source = (
        "import playline as pl\n\n@pl.play\nasync def waits(ctx, input):\n"
        "    return await ctx.wait_for_event('approve-1')\n"
    )
    play = cli.play(source)
    first = cli("run", play, "--run-id", "rs")
    assert first.exit_code == 3, first.output
    assert "suspended run rs" in first.stdout
    assert "waiting for: the event approve-1" in first.stdout
    assert "waiting for: the event approve-1" in cli("show", "rs").stdout
    sent = cli("event", "send", "approve-1", "--data", '{"ok": 1}')
    assert sent.exit_code == 0, sent.output
    shown = cli("show", "rs").stdout  # the event is there, for a worker or a resume to take
    assert "waiting for: the event approve-1 (sent: a worker or a resume goes on)" in shown
    resumed = cli("resume", "rs", "--json")
    assert resumed.exit_code == 0, resumed.output
    assert cli.json_lines(resumed.stdout)[-1]["output"] == {"ok": 1}


def test_the_installed_command_reports_errors_without_traceback(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("playline")
    env = {**os.environ, "PLAYLINE_STORE": f"sqlite:///{tmp_path}/x.db"}
    proc = subprocess.run(
        [str(exe), "run", str(tmp_path / "missing.py")], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: Play file")
    assert proc.stdout == ""
    bad = subprocess.run([str(exe), "run"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "Missing argument" in bad.stderr
    json.dumps(proc.stderr)


def test_counts_of_one_are_singular() -> None:
    from playline import RunStats
    from playline.cli._app import stats_line

    assert "· 1 provider request ·" in stats_line(RunStats(tool_requests=1))
    assert "· 2 provider requests ·" in stats_line(RunStats(tool_requests=2))
