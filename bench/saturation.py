"""saturation: 2,000 rows through one tool limited to R requests/s by the simulator.

The limit of ``sim.email.alpha`` is raised to R (burst R) with a ``/__faults`` rate override,
which the gateway's metadata does not reflect. Case ``declared``: the client is told the limit
(the tool's spec carries rate R); case ``learned``: the spec has no rate and the client must
find it from 429s. Reference in the same run: the limit itself, rows / R seconds.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import playline as pl
from playline.sim import Simulator, serve

from ._measure import timed

ROWS = int(os.environ.get("BENCH_ROWS_SAT", "2000"))
R = float(os.environ.get("BENCH_SAT_RATE", "200"))
TOOL = "sim.email.alpha"
PERSON = ("first_name", "last_name", "domain")


@pl.play(name="bench-saturation", limits=pl.Limits(retries=None))
async def saturation(ctx: pl.Context, input: dict[str, Any]) -> int:
    ds = await (
        ctx.dataset("people", input["people"], key="email")
        .with_column("email_found", lambda row, ctx: ctx.tool(TOOL, {k: row[k] for k in PERSON}))
        .run()
    )
    return len(ds)


def tool_spec(sim: Simulator, declared: bool) -> pl.ToolSpec:
    """The gateway's spec of the tool (its metadata says 20/s) with the rate replaced: R, or
    none at all; the concurrency stays the metadata's."""
    spec = next(s for s in pl.tools.Gateway(sim.url, token=sim.token).specs() if s.id == TOOL)
    concurrency = spec.rate.concurrency
    rate = (
        pl.Rate(per_second=R, burst=int(R), concurrency=concurrency)
        if declared
        else pl.Rate(concurrency=concurrency)
    )
    return dataclasses.replace(spec, rate=rate)


def run_case(sim: Simulator, people: list[dict[str, Any]], declared: bool) -> dict[str, Any]:
    sim.reset()
    sim.faults(tools={TOOL: {"rate_per_second": R, "burst": int(R)}})
    spec = tool_spec(sim, declared)
    wall, result = timed(
        lambda: pl.run(saturation, {"people": people}, store="memory://", tools=[spec])
    )
    assert result.status == "completed", result.error
    ledger = sim.ledger()
    accepted = ledger["calls"].get(TOOL, 0)
    rejected = ledger["rejected"].get(TOOL, 0)
    reference = len(people) / R
    return {
        "ratio": round(reference / wall, 3),
        "wall_s": round(wall, 3),
        "reference_s": round(reference, 3),
        "requests": accepted + rejected,
        "accepted": accepted,
        "rejected_429": rejected,
        "rejected_share": round(rejected / max(1, accepted + rejected), 4),
        "duplicate_charges": ledger["duplicate_charges"],
    }


def main() -> dict[str, Any]:
    with serve(seed=7) as sim:  # the simulator's default latency (20 ms, jittered)
        people = sim.people(ROWS)
        declared = run_case(sim, people, declared=True)
        learned = run_case(sim, people, declared=False)
    return {
        "bench": "saturation",
        "ratio": min(declared["ratio"], learned["ratio"]),
        "goal": ">= 0.90 of R sustained; 0 429s declared, <= 1% learned",
        "rows": ROWS,
        "rate_per_second": R,
        "declared": declared,
        "learned": learned,
    }
