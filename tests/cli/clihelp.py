"""Helpers of the CLI tests: a runner bound to a store in tmp_path, and error checks."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from playline.cli import app

LOCAL_PLAY = """
import playline as pl

@pl.tool("clitest.upper", batch=pl.Batch(max_size=10), cost=pl.Cost(1, charge="on_hit"))
def upper(inputs):
    return [None if i["name"] == "nobody" else {"name": i["name"].upper()} for i in inputs]

@pl.play
async def shout(ctx, input):
    names = input.get("names", ["ada", "alan", "nobody"])
    ctx.log(f"shouting {len(names)} names")
    return await (
        ctx.dataset("names", [{"name": n} for n in names], key="name")
        .with_column("loud", lambda row, ctx: ctx.tool("clitest.upper", {"name": row["name"]}))
        .with_column("size", lambda row: len(row["name"]))
        .run(description="Shout names")
    )
"""


class Cli:
    """Runs `playline ...` through Typer's runner against one store in tmp_path."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.store = f"sqlite:///{tmp_path}/cli.db"
        self.runner = CliRunner()

    def __call__(self, *args: str, store: bool = True) -> Any:
        argv = [*args, "--store", self.store] if store else list(args)
        return self.runner.invoke(app, argv)

    def play(self, source: str, name: str = "play.py") -> str:
        path = self.tmp / name
        path.write_text(source, encoding="utf-8")
        return str(path)

    def json_lines(self, output: str) -> list[dict[str, Any]]:
        return [json.loads(line) for line in output.splitlines() if line.strip()]


def one_error_line(result: Any, code: int) -> str:
    """The command failed with ``code`` and said so in one line, without a traceback."""
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return str(lines[0])


PLAYLINE = str(Path(sys.executable).with_name("playline"))


def in_a_terminal(args: list[str], cwd: Path, *, columns: int = 80) -> str:
    """`playline ...` on a pseudo-terminal of ``columns`` columns (so it fits its tables and
    shows its live display); what it printed, lines ending in ``\\n``."""
    master, slave = os.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "40", "TERM": "xterm"}
    proc = subprocess.Popen([PLAYLINE, *args], cwd=cwd, stdin=slave, stdout=slave,
                            stderr=slave, env=env, close_fds=True)  # fmt: skip
    os.close(slave)
    out = b""
    try:
        while select.select([master], [], [], 60)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal closed: the command ended
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
        proc.wait(timeout=60)
    assert proc.returncode == 0, out.decode(errors="replace")
    return out.decode(errors="replace").replace("\r\n", "\n")
