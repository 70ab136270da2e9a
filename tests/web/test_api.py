"""The UI's JSON twins and actions over real HTTP (uvicorn on a free port), on a store that
holds a real run of the demo play through the simulator."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

import playline as pl
from playline._trace import ledger_by_column
from playline.store import open_store
from playline.web import UIConfig, create_app
from playline.web.server import is_loopback, no_login_warning
from services import serve_asgi

UI = tuple[str, str, UIConfig]


def get(base: str, path: str, status: int = 200) -> Any:
    response = httpx.get(base + path, timeout=30)
    assert response.status_code == status, response.text
    return response.json()


def post(base: str, path: str, token: str | None, **kwargs: Any) -> httpx.Response:
    headers = {"X-CSRF-Token": token} if token else {}
    return httpx.post(base + path, headers=headers, timeout=30, **kwargs)


def test_runs_lists_the_run_and_filters_by_status_and_play(demo_ui: UI) -> None:
    base, run_id, _ = demo_ui
    doc = get(base, "/api/runs")
    (run,) = [r for r in doc["runs"] if r["run_id"] == run_id]
    assert run["status"] == "completed" and run["play"] == "enrich-people"
    assert run["rows"] == 50 and run["credits"] > 0 and run["duration"] >= 0
    assert doc["plays"] == ["enrich-people"]
    assert get(base, "/api/runs?status=failed")["runs"] == []
    assert get(base, "/api/runs?play=enrich-people&status=completed")["runs"]
    assert get(base, "/api/runs?status=queued")["runs"] == []  # shown, not stored, statuses
    error = get(base, "/api/runs?status=done", status=400)["error"]
    assert "use one of" in error and "interrupted" in error and "queued" in error


def test_a_run_has_its_trace_ledger_by_tool_and_column_and_waterfall(demo_ui: UI) -> None:
    base, run_id, _ = demo_ui
    doc = get(base, f"/api/run/{run_id}")
    assert doc["status"] == "completed" and doc["seq"] > 0
    assert [d["name"] for d in doc["datasets"]] == ["people"]
    assert doc["datasets"][0]["stored"] == 50
    tools = {t["tool"]: t for t in doc["tools"]}
    assert tools["sim.company.enrich"]["inputs"] == 50
    hit = tools["sim.company.enrich"]
    assert hit["credits_per_hit"] == pytest.approx(hit["credits"] / hit["found"])
    (fall,) = doc["waterfalls"]
    assert fall["id"] == "work_email" and [s["id"] for s in fall["steps"]] == [
        "beta", "alpha", "gamma"
    ]  # fmt: skip
    assert fall["steps"][0]["attempts"] == 50
    assert sum(s["hits"] for s in fall["steps"]) == fall["satisfied"]
    columns = {c["column"]: c for c in get(base, f"/api/columns/{run_id}")["columns"]}
    assert columns["email"]["credits"] == pytest.approx(fall["credits"])
    assert get(base, "/api/run/nope", status=404)["error"].startswith("No run 'nope'")


def test_ledger_by_column_counts_what_earlier_attempts_paid(tmp_path: Path) -> None:
    """A row finished by a resume has its paid cell answered from the receipt (cost 0 in the
    cell); the column still shows what the run paid for it, as the ledger has it, and a
    column that calls two tools counts both."""
    ready: list[bool] = []
    registry = pl.ToolRegistry()
    registry.tool("t.paid", batch=pl.Batch(max_size=10), cost=pl.Cost(2))(
        lambda inputs: [{"n": i["n"]} for i in inputs]
    )

    def later(row: Any) -> int:
        if not ready:
            raise RuntimeError("not yet")
        return int(row["n"])

    registry.tool("t.verify", cost=pl.Cost(1))(lambda input: {"ok": True})

    async def find_and_verify(row: Any, ctx: pl.Context) -> Any:
        await ctx.tool("t.verify", {"n": row["n"]})  # a second tool in the cell: its provider
        return await ctx.tool("t.paid", {"n": row["n"]})  # is the last one's

    @pl.play(name="paid-then-later")
    async def play(ctx: pl.Context, input: Any) -> Any:
        await ctx.tool("t.paid", {"n": -1})  # outside the dataset
        return await (
            ctx.dataset("rows", [{"n": n} for n in range(3)], key="n")
            .with_column("paid", find_and_verify)
            .with_column("later", later)
            .run()
        )

    url = f"sqlite:///{tmp_path}/l.db"
    first = pl.run(play, store=url, tools=[registry])
    assert first.status == "failed"  # every row failed at "later"
    ready.append(True)
    again = pl.run(play, store=url, tools=[registry], run_id=first.run_id)
    assert again.status == "completed" and again.stats.tool_calls_cached == 7
    doc = ledger_by_column(open_store(url), first.run_id)
    columns = {c["column"]: c for c in doc["columns"]}
    assert columns["paid"]["credits"] == 6 + 3 and columns["later"]["credits"] == 0
    assert doc["other_credits"] == 2  # the call outside the dataset
    total = sum(c["credits"] for c in doc["columns"]) + doc["other_credits"]
    assert total == sum(e.credits for e in open_store(url).read_ledger(first.run_id)) == 11


def _two_columns_of_one_tool(tmp_path: Path) -> tuple[str, str]:
    """A run whose rows verify two emails with one paid tool, 1 credit a call; the second
    email of row 2 is missing (its cell is skipped, nothing paid)."""
    registry = pl.ToolRegistry()
    registry.tool("t.verify", cost=pl.Cost(1))(lambda input: {"ok": True})

    def verify(field: str) -> Any:
        return lambda row, ctx: ctx.tool("t.verify", {"email": row[field]})

    @pl.play(name="two-emails")
    async def play(ctx: pl.Context, input: Any) -> Any:
        people = [{"n": n, "work": f"w{n}@x.io", "home": f"h{n}@x.io" if n != 2 else ""}
                  for n in range(3)]  # fmt: skip
        return await (
            ctx.dataset("people", people, key="n")
            .with_column("work_ok", verify("work"))
            .with_column("home_ok", verify("home"), when=lambda row: bool(row["home"]))
            .run()
        )

    url = f"sqlite:///{tmp_path}/two.db"
    result = pl.run(play, store=url, tools=[registry])
    assert result.status == "completed"
    return url, result.run_id


def test_ledger_by_column_puts_a_tool_two_columns_use_in_each(tmp_path: Path) -> None:
    url, run_id = _two_columns_of_one_tool(tmp_path)
    doc = ledger_by_column(open_store(url), run_id)
    columns = {c["column"]: c["credits"] for c in doc["columns"]}
    assert columns == {"work_ok": 3, "home_ok": 2} and doc["other_credits"] == 0


def test_ledger_by_column_reads_a_ledger_whose_entries_name_no_column(tmp_path: Path) -> None:
    """Entries written before the ledger named columns count in the first column of their
    row whose cell used the tool, as they did then: the totals still add up."""
    url, run_id = _two_columns_of_one_tool(tmp_path)
    with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as db, db:
        db.execute('UPDATE ledger SET "column" = NULL')
    doc = ledger_by_column(open_store(url), run_id)
    columns = {c["column"]: c["credits"] for c in doc["columns"]}
    assert columns == {"work_ok": 5, "home_ok": 0} and doc["other_credits"] == 0


def test_windows_filter_sort_and_count(demo_ui: UI) -> None:
    base, run_id, _ = demo_ui
    first = get(base, f"/api/rows/{run_id}?dataset=people&limit=10")
    assert first["total"] == 50 and len(first["rows"]) == 10
    assert [r["index"] for r in first["rows"]] == list(range(10))
    assert first["columns"][:4] == ["first_name", "last_name", "title", "website"]
    assert "email" in first["columns"] and first["rows"][0]["cells"]["company"]
    counts = get(base, f"/api/counts/{run_id}?dataset=people")
    missing = counts["rows_with"]["not_found"]
    found = get(base, f"/api/rows/{run_id}?dataset=people&state=not_found&limit=100")
    assert found["total"] == missing == len(found["rows"]) > 0
    assert all("not_found" in r["cells"].values() for r in found["rows"])
    names = [
        r["values"]["first_name"]
        for r in get(base, f"/api/rows/{run_id}?dataset=people&sort=first_name&limit=50")["rows"]
    ]
    assert names == sorted(names)
    assert "use one of" in get(base, f"/api/rows/{run_id}?state=done", status=400)["error"]
    error = get(base, f"/api/rows/{run_id}?dataset=people&limit=-1", status=400)["error"]
    assert error == "limit=-1 is below 0; pass limit=0 or more."
    error = get(base, f"/api/rows/{run_id}?dataset=people&offset=-5", status=400)["error"]
    assert error == "offset=-5 is below 0; pass offset=0 or more."
    assert get(base, "/api/runs?limit=0", status=400)["error"].endswith("pass limit=1 or more.")
    error = get(base, f"/api/rows/{run_id}?dataset=people&sort=frist_name", status=400)["error"]
    assert "Unknown column 'frist_name'" in error and "first_name" in error


def test_the_drawer_shows_a_waterfalls_attempts_and_charges(demo_ui: UI) -> None:
    base, run_id, _ = demo_ui
    rows = get(base, f"/api/rows/{run_id}?dataset=people&limit=50")["rows"]
    key = next(r["key"] for r in rows if r["cells"]["email"] == "not_found")
    doc = get(base, f"/api/row/{run_id}?dataset=people&key={key}")
    steps = doc["meta"]["email"]["waterfall"]["steps"]
    assert list(steps) == ["beta", "alpha", "gamma"]
    assert all(s["status"] == "not_found" and "provider" in s for s in steps.values())
    tools = {e["tool"] for e in doc["ledger"]}
    assert {"sim.email.beta", "sim.email.gamma"} <= tools
    assert all(len(e["receipt"]) == 64 for e in doc["ledger"])


def test_the_grid_of_a_dataset_an_ended_run_does_not_have_says_so(demo_ui: UI) -> None:
    """Not an empty grid of "nope rows" and a 404 in the console: which datasets there are."""
    base, run_id, _ = demo_ui
    page = httpx.get(f"{base}/grid/{run_id}?dataset=nope", timeout=30)
    assert page.status_code == 404
    assert f"Run {run_id} has no dataset &#39;nope&#39; (its datasets: people)" in page.text


def test_pages_carry_a_csrf_token_and_a_strict_csp(demo_ui: UI) -> None:
    base, run_id, config = demo_ui
    for path in ("/", f"/run/{run_id}", f"/grid/{run_id}?dataset=people"):
        page = httpx.get(base + path, timeout=30)
        assert page.status_code == 200
        assert config.csrf_token in page.text
        policy = page.headers["content-security-policy"]
        assert policy.startswith("default-src 'self';") and "'unsafe-inline'" not in policy
        assert "http" not in policy  # nothing from elsewhere
    script = httpx.get(base + "/static/vendor/ag-grid.min.js", timeout=30)
    assert (
        script.status_code == 200
        and "default-src 'self'" in script.headers["content-security-policy"]
    )
    missing = httpx.get(base + "/run/nope", timeout=30)
    assert missing.status_code == 404 and "No run &#39;nope&#39;" in missing.text


def test_actions_need_the_token_and_say_why_they_cannot_act(demo_ui: UI) -> None:
    base, run_id, config = demo_ui
    token = config.csrf_token
    refused = post(base, f"/api/stop/{run_id}", None)
    assert refused.status_code == 403 and "CSRF" in refused.json()["error"]
    assert post(base, f"/api/stop/{run_id}", "wrong").status_code == 403
    foreign = httpx.post(
        base + f"/api/stop/{run_id}",
        headers={"X-CSRF-Token": token, "Origin": "http://evil.example"},
        timeout=30,
    )
    assert foreign.status_code == 403 and "another site" in foreign.json()["error"]
    stop = post(base, f"/api/stop/{run_id}", token)
    assert stop.status_code == 409 and "completed, not running" in stop.json()["error"]
    resume = post(base, f"/api/resume/{run_id}", token)
    assert resume.status_code == 409 and "cannot be resumed" in resume.json()["error"]


def test_export_streams_csv_and_jsonl_from_the_read_model(demo_ui: UI) -> None:
    base, run_id, config = demo_ui
    form = {"csrf_token": config.csrf_token, "dataset": "people", "format": "csv"}
    response = httpx.post(base + f"/api/export/{run_id}", data=form, timeout=30)
    assert response.status_code == 200 and "attachment" in response.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert len(rows) == 50 and "email" in rows[0]
    with_status = {**form, "format": "jsonl", "with_status": "1"}
    lines = httpx.post(base + f"/api/export/{run_id}", data=with_status, timeout=30).text
    assert len(lines.splitlines()) == 50 and '"email.status"' in lines
    missing = httpx.post(base + f"/api/export/{run_id}", data={**form, "dataset": "x"}, timeout=30)
    assert missing.status_code == 404 and "its datasets: people" in missing.json()["error"]
    only = {k: v for k, v in form.items() if k != "dataset"}  # the run's only dataset
    assert httpx.post(base + f"/api/export/{run_id}", data=only, timeout=30).text == response.text


def test_the_csv_export_escapes_cells_a_spreadsheet_would_run(tmp_path: Path) -> None:
    """As `playline export`: provider data is untrusted, so a cell starting =, +, -, @, tab
    or CR is written with a quote in front (OWASP's rule)."""
    url = f"sqlite:///{tmp_path}/formulas.db"
    result = pl.run(pl.play(name="formulas")(_formulas), store=url, tools=[])
    config = UIConfig(store=open_store(url), store_url=url)
    with serve_asgi(create_app(config)) as base:
        form = {"csrf_token": config.csrf_token, "format": "csv"}
        text = httpx.post(base + f"/api/export/{result.run_id}", data=form, timeout=30).text

    [row] = list(csv.DictReader(io.StringIO(text)))
    assert row["sum"] == "'=1+2" and row["at"] == "'@SUM(A1)" and row["tab"] == "'\t=cmd"
    assert row["plain"] == "fine"


async def _formulas(ctx: pl.Context, input: object) -> object:
    cells = {"sum": "=1+2", "at": "@SUM(A1)", "tab": "\t=cmd", "plain": "fine"}
    return (
        await ctx.dataset("cells", [{"id": 1}], key="id")
        .with_column("sum", lambda row: cells["sum"])
        .with_column("at", lambda row: cells["at"])
        .with_column("tab", lambda row: cells["tab"])
        .with_column("plain", lambda row: cells["plain"])
        .run()
    )


def test_send_event_delivers_once(demo_ui: UI) -> None:
    base, _, config = demo_ui
    token = config.csrf_token
    first = post(base, "/api/event", token, json={"key": "approve:42", "payload": '{"ok": true}'})
    assert first.status_code == 200 and first.json()["sent"] is True
    again = post(base, "/api/event", token, json={"key": "approve:42", "payload": "{}"})
    assert again.json()["sent"] is False and "first payload stands" in again.json()["message"]
    bad = post(base, "/api/event", token, json={"key": "k", "payload": "{nope"})
    assert bad.status_code == 400 and "not JSON" in bad.json()["error"]


def test_export_with_status_of_a_column_named_as_a_status_column_is_a_409(
    tmp_path: Path,
) -> None:
    """Refused before anything is sent: a stream cut short would look like a whole file."""

    @pl.play(name="status-clash")
    async def play(ctx: pl.Context, input: Any) -> Any:
        return await ctx.dataset("d", [{"id": 1, "_status": "vip"}], key="id").run()

    url = f"sqlite:///{tmp_path}/clash.db"
    db = open_store(url)
    run_id = pl.run(play, store=db, tools=[]).run_id
    config = UIConfig(store=db, store_url=url)
    with serve_asgi(create_app(config)) as base:
        for fmt in ("csv", "jsonl"):
            form = {"csrf_token": config.csrf_token, "format": fmt, "with_status": "1"}
            answer = httpx.post(base + f"/api/export/{run_id}", data=form, timeout=30)
            assert answer.status_code == 409 and "'_status'" in answer.json()["error"], fmt
    db.close()


def test_send_event_keeps_a_falsy_payload_and_refuses_a_body_that_is_no_object(
    demo_ui: UI,
) -> None:
    base, _, config = demo_ui
    token = config.csrf_token
    sent = {"falsy:false": "false", "falsy:zero": "0", "falsy:empty": '""', "falsy:list": "[]"}
    for key, payload in sent.items():
        answer = post(base, "/api/event", token, json={"key": key, "payload": payload})
        assert answer.status_code == 200 and answer.json()["sent"] is True
    blank = post(base, "/api/event", token, json={"key": "falsy:none", "payload": " "})
    assert blank.status_code == 200  # blank text: no payload
    path = config.store_url.removeprefix("sqlite:///")
    with closing(sqlite3.connect(path)) as db:
        stored = dict(db.execute("SELECT key, payload FROM inbox WHERE key LIKE 'falsy:%'"))
    assert {k: json.loads(v) for k, v in stored.items()} == {
        **{key: json.loads(payload) for key, payload in sent.items()},
        "falsy:none": None,
    }
    for bad in ({"key": "k:nan", "payload": "NaN"}, {"key": {"a": 1}, "payload": "1"},
                {"key": "k:deep", "payload": "[" * 5000 + "]" * 5000}):  # fmt: skip
        refused = post(base, "/api/event", token, json=bad)
        assert refused.status_code == 400, bad
    with closing(sqlite3.connect(path)) as db:
        assert not db.execute(
            "SELECT key FROM inbox WHERE key LIKE 'k:%' OR key LIKE '{%'"
        ).fetchall()
    for body in ("[1]", '"text"', "{bad", "[" * 100_000 + "]" * 100_000,
                 '{"key": "k:body-nan", "payload": {"v": NaN}}'):  # fmt: skip
        refused = httpx.post(
            base + "/api/event",
            content=body,
            headers={"X-CSRF-Token": token, "content-type": "application/json"},
            timeout=30,
        )
        assert refused.status_code == 400 and "JSON object" in refused.json()["error"], body[:9]
    foreign = httpx.post(
        base + "/api/event",
        json={"key": "k:token", "payload": "1"},
        headers={"X-CSRF-Token": "é".encode("latin-1")},
        timeout=30,
    )
    assert foreign.status_code == 403  # a token that is not ASCII is a wrong token


def test_only_loopback_binds_quietly() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.0.2.1")
    assert "no login" in no_login_warning("0.0.0.0")


def test_playline_ui_names_a_missing_run_in_one_line(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from playline.cli import app

    result = CliRunner().invoke(
        app, ["ui", "--run", "nope", "--store", f"sqlite:///{tmp_path}/x.db"]
    )
    assert result.exit_code == 1
    assert result.stderr.strip().startswith("error: No run 'nope'")
    assert "playline runs" in result.stderr
