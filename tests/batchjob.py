"""A run whose OpenAI batch is in progress, for the tests of what `playline show` and the run
page say about the jobs a run waits on: a child process runs a play of one ``openai.batch``
column against the simulator's OpenAI double, whose clock is held (the batch never ends),
until the batch is on every receipt; the child then polls it, once a minute."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from playline.sim import Simulator, serve
from playline.sim._doubles.openai import OpenAIDouble
from stores import wait_for_jobs

KEY = "k-batch-job-double-0123456789abcdef"  # the doubles' key: the simulator's token
ROWS = 4
RUN_ID = "run-batch"

PLAY = textwrap.dedent(
    """
    import sys
    import playline as pl

    @pl.play(name="llm-batch")
    async def play(ctx, input):
        async def line(row, ctx):
            return (await ctx.llm(f"One line on company {row['n']}.", model="gpt-4o-mini",
                                  batch=True)).data

        rows = [{"n": n} for n in range(int(sys.argv[2]))]
        return await ctx.dataset("rows", rows, key="n").with_column("line", line).run()

    pl.run(play, {}, store=sys.argv[1], tools=[pl.providers.openai()], run_id=sys.argv[3])
    """
)


@contextmanager
def simulator() -> Iterator[Simulator]:
    """The simulator with the providers' doubles, taking ``KEY`` as their key."""
    with serve(seed=7, latency_ms=0, token=KEY, providers=True) as running:
        yield running


@contextmanager
def batch_in_progress(sim: Simulator, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """(store URL, child process) while the child's run ``RUN_ID`` waits on its batch of
    ``ROWS`` calls; the child is killed on the way out."""
    double = sim.double("openai")
    assert isinstance(double, OpenAIDouble)
    double.reset()
    double.clock = lambda: 1_000.0  # the double's time stands still: the batch never ends
    script = tmp_path / "batch_play.py"
    script.write_text(PLAY)
    path = tmp_path / "jobs.db"
    env = {
        **os.environ,
        "OPENAI_API_KEY": KEY,
        "PLAYLINE_OPENAI_URL": f"{sim.url}/openai/v1",
    }
    env.pop("PLAYLINE_LLM_PRICES", None)
    command = [sys.executable, str(script), f"sqlite:///{path}", str(ROWS), RUN_ID]
    child = subprocess.Popen(command, stderr=subprocess.PIPE, env=env)
    try:
        wait_for_jobs(path, child, ROWS)
        assert double.calls["batches"] == 1
        yield f"sqlite:///{path}", child
    finally:
        child.kill()
        child.communicate()
        double.reset()
