"""Issue 41, "a batch job of 1,000 rows: the worker is SIGKILLed while the batch is in
progress and restarted", on Temporal: a play whose column asks ``ctx.llm(..., batch=True)``
(``pl.providers.openai`` against the simulator's OpenAI double) is submitted with `playline
run --temporal ... --detach`; the `playline worker --temporal` process running its attempt is
SIGKILLed once the batch job is on the 1,000 receipts and the batch is in progress; the batch
completes meanwhile; a new worker takes the attempt over (Temporal retries it once the dead
worker's heartbeats stop: 30 s, the heartbeat timeout `playline run` gives), polls the same
batch, submits nothing again, and every row gets its answer at the batch price.

The batch is held in progress by the double's control endpoint (``POST /openai/__double``:
a ``batch_delay`` of an hour of its clock, then ``advance``); nothing sleeps to synchronise.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
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
from playline.store import open_store
from services import TemporalServer
from stores import wait_for_jobs

from temporalhelp import task_queue


class Worker:
    """`playline worker --temporal ... --json` in a process of its own (it finds the play
    file the run was submitted from)."""

    def __init__(self, folder: Path, name: str, args: list[str]) -> None:
        self.log = folder / f"worker-{name}.stderr"
        with self.log.open("wb") as err:
            self.proc = subprocess.Popen(
                [str(PLAYLINE), "worker", *args, "--json"],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        assert first, f"worker {name} did not start: {self.log.read_text()[-2000:]}"
        serving = json.loads(first)
        assert serving["status"] == "serving", serving
        self.identity: str = serving["worker"]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.alive():
            self.proc.kill()
            self.proc.communicate()


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with serve(seed=7, latency_ms=0, token=KEY, providers=True) as running:
        running.double("openai").reset()
        yield running


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    """The workers a test started; whatever is left of them is killed after it."""
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.stop()


def until(condition: Callable[[], bool], *, what: str, worker: Worker) -> None:
    """Poll an observable condition while the worker lives; the deadline only bounds a
    broken test."""
    deadline = time.monotonic() + 60
    while not condition():
        assert worker.alive(), f"the worker ended before {what}: {worker.log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def attempts_by_worker(store: str, run_id: str) -> list[str]:
    """The worker of each attempt, in order (the activity logs it in the run's events)."""
    db = open_store(store)
    try:
        return [
            (e.data or {})["temporal"]["worker"]
            for e in db.read_events(run_id, kinds=["log"])
            if "temporal" in (e.data or {})
        ]
    finally:
        db.close()


def test_a_worker_killed_mid_batch_is_replaced_and_the_batch_is_polled_not_resent(
    sim: Simulator, temporal_server: TemporalServer, workers: list[Worker], tmp_path: Path
) -> None:
    double = sim.double("openai")
    assert isinstance(double, OpenAIDouble)
    double.reset()
    control(sim, batch_delay=DELAY)
    play = play_file(tmp_path, sim, "llm-batch-worker-kill")
    db = tmp_path / "llm.db"
    store = f"sqlite:///{db}"
    on_temporal = ["--temporal", temporal_server.target, "--task-queue", task_queue()]
    workers.append(Worker(tmp_path, "a", [*on_temporal, "--store", store]))
    first = workers[0]

    submitted = subprocess.run(
        [str(PLAYLINE), "run", str(play), *on_temporal, "--store", store, "--detach", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    (said,) = [json.loads(out) for out in submitted.stdout.splitlines() if out.strip()]
    assert said["status"] == "submitted"
    run_id = said["run_id"]

    wait_for_jobs(db, first.proc, ROWS)  # the job is on every receipt before its first poll
    (batch_id,) = double.jobs
    control(sim, advance=DELAY / 2)  # half way: in progress
    assert batch_status(sim, batch_id) == "in_progress"
    seen = double.calls["batch"]
    until(lambda: double.calls["batch"] > seen, what="a poll in progress", worker=first)
    polled = double.calls["batch"]
    os.kill(first.proc.pid, signal.SIGKILL)
    first.proc.communicate()
    assert first.proc.returncode == -signal.SIGKILL
    assert double.calls["files"] == 1 and double.calls["batches"] == 1
    jobs = jobs_on_receipts(db)
    assert len(jobs) == ROWS
    assert all(job["job"] == {"batches": [{"id": batch_id, "model": MODEL}]} for job in jobs)
    assert books(sim)["llm"]["batch"] == {}  # nothing answered, nothing charged yet

    control(sim, advance=DELAY)  # the batch completes while no worker runs the play
    workers.append(Worker(tmp_path, "b", [*on_temporal, "--store", store]))
    second = workers[1]
    followed = subprocess.run(  # `playline resume` of a run on Temporal follows its workflow
        [str(PLAYLINE), "resume", run_id, "--store", store, "--json"],
        capture_output=True,
        text=True,
        timeout=110,
    )

    assert followed.returncode == 0, followed.stderr[-3000:] + second.log.read_text()[-3000:]
    assert double.calls["files"] == 1 and double.calls["batches"] == 1  # polled, not resent
    assert double.jobs.keys() == {batch_id}
    assert double.calls["batch"] > polled  # the new worker polled the same batch
    assert attempts_by_worker(store, run_id) == [first.identity, second.identity]

    check_paid_once(sim, store, run_id)
