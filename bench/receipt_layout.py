"""receipt_layout: SQLite receipts as a rowid table (today's) against ``WITHOUT ROWID``.

A receipt's key is a digest: a random text. In a rowid table (today's layout) a receipt is
written to the table, appended by its rowid, and to the index of its key, at a random place;
a ``WITHOUT ROWID`` table is one tree ordered by the key, so it is written once, at a random
place, whole (its result included). Which costs less is measured here, through the store's
own calls, in one process and one run: ``BENCH_ROWS`` calls are claimed, then completed, in
group commits of 1,000 (``write_receipts``, as a live wave does), then every receipt is read
back 1,000 keys at a time (``find_answers``, as a cached re-run does). Each layout three
times, alternating; the best of each is reported.

ratio = the ``WITHOUT ROWID`` layout's seconds / the rowid layout's, for writes and reads
(above 1: slower). ``python -m bench receipt_layout``.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from playline.store import Claim, Completion, open_store

ROWS = int(os.environ.get("BENCH_ROWS", "100000"))
CHUNK = 1_000
ROUNDS = 3
RESULT = orjson.dumps({"tool": "bench.one", "data": {"n": 1, "even": True}, "cost": 0.0})


def _without_rowid(path: str) -> None:
    """Make the store's receipts table a ``WITHOUT ROWID`` one (same columns, indexes)."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        (table,) = db.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'receipts'"
        ).fetchone()
        indexes = [
            sql
            for (sql,) in db.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'receipts' "
                "AND sql IS NOT NULL"
            )
        ]
        db.execute("DROP TABLE receipts")
        db.execute(f"{table} WITHOUT ROWID")
        for sql in indexes:
            db.execute(sql)
    finally:
        db.close()


def _case(layout: str, folder: str, keys: list[str]) -> tuple[float, float]:
    """Seconds to claim and complete every key, and to read them all back."""
    path = str(Path(folder) / f"{layout}.db")
    open_store(f"sqlite:///{path}").close()  # the schema, as Playline makes it
    if layout == "without_rowid":
        _without_rowid(path)
    store = open_store(f"sqlite:///{path}")
    try:
        started = time.perf_counter()
        for start in range(0, len(keys), CHUNK):
            chunk = keys[start : start + CHUNK]
            now = time.time()
            claims = [Claim(key=k, tool="bench.one", run_id="bench") for k in chunk]
            store.write_receipts(claims=claims, owner="bench", now=now, lease_until=now + 60)
            done = [Completion(key=k, result=RESULT) for k in chunk]
            store.write_receipts(completions=done, owner="bench", now=now)
        written = time.perf_counter() - started
        started = time.perf_counter()
        found = 0
        for start in range(0, len(keys), CHUNK):
            found += len(store.find_answers(keys[start : start + CHUNK]))
        read = time.perf_counter() - started
    finally:
        store.close()
    assert found == len(keys), (layout, found)
    return written, read


def main() -> dict[str, Any]:
    keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(ROWS)]
    best: dict[str, list[float]] = {"rowid": [1e9, 1e9], "without_rowid": [1e9, 1e9]}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(ROUNDS):
            for layout in best:
                folder = Path(tmp) / f"{layout}-{round_}"
                folder.mkdir()
                written, read = _case(layout, str(folder), keys)
                best[layout] = [min(best[layout][0], written), min(best[layout][1], read)]
    rowid, without = best["rowid"], best["without_rowid"]
    return {
        "bench": "receipt_layout",
        "ratio": round(without[0] / rowid[0], 3),
        "read_ratio": round(without[1] / rowid[1], 3),
        "goal": "measure (issue 43): keep the layout that writes and reads faster",
        "rows": ROWS,
        "rowid_write_s": round(rowid[0], 3),
        "rowid_read_s": round(rowid[1], 3),
        "without_rowid_write_s": round(without[0], 3),
        "without_rowid_read_s": round(without[1], 3),
    }
