"""cached_rerun: the bookkeeping play's 100,000 rows again, every receipt present.

The first run fills the receipts; the second (a new run id) must resolve every call from
them. Reference in the same run: a plain loop reading the receipts table with sqlite3 and
decoding each result with orjson, the least a cached rerun has to do.
"""

from __future__ import annotations

import sqlite3
import tempfile
from typing import Any

import orjson

from ._measure import timed
from .bookkeeping import ROWS, _run

GOAL_ROWS_PER_S = 50_000
_FETCH = 10_000


def reference(path: str) -> tuple[float, int]:
    """Seconds to read and decode every stored receipt, and how many there were."""

    def go() -> int:
        db = sqlite3.connect(path)
        try:
            cursor = db.execute("SELECT key, result FROM receipts WHERE status = 'completed'")
            decoded = 0
            while chunk := cursor.fetchmany(_FETCH):
                for _key, result in chunk:
                    orjson.loads(result)
                    decoded += 1
            return decoded
        finally:
            db.close()

    return timed(go)


def main() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{tmp}/bench.db"
        _, first = _run(store, "cached")
        assert first.status == "completed", first.error
        rerun_s, rerun = _run(store, "cached")  # same rows, new run id: every call cached
        assert rerun.status == "completed", rerun.error
        assert rerun.run_id != first.run_id
        reference_s, receipts = reference(f"{tmp}/bench.db")
    assert receipts == ROWS
    rows_per_s = ROWS / rerun_s
    reference_rows_per_s = receipts / reference_s
    return {
        "bench": "cached_rerun",
        "ratio": round(rows_per_s / GOAL_ROWS_PER_S, 3),
        "goal": ">= 50,000 rows/s; 0 tool calls",
        "rows": ROWS,
        "rows_per_s": round(rows_per_s),
        "reference_rows_per_s": round(reference_rows_per_s),
        "vs_reference": round(rows_per_s / reference_rows_per_s, 3),
        "tool_calls_live": rerun.stats.tool_calls_live,
        "tool_calls_cached": rerun.stats.tool_calls_cached,
        "rerun_s": round(rerun_s, 3),
        "first_run_calls_live": first.stats.tool_calls_live,
    }
