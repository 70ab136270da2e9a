"""packing: how many requests a bulk tool downstream of a waterfall gets.

1,000 people of the simulator through an email waterfall (``sim.email.beta`` in bulk, then
``sim.email.alpha``), then every email found through ``sim.email.verify`` (a bulk operation
of 200 inputs per request). The verifier's inputs trickle in as the waterfall's rows finish.

Two trials, each on a fresh in-memory store with the simulator reset:

- ``limited``: the verifier allows 5 requests a minute (ZeroBounce's batch validation). Goal:
  at most ``ceil(inputs / 200) + 1`` requests (each carries everything queued by the time its
  gate lets it out), where ``inputs`` is the verify calls made;
- ``free``: the verifier's own rate (50/s). Its wall time is the reference the issue of
  packing compares with ("within 1.05x of today's"); the requests it made are reported.

``ratio`` is the limited trial's requests over ``ceil(inputs / 200) + 1`` (goal <= 1).
``python -m bench packing``; smaller: ``BENCH_PACKING_PEOPLE``.
"""

from __future__ import annotations

import math
import os
from typing import Any

import playline as pl
from playline.sim import Simulator, serve

from ._measure import timed

PEOPLE = int(os.environ.get("BENCH_PACKING_PEOPLE", "1000"))
VERIFY, BULK = "sim.email.verify", 200
LIMITED = 5 / 60  # requests a second: 5 a minute

FIND_EMAIL = pl.Waterfall(
    "packing-email",
    output="email",
    steps=[pl.ToolStep("beta", "sim.email.beta"), pl.ToolStep("alpha", "sim.email.alpha")],
)


@pl.play(name="bench-packing")
async def packing(ctx: pl.Context, input: dict[str, Any]) -> int:
    ds = await (
        ctx.dataset("people", input["people"], key=["first_name", "last_name", "domain"])
        .with_column("email", lambda row, ctx: ctx.waterfall(FIND_EMAIL, dict(row)))
        .with_column(
            "check",
            lambda row, ctx: ctx.tool(VERIFY, {"email": row["email"]}),
            when=lambda row: bool(row["email"]),
        )
        .run()
    )
    return len(ds)


def trial(sim: Simulator, people: list[dict[str, Any]], rate: float | None) -> dict[str, Any]:
    sim.reset()
    if rate is not None:
        sim.faults(tools={VERIFY: {"rate_per_second": rate, "burst": 1}})
    gateway = pl.Gateway(sim.url, token=sim.token)
    wall, result = timed(
        lambda: pl.run(packing, {"people": people}, store="memory://", tools=[gateway])
    )
    assert result.status == "completed", result.error
    ledger = sim.ledger()
    inputs = result.stats.tools.get(VERIFY, {}).get("live", 0)
    requests = ledger["calls"].get(VERIFY, 0) + ledger["calls"].get(f"{VERIFY}.bulk", 0)
    return {
        "wall_s": round(wall, 3),
        "verify_inputs": inputs,
        "verify_requests": requests,
        "bound": math.ceil(inputs / BULK) + 1,
        "rejected_429": sum(ledger["rejected"].values()),
        "duplicate_charges": ledger["duplicate_charges"],
    }


def main() -> dict[str, Any]:
    with serve(seed=7) as sim:
        people = [
            {k: p[k] for k in ("first_name", "last_name", "domain")}
            for p in sim.people(limit=PEOPLE)
        ]
        limited = trial(sim, people, LIMITED)
        free = trial(sim, people, None)
    return {
        "bench": "packing",
        "ratio": round(limited["verify_requests"] / limited["bound"], 3),
        "goal": "with 5 verify requests a minute, at most ceil(inputs / 200) + 1 requests",
        "people": PEOPLE,
        "limited": limited,
        "free": free,
    }
