"""single_call: 100,000 rows through one single-call local tool, against a lean script.

The tool (``bench.one``) has no batch, no latency and returns a small dict, so the figures are
Playline's own cost per call: receipt, row, events, ledger. Cases, each in a child process
(its own peak RSS):

- ``sqlite``: live calls on a fresh SQLite store (temp dir);
- ``memory``: the same on ``memory://``;
- ``cached``: the ``sqlite`` case's play again on its store, every receipt present (rows/s,
  0 live calls);
- ``batch``: the same rows through a batch tool (``batch=pl.Batch(max_size=500)``), SQLite;
- ``lean``: the reference, a standalone loop doing the same bookkeeping by hand: for each
  input a receipt key (hashlib over orjson), then the receipt and the row inserted into
  SQLite (WAL, ``synchronous=NORMAL``, like Playline's store) by chunked ``executemany``
  transactions.

ratio = Playline's live calls/s on SQLite / the lean script's.
``python -m bench single_call``; ``BENCH_ROWS_SINGLE=10000`` makes a quick one.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

import playline as pl

from ._measure import in_child, peak_rss_mb, timed

ROWS = int(os.environ.get("BENCH_ROWS_SINGLE", "100000"))
GOAL = ">= 20,000 live calls/s; cached re-run >= 50,000 rows/s"
GOAL_LIVE = 20_000
GOAL_CACHED = 50_000
_CHUNK = 1_000


def one(input: dict[str, Any]) -> dict[str, Any]:
    return {"n": input["n"], "even": input["n"] % 2 == 0}


def many(inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [one(i) for i in inputs]


ONE = pl.tool("bench.one", cost=pl.Cost(0))(one)
MANY = pl.tool("bench.many", batch=pl.Batch(max_size=500), cost=pl.Cost(0))(many)


@pl.play(name="bench-single-call")
async def single_call(ctx: pl.Context, input: dict[str, Any]) -> int:
    tool = input["tool"]
    ds = await (
        ctx.dataset("rows", ({"n": i} for i in range(input["rows"])))
        .with_column("out", lambda row, ctx: ctx.tool(tool, {"n": row["n"]}))
        .run()
    )
    return len(ds)


def playline_case(case: str, db: str) -> dict[str, Any]:
    """One Playline case; ``db`` is the SQLite file (unused on ``memory``)."""
    tool = "bench.many" if case == "batch" else "bench.one"
    store = "memory://" if case == "memory" else f"sqlite:///{db}"
    seconds, result = timed(
        lambda: pl.run(single_call, {"rows": ROWS, "tool": tool}, store=store, tools=[ONE, MANY])
    )
    assert result.status == "completed", result.error
    return {
        "seconds": seconds,
        "rows": result.output,
        "calls_live": result.stats.tool_calls_live,
        "calls_cached": result.stats.tool_calls_cached,
    }


def lean_case(db: str) -> dict[str, Any]:
    """The same bookkeeping by hand: receipt key, receipt and row, chunked transactions."""

    def records(start: int, stop: int) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        receipts, rows = [], []
        for i in range(start, stop):
            row = {"n": i}
            payload = {"n": row["n"]}
            key = hashlib.sha256(
                orjson.dumps({"tool": "bench.one", "input": payload}, option=orjson.OPT_SORT_KEYS)
            ).hexdigest()
            result = one(payload)
            receipts.append((key, "bench.one", "completed", orjson.dumps(result)))
            rows.append((i, key, orjson.dumps({**row, "out": result})))
        return receipts, rows

    def go() -> int:
        conn = sqlite3.connect(db)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(
                "CREATE TABLE receipts "
                "(key TEXT PRIMARY KEY, tool TEXT NOT NULL, status TEXT NOT NULL, result BLOB)"
            )
            conn.execute(
                'CREATE TABLE rows (idx INTEGER PRIMARY KEY, key TEXT NOT NULL, "values" BLOB)'
            )
            for start in range(0, ROWS, _CHUNK):
                receipts, rows = records(start, min(ROWS, start + _CHUNK))
                with conn:
                    conn.executemany("INSERT INTO receipts VALUES (?, ?, ?, ?)", receipts)
                    conn.executemany("INSERT INTO rows VALUES (?, ?, ?)", rows)
            (count,) = conn.execute("SELECT count(*) FROM receipts").fetchone()
            return int(count)
        finally:
            conn.close()

    seconds, count = timed(go)
    return {"seconds": seconds, "rows": count, "calls_live": count, "calls_cached": 0}


def child(case: str, db: str) -> None:
    figures = lean_case(db) if case == "lean" else playline_case(case, db)
    print(orjson.dumps({**figures, "rss_mb": peak_rss_mb()}).decode())


def _summary(figures: dict[str, Any]) -> dict[str, Any]:
    seconds = figures["seconds"]
    return {
        "seconds": round(seconds, 3),
        "rows_per_s": round(figures["rows"] / seconds),
        "live_calls_per_s": round(figures["calls_live"] / seconds),
        "calls_live": figures["calls_live"],
        "calls_cached": figures["calls_cached"],
        "peak_rss_mb": round(figures["rss_mb"], 1),
    }


def main() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "single.db")
        cases = {
            "lean": in_child("bench.single_call", "--child", "lean", str(Path(tmp) / "lean.db")),
            "sqlite": in_child("bench.single_call", "--child", "sqlite", db),
            "memory": in_child("bench.single_call", "--child", "memory", db),
            "cached": in_child("bench.single_call", "--child", "cached", db),
            "batch": in_child("bench.single_call", "--child", "batch", str(Path(tmp) / "b.db")),
        }
    figures = {name: _summary(f) for name, f in cases.items()}
    live = figures["sqlite"]["live_calls_per_s"]
    cached = figures["cached"]
    report = {
        "bench": "single_call",
        "ratio": round(live / figures["lean"]["live_calls_per_s"], 3),
        "goal": GOAL,
        "met": live >= GOAL_LIVE and cached["rows_per_s"] >= GOAL_CACHED,
        "rows": ROWS,
        "live_calls_per_s": live,
        "cached_rows_per_s": cached["rows_per_s"],
        "cached_calls_live": cached["calls_live"],
        **figures,
    }
    print(table(report), file=sys.stderr, flush=True)
    return report


def table(report: dict[str, Any]) -> str:
    lines = [f"single_call: {report['rows']:,} rows, one zero-latency local tool"]
    lines.append(f"{'':10} {'seconds':>8} {'rows/s':>9} {'live/s':>9} {'cached':>7} {'RSS MB':>7}")
    for name in ("sqlite", "memory", "cached", "batch", "lean"):
        f = report[name]
        lines.append(
            f"{name:10} {f['seconds']:8.2f} {f['rows_per_s']:9,} {f['live_calls_per_s']:9,} "
            f"{f['calls_cached']:7,} {f['peak_rss_mb']:7.1f}"
        )
    lines.append(
        f"Playline live calls/s on SQLite / the lean script's: {report['ratio']:.3f}   "
        f"goal met: {report['met']}"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3])
    else:
        print(orjson.dumps(main()).decode())
