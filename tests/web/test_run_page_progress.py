"""The run page's progress bar, live in headless Chromium: rows done of the input's rows from
the start of the run (the dataset's start says how many), then the rate and the time left as
rows finish, moved by the run's summaries on the stream the page follows; at the end, the rows
as they ended. Rows finish when the test releases them (webhelp.gated_play), and every wait
is for a condition of the page."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest

import playline as pl
from playline.store import open_store
from playline.web import UIConfig, create_app
from services import chromium_context, serve_asgi

from webhelp import Gate, gated_play, wait_until

pytestmark = pytest.mark.timeout(240)
WAIT_MS = 60_000
ROWS = 20


def test_the_progress_bar_follows_a_run_with_its_rate_and_time_left(
    tmp_path: Path, chromium_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/progress.db"
    db = open_store(url)
    gate = Gate()
    outcome: dict[str, Any] = {}
    runner = threading.Thread(
        target=lambda: outcome.update(
            result=pl.run(gated_play(gate), {"rows": ROWS}, store=open_store(url), run_id="p")
        )
    )
    runner.start()
    try:
        wait_until(lambda: db.get_run("p"), "the run to start")
        config = UIConfig(store=db, store_url=url)
        with serve_asgi(create_app(config)) as base, chromium_context(chromium_path) as browser:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{base}/run/p")
            line = page.locator('#progress [data-dataset="items"]')
            done = line.locator(".done")
            done.filter(has_text="0 of 20 rows (0%)").wait_for(timeout=WAIT_MS)
            assert line.locator("progress").get_attribute("aria-label") == "items: rows done"

            gate.release(5)
            done.filter(has_text="5 of 20 rows (25%)").wait_for(timeout=WAIT_MS)
            gate.release(5)
            done.filter(has_text="10 of 20 rows (50%)").wait_for(timeout=WAIT_MS)
            rows = page.locator('#stats [data-stat="rows"] dd', has_text=re.compile(r"^10$"))
            rows.wait_for(timeout=WAIT_MS)  # the stats' rows follow the stream too
            # two samples with rows between them: a rate, and the time left at that rate
            page.wait_for_function(
                "() => /^[\\d,.]+ rows\\/s$/.test("
                "document.querySelector('#progress .rate')?.textContent || '')",
                timeout=WAIT_MS,
            )
            eta = line.locator(".eta").inner_text()
            assert re.fullmatch(r"ETA (\d+\.\d s|\d+ min \d+ s|\d+ h \d+ min)", eta), eta
            bar = line.locator("progress")
            assert (bar.get_attribute("max"), bar.evaluate("b => b.value")) == ("20", 10)

            gate.release(ROWS - 10)
            page.locator("#status", has_text="completed").wait_for(timeout=WAIT_MS)
            ended = line.filter(has_text="20 of 20 rows (100%) · completed")
            ended.wait_for(timeout=WAIT_MS)
            assert line.locator(".rate").count() == 0 and line.locator(".eta").count() == 0
            assert not errors, errors
    finally:
        gate.release(ROWS)
        runner.join()
    assert outcome["result"].status == "completed"
    db.close()
