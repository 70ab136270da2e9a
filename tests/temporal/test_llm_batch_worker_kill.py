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

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from playline.llm import OPENAI_PRICES, usd
from playline.llm._adapter import read_call
from playline.providers.openai import chat_body
from playline.sim import Simulator, serve
from playline.sim._doubles._answers import line
from playline.sim._doubles.openai import OpenAIDouble
from playline.store import RunStatus, open_store
from services import TemporalServer
from stores import wait_for_jobs

from temporalhelp import task_queue

KEY = "sk-sim-llm-0123456789abcdef"
MODEL = "gpt-4o-mini"
ROWS = 1000
DELAY = 3600.0  # seconds of the double's clock a batch takes: held until advanced
PLAYLINE = Path(sys.executable).with_name("playline")

PLAY = """
import playline as pl

openai = pl.providers.openai(api_key={key!r}, base_url={url!r}, poll_interval=0.05,
                             batch_wait=0.2)


@pl.play(name="llm-batch-worker-kill")
async def first_lines(ctx, input):
    rows = [{{"n": n, "company": f"Company {{n}}"}} for n in range({rows})]
    return await (
        ctx.dataset("companies", rows, key="n")
        .with_column("line", lambda row, ctx: ctx.llm(
            f"One line on {{row['company']}}, please.", model={model!r}, max_tokens=20,
            batch=True))
        .run()
    )
"""


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


def control(sim: Simulator, **settings: Any) -> None:
    """``POST /openai/__double``: the double's settings (``batch_delay``, ``advance``...)."""
    answer = httpx.post(f"{sim.url}/openai/__double", json=settings, timeout=30)
    assert answer.status_code == 200, answer.text


def books(sim: Simulator) -> dict[str, Any]:
    """The double's counters and its LLM ledger (``GET /openai/__double``)."""
    doc: dict[str, Any] = httpx.get(f"{sim.url}/openai/__double", timeout=30).json()
    return doc


def batch_status(sim: Simulator, batch_id: str) -> str:
    answer = httpx.get(
        f"{sim.url}/openai/v1/batches/{batch_id}",
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["status"])


def until(condition: Callable[[], bool], *, what: str, worker: Worker) -> None:
    """Poll an observable condition while the worker lives; the deadline only bounds a
    broken test."""
    deadline = time.monotonic() + 60
    while not condition():
        assert worker.alive(), f"the worker ended before {what}: {worker.log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def jobs_on_receipts(path: Path) -> list[Any]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return [
            json.loads(job)
            for (job,) in db.execute("SELECT job FROM receipts WHERE job IS NOT NULL")
        ]


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


def expected_line(double: OpenAIDouble, n: int) -> str:
    """The answer the double gives row ``n``'s exact request (its words, its digest)."""
    input = {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"One line on Company {n}, please."}],
        "temperature": 0,
        "max_tokens": 20,
    }
    chat = double.read(chat_body(read_call("openai.batch", input, 1024)))
    return line(chat.seed, chat.last_user)


def test_a_worker_killed_mid_batch_is_replaced_and_the_batch_is_polled_not_resent(
    sim: Simulator, temporal_server: TemporalServer, workers: list[Worker], tmp_path: Path
) -> None:
    double = sim.double("openai")
    assert isinstance(double, OpenAIDouble)
    double.reset()
    control(sim, batch_delay=DELAY)
    play = tmp_path / "first_lines.py"
    play.write_text(
        PLAY.format(key=KEY, url=f"{sim.url}/openai/v1", rows=ROWS, model=MODEL), encoding="utf-8"
    )
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

    ledger = books(sim)
    assert ledger["duplicates"] == 0
    llm = ledger["llm"]
    assert llm["live"] == {}
    batch = llm["batch"][MODEL]
    assert batch["requests"] == ROWS
    used_in, used_out = int(batch["input_tokens"]), int(batch["output_tokens"])
    price = OPENAI_PRICES[MODEL]
    chat_price = (used_in * price.input + used_out * price.output) / 1e6
    assert llm["usd"] == pytest.approx(chat_price / 2)  # the batch price: half
    assert llm["usd"] == pytest.approx(usd(MODEL, used_in, used_out, batch=True))

    opened = open_store(store)
    try:
        record = opened.get_run(run_id)
        rows = list(opened.iter_rows(run_id, "companies"))
        entries = opened.read_ledger(run_id)
    finally:
        opened.close()
    assert record is not None and record.status is RunStatus.COMPLETED
    assert len(rows) == ROWS and {r.status for r in rows} == {"completed"}
    for row in rows:  # matched by custom_id: each row has the answer to its own prompt
        assert row.values["line"] == expected_line(double, row.values["n"])
    assert len(entries) == ROWS and {(e.tool, e.unit) for e in entries} == {("openai.batch", "usd")}
    assert sum(e.credits for e in entries) == pytest.approx(llm["usd"])
