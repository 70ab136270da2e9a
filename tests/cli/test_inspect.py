"""`runs`, `show`, `logs`, `export` and `cache`: a run is inspectable after it ended."""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path

import pytest

from playline.cli._load import CliError
from playline.cli._outfile import check_out
from playline.store import Event, RunRecord, RunStatus, open_store

from clihelp import Cli, one_error_line


@pytest.fixture
def ran(cli: Cli, local_play: str) -> str:
    result = cli("run", local_play, "--run-id", "r1")
    assert result.exit_code == 0, result.output
    return "r1"


def test_runs_lists_the_newest_runs(cli: Cli, ran: str) -> None:
    result = cli("runs")
    assert result.exit_code == 0
    assert "r1" in result.stdout and "shout" in result.stdout and "completed" in result.stdout
    rows = cli.json_lines(cli("runs", "--json").stdout)
    assert rows[0]["run_id"] == "r1" and rows[0]["stats"]["rows"] == 3


def test_runs_on_an_empty_store_says_how_to_start(cli: Cli) -> None:
    open_store(cli.store).close()
    result = cli("runs")
    assert result.exit_code == 0 and "No runs yet" in result.stdout


def test_reading_commands_never_create_a_store(cli: Cli, tmp_path: Path) -> None:
    line = one_error_line(cli("runs"), 1)
    assert line.startswith(f"error: No store at {tmp_path / 'cli.db'}")
    assert not (tmp_path / "cli.db").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["runs", "--limit"],
        ["show", "r1", "--rows"],
        ["worker", "--temporal", "127.0.0.1:1", "--concurrency"],
    ],
)
def test_a_count_too_large_for_the_store_is_a_usage_error(
    cli: Cli, ran: str, args: list[str]
) -> None:
    """Not 'OverflowError: Python int too large to convert to SQLite INTEGER', exit 1."""
    refused = cli(*args, "99999999999999999999")
    assert refused.exit_code == 2, refused.output
    assert f"Invalid value for '{args[-1]}'" in refused.stderr
    assert "less than or equal to" in refused.stderr and "1000000000" in refused.stderr
    assert "OverflowError" not in refused.output
    if args[0] != "worker":  # the most it takes is taken
        assert cli(*args, "1000000000").exit_code == 0


def test_show_prints_status_trace_stats_and_ledger(cli: Cli, ran: str) -> None:
    result = cli("show", ran)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Run r1" in out and "shout" in out and "completed" in out
    assert "source " in out and "play.py:shout" in out
    assert "names" in out and "Shout names" in out  # the dataset step
    assert "clitest.upper" in out  # batches and ledger per tool
    assert "1 log line(s)" in out
    doc = json.loads(cli("show", ran, "--json").stdout)
    assert doc["status"] == "completed" and doc["stats"]["credits"] == 2
    trace = doc["trace"]
    assert trace["datasets"][0]["name"] == "names"
    assert trace["datasets"][0]["columns"] == ["loud", "size"]
    assert trace["datasets"][0]["stats"]["rows"] == 3
    assert trace["tools"]["clitest.upper"] == {
        "requests": 1,
        "inputs": 3,
        "calls": 3,
        "found": 2,
        "credits": 2.0,
    }
    assert trace["attempts"] == 1


def test_logs_prints_the_log_lines(cli: Cli, ran: str) -> None:
    result = cli("logs", ran)
    assert result.exit_code == 0
    assert "shouting 3 names" in result.stdout
    assert cli.json_lines(cli("logs", ran, "--json").stdout)[0]["message"] == "shouting 3 names"


def test_export_csv_and_jsonl(cli: Cli, ran: str, tmp_path: Path) -> None:
    out = tmp_path / "x.csv"
    result = cli("export", ran, "--out", str(out))
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(out.open()))
    assert [r["loud"] for r in rows] == ['{"name":"ADA"}', '{"name":"ALAN"}', ""]
    assert set(rows[0]) == {"name", "loud", "size"}
    jsonl = tmp_path / "x.jsonl"
    assert cli("export", ran, "--out", str(jsonl), "--dataset", "names").exit_code == 0
    docs = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert docs[1] == {"name": "alan", "loud": {"name": "ALAN"}, "size": 4}


def test_export_to_standard_output(cli: Cli, ran: str, tmp_path: Path, monkeypatch) -> None:
    """`--out -` prints the rows (CSV, or JSON lines with --format), and the count to stderr;
    a command that prints its own output there, or Parquet, refuses it."""
    monkeypatch.chdir(tmp_path)
    printed = cli("export", ran, "--out", "-")
    assert printed.exit_code == 0, printed.output
    rows = list(csv.DictReader(io.StringIO(printed.stdout)))
    assert [r["name"] for r in rows] == ["ada", "alan", "nobody"]
    assert "Wrote 3 rows of dataset 'names' to standard output" in printed.stderr
    lines = cli("export", ran, "--out", "-", "--format", "jsonl").stdout.splitlines()
    assert json.loads(lines[1])["loud"] == {"name": "ALAN"}
    assert "Parquet is not text" in one_error_line(
        cli("export", ran, "--out", "-", "--format", "parquet"), 2
    )
    assert not (tmp_path / "-").exists()  # no file of that name, ever
    with pytest.raises(CliError, match="give a file name"):  # `playline run --out -`
        check_out(Path("-"), force=False)


def test_export_with_status_adds_row_and_cell_columns(cli: Cli, ran: str, tmp_path: Path) -> None:
    out = tmp_path / "s.jsonl"
    assert cli("export", ran, "--out", str(out), "--with-status").exit_code == 0
    docs = [json.loads(line) for line in out.read_text().splitlines()]
    assert docs[0]["_key"] == "ada" and docs[0]["_status"] == "completed"
    assert docs[0]["loud.status"] == "completed" and docs[0]["loud.provider"] == "clitest.upper"
    assert docs[2]["loud.status"] == "not_found"
    assert docs[0]["size.status"] == "completed" and docs[0]["size.provider"] is None
    assert "name.status" not in docs[0]  # input columns have no cell


CLASH_PLAY = """
import playline as pl


@pl.play
async def clash(ctx, input):
    rows = [{"id": 1, "_note": "vip", "company.status": "active", "company": "Acme"}]
    return await ctx.dataset("d", rows, key="id").with_column(
        "company", lambda row: row["company"].upper()
    ).run()
"""


def test_input_fields_keep_their_names_and_a_status_name_clash_is_refused(
    cli: Cli, tmp_path: Path
) -> None:
    """An input field may start with "_" (only hidden computed columns are left out); one
    named like a status column --with-status adds is refused, not overwritten."""
    assert cli("run", cli.play(CLASH_PLAY), "--run-id", "clash").exit_code == 0
    out = tmp_path / "plain.jsonl"
    assert cli("export", "clash", "--out", str(out)).exit_code == 0
    (doc,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert doc == {"id": 1, "_note": "vip", "company.status": "active", "company": "ACME"}
    status = tmp_path / "status.csv"
    line = one_error_line(cli("export", "clash", "--out", str(status), "--with-status"), 1)
    assert "column 'company.status'" in line and "without --with-status" in line
    assert not status.exists()


def test_export_errors(cli: Cli, ran: str, tmp_path: Path) -> None:
    out = str(tmp_path / "x.csv")
    assert "No run 'nope'" in one_error_line(cli("export", "nope", "--out", out), 1)
    line = one_error_line(cli("export", ran, "--out", out, "--dataset", "other"), 1)
    assert "no dataset 'other'" in line and "names" in line
    assert ".csv or .jsonl" in one_error_line(cli("export", ran, "--out", "x.txt"), 2)


def test_export_of_several_datasets_needs_a_name(cli: Cli, tmp_path: Path) -> None:
    play = cli.play(
        "import playline as pl\n\n@pl.play\nasync def two(ctx, input):\n"
        "    await ctx.dataset('a', [{'x': 1}]).run()\n"
        "    await ctx.dataset('b', [{'x': 2}]).run()\n"
    )
    assert cli("run", play, "--run-id", "r2").exit_code == 0
    line = one_error_line(cli("export", "r2", "--out", str(tmp_path / "o.csv")), 2)
    assert "several datasets (a, b)" in line and "--dataset" in line


@pytest.mark.parametrize("command", ["show", "logs"])
def test_unknown_run_id_fails_with_exit_1(cli: Cli, ran: str, command: str) -> None:
    line = one_error_line(cli(command, "run_nope"), 1)
    assert "No run 'run_nope'" in line and "playline runs" in line


def test_cache_stats_and_clear(cli: Cli, ran: str, local_play: str) -> None:
    stats = cli("cache", "stats")
    assert stats.exit_code == 0 and "clitest.upper" in stats.stdout
    doc = json.loads(cli("cache", "stats", "--json").stdout)
    assert doc["clitest.upper"]["completed"] == 3
    cleared = cli("cache", "clear", "--tool", "clitest.upper", "--yes")
    assert cleared.exit_code == 0 and "Deleted 3 receipt(s)" in cleared.stdout
    assert "No receipts yet" in cli("cache", "stats").stdout
    again = cli("run", local_play, "--json")
    assert cli.json_lines(again.stdout)[-1]["stats"]["tool_calls_live"] == 3  # paid again


def test_a_bad_store_url_fails_with_exit_1(cli: Cli) -> None:
    result = cli("runs", "--store", "bogus://x", store=False)
    assert "Unknown store URL" in one_error_line(result, 1)


TEMPORAL = {"target": "127.0.0.1:7233", "namespace": "default", "task_queue": "plays"}


def test_a_run_submitted_to_temporal_that_no_worker_started_is_queued(cli: Cli) -> None:
    """Not ``interrupted``: nothing stopped it, it waits for a worker; show says so."""
    db = open_store(cli.store)
    when = time.time()
    queued = dict(play="shout", status=RunStatus.RUNNING, created_at=when, updated_at=when)
    db.create_run(RunRecord(run_id="t-new", options={"temporal": TEMPORAL}, **queued))
    # a worker took this one (an attempt) and died; this one ran here and died before its
    # first attempt: both were interrupted
    db.create_run(RunRecord(run_id="t-died", options={"temporal": TEMPORAL}, attempts=1, **queued))
    db.create_run(RunRecord(run_id="here", **queued))
    db.close()

    listed = cli("runs")
    assert listed.exit_code == 0, listed.output
    status = {
        line.split("│")[1].strip(): line for line in listed.stdout.splitlines() if "│" in line
    }
    assert "queued" in status["t-new"]
    assert "interrupted" in status["t-died"] and "interrupted" in status["here"]
    shown = cli("show", "t-new")
    assert shown.exit_code == 0, shown.output
    assert "queued" in shown.stdout
    assert "no worker has started it yet" in " ".join(shown.stdout.split())


PAID_PLAY = """
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


def _dataset_statuses(out: str) -> dict[str, str]:
    """The dataset table of `playline show`: dataset -> status."""
    table = out[out.index("Datasets (rows as stored)") :]
    table = table[: table.index("└")]
    cells = [line.split("│") for line in table.splitlines() if line.startswith("│")]
    return {row[1].strip(): row[2].strip() for row in cells if row[1].strip()}


def test_show_lists_a_dataset_the_budget_stopped_as_stopped(cli: Cli) -> None:
    """Not ``running``: the budget ended its attempt, its rows wait for a resume."""
    play = cli.play(PAID_PLAY)
    first = cli("run", play, "--run-id", "capped", "--max-credits", "2")
    assert first.exit_code == 1, first.output
    shown = cli("show", "capped")
    assert shown.exit_code == 0, shown.output
    assert _dataset_statuses(shown.stdout) == {"rows": "stopped"}
    (dataset,) = json.loads(cli("show", "capped", "--json").stdout)["trace"]["datasets"]
    assert dataset["status"] == "stopped" and dataset["stats"]["rows_pending"] == 3
    done = cli("resume", "capped", "--max-credits", "10")
    assert done.exit_code == 0, done.output
    assert _dataset_statuses(cli("show", "capped").stdout) == {"rows": "completed"}


def test_show_lists_the_datasets_an_attempt_left_unended_as_not_running(cli: Cli) -> None:
    """A store written before datasets reported a budget stop, or by a process that was
    killed: a dataset whose attempt ended (or was followed by another) is not running."""
    db = open_store(cli.store)
    when = time.time()
    db.create_run(
        RunRecord(
            run_id="old", play="pay", status=RunStatus.FAILED, attempts=2, created_at=when,
            updated_at=when, error="Budget of 2 credits would be exceeded",
        )
    )  # fmt: skip
    events = [
        ("run", None, "running"),  # attempt 1: killed while dataset "a" ran
        ("dataset", "a", "running"),
        ("run", None, "running"),  # attempt 2: the budget stopped dataset "b", unreported
        ("dataset", "b", "running"),
        ("run", None, "failed"),
    ]
    db.append_events(
        [
            Event(kind=kind, run_id="old", at=when + n, dataset=name, status=status)
            for n, (kind, name, status) in enumerate(events)
        ]
    )
    db.close()
    shown = cli("show", "old")
    assert shown.exit_code == 0, shown.output
    assert _dataset_statuses(shown.stdout) == {"a": "interrupted", "b": "stopped"}
