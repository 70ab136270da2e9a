"""The run page's numbers explain themselves (docs/guide/reading-a-run.md): what a stopped
run paid for rows that had not finished stays in its column, said so, and the play's own
calls are named as such, not "outside the stored cells"; a tool's inputs are never fewer than
its live calls, also when a killed attempt lost the events of its last requests; credits are
rounded for reading. The numbers over real HTTP, their words in headless Chromium."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

import playline as pl
from playline.store import open_store
from playline.web import UIConfig, create_app
from services import chromium_context, serve_asgi

pytestmark = pytest.mark.timeout(240)
WAIT_MS = 60_000

registry = pl.ToolRegistry()
registry.tool("t.batched", batch=pl.Batch(max_size=10), cost=pl.Cost(1))(
    lambda inputs: [{"n": i["n"]} for i in inputs]
)
registry.tool("t.each", cost=pl.Cost(1))(lambda input: {"ok": True})
# found for one input in six: 17 calls, 3 hits, 5.666... credits per hit
registry.tool("t.rare", cost=pl.Cost(1))(
    lambda input: {"n": input["n"]} if input["n"] % 6 == 0 else None
)


@pl.play(name="stopped-by-budget")
async def _stopped(ctx: pl.Context, input: Any) -> Any:
    await ctx.tool("t.each", {"n": -1})  # the play's own call, outside any dataset
    return await (
        ctx.dataset("rows", [{"n": n} for n in range(3)], key="n")
        .with_column("first", lambda row, ctx: ctx.tool("t.batched", {"n": row["n"]}))
        .with_column("second", lambda row, ctx: ctx.tool("t.each", {"n": row["n"]}))
        .run()
    )


@pl.play(name="rare-hits")
async def _rare(ctx: pl.Context, input: Any) -> Any:
    rows = [{"n": n} for n in range(17)]
    return await (
        ctx.dataset("rows", rows, key="n")
        .with_column("hit", lambda row, ctx: ctx.tool("t.rare", {"n": row["n"]}))
        .run()
    )


@pytest.fixture
def ui(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The UI on a free port over a store in a temp dir: (base URL, store URL)."""
    url = f"sqlite:///{tmp_path}/numbers.db"
    db = open_store(url)
    with serve_asgi(create_app(UIConfig(store=db, store_url=url))) as base:
        yield base, url
    db.close()


def get(base: str, path: str) -> Any:
    response = httpx.get(base + path, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def test_what_a_stopped_run_paid_for_unfinished_rows_stays_in_its_column(
    ui: tuple[str, str], chromium_path: Path
) -> None:
    """A budget stops the run after each row's first call and one row's second: two rows are
    not stored (pending for a resume), yet their first calls were paid. They count in the
    column that made them (3 credits, 2 of them for rows not finished); the play's own call
    is the only one outside any dataset. On main they were 3 credits "outside the stored
    cells" beside a column of 1."""
    base, url = ui
    result = pl.run(_stopped, store=url, tools=[registry], max_credits=5)
    assert result.status == "failed" and result.stats.credits == 5, result.error

    doc = get(base, f"/api/columns/{result.run_id}")
    columns = {c["column"]: c for c in doc["columns"]}
    assert columns["first"]["cells"] == 1 and columns["first"]["credits"] == 3
    assert columns["first"]["unstored_credits"] == 2
    assert columns["second"]["credits"] == 1 and columns["second"]["unstored_credits"] == 0
    assert doc["other_credits"] == 1  # t.each outside the dataset
    assert sum(c["credits"] for c in doc["columns"]) + doc["other_credits"] == 5

    with chromium_context(chromium_path) as browser:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{base}/run/{result.run_id}")
        first = page.locator("#columns tbody tr", has_text="rows.first")
        first.wait_for(timeout=WAIT_MS)
        assert first.locator("td").nth(3).inner_text() == "3 (2 for rows not finished)"
        unfinished = first.locator(".unstored").get_attribute("title") or ""
        assert "resume answers these calls from their receipts" in unfinished
        outside = page.locator("#columns tbody tr", has_text="Outside any dataset")
        assert outside.locator("td").nth(3).inner_text() == "1"
        assert "play's own code" in (outside.locator("span").get_attribute("title") or "")
        assert "outside the stored cells" not in page.locator("#columns").inner_text()
        credits = page.locator("#columns thead th", has_text="Credits").get_attribute("title")
        assert "unfinished rows" in (credits or "")
        progress = page.locator('#progress [data-dataset="rows"]').inner_text()
        assert "1 of 3 rows (33%) · stopped" in progress, progress
        # the rows stored, as `playline show` says: not the 3 the attempt read
        assert page.locator('#stats [data-stat="rows"] dd').inner_text() == "1"
        dataset = page.locator("#datasets tbody tr", has_text="rows").locator("td")
        assert [dataset.nth(n).inner_text() for n in (2, 3)] == ["1", "1"]  # rows, executed
        assert not errors, errors
    assert get(base, f"/api/run/{result.run_id}")["rows"] == 1


def test_inputs_are_never_fewer_than_live_calls_after_a_kill(
    ui: tuple[str, str], chromium_path: Path
) -> None:
    """A process killed right after its calls' answers were recorded loses the events of its
    last requests (they are written up to 0.1 s later) while the ledger keeps the answers:
    made here by removing a request event and the attempt's end from a finished run, and
    leaving its holder dead. The tool's inputs count those calls from the ledger (4 inputs
    for 4 live calls, those of the lost event from the ledger), where main said fewer inputs
    than live calls."""
    base, url = ui
    result = pl.run(_stopped, store=url, tools=[registry], max_credits=100)
    assert result.status == "completed", result.error
    path = url.removeprefix("sqlite:///")
    with closing(sqlite3.connect(path)) as db, db:
        (last, data) = db.execute(
            "SELECT seq, data FROM events WHERE run_id = ? AND kind = 'batch' AND provider = ? "
            "ORDER BY seq DESC LIMIT 1",
            (result.run_id, "t.each"),
        ).fetchone()
        lost = json.loads(data)["size"]  # the rows' calls of t.each, sent in one wave
        db.execute("DELETE FROM events WHERE seq = ?", (last,))
        db.execute(
            "DELETE FROM events WHERE run_id = ? AND kind = 'run' AND status != 'running'",
            (result.run_id,),
        )
        db.execute(
            "UPDATE runs SET status = 'running', holder = 'gone-host:1', lease_until = 0 "
            "WHERE run_id = ?",
            (result.run_id,),
        )

    doc = get(base, f"/api/run/{result.run_id}")
    assert doc["status"] == "interrupted"
    each = next(t for t in doc["tools"] if t["tool"] == "t.each")
    assert each["calls"] == 4 and each["inputs"] == 4 and each["unlogged"] == lost > 0
    assert all(t["inputs"] >= t["calls"] for t in doc["tools"])
    assert doc["trace"]["tools"]["t.each"]["unlogged"] == lost

    with chromium_context(chromium_path) as browser:
        page = browser.new_page()
        page.goto(f"{base}/run/{result.run_id}")
        row = page.locator("#tools tbody tr", has_text="t.each")
        row.wait_for(timeout=WAIT_MS)
        assert row.locator("td").nth(2).inner_text() == f"4 ({lost} from the ledger)"
        note = row.locator(".unlogged").get_attribute("title") or ""
        assert "killed before it wrote their requests down" in note


def test_credits_are_rounded_for_reading(ui: tuple[str, str], chromium_path: Path) -> None:
    """17 credits for 3 hits read 5.67 credits per hit, not 5.6667."""
    base, url = ui
    result = pl.run(_rare, store=url, tools=[registry])
    assert result.status == "completed", result.error
    (tool,) = get(base, f"/api/run/{result.run_id}")["tools"]
    assert tool["credits_per_hit"] == pytest.approx(17 / 3)
    with chromium_context(chromium_path) as browser:
        page = browser.new_page()
        page.goto(f"{base}/run/{result.run_id}")
        row = page.locator("#tools tbody tr", has_text="t.rare")
        row.wait_for(timeout=WAIT_MS)
        assert row.locator("td").nth(6).inner_text() == "5.67"
        assert "5.6667" not in page.locator("#run").inner_text()


@pl.play(name="waits-for-approval")
async def _waits(ctx: pl.Context, input: Any) -> Any:
    await ctx.tool("t.each", {"n": 0})  # one request carrying one input
    return await ctx.wait_for_event("approve:1")


def test_a_run_page_says_why_its_buttons_cannot_act_and_what_it_waits_for(
    ui: tuple[str, str], chromium_path: Path
) -> None:
    """On a phone's width: a disabled Stop or Resume says why, a waiting run says what it
    waits for in words (not its JSON), counts of one are singular, and wide tables scroll in
    their sections instead of the page."""
    base, url = ui
    done = pl.run(_rare, store=url, tools=[registry])
    waiting = pl.run(_waits, store=url, tools=[registry])
    assert waiting.status == "suspended", waiting.error
    with chromium_context(chromium_path) as browser:
        page = browser.new_page()
        page.set_viewport_size({"width": 375, "height": 800})
        page.goto(f"{base}/run/{done.run_id}")
        page.locator("#status", has_text="completed").wait_for(timeout=WAIT_MS)
        page.locator("#tools tbody tr", has_text="t.rare").wait_for(timeout=WAIT_MS)
        assert page.locator("#stop").is_disabled() and page.locator("#resume").is_disabled()
        why = page.locator("#why-not").inner_text()
        assert why == "The run completed: nothing to stop or resume."
        assert page.evaluate("document.documentElement.scrollWidth") <= 375

        page.goto(f"{base}/run/{waiting.run_id}")
        page.locator("#status", has_text="suspended").wait_for(timeout=WAIT_MS)
        trace = page.locator("#trace")
        trace.locator("li", has_text="waits for").wait_for(timeout=WAIT_MS)
        said = trace.inner_text()
        assert "waits for the event approve:1" in said and "{" not in said
        assert "t.each: 1 request carrying 1 input" in said
        assert page.locator("#resume").is_enabled() and page.locator("#stop").is_disabled()
        assert "Nothing to stop" in (page.locator("#stop").get_attribute("title") or "")
