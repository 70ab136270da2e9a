"""Flat results on the command line, against the simulator: a column's ``fields=`` in the
``--out`` CSV, ``export --flatten`` (CSV and JSON lines), and ``show --rows`` printing a
nested result compactly, one line per row, in a pipe and in an 80-column terminal."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

import playline

from clihelp import PLAYLINE, Cli, in_a_terminal

PEOPLE = Path(playline.__file__).with_name("demo") / "people.csv"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

PLAY = f"""
import playline as pl
from playline.demo import domain_of

def company(row, ctx):
    return ctx.tool("sim.company.enrich", {{"domain": row["domain"]}})

@pl.play
async def firms(ctx, input):
    rows = ctx.csv({str(PEOPLE)!r}, rename={{"Company Website": "website"}},
                   columns=["First Name", "Company Website"])
    return await (
        ctx.dataset("people", list(rows)[:8], key="First Name")
        .with_column("domain", lambda row: domain_of(row["website"]))
        .with_column("company", company, fields=["name", "industry", "revenue"])
        .with_column("firm", company)
        .run()
    )
"""


@pytest.fixture
def ran(cli: Cli, gateway: str, tmp_path: Path) -> Path:
    """The play run once with --out, through the installed command: the CSV it wrote."""
    out = tmp_path / "firms.csv"
    done = _playline("run", cli.play(PLAY), "--run-id", "f1", "--out", str(out), cli=cli)
    assert done.returncode == 0, done.stderr
    return out


def _playline(*args: str, cli: Cli, columns: int = 80) -> subprocess.CompletedProcess[str]:
    """`playline ...` with its output in a pipe (as `| cat` has it), COLUMNS as given."""
    return subprocess.run(
        [PLAYLINE, *args, "--store", cli.store],
        cwd=cli.tmp,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": str(columns)},
    )


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_out_writes_a_column_with_fields_as_its_fields_columns(ran: Path) -> None:
    rows = _csv(ran)
    assert list(rows[0]) == [
        "First Name", "website", "domain", "company.name", "company.industry",
        "company.revenue", "firm",
    ]  # fmt: skip
    found = [r for r in rows if r["company.name"]]
    assert found and all(r["company.industry"] for r in found)
    assert all(r["company.revenue"] == "" for r in rows)  # not in the result: empty, no error
    firm = json.loads(found[0]["firm"])  # no fields=: the whole result, as JSON text
    assert firm["name"] == found[0]["company.name"]


def test_export_flatten_spreads_every_nested_result(cli: Cli, ran: Path, tmp_path: Path) -> None:
    flat = tmp_path / "flat.csv"
    done = cli("export", "f1", "--out", str(flat), "--flatten")
    assert done.exit_code == 0, done.output
    rows = _csv(flat)
    header = list(rows[0])
    assert "firm" not in header  # rows not found add no empty column of their own
    assert [h for h in header if h.startswith("firm.")] == [
        "firm.country", "firm.domain", "firm.industry", "firm.name", "firm.size",
    ]  # fmt: skip
    assert rows[0]["firm.name"] == _csv(ran)[0]["company.name"]

    lines = tmp_path / "whole.jsonl"
    assert cli("export", "f1", "--out", str(lines)).exit_code == 0
    first = json.loads(lines.read_text(encoding="utf-8").splitlines()[0])
    assert isinstance(first["company"], dict)  # JSON lines keep the stored value whole
    assert cli("export", "f1", "--out", str(tmp_path / "f.jsonl"), "--flatten").exit_code == 0
    spread = json.loads((tmp_path / "f.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert "firm.name" in spread and "firm" not in spread and "company" not in spread


def test_show_rows_prints_a_nested_result_on_one_line_in_a_pipe(cli: Cli, ran: Path) -> None:
    shown = _playline("show", "f1", "--rows", "3", "--columns", "First Name,firm", cli=cli)
    assert shown.returncode == 0, shown.stderr
    names = [r["First Name"] for r in _csv(ran)[:3]]
    lines = [line for line in shown.stdout.splitlines() if "completed" in line]
    assert len(lines) == 3, shown.stdout  # a row a line, however long
    for name, line in zip(names, lines, strict=True):
        assert name in line
    firm = next(r for r in _csv(ran)[:3] if r["firm"])
    assert f"name={json.loads(firm['firm'])['name']}" in shown.stdout  # name=Acme · ...
    assert "{" not in shown.stdout  # not as JSON text


def test_show_rows_fits_an_80_column_terminal(cli: Cli, ran: Path) -> None:
    out = in_a_terminal(["show", "f1", "--rows", "4", "--store", cli.store], cli.tmp)
    lines = [ANSI.sub("", line) for line in out.splitlines()]
    assert max(len(line) for line in lines) <= 80, out
    body = [line for line in lines if line.startswith("│")]
    assert len(body) == 4 and all("completed" in line for line in body), out  # a row a line
    assert "…" in out  # the long values cut to the column, never wrapped over lines
