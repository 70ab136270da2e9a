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

import contextlib
import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
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
from playline.store import open_store
from stores import wait_for_jobs

from crash_helpers import kill, wait_until

KEY = "sk-sim-llm-0123456789abcdef"
MODEL = "gpt-4o-mini"
ROWS = 1000
DELAY = 3600.0  # seconds of the double's clock a batch takes: held until advanced
PLAYLINE = Path(sys.executable).with_name("playline")

PLAY = """
import playline as pl

openai = pl.providers.openai(api_key={key!r}, base_url={url!r}, poll_interval=0.05,
                             batch_wait=0.2)


@pl.play(name="llm-batch-kill")
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


def play_file(folder: Path, sim: Simulator) -> Path:
    path = folder / "first_lines.py"
    path.write_text(
        PLAY.format(key=KEY, url=f"{sim.url}/openai/v1", rows=ROWS, model=MODEL), encoding="utf-8"
    )
    return path


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


def control(sim: Simulator, **settings: Any) -> dict[str, Any]:
    """``POST /openai/__double``: the double's settings (``batch_delay``, ``advance``...)."""
    answer = httpx.post(f"{sim.url}/openai/__double", json=settings, timeout=30)
    assert answer.status_code == 200, answer.text
    doc: dict[str, Any] = answer.json()
    return doc


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


def stop(proc: subprocess.Popen[str]) -> None:
    """Kill a process a failed test left running (it would call the next test's double)."""
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def jobs_on_receipts(path: Path) -> list[Any]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return [
            json.loads(job)
            for (job,) in db.execute("SELECT job FROM receipts WHERE job IS NOT NULL")
        ]


def test_a_killed_run_s_batch_is_polled_by_its_resume_never_submitted_again(
    sim: Simulator, tmp_path: Path
) -> None:
    double = sim.double("openai")
    assert isinstance(double, OpenAIDouble)
    play = play_file(tmp_path, sim)
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


def check_paid_once(sim: Simulator, store: str, run_id: str) -> None:
    """Every row has its own answer; the ledger's dollars are the double's, at the batch
    price (half the chat price of the same tokens)."""
    double = sim.double("openai")
    assert isinstance(double, OpenAIDouble)
    ledger = books(sim)
    assert ledger["duplicates"] == 0
    llm = ledger["llm"]
    assert llm["live"] == {}
    batch = llm["batch"][MODEL]
    assert batch["requests"] == ROWS
    used_in, used_out = int(batch["input_tokens"]), int(batch["output_tokens"])
    price = OPENAI_PRICES[MODEL]
    chat_price = (used_in * price.input + used_out * price.output) / 1e6
    assert llm["usd"] == pytest.approx(chat_price / 2)
    assert llm["usd"] == pytest.approx(usd(MODEL, used_in, used_out, batch=True))

    db = open_store(store)
    try:
        rows = list(db.iter_rows(run_id, "companies"))
        entries = db.read_ledger(run_id)
        record = db.get_run(run_id)
    finally:
        db.close()
    assert record is not None and record.status.value == "completed"
    assert len(rows) == ROWS and {r.status for r in rows} == {"completed"}
    for row in rows:  # matched by custom_id: each row has the answer to its own prompt
        assert row.values["line"] == expected_line(double, row.values["n"])
    assert len(entries) == ROWS and {(e.tool, e.unit) for e in entries} == {("openai.batch", "usd")}
    assert sum(e.credits for e in entries) == pytest.approx(llm["usd"])
