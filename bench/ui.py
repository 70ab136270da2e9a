"""ui: the live grid under load, in headless Chromium (Debian's /usr/bin/chromium).

A 100,000-row x 30-column dataset sits in a SQLite store; while its grid is open, another
connection streams 300,000 cell changes into it as the engine would (row events carrying
their changed cells, and the rows themselves), at a steady rate. Measured in the page
(``window.playlineGrid``): when the first rows showed, when the last change was applied,
the worst gap between animation frames while the changes streamed, and the JS heap.

Goals (issue 16): first rows within 1 s; changes applied within 1.2x the stream's duration;
no frame gap over 100 ms; page memory under 200 MB. The windows the grid asks the store for
over a 1,000,000-row dataset (filters, sorts, deep offsets) are ``bench ui_window``'s.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from playline.store import Event, RowRecord, RunRecord, RunStatus, open_store, owner_id
from playline.web import UIConfig
from playline.web.server import serve_in_thread

ROWS = 100_000
COLUMNS = 30
INPUTS = 5  # the first columns are input fields; the other 25 are computed cells
CHANGES = 300_000
CELLS_PER_EVENT = 3
RATE = 20_000  # cell changes per second
TICK = 0.1
CHROMIUM = "/usr/bin/chromium"
GOALS = {"first_rows_s": 1.0, "applied_ratio": 1.2, "worst_frame_gap_ms": 100, "heap_mb": 200}


def _names() -> list[str]:
    return [f"c{i:02d}" for i in range(COLUMNS)]


def _fill(url: str, run_id: str) -> dict[str, dict[str, Any]]:
    db = open_store(url)
    now = time.time()
    db.create_run(
        RunRecord(run_id=run_id, play="bench-ui", status=RunStatus.RUNNING, created_at=now,
                  updated_at=now, holder=owner_id("bench"), lease_until=now + 3600)
    )  # fmt: skip
    names = _names()
    computed = names[INPUTS:]
    db.append_events(
        [Event(kind="dataset", run_id=run_id, at=now, dataset="leads", status="running",
               data={"columns": computed, "description": "bench"})]
    )  # fmt: skip
    rows: dict[str, dict[str, Any]] = {}
    batch = []
    for i in range(ROWS):
        values: dict[str, Any] = {n: f"in-{i}-{n}" for n in names[:INPUTS]}
        values.update({n: None for n in computed})
        row = {"values": values, "cells": {n: {"status": "queued"} for n in computed}}
        rows[f"k{i:06d}"] = row
        batch.append(_record(run_id, f"k{i:06d}", i, row))
        if len(batch) == 5000:
            db.save_rows(batch)
            batch = []
    db.save_rows(batch)
    db.close()
    return rows


def _record(run_id: str, key: str, index: int, row: dict[str, Any]) -> RowRecord:
    return RowRecord(run_id=run_id, dataset="leads", key=key, index=index, status="completed",
                     values=row["values"], cells=row["cells"])  # fmt: skip


def _stream(url: str, run_id: str, rows: dict[str, dict[str, Any]], out: dict[str, Any]) -> None:
    """Write CHANGES cell changes at RATE per second; records the span and the last seq."""
    db = open_store(url)
    keys = list(rows)
    computed = _names()[INPUTS:]
    per_tick = int(RATE * TICK)
    written = 0
    start = time.monotonic()
    out["start"] = start
    tick = 0
    while written < CHANGES:
        events, records = [], []
        first = db.reserve_seqs(per_tick // CELLS_PER_EVENT + 1)
        for n in range(per_tick // CELLS_PER_EVENT):
            change = written // CELLS_PER_EVENT
            key = keys[(change * 7919) % ROWS]  # spread over the whole table
            row = rows[key]
            cells, values = {}, {}
            for c in range(CELLS_PER_EVENT):
                column = computed[(change + c) % len(computed)]
                status = "completed" if (change + c) % 11 else "not_found"
                value = f"v{change}-{c}" if status == "completed" else None
                row["values"][column] = value
                row["cells"][column] = {"status": status, "provider": "bench.tool"}
                cells[column], values[column] = status, value
            written += CELLS_PER_EVENT
            events.append(Event(kind="row", run_id=run_id, at=time.time(), dataset="leads",
                                row_key=key, status="completed", seq=first + n,
                                data={"cells": cells, "values": values}))  # fmt: skip
            records.append(_record(run_id, key, int(key[1:]), row))
            if written >= CHANGES:
                break
        db.append_events(events)
        db.save_rows(records)
        out["last_seq"] = events[-1].seq
        tick += 1
        pause = start + tick * TICK - time.monotonic()
        if pause > 0:
            time.sleep(pause)  # a steady rate, as a run writes (the benchmark's own clock)
    out["end"] = time.monotonic()
    db.close()


def _probe(page: Any) -> dict[str, Any]:
    return page.evaluate(
        "() => ({firstRowsAt: playlineGrid.firstRowsAt, appliedSeq: playlineGrid.appliedSeq,"
        " worst: playlineGrid.worstFrameGap, messages: playlineGrid.messages,"
        " reloads: playlineGrid.reloads, frames: playlineGrid.frames})"
    )


def main() -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="playline-bench-ui-") as tmp:
        url = f"sqlite:///{tmp}/ui.db"
        run_id = "bench-ui"
        t0 = time.perf_counter()
        rows = _fill(url, run_id)
        fill_s = time.perf_counter() - t0
        base = serve_in_thread(UIConfig(store=open_store(url), store_url=url))
        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                user_data_dir=str(Path(tmp) / "profile"), executable_path=CHROMIUM,
                headless=True, args=["--no-sandbox", "--disable-gpu", "--no-first-run",
                                     "--disable-background-networking"],
            )  # fmt: skip
            page = context.new_page()
            page.set_viewport_size({"width": 1600, "height": 1000})
            page.goto(f"{base}/grid/{run_id}?dataset=leads")
            page.wait_for_function("() => playlineGrid.firstRowsAt !== null", timeout=30_000)
            first_rows_ms = _probe(page)["firstRowsAt"]  # since navigation started
            page.wait_for_function("() => playlineGrid.streamSeq >= 0 && playlineGrid.frames > 5")
            page.evaluate("() => playlineGrid.resetFrames()")
            stream: dict[str, Any] = {}
            writer = threading.Thread(target=_stream, args=(url, run_id, rows, stream))
            writer.start()
            writer.join()
            page.wait_for_function(
                f"() => playlineGrid.appliedSeq >= {stream['last_seq']}", timeout=120_000
            )
            applied_at = time.monotonic()
            probe = _probe(page)
            cdp = context.new_cdp_session(page)
            cdp.send("Performance.enable")
            metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
            context.close()
    duration = stream["end"] - stream["start"]
    applied = applied_at - stream["start"]
    result = {
        "name": "ui",
        "rows": ROWS,
        "columns": COLUMNS,
        "cell_changes": CHANGES,
        "fill_s": round(fill_s, 2),
        "first_rows_s": round(first_rows_ms / 1000, 3),
        "stream_s": round(duration, 2),
        "applied_s": round(applied, 2),
        "applied_ratio": round(applied / duration, 3),
        "worst_frame_gap_ms": round(probe["worst"], 1),
        "heap_mb": round(metrics.get("JSHeapUsedSize", 0) / 2**20, 1),
        "messages": probe["messages"],
        "reloads": probe["reloads"],
        "cpus": os.cpu_count(),
    }
    result["ok"] = (
        result["first_rows_s"] <= GOALS["first_rows_s"]
        and result["applied_ratio"] <= GOALS["applied_ratio"]
        and result["worst_frame_gap_ms"] <= GOALS["worst_frame_gap_ms"]
        and result["heap_mb"] < GOALS["heap_mb"]
    )
    return result


if __name__ == "__main__":
    print(main())
