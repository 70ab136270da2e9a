"""bookkeeping: 100,000 rows, one zero-latency local tool; durable store vs in-memory.

Measures what Playline itself costs per call: receipts, batching, rows, events, ledger.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import playline as pl

from ._measure import timed

ROWS = int(os.environ.get("BENCH_ROWS", "100000"))


@pl.tool("bench.echo", batch=pl.Batch(max_size=500), cost=pl.Cost(0))
def echo(inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"n": i["n"]} for i in inputs]


@pl.play(name="bench-bookkeeping")
async def bookkeeping(ctx: pl.Context, input: dict[str, Any]) -> int:
    ds = await (
        ctx.dataset("rows", ({"n": i, "salt": input["salt"]} for i in range(input["rows"])))
        .with_column(
            "echo", lambda row, ctx: ctx.tool("bench.echo", {"n": row["n"], "s": row["salt"]})
        )
        .run()
    )
    return len(ds)


def _run(store: str, salt: str) -> tuple[float, pl.RunResult]:
    return timed(
        lambda: pl.run(bookkeeping, {"rows": ROWS, "salt": salt}, store=store, tools=[echo])
    )


def main() -> dict[str, Any]:
    memory_s, memory = _run("memory://", "m")
    figures: dict[str, Any] = {
        "rows": ROWS,
        "memory_s": round(memory_s, 3),
        "memory_calls_per_s": round(memory.stats.tool_calls_live / memory_s),
    }
    try:
        with tempfile.TemporaryDirectory() as tmp:
            durable_s, durable = _run(f"sqlite:///{tmp}/bench.db", "d")
    except pl.StoreError as exc:  # SQLite store not built yet
        return {
            "bench": "bookkeeping",
            "ratio": None,
            "goal": "<= 1.5",
            "note": str(exc),
            **figures,
        }
    assert durable.status == "completed", durable.error
    return {
        "bench": "bookkeeping",
        "ratio": round(durable_s / memory_s, 3),
        "goal": "durable/in-memory <= 1.5; >= 20,000 live calls/s durable",
        "durable_s": round(durable_s, 3),
        "durable_calls_per_s": round(durable.stats.tool_calls_live / durable_s),
        **figures,
    }
