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
  transactions;
- ``lean_claimed``: ``lean`` with the claim exactly-once needs: each chunk's receipts inserted
  as claims and committed before the tool is called, then completed (an update);
- ``lean_cached``: the cached reference, the lean loop again on its own file, every receipt
  present: per chunk the keys, one ``SELECT ... IN`` for their receipts, each result decoded,
  the rows inserted.

ratio = Playline's live calls/s on SQLite / the lean script's (``claimed_ratio``: / the lean
script's with claims); ``cached_ratio`` = the cached
re-run's rows/s / the lean cached loop's. The goals (issue 43): live at least 0.6x lean,
cached at least 0.8x lean cached and 50,000 rows/s, batch at least 25,000 calls/s.
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
GOAL = (
    "live >= 0.6x lean; cached re-run >= 0.8x lean cached and >= 50,000 rows/s; "
    "batch >= 25,000 calls/s"
)
GOAL_LIVE_RATIO = 0.6
GOAL_CACHED_RATIO = 0.8
GOAL_CACHED = 50_000
GOAL_BATCH = 25_000
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


def _receipt_key(payload: dict[str, Any]) -> str:
    return hashlib.sha256(
        orjson.dumps({"tool": "bench.one", "input": payload}, option=orjson.OPT_SORT_KEYS)
    ).hexdigest()


def lean_case(db: str, mode: str = "lean") -> dict[str, Any]:
    """The same bookkeeping by hand: receipt key, receipt and row, chunked transactions.

    ``mode`` ``lean``: each receipt inserted completed, with its row. ``lean_claimed``: each
    chunk's receipts first inserted as claims and committed, then the tool called, then the
    receipts completed (an update) with the rows: the claim before the call that exactly-once
    needs, which ``lean`` leaves out. ``lean_cached``: the receipts are in ``db`` already (a
    ``lean`` run made them); each chunk's are read with one query and decoded, and the rows
    written to a table of their own."""
    cached = mode == "lean_cached"

    def keyed(start: int, stop: int) -> list[tuple[dict[str, Any], str]]:
        return [({"n": i}, _receipt_key({"n": i})) for i in range(start, stop)]

    def live(conn: sqlite3.Connection, start: int, stop: int) -> None:
        chunk = keyed(start, stop)
        if mode == "lean_claimed":
            with conn:
                conn.executemany(
                    "INSERT INTO receipts VALUES (?, 'bench.one', 'running', NULL)",
                    [(key,) for _, key in chunk],
                )
        receipts, rows = [], []
        for row, key in chunk:
            result = one(dict(row))
            receipts.append((key, "bench.one", "completed", orjson.dumps(result)))
            rows.append((row["n"], key, orjson.dumps({**row, "out": result})))
        with conn:
            if mode == "lean_claimed":
                conn.executemany(
                    "UPDATE receipts SET status = 'completed', result = ? WHERE key = ?",
                    [(result, key) for key, _, _, result in receipts],
                )
            else:
                conn.executemany("INSERT INTO receipts VALUES (?, ?, ?, ?)", receipts)
            conn.executemany("INSERT INTO rows VALUES (?, ?, ?)", rows)

    def answered(conn: sqlite3.Connection, start: int, stop: int) -> None:
        chunk = keyed(start, stop)
        marks = ",".join("?" * len(chunk))
        found = dict(
            conn.execute(
                f"SELECT key, result FROM receipts WHERE status = 'completed' AND key IN ({marks})",
                [key for _, key in chunk],
            ).fetchall()
        )
        rows = [
            (row["n"], key, orjson.dumps({**row, "out": orjson.loads(found[key])}))
            for row, key in chunk
        ]
        with conn:
            conn.executemany("INSERT INTO rerun VALUES (?, ?, ?)", rows)

    def go() -> int:
        conn = sqlite3.connect(db)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            rows_table = "rerun" if cached else "rows"
            if not cached:
                conn.execute(
                    "CREATE TABLE receipts "
                    "(key TEXT PRIMARY KEY, tool TEXT NOT NULL, status TEXT NOT NULL, result BLOB)"
                )
            conn.execute(
                f"CREATE TABLE {rows_table} "
                '(idx INTEGER PRIMARY KEY, key TEXT NOT NULL, "values" BLOB)'
            )
            for start in range(0, ROWS, _CHUNK):
                (answered if cached else live)(conn, start, min(ROWS, start + _CHUNK))
            (count,) = conn.execute(f"SELECT count(*) FROM {rows_table}").fetchone()
            return int(count)
        finally:
            conn.close()

    seconds, count = timed(go)
    return {
        "seconds": seconds,
        "rows": count,
        "calls_live": 0 if cached else count,
        "calls_cached": count if cached else 0,
    }


def child(case: str, db: str) -> None:
    figures = lean_case(db, case) if case.startswith("lean") else playline_case(case, db)
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
        db, lean = str(Path(tmp) / "single.db"), str(Path(tmp) / "lean.db")
        cases = {
            "lean": in_child("bench.single_call", "--child", "lean", lean),
            "lean_cached": in_child("bench.single_call", "--child", "lean_cached", lean),
            "lean_claimed": in_child(
                "bench.single_call", "--child", "lean_claimed", str(Path(tmp) / "claimed.db")
            ),
            "sqlite": in_child("bench.single_call", "--child", "sqlite", db),
            "memory": in_child("bench.single_call", "--child", "memory", db),
            "cached": in_child("bench.single_call", "--child", "cached", db),
            "batch": in_child("bench.single_call", "--child", "batch", str(Path(tmp) / "b.db")),
        }
    figures = {name: _summary(f) for name, f in cases.items()}
    live = figures["sqlite"]["live_calls_per_s"]
    cached = figures["cached"]["rows_per_s"]
    ratio = live / figures["lean"]["live_calls_per_s"]
    claimed_ratio = live / figures["lean_claimed"]["live_calls_per_s"]
    cached_ratio = cached / figures["lean_cached"]["rows_per_s"]
    batch = figures["batch"]["live_calls_per_s"]
    report = {
        "bench": "single_call",
        "ratio": round(ratio, 3),
        "cached_ratio": round(cached_ratio, 3),
        "claimed_ratio": round(claimed_ratio, 3),
        "goal": GOAL,
        "met": ratio >= GOAL_LIVE_RATIO
        and cached_ratio >= GOAL_CACHED_RATIO
        and cached >= GOAL_CACHED
        and batch >= GOAL_BATCH,
        "rows": ROWS,
        "live_calls_per_s": live,
        "cached_rows_per_s": cached,
        "batch_calls_per_s": batch,
        "cached_calls_live": figures["cached"]["calls_live"],
        **figures,
    }
    print(table(report), file=sys.stderr, flush=True)
    return report


def table(report: dict[str, Any]) -> str:
    lines = [f"single_call: {report['rows']:,} rows, one zero-latency local tool"]
    lines.append(f"{'':12} {'seconds':>8} {'rows/s':>9} {'live/s':>9} {'cached':>7} {'RSS MB':>7}")
    for name in ("sqlite", "memory", "cached", "batch", "lean", "lean_claimed", "lean_cached"):
        f = report[name]
        lines.append(
            f"{name:12} {f['seconds']:8.2f} {f['rows_per_s']:9,} {f['live_calls_per_s']:9,} "
            f"{f['calls_cached']:7,} {f['peak_rss_mb']:7.1f}"
        )
    lines.append(
        f"live / lean: {report['ratio']:.3f} (goal 0.6; / lean with claims: "
        f"{report['claimed_ratio']:.3f})   cached / lean cached: {report['cached_ratio']:.3f} "
        f"(goal 0.8)   goals met: {report['met']}"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3])
    else:
        print(orjson.dumps(main()).decode())
