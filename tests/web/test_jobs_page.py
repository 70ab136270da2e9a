"""The run page in headless Chromium shows the jobs a run waits on: a run whose OpenAI batch is
in progress (the simulator's double, its clock held) has its "Jobs in progress" section with
the batch, its calls and who polls it; a finished run's page keeps the section hidden."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from batchjob import ROWS, RUN_ID, batch_in_progress, simulator
from playline.sim import Simulator
from playline.store import open_store
from playline.web import UIConfig, create_app
from services import chromium_context, serve_asgi

pytestmark = pytest.mark.timeout(240)
WAIT_MS = 60_000


@pytest.fixture(scope="module")
def llm_sim() -> Iterator[Simulator]:
    with simulator() as running:
        yield running


def test_the_run_page_shows_the_batch_in_progress(
    llm_sim: Simulator, tmp_path: Path, chromium_path: Path, artifacts: Path
) -> None:
    with batch_in_progress(llm_sim, tmp_path) as (url, child):
        db = open_store(url)
        [receipt, *_] = db.pending_jobs(RUN_ID)
        label = receipt.job and receipt.job.decode()
        config = UIConfig(store=db, store_url=url)
        with serve_asgi(create_app(config)) as base, chromium_context(chromium_path) as browser:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{base}/run/{RUN_ID}")
            page.locator("#status", has_text="running").wait_for(timeout=WAIT_MS)
            section = page.locator("#jobs")
            section.wait_for(state="visible", timeout=WAIT_MS)
            assert "Jobs in progress" in section.inner_text()
            text = page.locator("#jobs-text").inner_text()
            assert f"{ROWS} call(s) wait on 1 submitted job(s)" in text
            [row] = page.locator("#jobs-table tbody tr").all()
            cells = [c.inner_text() for c in row.locator("td").all()]
            assert cells[0] == "openai.batch"
            assert cells[1].startswith("batch_") and cells[1] in (label or "")
            assert cells[2] == str(ROWS)
            assert cells[4] == "submitted, polled by the run"
            artifacts.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(artifacts / "run-jobs.png"), full_page=True)

            child.kill()  # its attempt stops: the job is left to a resume
            child.wait()
            page.reload()
            page.locator("#status", has_text="interrupted").wait_for(timeout=WAIT_MS)
            page.locator("#jobs-table td", has_text="its attempt stopped").wait_for(timeout=WAIT_MS)
            assert "playline resume run-batch" in page.locator("#jobs-table").inner_text()
            assert page.locator("#doubt").is_hidden()  # polled by a resume: not in doubt
            assert not errors, errors
        db.close()


def test_a_run_with_no_job_keeps_the_section_hidden(
    demo_ui: tuple[str, str, UIConfig], chromium_path: Path
) -> None:
    base, run_id, _ = demo_ui
    with chromium_context(chromium_path) as browser:
        page = browser.new_page()
        page.goto(f"{base}/run/{run_id}")
        page.locator("#tools tbody tr").first.wait_for(timeout=WAIT_MS)
        assert page.locator("#jobs").is_hidden()
