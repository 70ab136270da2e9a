"""The grid, for reading, in headless Chromium at 1440 x 900 (a laptop's browser): values
shown whole with each cell's state as an icon (its word for screen readers and in its
tooltip), nested results as a few of their fields, a filter per column ("email: not found"),
every row of a running dataset listed from the start (pending ones as pending), and a cost
column. The demo run is the real simulator's over loopback HTTP; the running one is the gated
play of webhelp.py, whose rows finish when the test releases them. Screenshots are kept under
the session's temp dir (``artifacts``); docs/images/ui holds copies of some."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import playline as pl
from playline.store import Event, RowRecord, RunRecord, RunStatus, Store, open_store, owner_id
from playline.web import UIConfig, create_app
from services import chromium_context, serve_asgi

from webhelp import Gate, gated_play, wait_until

pytestmark = pytest.mark.timeout(240)
WAIT_MS = 60_000
LAPTOP = {"width": 1440, "height": 900}
UI = tuple[str, str, UIConfig]


@pytest.fixture
def page_errors() -> list[str]:
    return []


@pytest.fixture
def laptop(chromium_path: Path, page_errors: list[str]) -> Iterator[Any]:
    """A page at 1440 x 900 that records the errors it logs."""
    with chromium_context(chromium_path) as browser:
        page = browser.new_page()
        page.set_viewport_size(LAPTOP)
        page.on("console", lambda m: page_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: page_errors.append(str(e)))
        yield page


def demo_rows(config: UIConfig, run_id: str) -> list[RowRecord]:
    return config.store.row_window(run_id, "people", limit=50)


def open_grid(page: Any, base: str, run_id: str, query: str = "") -> None:
    """The demo's grid, its first rows drawn and its chips counted."""
    page.goto(f"{base}/grid/{run_id}?dataset=people{query}")
    page.locator(".ag-row[row-index='0'] [col-id='company'] .cell-in").wait_for(timeout=WAIT_MS)
    page.locator("#count-all", has_text=re.compile(r"\d")).wait_for(timeout=WAIT_MS)


def cells(page: Any, column: str) -> Any:
    return page.locator(f".ag-center-cols-container .ag-row [col-id='{column}']")


def rendered(page: Any, column: str) -> dict[int, str]:
    """Each rendered row's index and the text of its ``column`` cell's value."""
    return dict(
        page.evaluate(
            """(column) => [...document.querySelectorAll(
                 `.ag-center-cols-container .ag-row [col-id="${column}"] .value`)]
               .map((v) => [Number(v.closest(".ag-row").getAttribute("row-index")),
                            v.textContent])""",
            column,
        )
    )


def test_values_show_whole_with_state_icons_and_nested_fields_at_1440_px(
    demo_ui: UI, laptop: Any, page_errors: list[str], artifacts: Path
) -> None:
    """At 1440 px every email shows whole (its cell is as wide as the widest, none cut), each
    cell's state is an icon whose word screen readers read and its tooltip says, and the
    nested company shows as its name and size (the fields its header names), whole in the
    drawer. Before: the status word took the cell and values read ``a…``, ``{…``."""
    base, run_id, config = demo_ui
    rows = demo_rows(config, run_id)
    page = laptop
    open_grid(page, base, run_id)
    artifacts.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(artifacts / "grid-1440.png"))

    page.evaluate("() => playlineGrid.api.ensureColumnVisible('email')")
    cells(page, "email").first.wait_for(timeout=WAIT_MS)
    emails = rendered(page, "email")
    found = {
        i: rows[i].values["email"]
        for i in emails
        if rows[i].cells["email"]["status"] == "completed"
    }
    assert len(found) >= 10, emails
    assert {i: emails[i] for i in found} == found
    cut = page.evaluate(
        """() => [...document.querySelectorAll(
             '.ag-center-cols-container [col-id="email"] .value')]
           .filter((v) => v.scrollWidth > v.clientWidth).map((v) => v.textContent)"""
    )
    assert cut == []
    page.screenshot(path=str(artifacts / "grid-1440-email.png"))

    missed = next(i for i in emails if rows[i].cells["email"]["status"] == "not_found")
    cell = page.locator(f".ag-center-cols-container .ag-row[row-index='{missed}'] [col-id='email']")
    icon = cell.get_by_role("img", name="not found")
    assert icon.inner_text() == "∅"
    assert cell.locator(".value").inner_text() == "not found"
    done = page.locator(".ag-center-cols-container .ag-row[row-index='0'] [col-id='email']")
    assert done.get_by_role("img", name="done").count() == 1
    icon.hover()
    page.locator(".ag-tooltip", has_text="not found").wait_for(timeout=WAIT_MS)

    page.evaluate("() => playlineGrid.api.ensureColumnVisible('company')")
    company = rows[0].values["company"]
    shown = page.locator(".ag-center-cols-container .ag-row[row-index='0'] [col-id='company']")
    assert shown.locator(".value").inner_text() == f"{company['name']} · {company['size']}"
    hint = page.locator(".ag-header-cell[col-id='company'] .col-hint").inner_text()
    assert hint == "name · size"  # its industry is a column of its own
    shown.click()
    drawer = page.locator("#drawer:not([hidden])")
    drawer.wait_for(timeout=WAIT_MS)
    fields = drawer.locator(".cell-meta", has=page.locator("h3", has_text="company")).locator(
        "dl.nested"
    )
    assert fields.inner_text().split("\n") == [x for k, v in company.items() for x in (k, str(v))]
    assert not page_errors, page_errors


def declared_fields_store(tmp_path: Path) -> tuple[str, Store]:
    """A run ``f`` whose dataset ``d`` declared the fields its ``company`` is shown by."""
    url = f"sqlite:///{tmp_path}/fields.db"
    db = open_store(url)
    now = time.time()
    db.create_run(
        RunRecord(run_id="f", play="p", status=RunStatus.COMPLETED, created_at=now,
                  updated_at=now, holder=owner_id("test"), lease_until=now)
    )  # fmt: skip
    start = {"columns": ["company"], "fields": {"company": ["name", "employees"]}, "total": 1}
    db.append_events(
        [Event(kind="dataset", run_id="f", at=now, dataset="d", status="running", data=start)]
    )
    company = {"id": 7, "name": "Acme", "industry": "Software", "employees": 120}
    db.save_rows(
        [RowRecord(run_id="f", dataset="d", key="k", index=0, status="completed",
                   values={"domain": "acme.io", "company": company},
                   cells={"company": {"status": "completed"}})]
    )  # fmt: skip
    return url, db


def test_a_column_shows_the_fields_its_with_column_named(
    tmp_path: Path, laptop: Any, page_errors: list[str]
) -> None:
    """Fields named for a column (``fields=["name", "employees"]``, in its dataset's start
    event) are the ones its cells show, in that order, over those the grid would choose; the
    page knows which columns are computed (they have a state filter)."""
    url, db = declared_fields_store(tmp_path)
    with serve_asgi(create_app(UIConfig(store=db, store_url=url))) as base:
        laptop.goto(f"{base}/grid/f?dataset=d")
        cell = laptop.locator(".ag-row[row-index='0'] [col-id='company'] .value")
        cell.wait_for(timeout=WAIT_MS)
        assert cell.inner_text() == "Acme · 120"
        hint = laptop.locator(".ag-header-cell[col-id='company'] .col-hint").inner_text()
        assert hint == "name · employees"
        assert laptop.locator(".col-filter").count() == 1  # domain is an input field
        laptop.close()  # its stream ends before the server does
    assert not page_errors, page_errors


def test_a_column_filter_isolates_the_rows_whose_email_was_not_found(
    demo_ui: UI, laptop: Any, page_errors: list[str], artifacts: Path
) -> None:
    """The email header's filter, "not found": the rows whose email was not found, not those
    with any cell not found (a company not found), kept in the URL; its chip shows all rows
    again. Before: the chips filtered by a cell of any column only."""
    base, run_id, config = demo_ui
    rows = demo_rows(config, run_id)
    no_email = [i for i, r in enumerate(rows) if r.cells["email"]["status"] == "not_found"]
    any_miss = [
        i for i, r in enumerate(rows) if any(c["status"] == "not_found" for c in r.cells.values())
    ]
    assert 0 < len(no_email) < len(any_miss)
    page = laptop
    open_grid(page, base, run_id)
    page.evaluate("() => playlineGrid.api.ensureColumnVisible('email')")
    page.click(".ag-header-cell[col-id='email'] .col-filter")
    menu = page.get_by_role("menu", name="Show the rows whose email is")
    menu.get_by_role("menuitemradio", name="not found").click()
    shown = page.locator("#shown", has_text=f"{len(no_email)} rows whose email is not found")
    shown.wait_for(timeout=WAIT_MS)
    assert "state=not_found&column=email" in page.url
    listed = page.locator(".ag-center-cols-container .ag-row")
    wait_until(lambda: listed.count() == len(no_email), "the grid to narrow")
    keys = page.evaluate(
        "(n) => [...Array(n).keys()]"
        ".map((i) => playlineGrid.api.getDisplayedRowAtIndex(i).data.key)",
        len(no_email),
    )
    assert keys == [rows[i].key for i in no_email]
    assert set(rendered(page, "email").values()) == {"not found"}
    assert page.locator(".ag-header-cell[col-id='email'] .col-filter.on").count() == 1
    page.screenshot(path=str(artifacts / "grid-column-filter.png"))

    page.reload()  # the URL keeps the filter
    shown.wait_for(timeout=WAIT_MS)
    page.locator("#column-chip", has_text="email: not found").click()
    page.locator("#shown", has_text="50 rows").wait_for(timeout=WAIT_MS)
    assert "column=" not in page.url

    # by keyboard: from a cell up to its header, Tab to the filter, Enter, the arrows, Enter
    page.locator(".ag-center-cols-container .ag-row[row-index='0'] [col-id='company']").focus()
    page.keyboard.press("ArrowUp")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.dataset.column") == "company"
    page.keyboard.press("Enter")
    for _ in range(5):  # any state, queued, running, done, cached, not found
        page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.locator("#shown", has_text="rows whose company is not found").wait_for(timeout=WAIT_MS)
    assert page.evaluate("() => document.activeElement.dataset.column") == "company"
    assert not page_errors, page_errors


def test_the_cost_column_shows_what_the_ledger_charged_each_row(
    demo_ui: UI, laptop: Any, page_errors: list[str]
) -> None:
    """Hidden until asked for ("cost per row"), then each row's credits from the ledger, over
    every attempt: what its drawer lists as its charges."""
    base, run_id, config = demo_ui
    rows = demo_rows(config, run_id)
    spent: dict[str, float] = {}
    for charge in config.store.read_ledger(run_id):
        if charge.row_key is not None:
            spent[charge.row_key] = spent.get(charge.row_key, 0.0) + charge.credits
    page = laptop
    open_grid(page, base, run_id)
    assert page.locator(".ag-header-cell[col-id='_cost']").count() == 0
    page.get_by_label("cost per row").check()
    costs = page.locator(".ag-center-cols-container .ag-row[row-index='3'] [col-id='_cost']")
    costs.wait_for(timeout=WAIT_MS)
    wait_until(lambda: costs.inner_text() != "", "the costs")
    assert "cost=1" in page.url
    for index in range(4):
        cost = page.locator(
            f".ag-center-cols-container .ag-row[row-index='{index}'] [col-id='_cost']"
        )
        assert float(cost.inner_text()) == pytest.approx(
            spent[rows[index].key], abs=0.006
        )  # shown to 2 places
    assert not page_errors, page_errors


def test_every_row_of_a_running_dataset_is_listed_from_the_start(
    tmp_path: Path, chromium_path: Path, artifacts: Path
) -> None:
    """While no row has finished, the grid lists all 30 rows of the input as pending; as rows
    finish they take the places of pending ones, and the input fields' column comes with the
    first stored row; when the run ends no row is pending. Before: only finished rows were
    listed (0 rows at the start)."""
    url = f"sqlite:///{tmp_path}/live.db"
    db = open_store(url)
    gate = Gate()
    outcome: dict[str, Any] = {}
    runner = threading.Thread(
        target=lambda: outcome.update(
            result=pl.run(gated_play(gate), {"rows": 30}, store=open_store(url), run_id="live")
        )
    )
    runner.start()
    errors: list[str] = []
    artifacts.mkdir(parents=True, exist_ok=True)
    try:
        wait_until(lambda: db.read_events("live", kinds=["dataset"]), "the dataset to start")
        with (
            serve_asgi(create_app(UIConfig(store=db, store_url=url))) as base,
            chromium_context(chromium_path) as browser,
        ):
            page = browser.new_page()
            page.set_viewport_size(LAPTOP)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{base}/grid/live?dataset=items")
            page.locator("#shown", has_text="30 rows, 30 of them pending").wait_for(timeout=WAIT_MS)
            first = page.locator(".ag-center-cols-container .ag-row[row-index='0']")
            assert "row-pending" in (first.get_attribute("class") or "")
            status = first.locator("[col-id='_status']")
            assert status.get_by_role("img", name="pending").count() == 1
            page.screenshot(path=str(artifacts / "grid-pending.png"))

            gate.release(10)
            page.locator("#shown", has_text="30 rows, 20 of them pending").wait_for(timeout=WAIT_MS)
            page.locator(".ag-header-cell[col-id='n']").wait_for(timeout=WAIT_MS)
            labels = rendered(page, "label")
            wait_until(lambda: len(labels) >= 10 or labels.update(rendered(page, "label")), "rows")
            done = {i: v for i, v in labels.items() if v.startswith("item-")}
            assert sorted(done) == list(range(10)), labels  # the stored rows first
            pending = page.locator(".ag-center-cols-container .ag-row.row-pending")
            wait_until(lambda: pending.count() >= 5, "the pending rows after them")
            page.screenshot(path=str(artifacts / "grid-pending-some.png"))

            gate.release(20)
            page.locator("#status", has_text="completed").wait_for(timeout=WAIT_MS)
            page.locator("#shown", has_text=re.compile(r"^30 rows$")).wait_for(timeout=WAIT_MS)
            wait_until(lambda: pending.count() == 0, "no row to be pending")
    finally:
        gate.release(30)
        runner.join()
    assert outcome["result"].status == "completed"
    assert not errors, errors
