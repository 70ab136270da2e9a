"""Issue 41, "a batch job of 1,000 rows: the worker is SIGKILLed while the batch is in
progress and restarted": `playline run` of a play whose column asks ``ctx.llm(...,
batch=True)``, through ``pl.providers.openai`` against the simulator's OpenAI double, is
SIGKILLed once the batch job is on the 1,000 receipts and the batch is in progress; the batch
completes meanwhile; `playline resume` polls that batch, submits nothing again, gives every
row its answer and pays the batch price, which is half the chat price of the same usage.

The batch is held in progress by the double's control endpoint (``POST
/openai/__double``): a ``batch_delay`` of an hour of its clock, then ``advance``; nothing
sleeps, and the runs poll it every 50 ms of real time.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmbatch import (
    DELAY,
    KEY,
    MODEL,
    PLAYLINE,
    ROWS,
    batch_status,
    books,
    check_paid_once,
    control,
    jobs_on_receipts,
    play_file,
)
from playline.sim import Simulator, serve
from playline.sim._doubles.openai import OpenAIDouble
from stores import wait_for_jobs

from crash_helpers import kill, wait_until


@pytest.fixture(scope="module")
def running_sim() -> Iterator[Simulator]:
    with serve(seed=7, latency_ms=0, token=KEY, providers=True) as sim:
        yield sim


@pytest.fixture
def sim(running_sim: Simulator) -> Iterator[Simulator]:
    running_sim.double("openai").reset()
    control(running_sim, batch_delay=DELAY)
    yield running_sim
    running_sim.double("openai").reset()


def stop(proc: subprocess.Popen[str]) -> None:
    """Kill a process a failed test left running (it would call the next test's double)."""
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def test_a_killed_run_s_batch_is_polled_by_its_resume_never_submitted_again(
    sim: Simulator, tmp_path: Path
) -> None:
    double = sim.double("openai")
    assert isinstance(double, OpenAIDouble)
    play = play_file(tmp_path, sim, "llm-batch-kill")
    db = tmp_path / "llm.db"
    store = f"sqlite:///{db}"
    run_id = "run-llm-batch-kill"
    with (tmp_path / "run.stderr").open("wb") as err:
        child = subprocess.Popen(
            [str(PLAYLINE), "run", str(play), "--store", store, "--run-id", run_id, "--json"],
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
        )
    try:
        wait_for_jobs(db, child, ROWS)  # the job is on every receipt before its first poll
        (batch_id,) = double.jobs
        control(sim, advance=DELAY / 2)  # half way: in progress
        assert batch_status(sim, batch_id) == "in_progress"
        seen = double.calls["batch"]
        wait_until(lambda: double.calls["batch"] > seen, what="a poll in progress", proc=child)
        polled = double.calls["batch"]
        kill(child)
    finally:
        stop(child)
    assert double.calls["files"] == 1 and double.calls["batches"] == 1
    jobs = jobs_on_receipts(db)
    assert len(jobs) == ROWS
    # one job: the batch, each receipt its own item (line) of it
    assert all(job["job"] == {"batches": [{"id": batch_id, "model": MODEL}]} for job in jobs)
    assert sorted(job["item"] for job in jobs) == list(range(ROWS))
    assert books(sim)["llm"]["batch"] == {}  # nothing answered, nothing charged yet

    control(sim, advance=DELAY)  # the batch completes while no process runs the play
    resumed = subprocess.run(
        [str(PLAYLINE), "resume", run_id, "--store", store, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert double.calls["files"] == 1 and double.calls["batches"] == 1  # polled, not resent
    assert double.jobs.keys() == {batch_id}
    assert double.calls["batch"] > polled  # the resumed run polled the same batch
    check_paid_once(sim, store, run_id)
