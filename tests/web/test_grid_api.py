"""The rows API behind the grid, over real HTTP: a state filter scoped to a column, each
row's cost from the ledger, the rows of a running dataset listed from the start (pending
placeholders after the stored rows)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx

import playline as pl
from playline.store import open_store
from playline.web import UIConfig, create_app
from playline.web.grid import PENDING_KEY
from services import serve_asgi

from webhelp import Gate, gated_play, wait_until

UI = tuple[str, str, UIConfig]


def get(base: str, path: str, status: int = 200) -> Any:
    response = httpx.get(base + path, timeout=30)
    assert response.status_code == status, response.text
    return response.json()


def test_a_state_scoped_to_a_column_keeps_the_rows_whose_cell_of_it_is_in_it(
    demo_ui: UI,
) -> None:
    base, run_id, config = demo_ui
    rows = config.store.row_window(run_id, "people", limit=50)
    no_email = [r.key for r in rows if r.cells["email"]["status"] == "not_found"]
    rows_url = f"/api/rows/{run_id}?dataset=people&limit=100"
    doc = get(base, f"{rows_url}&state=not_found&column=email")
    assert [r["key"] for r in doc["rows"]] == no_email
    assert doc["total"] == doc["stored"] == len(no_email) > 0
    anywhere = get(base, f"{rows_url}&state=not_found")["total"]
    assert anywhere > len(no_email)  # a company not found counts there, not here
    error = get(base, f"{rows_url}&column=email", status=400)["error"]
    assert error.startswith("column='email' filters by a cell state: add state=, one of")
    error = get(base, f"{rows_url}&state=waiting&column=email", status=400)["error"]
    assert "add state=" in error
    error = get(base, f"{rows_url}&state=failed&column=emial", status=400)["error"]
    assert "Unknown column 'emial' to filter" in error and "email" in error


def test_cost_adds_each_rows_charges_from_the_ledger(demo_ui: UI) -> None:
    base, run_id, config = demo_ui
    spent: dict[str, float] = {}
    for charge in config.store.read_ledger(run_id):
        if charge.row_key is not None:
            spent[charge.row_key] = spent.get(charge.row_key, 0.0) + charge.credits
    doc = get(base, f"/api/rows/{run_id}?dataset=people&limit=50&cost=1")
    assert {r["key"]: r["cost"] for r in doc["rows"]} == {k: round(v, 6) for k, v in spent.items()}
    assert sum(r["cost"] for r in doc["rows"]) > 0 and all(r["usd"] == 0 for r in doc["rows"])
    assert "cost" not in get(base, f"/api/rows/{run_id}?dataset=people&limit=1")["rows"][0]


def test_a_running_dataset_lists_its_rows_not_stored_yet_as_pending(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/live.db"
    db = open_store(url)
    gate = Gate()
    runner = threading.Thread(
        target=lambda: pl.run(gated_play(gate), {"rows": 12}, store=open_store(url), run_id="r")
    )
    runner.start()
    try:
        wait_until(lambda: db.read_events("r", kinds=["dataset"]), "the dataset to start")
        with serve_asgi(create_app(UIConfig(store=db, store_url=url))) as base:
            rows = "/api/rows/r?dataset=items"
            start = get(base, f"{rows}&limit=5")
            assert (start["total"], start["stored"], start["expected"]) == (12, 0, 12)
            assert [r["key"] for r in start["rows"]] == [f"{PENDING_KEY}{i}" for i in range(5)]
            assert all(r["pending"] and r["status"] == "pending" for r in start["rows"])
            assert len(get(base, f"{rows}&offset=10&limit=5")["rows"]) == 2  # 10 and 11
            assert get(base, f"{rows}&state=queued")["total"] == 0  # a filter: stored rows only

            gate.release(4)
            wait_until(lambda: db.count_rows("r", "items") == 4, "4 rows to be stored")
            some = get(base, f"{rows}&offset=2&limit=5")
            assert (some["total"], some["stored"]) == (12, 4)
            kinds = ["stored" if not r.get("pending") else r["key"] for r in some["rows"]]
            assert kinds == ["stored", "stored", f"{PENDING_KEY}4", f"{PENDING_KEY}5",
                             f"{PENDING_KEY}6"]  # fmt: skip

            gate.release(8)
            runner.join()
            done = get(base, f"{rows}&limit=100")
            assert (done["total"], done["stored"], done["expected"]) == (12, 12, None)
            assert not any(r.get("pending") for r in done["rows"])
    finally:
        gate.release(12)
        runner.join()
