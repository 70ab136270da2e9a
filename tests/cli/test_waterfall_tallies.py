"""`show`'s waterfall tables count each row once: after a kill -9 (the killed attempt never
reported its tallies) and after the resume that finishes the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from clihelp import Cli

PLAYLINE = str(Path(sys.executable).with_name("playline"))

PLAY = """
import os, signal
from pathlib import Path
import playline as pl

@pl.tool("wt.dear", batch=pl.Batch(max_size=50), cost=pl.Cost(2))
def dear(inputs):
    return [{"v": i["n"]} if i["n"] % 2 else None for i in inputs]

@pl.tool("wt.cheap", batch=pl.Batch(max_size=50), cost=pl.Cost(1))
def cheap(inputs):
    return [{"v": -i["n"]} for i in inputs]

FIND = pl.Waterfall("find", output="v", steps=[pl.ToolStep("dear", "wt.dear"),
                                               pl.ToolStep("cheap", "wt.cheap")])

def maybe_die(row):
    if Path(os.environ["WT_KILL"]).exists():
        Path(os.environ["WT_KILL"]).unlink()
        os.kill(os.getpid(), signal.SIGKILL)  # after the first dataset was stored, as kill -9
    return row["n"]

@pl.play
async def found(ctx, input):
    people = await (
        ctx.dataset("nums", [{"n": n} for n in range(40)], key="n")
        .with_column("v", lambda row, ctx: ctx.waterfall(FIND, {"n": row["n"]}))
        .run()
    )
    await ctx.dataset("after", [{"n": 0}], key="n").with_column("m", maybe_die).run()
    return len(people)
"""


def _playline(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PLAYLINE, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200", **env},
    )


def _waterfall(cli: Cli, run_id: str) -> dict[str, object]:
    shown = cli("show", run_id, "--json")
    assert shown.exit_code == 0, shown.output
    (waterfall,) = json.loads(shown.stdout)["waterfalls"]
    return {
        "rows": waterfall["rows"],
        "satisfied": waterfall["satisfied"],
        "credits": waterfall["credits"],
        "steps": {s["id"]: (s["attempts"], s["hits"]) for s in waterfall["steps"]},
    }


def test_show_counts_each_waterfall_row_once_after_a_kill_and_a_resume(
    cli: Cli, tmp_path: Path
) -> None:
    play = cli.play(PLAY)
    flag = tmp_path / "kill-now"
    flag.touch()
    env = {"WT_KILL": str(flag)}
    killed = _playline("run", play, "--run-id", "w9", "--store", cli.store, cwd=tmp_path, env=env)
    assert killed.returncode == -9, killed.stderr
    # 40 rows: dear (2 credits a call) finds the odd ones, cheap (1) the rest
    once = {"rows": 40, "satisfied": 40, "credits": 100.0,
            "steps": {"dear": (40, 20), "cheap": (20, 20)}}  # fmt: skip
    # the killed attempt never reported its tallies: show counts the rows it stored
    assert _waterfall(cli, "w9") == once

    resumed = _playline("resume", "w9", "--store", cli.store, cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr
    # the resume reused every stored row (it ran none of them again): the run's, once each
    assert _waterfall(cli, "w9") == once
    out = " ".join(cli("show", "w9").stdout.split())
    assert "Waterfall find: 40 rows, 40 found (100%), 100 credits, 2.50 credits per hit" in out
