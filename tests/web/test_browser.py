"""The UI in headless Chromium (Debian's, through Playwright): one browser per test.

The first test drives a run started by `playline run` in its own process through the
simulator: the runs page lists it, Stop stops it, Resume finishes it while its grid fills in,
and the simulator's ledger shows no charge twice. The second reads a finished demo run: a chip
narrows the rows, the drawer shows a waterfall's attempts, the arrow keys move between cells,
and an aria snapshot and a screenshot of each page are kept under the session's temp dir.
Others click every action (Stop, Resume, Send event, Download) on a run whose id needs
encoding in a URL, and load a page from a foreign host name that resolves to 127.0.0.1
(DNS rebinding), which gets nothing from any endpoint.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

import playline as pl
import playline.demo
from playline.sim import Simulator, serve
from playline.store import Claim, RunStatus, open_store
from playline.tools import Charged
from playline.triggers import queue_run
from playline.web import UIConfig, create_app
from services import chromium_context, serve_asgi

from webhelp import every_endpoint, wait_until

pytestmark = pytest.mark.timeout(240)
WAIT_MS = 60_000
# the toast of a resume started, or of one that ended at once (not the stop's "Resume continues")
RESUMED = re.compile(r"Resuming in process|Resumed: ")


@pytest.fixture
def fresh_sim() -> Iterator[Simulator]:
    with serve(seed=7, latency_ms=0) as running:
        yield running


def test_stop_then_resume_finishes_the_run_with_no_charge_twice(
    tmp_path: Path,
    chromium_path: Path,
    fresh_sim: Simulator,
    artifacts: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PLAYLINE_GATEWAY_TOKEN", fresh_sim.token)
    url = f"sqlite:///{tmp_path}/ui.db"
    db = open_store(url)
    fresh_sim.faults(latency_ms=1500)  # its first requests are still out when Stop comes
    command = [sys.executable, "-m", "playline", "run", playline.demo.__file__, "--store", url,
               "--gateway", fresh_sim.url]  # fmt: skip
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    artifacts.mkdir(parents=True, exist_ok=True)
    try:
        record = wait_until(lambda: db.list_runs(limit=1), "the run to start")[0]
        run_id = record.run_id
        config = UIConfig(store=db, store_url=url, gateway=fresh_sim.url, log_dir=tmp_path)
        with serve_asgi(create_app(config)) as base, chromium_context(chromium_path) as browser:
            page = browser.new_page()
            page.goto(base + "/")
            row = page.locator(f'#runs tr[data-run-id="{run_id}"]')
            row.wait_for(timeout=WAIT_MS)
            assert "running" in row.inner_text()

            page.goto(f"{base}/run/{run_id}")
            page.locator("#status", has_text="running").wait_for(timeout=WAIT_MS)
            page.click("#stop")
            page.locator("#toast", has_text="Asked to stop").wait_for(timeout=WAIT_MS)
            assert run.wait(timeout=120) == 3, run.stdout.read() if run.stdout else ""
            page.locator("#status", has_text="suspended").wait_for(timeout=WAIT_MS)
            stopped = db.get_run(run_id)
            assert stopped is not None and stopped.status is RunStatus.SUSPENDED
            assert (stopped.waiting or {}).get("stop")

            fresh_sim.faults(latency_ms=40)  # slow enough to watch the grid fill in
            grid = browser.new_page()
            grid.goto(f"{base}/grid/{run_id}?dataset=people")
            grid.locator("#status").wait_for(timeout=WAIT_MS)
            before = db.count_rows(run_id, "people")
            page.click("#resume")
            page.locator("#toast", has_text=RESUMED).wait_for(timeout=WAIT_MS)
            grid.locator("#shown", has_text="50 rows").wait_for(timeout=WAIT_MS)
            assert before < 50
            page.locator("#status", has_text="completed").wait_for(timeout=WAIT_MS)
            grid.locator(".ag-row[row-index='0'] .cell-in").first.wait_for(timeout=WAIT_MS)
            grid.screenshot(path=str(artifacts / "grid-after-resume.png"))
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    done = db.get_run(run_id)
    assert done is not None and done.status is RunStatus.COMPLETED
    assert done.attempts == 2
    assert fresh_sim.ledger()["duplicate_charges"] == 0


def test_chips_drawer_keys_aria_and_screenshots(
    demo_ui: tuple[str, str, UIConfig], chromium_path: Path, artifacts: Path
) -> None:
    base, run_id, _ = demo_ui
    artifacts.mkdir(parents=True, exist_ok=True)
    with chromium_context(chromium_path) as browser:
        page = browser.new_page()
        page.set_viewport_size({"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))

        page.goto(base + "/")
        page.locator(f'#runs tr[data-run-id="{run_id}"]').wait_for(timeout=WAIT_MS)
        page.screenshot(path=str(artifacts / "runs.png"))
        page.goto(f"{base}/run/{run_id}")
        page.locator("#tools tbody tr").first.wait_for(timeout=WAIT_MS)
        assert page.locator("#waterfalls").inner_text().count("gamma") == 1
        page.screenshot(path=str(artifacts / "run.png"), full_page=True)

        page.goto(f"{base}/grid/{run_id}?dataset=people")
        page.locator("#shown", has_text="50 rows").wait_for(timeout=WAIT_MS)
        page.locator(".ag-row[row-index='0'] .cell-in").first.wait_for(timeout=WAIT_MS)
        page.screenshot(path=str(artifacts / "grid.png"))
        snapshot = page.locator("#grid .ag-root").aria_snapshot()
        (artifacts / "grid.aria.yml").write_text(snapshot)
        assert re.search(r"^- (tree)?grid", snapshot, re.M), snapshot[:300]
        assert 'columnheader "email"' in snapshot and "row " in snapshot
        assert page.locator("#grid [role=row][aria-rowindex]").count() > 10

        chip = page.locator('.chip[data-state="not_found"]')
        wanted = int(wait_until(chip.locator(".count").inner_text, "the chips' counts"))
        chip.click()
        page.locator("#shown", has_text=f"{wanted} rows with a cell not found").wait_for()
        assert "state=not_found" in page.url
        rows = page.locator(".ag-center-cols-container .ag-row")
        wait_until(lambda: rows.count() == wanted, "the grid to narrow")
        # each row's cells as the grid holds them: columns past the window are not drawn
        narrowed = page.evaluate(
            "(n) => [...Array(n).keys()].map((i) =>"
            " Object.values(playlineGrid.api.getDisplayedRowAtIndex(i).data.cells))",
            wanted,
        )
        assert all("not_found" in cells for cells in narrowed), narrowed

        email = page.locator(
            ".ag-center-cols-container .ag-row [col-id='email']", has_text="not found"
        )
        email.first.click()
        page.locator("#drawer:not([hidden])").wait_for()
        drawer = page.locator("#drawer").inner_text()
        assert "Waterfall work_email" in drawer
        assert all(
            step in drawer for step in ("sim.email.beta", "sim.email.alpha", "sim.email.gamma")
        )
        assert "Charges (ledger)" in drawer
        page.screenshot(path=str(artifacts / "grid-drawer.png"))
        page.keyboard.press("Escape")
        page.locator("#drawer[hidden]").wait_for(state="attached")

        focused = page.locator(".ag-cell-focus")
        first_row = focused.locator("xpath=..").get_attribute("row-index")
        page.keyboard.press("ArrowDown")
        moved = page.locator(".ag-cell-focus").locator("xpath=..").get_attribute("row-index")
        assert int(moved or 0) == int(first_row or 0) + 1
        assert not errors, errors
    for name in ("runs.png", "run.png", "grid.png", "grid-drawer.png"):
        assert (artifacts / name).stat().st_size > 10_000


@pl.tool("web.paid", cost=pl.Cost(1))
def _paid(input: dict[str, Any]) -> dict[str, Any]:
    return {"v": input["i"]}


@pl.play(name="web-kid")
async def _kid(ctx: pl.Context, input: dict[str, Any]) -> int:
    ds = await (
        ctx.dataset("d", [{"i": i} for i in range(input["n"])], key="i")
        .with_column("v", lambda row, ctx: ctx.tool("web.paid", {"i": row["i"]}))
        .run()
    )
    return len(ds)


@pl.play(name="web-parent")
async def _parent(ctx: pl.Context, input: Any) -> Any:
    return await ctx.run_play("kid", _kid, {"n": 10})


def test_the_run_page_shows_calls_in_doubt_and_what_child_plays_paid(
    tmp_path: Path, chromium_path: Path, artifacts: Path
) -> None:
    """What `playline show` says of a run's money, the run page says too: the child plays'
    credits, and the calls a dead process left in doubt (claimed, their lease run out) with
    how to settle them."""
    url = f"sqlite:///{tmp_path}/money.db"
    db = open_store(url)
    odd = "Q3 leads' run"  # no new run takes such an id: one a store kept from before does
    queue_run(db, run_id=odd, play="web-parent", origin={"kind": "test"})
    result = pl.run(_parent, store=db, tools=[_paid], run_id=odd)
    assert result.status == "completed", result.error
    now = time.time()
    claim = Claim(key="k" * 64, tool="web.paid", run_id=result.run_id, request="r-1")
    db.write_receipts(claims=[claim], owner="died", now=now - 60, lease_until=now - 30)
    artifacts.mkdir(parents=True, exist_ok=True)
    config = UIConfig(store=db, store_url=url)
    with serve_asgi(create_app(config)) as base, chromium_context(chromium_path) as browser:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{base}/run/{quote(result.run_id)}")
        doubt = page.locator("#doubt:not([hidden]) #doubt-text")
        doubt.wait_for(timeout=WAIT_MS)
        assert doubt.inner_text() == (
            "1 call(s) may have been charged with no record of it: 1 of web.paid. Resume "
            "re-sends those whose provider recognises idempotency keys (no second charge); "
            "`playline resume --retry-in-doubt 'Q3 leads'\\'' run'` buys the others again."
        )
        stats = page.locator("#stats").inner_text()
        assert "10 (10 by child plays)" in stats and "calls in doubt\n1" in stats, stats
        (child,) = db.child_runs(result.run_id)
        trace = page.locator("#trace").inner_text()
        assert f"child play web-kid ({child.run_id}): completed · 10 rows · 10 credits" in trace
        page.screenshot(path=str(artifacts / "run-in-doubt.png"), full_page=True)
        assert not errors, errors
    db.close()


@pl.tool("web.reported", cost=pl.Cost(1))
def _reported(input: dict[str, Any]) -> Any:
    return Charged({"v": input["i"]}, reported=3.0)  # the provider says: 3, not 1


@pl.play(name="web-reported")
async def _reporting(ctx: pl.Context, input: Any) -> Any:
    rows = [{"i": i} for i in range(2)]
    ds = ctx.dataset("d", rows, key="i").with_column(
        "v", lambda row, ctx: ctx.tool("web.reported", {"i": row["i"]})
    )
    return len(await ds.run())


def test_the_run_page_flags_a_provider_that_reports_another_charge(
    tmp_path: Path, chromium_path: Path
) -> None:
    """The ledger by tool shows what the provider reported it charged, flagged where it is
    not what the tool declares (budgets counted the higher)."""
    url = f"sqlite:///{tmp_path}/reported.db"
    db = open_store(url)
    result = pl.run(_reporting, store=db, tools=[_reported])
    assert result.stats.credits == 6, result.error
    with (
        serve_asgi(create_app(UIConfig(store=db, store_url=url))) as base,
        chromium_context(chromium_path) as browser,
    ):
        page = browser.new_page()
        page.goto(f"{base}/run/{quote(result.run_id)}")
        flagged = page.locator("#tools .mismatch")
        flagged.wait_for(timeout=WAIT_MS)
        assert flagged.inner_text() == "6 for 2 calls (declared 2)"
        assert "the higher" in (flagged.get_attribute("title") or "")
    db.close()


def test_the_drawer_shows_each_waterfall_a_column_ran(tmp_path: Path, chromium_path: Path) -> None:
    """A column whose resolver runs two waterfalls shows both in the row's drawer."""
    first = pl.Waterfall("first", output="v", steps=[pl.ToolStep("paid", "web.paid")])
    second = pl.Waterfall("second", output="v", steps=[pl.ToolStep("again", "web.paid")])

    async def both(row: Any, ctx: pl.Context) -> Any:
        return [await ctx.waterfall(first, {"i": row["i"]}),
                await ctx.waterfall(second, {"i": row["i"] + 100})]  # fmt: skip

    @pl.play(name="web-two-waterfalls")
    async def play(ctx: pl.Context, input: Any) -> int:
        rows = [{"i": i} for i in range(3)]
        return len(await ctx.dataset("d", rows, key="i").with_column("both", both).run())

    url = f"sqlite:///{tmp_path}/falls.db"
    db = open_store(url)
    result = pl.run(play, store=db, tools=[_paid])
    assert result.status == "completed", result.error
    config = UIConfig(store=db, store_url=url)
    with serve_asgi(create_app(config)) as base, chromium_context(chromium_path) as browser:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{base}/grid/{result.run_id}?dataset=d")
        page.locator("#shown", has_text="3 rows").wait_for(timeout=WAIT_MS)
        page.locator(".ag-center-cols-container .ag-row [col-id='both']").first.click()
        page.locator("#drawer:not([hidden])").wait_for(timeout=WAIT_MS)
        drawer = page.locator("#drawer").inner_text()
        assert "Waterfall first: won by paid" in drawer, drawer
        assert "Waterfall second: won by again" in drawer, drawer
        assert not errors, errors
    db.close()


# What a page asks of every endpoint (pages, JSON, streams, static files, actions): the
# status and body of each; a stream answered 200 is not read (it would not end).
ASK_EVERY_ENDPOINT = """async ({gets, posts, token}) => {
  const answers = [];
  for (const path of gets) {
    const r = await fetch(path);
    const stream = (r.headers.get("content-type") || "").startsWith("text/event-stream");
    answers.push([path, r.status, stream ? (await r.body.cancel(), "") : await r.text()]);
  }
  for (const path of posts) {
    const body = new URLSearchParams({csrf_token: token, dataset: "people", key: "rebound:2"});
    const r = await fetch(path, {method: "POST", body, headers: {"X-CSRF-Token": token}});
    answers.push([path, r.status, await r.text()]);
  }
  return answers;
}"""


def test_a_page_of_another_host_gets_nothing_from_any_endpoint(
    demo_ui: tuple[str, str, UIConfig], chromium_path: Path
) -> None:
    """DNS rebinding, as Chromium does it: evil.test resolves to 127.0.0.1, so a page loaded
    from http://evil.test:PORT/ is same-origin with every request it sends there (Origin
    and Host agree). The UI answers each with 400 and nothing of the store, even with the
    token; the same browser on 127.0.0.1 reads the UI."""
    base, run_id, config = demo_ui
    port = base.rsplit(":", 1)[1]
    (row,) = config.store.row_window(run_id, "people", offset=0, limit=1)
    gets, posts = every_endpoint(run_id, "people", row.key)
    rule = "--host-resolver-rules=MAP evil.test 127.0.0.1"
    with chromium_context(chromium_path, [rule]) as browser:
        page = browser.new_page()
        loaded = page.goto(f"http://evil.test:{port}/")
        assert loaded is not None and loaded.status == 400
        answers = page.evaluate(
            ASK_EVERY_ENDPOINT, {"gets": gets, "posts": posts, "token": config.csrf_token}
        )
        assert [path for path, *_ in answers] == gets + posts
        for path, status, body in answers:
            assert status == 400, (path, status, body[:200])
            assert config.csrf_token not in body and run_id not in body, path
        own = page.goto(base + "/")
        assert own is not None and own.status == 200
    path = config.store_url.removeprefix("sqlite:///")
    with closing(sqlite3.connect(path)) as db:
        assert not db.execute("SELECT key FROM inbox WHERE key = 'rebound:2'").fetchall()


ACTS = """\
import asyncio
from pathlib import Path

import playline as pl

GO = Path(__file__).with_name("go")


async def double(row):
    if not GO.exists():
        await asyncio.Event().wait()  # until the UI's Stop ends this attempt
    return row["n"] * 2


@pl.play(name="acts")
async def acts(ctx, input):
    rows = [{"n": n} for n in range(3)]
    await ctx.dataset("pëople #1", rows, key="n").with_column("double", double).run()
    return await ctx.wait_for_event("acts:go")
"""


@pl.play(name="acts")
async def _prefix(ctx: pl.Context, input: Any) -> Any:
    await ctx.dataset("pëople #1", [{"n": 100}], key="n").run()


def test_every_action_clicked_in_chromium_acts_on_a_run_whose_id_needs_encoding(
    tmp_path: Path, chromium_path: Path
) -> None:
    """Stop, Resume, Send event and the grid's Download, each clicked, on run ``R1?x #%/2``
    (a ``?``, ``#``, ``%``, space and ``/`` in its id) beside a run ``R1``: the runs page's
    link opens its page, its dataset link its grid, and every action acts on it, not on R1.
    (Download answered 403 in Chromium: the page's no-referrer policy made its form POST
    say ``Origin: null``; an id not encoded opened R1.)"""
    play = tmp_path / "acts.py"
    play.write_text(ACTS)
    url = f"sqlite:///{tmp_path}/acts.db"
    db = open_store(url)
    assert pl.run(_prefix, store=db, run_id="R1").status == "completed"
    run_id = "R1?x #%/2"  # no new run takes such an id: one a store kept from before has
    queue_run(db, run_id=run_id, play="acts", origin={"kind": "test"})
    command = [sys.executable, "-m", "playline", "run", str(play), "--store", url,
               "--run-id", run_id]  # fmt: skip
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    app = create_app(UIConfig(store=db, store_url=url, log_dir=tmp_path))
    children: dict[str, subprocess.Popen[bytes]] = app.state.children.started
    try:
        wait_until(lambda: db.get_run(run_id), "the run to start")
        with serve_asgi(app) as base, chromium_context(chromium_path) as browser:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(base + "/")
            page.get_by_role("link", name=run_id, exact=True).click()
            page.wait_for_url(f"{base}/run/R1%3Fx%20%23%25/2")
            page.locator("#status", has_text="running").wait_for(timeout=WAIT_MS)

            page.click("#stop")
            page.locator("#toast", has_text="Asked to stop").wait_for(timeout=WAIT_MS)
            assert first.wait(timeout=120) == 3, first.stdout.read() if first.stdout else ""
            page.locator("#status", has_text="suspended").wait_for(timeout=WAIT_MS)

            (tmp_path / "go").touch()
            page.click("#resume")
            page.locator("#toast", has_text=RESUMED).wait_for(timeout=WAIT_MS)
            children[run_id].wait(timeout=120)
            page.locator("#send:not([hidden]) #send-key").wait_for(timeout=WAIT_MS)
            page.fill("#send-payload", '{"ok": true}')
            page.click("#send button[type=submit]")
            page.locator("#toast", has_text="Sent 'acts:go'").wait_for(timeout=WAIT_MS)
            # the page says the event is there, and offers no event left to send
            page.locator(
                "#waits-text", has_text="acts:go (sent: a worker or Resume goes on)"
            ).wait_for(timeout=WAIT_MS)
            page.locator("#send[hidden]").wait_for(state="attached", timeout=WAIT_MS)

            page.click("#resume")
            page.locator("#toast", has_text=RESUMED).wait_for(timeout=WAIT_MS)
            assert children[run_id].wait(timeout=120) == 0
            page.locator("#status", has_text="completed").wait_for(timeout=WAIT_MS)

            page.get_by_role("link", name="pëople #1").click()
            page.locator("#shown", has_text="3 rows").wait_for(timeout=WAIT_MS)
            with (
                page.expect_download(timeout=WAIT_MS) as downloaded,
                page.expect_response(lambda r: "/api/export/" in r.url) as exported,
            ):
                page.click("#export button[type=submit]")
                assert exported.value.status == 200, exported.value.text()
            csv_text = Path(downloaded.value.path()).read_text()
            assert csv_text.splitlines() == ["n,double", "0,0", "1,2", "2,4"], csv_text
            assert not errors, errors
    finally:
        for process in [first, *children.values()]:
            if process.poll() is None:
                process.kill()
                process.wait()
    done = db.get_run(run_id)
    assert done is not None and done.status is RunStatus.COMPLETED and done.attempts == 3
    prefix = db.get_run("R1")
    assert prefix is not None and prefix.status is RunStatus.COMPLETED and prefix.attempts == 1
    assert not prefix.stop_requested
    db.close()
