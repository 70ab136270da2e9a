"""`--out` of export, run and resume: files that are safe to write and safe to open.

An existing file is kept unless --force; a symbolic link at the path is never followed; the
file appears whole (written next to it, then renamed); CSV cells a spreadsheet would run as
formulas are escaped (OWASP) unless --raw; a bad path is one line, found before a run starts.
"""

from __future__ import annotations

import csv
import errno
import json
import os
import stat
from pathlib import Path

import pytest

from clihelp import Cli, one_error_line

FORMULAS = ['=HYPERLINK("http://x")', "+1+1", "-2+3", "@SUM(A1)", "\tTAB", "\rCR", "ok", "-"]

FORMULA_PLAY = f"""
import playline as pl

@pl.tool("files.lookup")
def lookup(input):
    return {{"title": input["v"]}}

@pl.play
async def formulas(ctx, input):
    rows = [{{"id": i, "v": v}} for i, v in enumerate({FORMULAS!r})]
    return await (
        ctx.dataset("cells", rows, key="id")
        .with_column("title", lambda row, ctx: ctx.tool("files.lookup", {{"v": row["v"]}}))
        .with_column("plain", lambda row: row["title"].get("title"))
        .with_column("=sum", lambda row: -5)
        .run()
    )
"""


@pytest.fixture
def ran(cli: Cli, local_play: str) -> str:
    result = cli("run", local_play, "--run-id", "r1")
    assert result.exit_code == 0, result.output
    return "r1"


def _files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def test_export_refuses_to_overwrite_without_force(cli: Cli, ran: str, tmp_path: Path) -> None:
    out = tmp_path / "rows.csv"
    out.write_text("keep me\n")

    line = one_error_line(cli("export", ran, "--out", str(out)), 2)

    assert "exists" in line and "--force" in line
    assert out.read_text() == "keep me\n"
    other_name = tmp_path / "hard-link-to-rows.csv"
    os.link(out, other_name)
    assert cli("export", ran, "--out", str(out), "--force").exit_code == 0
    assert out.read_text().startswith("name,loud,size")
    assert other_name.read_text() == "keep me\n"  # a new file renamed into place, not rewritten


def test_export_never_writes_through_a_symlink(cli: Cli, ran: str, tmp_path: Path) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("do not touch\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)

    line = one_error_line(cli("export", ran, "--out", str(link)), 2)
    assert "symbolic link" in line
    assert target.read_text() == "do not touch\n"

    assert cli("export", ran, "--out", str(link), "--force").exit_code == 0
    assert target.read_text() == "do not touch\n"  # the link was replaced, not followed
    assert not link.is_symlink() and link.read_text().startswith("name,loud,size")


def test_a_dangling_symlink_is_not_followed_either(cli: Cli, ran: str, tmp_path: Path) -> None:
    link = tmp_path / "dangling.jsonl"
    link.symlink_to(tmp_path / "created-through-the-link.jsonl")

    one_error_line(cli("export", ran, "--out", str(link)), 2)

    assert not (tmp_path / "created-through-the-link.jsonl").exists()


def test_export_appears_whole_with_a_normal_mode(cli: Cli, ran: str, tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    out = folder / "rows.jsonl"

    assert cli("export", ran, "--out", str(out)).exit_code == 0

    assert _files(folder) == {"rows.jsonl"}  # no temporary file left behind
    assert len(out.read_text().splitlines()) == 3
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask


def test_a_missing_folder_is_one_line(cli: Cli, ran: str, tmp_path: Path) -> None:
    out = tmp_path / "no" / "such" / "rows.csv"

    line = one_error_line(cli("export", ran, "--out", str(out)), 2)

    assert "does not exist" in line and str(out.parent) in line
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize(
    ("name", "format"), [("rows.csv", "parquet"), ("rows.parquet", "csv"), ("rows.CSV", "jsonl")]
)
def test_a_format_the_file_name_contradicts_is_refused(
    cli: Cli, ran: str, tmp_path: Path, name: str, format: str
) -> None:
    """Parquet in rows.csv: what opens the file by its name reads garbage."""
    line = one_error_line(cli("export", ran, "--out", str(tmp_path / name), "--format", format), 2)

    assert f"the format {format}" in line and f"Name it rows.{format}" in line
    assert name not in _files(tmp_path)
    # a name of no format of ours is the --format's to say
    assert (
        cli("export", ran, "--out", str(tmp_path / "rows.ndjson"), "--format", "jsonl").exit_code
        == 0
    )
    assert json.loads((tmp_path / "rows.ndjson").read_text().splitlines()[0])["name"] == "ada"


def test_run_checks_the_out_path_before_anything_runs(
    cli: Cli, local_play: str, tmp_path: Path
) -> None:
    existing = tmp_path / "rows.csv"
    existing.write_text("keep me\n")

    missing = one_error_line(cli("run", local_play, "--out", str(tmp_path / "x" / "r.csv")), 2)
    exists = one_error_line(cli("run", local_play, "--out", str(existing)), 2)

    # a folder no file can be made in, even by root (os.access says yes to root)
    unwritable = one_error_line(cli("run", local_play, "--out", "/proc/self/rows.csv"), 2)

    assert "does not exist" in missing and "--force" in exists
    assert "no file can be written in /proc/self" in unwritable
    assert existing.read_text() == "keep me\n"
    assert cli.json_lines(cli("runs", "--json").stdout) == []  # no run started, nothing paid


def test_a_file_system_that_refuses_the_rows_is_one_line_and_leaves_nothing(
    cli: Cli, ran: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills up as the export is written: one line saying so and how to write the
    rows later; no half file, no temporary file."""
    folder = tmp_path / "full"
    folder.mkdir()

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    line = one_error_line(cli("export", ran, "--out", str(folder / "rows.csv")), 1)

    assert "could not be written (No space left on device)" in line and "playline export" in line
    assert _files(folder) == set()


def test_resume_checks_the_out_path_first(cli: Cli, ran: str, tmp_path: Path) -> None:
    existing = tmp_path / "rows.jsonl"
    existing.write_text("keep me\n")

    assert "--force" in one_error_line(cli("resume", ran, "--out", str(existing)), 2)
    assert cli("resume", ran, "--out", str(existing), "--force").exit_code == 0
    assert len(existing.read_text().splitlines()) == 3


def test_csv_cells_that_would_run_as_formulas_are_escaped(cli: Cli, tmp_path: Path) -> None:
    play = cli.play(FORMULA_PLAY)
    out = tmp_path / "cells.csv"

    result = cli("run", play, "--out", str(out))

    assert result.exit_code == 0, result.output
    with out.open(newline="") as handle:
        header, *rows = list(csv.reader(handle))
    assert header == ["id", "v", "title", "plain", "'=sum"]
    assert [row[1] for row in rows] == ["'" + v if v[0] in "=+-@\t\r" else v for v in FORMULAS]
    assert [row[3] for row in rows] == [row[1] for row in rows]
    assert rows[0][2] == '{"title":"=HYPERLINK(\\"http://x\\")"}'  # JSON cells begin with {
    assert {row[4] for row in rows} == {"-5"}  # numbers stay numbers


def test_raw_and_jsonl_keep_values_as_they_are(cli: Cli, tmp_path: Path) -> None:
    play = cli.play(FORMULA_PLAY)
    assert cli("run", play, "--run-id", "f1").exit_code == 0
    raw, jsonl = tmp_path / "raw.csv", tmp_path / "cells.jsonl"

    assert cli("export", "f1", "--out", str(raw), "--raw").exit_code == 0
    assert cli("export", "f1", "--out", str(jsonl)).exit_code == 0

    with raw.open(newline="") as handle:
        assert [row["v"] for row in csv.DictReader(handle)] == FORMULAS
    assert [json.loads(line)["v"] for line in jsonl.read_text().splitlines()] == FORMULAS


MANY_PLAY = """
import playline as pl

@pl.play
async def many(ctx, input):
    rows = [{"n": n, "text": "x" * 40} for n in range(5000)]
    return await ctx.dataset("rows", rows, key="n").with_column("y", lambda row: 1).run()
"""


def test_export_to_a_pipe_its_reader_closes_ends_quietly(cli: Cli) -> None:
    """`playline export RUN --out - | head -1` printed 'error: BrokenPipeError', exit 1."""
    import subprocess
    import sys

    assert cli("run", cli.play(MANY_PLAY), "--run-id", "many").exit_code == 0
    playline = Path(sys.executable).with_name("playline")
    piped = subprocess.run(
        f"'{playline}' export many --out - --store '{cli.store}' 2>err.txt | head -1; "
        "echo ${PIPESTATUS[0]} > code.txt",
        shell=True, executable="/bin/bash", cwd=cli.tmp, capture_output=True, text=True,
    )  # fmt: skip
    assert piped.stdout.splitlines() == ["n,text,y"]
    assert (cli.tmp / "err.txt").read_text() == ""
    assert (cli.tmp / "code.txt").read_text().strip() == "0"


STATUS_PLAY = """
import playline as pl

@pl.play
async def verified(ctx, input):
    rows = [{"email": "ada@x.io"}]
    return await (
        ctx.dataset("rows", rows, key="email")
        .with_column("verification", lambda row: {"status": "valid"})
        .run()
    )
"""


def test_a_spread_name_clashing_with_a_status_column_is_refused_before_any_output(
    cli: Cli,
) -> None:
    """`verification.status` (the result's field, spread) beside --with-status's
    `verification.status`: the header went out with the name twice, then the export failed."""
    assert cli("run", cli.play(STATUS_PLAY), "--run-id", "st").exit_code == 0
    out = cli("export", "st", "--out", "-", "--with-status", "--flatten")
    assert out.exit_code == 1
    assert out.stdout == ""
    assert "spreads into 'verification.status'" in out.stderr and "--with-status" in out.stderr
