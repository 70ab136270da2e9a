"""Exit codes that tell the truth: ``sys.exit()``, ``KeyboardInterrupt`` or a play's own
``BaseException`` in its code fail the run (exit 1) or its import (exit 2), saying so; exit 3
is only for a stop Playline made; a Ctrl-C stops a play file that loops as it imports."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from clihelp import Cli, one_error_line

PLAYLINE = str(Path(sys.executable).with_name("playline"))
SECRET = "cli-exit-secret-9d27b4"

EXITING_PLAY = """
import sys
import playline as pl

@pl.tool("exits.lookup")
def lookup(input):
    raise KeyboardInterrupt("interrupted with " + input["key"])

@pl.play
async def exits(ctx, input):
    key = ctx.secrets.get("EXIT_KEY")
    rows = ctx.dataset("rows", [{"n": n} for n in range(3)], key="n")
    if input["where"] == "column":
        column = lambda row: sys.exit("giving up with " + key.reveal())
    else:
        column = lambda row, ctx: ctx.tool("exits.lookup", {"key": key})
    return await rows.with_column("v", column).run()
"""


@pytest.mark.parametrize("where", ["column", "tool"])
def test_an_exit_in_play_code_fails_the_run_with_exit_1_and_no_secret(cli: Cli, where: str) -> None:
    play = cli.play(EXITING_PLAY)
    proc = subprocess.run(
        [PLAYLINE, "run", play, "-i", f"where={where}", "--store", cli.store],
        capture_output=True,
        text=True,
        env={**os.environ, "PLAYLINE_SECRET_EXIT_KEY": SECRET, "COLUMNS": "300"},
        timeout=120,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "failed run" in proc.stdout
    name = "SystemExit" if where == "column" else "KeyboardInterrupt"
    assert f"error: {name}: " in proc.stdout and "[secret EXIT_KEY]" in proc.stdout
    assert "raised by the play's code" in proc.stdout
    assert SECRET not in output
    assert "Traceback" not in output and "never retrieved" not in output
    assert "stopped" not in output  # Playline did not stop it: its code did


@pytest.mark.parametrize(
    ("raising", "shown"),
    [
        ("import sys\nsys.exit(3)", "SystemExit: 3"),
        ("raise KeyboardInterrupt('not a Ctrl-C')", "KeyboardInterrupt: not a Ctrl-C"),
    ],
)
def test_an_exit_as_the_play_file_imports_is_an_import_error(
    cli: Cli, raising: str, shown: str
) -> None:
    play = cli.play(f"import playline as pl\n{raising}\n")
    line = one_error_line(cli("run", play), 2)  # not 3 (stopped) nor 130 (a Ctrl-C)
    assert f"Cannot import {play}: {shown}." in line


def test_ctrl_c_stops_a_play_file_looping_as_it_imports(tmp_path: Path) -> None:
    """Also when the command starts with SIGINT ignored, as a script's background job does:
    the run that follows would take it as a stop, so its import does too."""
    play = tmp_path / "loop.py"
    play.write_text(
        "import playline as pl\nprint('looping', flush=True)\nwhile True:\n    pass\n",
        encoding="utf-8",
    )
    proc = subprocess.Popen(
        [PLAYLINE, "run", str(play), "--store", f"sqlite:///{tmp_path}/s.db"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "looping\n"  # the file's top level is in its loop
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert err == "error: interrupted\n"
