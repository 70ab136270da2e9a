"""`playline show` of a run whose calls wait on an OpenAI batch in progress (the simulator's
double, its clock held): the job, its calls and since when, polled by the live run; once the
run's process is killed, the job is left to a resume (and its calls are not in doubt: a
resume polls the job, never submits it again)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from batchjob import ROWS, RUN_ID, batch_in_progress, simulator
from playline.sim import Simulator
from playline.store import open_store

from clihelp import Cli


@pytest.fixture(scope="module")
def llm_sim() -> Iterator[Simulator]:
    with simulator() as running:
        yield running


def said(text: str) -> str:
    """What a command printed, as one line (the console wraps long lines)."""
    return " ".join(text.split())


def test_show_lists_the_batch_a_run_waits_on(llm_sim: Simulator, tmp_path: Path) -> None:
    with batch_in_progress(llm_sim, tmp_path) as (store, child):
        cli = Cli(tmp_path)
        cli.store = store
        doc = json.loads(cli("show", RUN_ID, "--json").stdout)
        db = open_store(store)
        [receipt, *_] = db.pending_jobs(RUN_ID)
        text = said(cli("show", RUN_ID).stdout)
        child.kill()
        child.wait()
        after = json.loads(cli("show", RUN_ID, "--json").stdout)
        after_text = said(cli("show", RUN_ID).stdout)
        db.close()

    assert doc["status"] == "running"
    jobs = doc["jobs"]
    assert jobs["calls"] == ROWS and jobs["more"] == 0
    [job] = jobs["jobs"]
    assert job["tool"] == "openai.batch" and job["calls"] == ROWS
    assert job["label"].startswith("batch_") and job["job"]["batches"][0]["model"] == "gpt-4o-mini"
    assert job["state"] == "polling" and job["run_id"] == RUN_ID
    assert job["since"] == pytest.approx(receipt.updated_at)  # the oldest claim
    assert "Jobs in progress: 4 call(s) wait on 1 job(s)" in text
    assert f"openai.batch {job['label']}: 4 call(s), submitted, waiting since" in text
    assert "polled by the run" in text

    assert after["status"] == "interrupted"
    [stopped] = after["jobs"]["jobs"]
    assert stopped["state"] == "stopped" and stopped["label"] == job["label"]
    assert after["in_doubt"] == {
        "calls": 0,
        "tools": {},
        "passed": {},
    }  # polled by a resume: not in doubt
    assert f"its attempt stopped: resuming it (pl.run(play, run_id='{RUN_ID}'))" in after_text
    assert "polls it (never submits it again)" in after_text
    assert "in doubt" not in after_text
