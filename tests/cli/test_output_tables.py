"""Tables that fit where they go: in a pipe every table is printed whole (no tool name cut to
`sim.co…` because a pipe was taken as 80 columns), in a terminal it fits the terminal, and
`--tsv` prints the rows as tab-separated values for other tools. Credits are rounded for
people (`6.35`), exact in --json. Against the simulator, through the installed command."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

import playline

from clihelp import LOCAL_PLAY, PLAYLINE, Cli, in_a_terminal, one_error_line

DEMO = str(Path(playline.__file__).with_name("demo") / "__init__.py")
SIM_TOOLS = ("sim.company.enrich", "sim.email.alpha", "sim.email.beta", "sim.email.gamma",
             "sim.email.verify")  # fmt: skip
PLANNED = SIM_TOOLS[:4]  # the plan counts no verification: it plans emails as not found
PLAN_HEADER = ["tool", "calls", "requests", "from receipts", "hit rate", "credits expected",
               "at most", "time at rate"]  # fmt: skip
BOX = re.compile("[┃│┏┡└━─]")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# three calls of 2.117647 credits: 6.352941 credits, shown as 6.35
FRACTIONAL_PLAY = """
import playline as pl

@pl.tool("frac.score", cost=pl.Cost(2.117647))
def score(input):
    return {"score": input["n"] * 2}

@pl.play
async def fractions(ctx, input):
    return await (
        ctx.dataset("nums", [{"n": n} for n in range(3)], key="n")
        .with_column("score", lambda row, ctx: ctx.tool("frac.score", {"n": row["n"]}))
        .run()
    )
"""


def _piped(cli: Cli, *args: str, store: bool = True) -> subprocess.CompletedProcess[str]:
    """`playline ... | cat`: stdout a pipe, on what would be an 80-column terminal."""
    done = subprocess.run(
        [PLAYLINE, *args, *(["--store", cli.store] if store else [])],
        cwd=cli.tmp,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert done.returncode == 0, done.stderr
    return done


def _tsv(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.splitlines()]


def test_plan_in_a_pipe_prints_tool_names_and_headers_whole(cli: Cli, gateway: str) -> None:
    out = _piped(cli, "plan", DEMO).stdout
    assert "…" not in out, out
    for tool in PLANNED:
        rows = [line for line in out.splitlines() if f" {tool} " in line]
        assert len(rows) == 1, (tool, out)  # whole, and on one line
    header = next(line for line in out.splitlines() if "┃ tool " in line)
    assert all(name in header for name in PLAN_HEADER), header


def test_plan_tsv_prints_its_tables_alone_on_stdout(cli: Cli, gateway: str) -> None:
    done = _piped(cli, "plan", DEMO, "--tsv")
    assert not BOX.search(done.stdout), done.stdout
    per_tool, per_column = done.stdout.split("\n\n")
    tools = _tsv(per_tool)
    assert tools[0] == PLAN_HEADER
    assert sorted(row[0] for row in tools[1:]) == sorted(PLANNED)
    assert all(len(row) == len(PLAN_HEADER) and row[1].isdigit() for row in tools[1:])
    assert _tsv(per_column)[0] == ["column", "calls", "requests", "credits expected", "at most"]
    # the headline, totals and titles are for people: on stderr
    assert "Plan of play" in done.stderr and "Per tool" in done.stderr
    assert "Plan of play" not in done.stdout


def test_plan_fits_an_80_column_terminal(cli: Cli, gateway: str) -> None:
    out = in_a_terminal(["plan", DEMO, "--store", cli.store], cli.tmp)
    lines = [ANSI.sub("", line) for line in out.splitlines()]
    assert max(len(line) for line in lines) <= 80, out
    assert any("Per tool" in line for line in lines)


def test_the_demo_reads_in_an_80_column_terminal(cli: Cli) -> None:
    """In 80 columns the demo's six columns were squeezed to `Le… │ Sy…`, its progress line's
    dataset to `p…`, and its credits counted the AI column's dollars as credits (115.001)."""
    out = in_a_terminal(["demo"], cli.tmp)
    lines = [ANSI.sub("", line) for line in out.splitlines()]
    table = [line for line in lines if line.startswith("│")]
    assert table and max(len(line) for line in table) <= 80, out
    # each person on two lines: the name above the email, the company above its summary
    first = next(i for i, line in enumerate(table) if "Jin Cruz" in line)
    assert "jin.cruz@algalkinhq.co" in table[first + 1] and "AlgalkinHQ" in table[first]
    assert any(" people ━" in line and "50/50 rows" in line for line in lines), out
    # a fraction of a cent to three significant digits ($0.0000 hid an LLM call's cost)
    assert any(re.search(r"credits 115 · \$0\.000[1-9]\d{0,2}\b", line) for line in lines), out


def test_show_in_a_pipe_and_as_tsv(cli: Cli, gateway: str) -> None:
    assert _piped(cli, "run", DEMO, "--run-id", "d1").returncode == 0
    out = _piped(cli, "show", "d1").stdout
    for tool in SIM_TOOLS:
        assert len([line for line in out.splitlines() if f" {tool} " in line]) == 1, out
    assert "…" not in out

    tables = _piped(cli, "show", "d1", "--tsv").stdout.split("\n\n")
    headers = [_tsv(table)[0] for table in tables]
    assert headers[0][:3] == ["dataset", "status", "rows"]
    tools = _tsv(tables[1])
    assert tools[0] == ["tool", "requests", "inputs sent", "live calls", "found", "cost"]
    assert sorted(row[0] for row in tools[1:-1]) == sorted(SIM_TOOLS)
    assert tools[-1][0] == "total"
    assert headers[2][:3] == ["step", "attempts", "hits"]  # the waterfall's steps

    rows = _tsv(_piped(cli, "show", "d1", "--rows", "2", "--tsv").stdout)
    assert rows[0][:2] == ["status", "first_name"] and len(rows) == 3
    company = rows[1][rows[0].index("company")]
    assert json.loads(company)["domain"]  # in TSV, a nested value is JSON text


def test_runs_tools_providers_and_schedules_print_tsv(cli: Cli, gateway: str) -> None:
    play = cli.play(LOCAL_PLAY)
    assert _piped(cli, "run", play, "--run-id", "tsv-run").returncode == 0
    runs = _tsv(_piped(cli, "runs", "--tsv").stdout)
    assert runs[0] == ["run", "play", "status", "started", "rows", "failed", "credits"]
    assert runs[1][:3] == ["tsv-run", "shout", "completed"] and runs[1][4:] == ["3", "0", "2"]

    tools = _tsv(_piped(cli, "tools", "list", "--tsv", store=False).stdout)
    assert tools[0] == ["tool", "source", "rate/s", "batch", "cost", "description"]
    assert set(SIM_TOOLS) <= {row[0] for row in tools[1:]}

    providers = _tsv(_piped(cli, "providers", "list", "--tsv", store=False).stdout)
    assert providers[0][0] == "hunter" and all(len(row) == 2 for row in providers)
    assert any(row[0] == "hunter.email_finder" for row in providers)  # not indented

    added = cli("schedule", "add", "nightly", play, "--cron", "0 2 * * *")
    assert added.exit_code == 0, added.output
    schedules = _tsv(_piped(cli, "schedule", "list", "--tsv").stdout)
    assert schedules[0] == ["name", "play", "cron", "timezone", "next fire", "paused", "last run"]
    assert schedules[1][:3] == ["nightly", "shout", "0 2 * * *"]


def test_json_and_tsv_together_are_a_usage_error(cli: Cli, local_play: str) -> None:
    line = one_error_line(cli("runs", "--json", "--tsv"), 2)
    assert "--json and --tsv" in line


def test_show_rounds_credits_for_people_and_keeps_them_exact_in_json(cli: Cli) -> None:
    assert cli("run", cli.play(FRACTIONAL_PLAY), "--run-id", "c1").exit_code == 0
    shown = _piped(cli, "show", "c1").stdout
    assert "6.352941" not in shown and "6.35294" not in shown, shown
    tool = next(line for line in shown.splitlines() if "frac.score" in line)
    assert tool.split()[-2] == "6.35", tool  # the cost column
    assert "· 6.35 credits" in shown  # the totals line
    runs = _tsv(_piped(cli, "runs", "--tsv").stdout)
    assert runs[1][-1] == "6.35"
    doc = json.loads(cli("show", "c1", "--json").stdout)
    assert doc["trace"]["tools"]["frac.score"]["credits"] == pytest.approx(6.352941)


def test_the_demo_in_a_pipe_prints_its_tables_whole(cli: Cli) -> None:
    """`make demo | tee demo.log`: its enriched table was cut to 80 columns (`ji…`)."""
    out = _piped(cli, "demo").stdout
    assert "jin.cruz@algalkinhq.co" in out  # the first person's email, whole
    assert "sim.company.enrich" in out  # the cost table's tool names, whole
