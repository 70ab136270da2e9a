"""A running run's page follows it without a reload (ui.md): the ledger by column, the
datasets' rows and the heading's duration, which no event of the stream announces. Clicked
in headless Chromium over a run held mid-way in a thread of the test."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import playline as pl
from playline.store import open_store
from playline.web import UIConfig, create_app
from services import chromium_context, serve_asgi

pytestmark = pytest.mark.timeout(240)
WAIT_MS = 60_000

gates = {n: threading.Event() for n in (1, 2)}  # row n's call waits for its gate
registry = pl.ToolRegistry()


@registry.tool("t.held", cost=pl.Cost(1))
async def _held(input: dict[str, Any]) -> dict[str, Any]:
    gate = gates.get(input["n"])
    if gate is not None:  # waited for off the run's loop: its other rows go on
        assert await asyncio.to_thread(gate.wait, 120), "the test never opened the gate"
    return {"n": input["n"]}


@pl.play(name="held")
async def _play(ctx: pl.Context, input: Any) -> Any:
    return await (
        ctx.dataset("rows", [{"n": n} for n in range(3)], key="n")
        .with_column("got", lambda row, ctx: ctx.tool("t.held", {"n": row["n"]}))
        .run()
    )


@pytest.fixture
def ui(tmp_path: Path) -> Iterator[tuple[str, str]]:
    url = f"sqlite:///{tmp_path}/live.db"
    db = open_store(url)
    with serve_asgi(create_app(UIConfig(store=db, store_url=url))) as base:
        yield base, url
    db.close()


def test_a_running_runs_page_follows_its_ledger_by_column(
    ui: tuple[str, str], chromium_path: Path
) -> None:
    base, url = ui
    for gate in gates.values():
        gate.clear()
    results: list[pl.RunResult] = []
    runner = threading.Thread(
        target=lambda: results.append(pl.run(_play, store=url, tools=[registry], run_id="live"))
    )
    runner.start()
    try:
        with chromium_context(chromium_path) as browser:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{base}/run/live")
            page.locator("#status", has_text="running").wait_for(timeout=WAIT_MS)
            column = page.locator("#columns tbody tr", has_text="rows.got").locator("td")
            column.nth(1).filter(has_text="1").wait_for(timeout=WAIT_MS)  # row 0's cell
            heading = page.locator("#sub").inner_text()

            gates[1].set()  # row 1 ends; row 2 holds the run running
            column.nth(1).filter(has_text="2").wait_for(timeout=WAIT_MS)
            assert page.locator("#status").inner_text() == "running"
            dataset = page.locator("#datasets tbody tr", has_text="rows").locator("td")
            dataset.nth(2).filter(has_text="2").wait_for(timeout=WAIT_MS)  # rows stored
            page.wait_for_function(
                "(before) => document.getElementById('sub').textContent !== before",
                arg=heading,
                timeout=WAIT_MS,
            )  # the duration moved on
            assert not errors, errors
    finally:
        for gate in gates.values():
            gate.set()
        runner.join(timeout=120)
    assert results and results[0].status == "completed", results and results[0].error
