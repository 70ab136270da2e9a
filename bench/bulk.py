"""bulk: 5,000 rows against sim.company.enrich (bulk operation of 100, 50 requests/s).

The simulator runs with its default latency. Reference in the same run: the bound the
provider sets, ceil(rows / 100) calls at 50/s plus one (bulk) call's latency, measured here
as the mean wall time of a few direct bulk requests of 100 items.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import httpx

import playline as pl
from playline.sim import Simulator, serve

from ._measure import timed

ROWS = int(os.environ.get("BENCH_ROWS_BULK", "5000"))
TOOL = "sim.company.enrich"
BATCH = 100
RATE = 50.0


@pl.play(name="bench-bulk")
async def bulk(ctx: pl.Context, input: dict[str, Any]) -> int:
    ds = await (
        ctx.dataset("companies", input["companies"], key="domain")
        .with_column("firmo", lambda row, ctx: ctx.tool(TOOL, {"domain": row["domain"]}))
        .run()
    )
    return len(ds)


def bulk_latency(sim: Simulator, companies: list[dict[str, Any]], samples: int = 5) -> float:
    """Mean seconds of one bulk request of ``BATCH`` items (ledger reset afterwards)."""
    items = [{"domain": c["domain"]} for c in companies[:BATCH]]
    with httpx.Client(base_url=sim.url, headers=sim.headers, timeout=30) as client:
        took = []
        for _ in range(samples):
            start = time.perf_counter()
            response = client.post(
                f"/api/v2/integrations/{TOOL}.bulk/execute", json={"payload": {"items": items}}
            )
            took.append(time.perf_counter() - start)
            assert response.status_code == 200, response.text
    sim.reset()
    return sum(took) / len(took)


def main() -> dict[str, Any]:
    with serve(seed=7) as sim:  # the simulator's default latency (20 ms, jittered)
        companies = sim.companies(ROWS)
        latency = bulk_latency(sim, companies)
        gateway = pl.tools.Gateway(sim.url, token=sim.token)
        gateway.specs()
        wall, result = timed(
            lambda: pl.run(bulk, {"companies": companies}, store="memory://", tools=[gateway])
        )
        assert result.status == "completed", result.error
        ledger = sim.ledger()
    calls = math.ceil(ROWS / BATCH)
    bound = calls / RATE + latency
    made = sum(ledger["calls"].values())
    return {
        "bench": "bulk",
        "ratio": round(wall / bound, 3),
        "goal": "wall <= 1.5x the bound; calls made = 50",
        "rows": ROWS,
        "wall_s": round(wall, 3),
        "bound_s": round(bound, 3),
        "bulk_latency_s": round(latency, 4),
        "calls_made": made,
        "calls_expected": calls,
        "calls_by_operation": ledger["calls"],
        "rejected_429": sum(ledger["rejected"].values()),
        "credits": ledger["credits"],
        "client_credits": result.stats.credits,
    }
