"""waterfall_coverage: the shipped ``work_email`` waterfall against each email finder alone.

2,000 people of the simulated world (``/__world/people?limit=2000``, seed 7). Each provider
alone is called for every person; then the waterfall runs on a fresh store (no receipts from
the single-provider runs). A hit counts only when the email is the person's true one.

Goal: the waterfall finds more emails than the best single provider, for fewer credits than
calling all three for every row. ``python -m bench.waterfall_coverage`` prints a table and a
JSON line. Rate limits are lifted in the simulator and the runs use a ManualClock, so the
figures are about coverage and credits, not speed.
"""

from __future__ import annotations

import sys
from typing import Any

import httpx
import orjson

import playline as pl
from playline.sim import serve

PEOPLE = 2000
PROVIDERS = ("sim.email.alpha", "sim.email.beta", "sim.email.gamma")
FIELDS = ("first_name", "last_name", "domain")
_UNLIMITED = {"rate_per_second": 1_000_000, "burst": 1_000_000}


def _people(url: str, headers: dict[str, str]) -> list[dict[str, Any]]:
    response = httpx.get(f"{url}/__world/people", params={"limit": PEOPLE}, headers=headers)
    response.raise_for_status()
    people: list[dict[str, Any]] = response.json()["people"]
    return people


def _finder_play(tool: str | None, people: list[dict[str, Any]]) -> Any:
    """A play finding every person's email with ``tool`` alone, or with the waterfall (None)."""

    async def find(row: Any, ctx: pl.Context) -> Any:
        person = {k: row[k] for k in FIELDS}
        if tool is None:
            return await ctx.waterfall("work_email", person)
        return (await ctx.tool(tool, person)).get("email")

    async def play(ctx: pl.Context, input: Any) -> Any:
        ds = await ctx.dataset("people", people, key="email").with_column("found", find).run()
        stats = ctx.waterfall_stats()
        return {
            "found": [row["found"] for row in ds],
            "steps": stats["work_email"].to_dict()["steps"] if stats else None,
        }

    return play


def _measure(sim: Any, tool: str | None, people: list[dict[str, Any]]) -> dict[str, Any]:
    sim.reset()
    sim.faults(tools={t: _UNLIMITED for t in (*PROVIDERS, "sim.email.verify")})
    result = pl.run(
        _finder_play(tool, people),
        store="memory://",
        tools=[pl.tools.Gateway(sim.url, token=sim.token)],
        clock=pl.ManualClock(),
    )
    assert result.status == "completed", result.error
    found = result.output["found"]
    answered = sum(1 for f in found if f)
    correct = sum(1 for f, p in zip(found, people, strict=True) if f == p["email"])
    credits = result.stats.credits
    ledger = sim.ledger()
    return {
        "name": tool or "waterfall work_email",
        "found": correct,
        "wrong": answered - correct,
        "coverage": round(correct / len(people), 4),
        "credits": credits,
        "simulator_credits": ledger["credits"],
        "credits_per_hit": round(credits / correct, 3) if correct else None,
        "requests": result.stats.tool_requests,
        **({"steps": result.output["steps"]} if result.output["steps"] else {}),
    }


def main() -> dict[str, Any]:
    with serve(seed=7, latency_ms=0) as sim:
        people = _people(sim.url, sim.headers)
        singles = [_measure(sim, tool, people) for tool in PROVIDERS]
        waterfall = _measure(sim, None, people)
    best = max(singles, key=lambda s: s["found"])
    all_three = round(sum(s["credits"] for s in singles), 6)
    return {
        "bench": "waterfall_coverage",
        # emails found by the waterfall per email found by the best single provider
        "ratio": round(waterfall["found"] / best["found"], 3) if best["found"] else None,
        "people": len(people),
        "goal": "more emails than the best provider, fewer credits than all three per row",
        "met": waterfall["found"] > best["found"] and waterfall["credits"] < all_three,
        "providers": singles,
        "waterfall": waterfall,
        "best_single": best["name"],
        "all_three_credits": all_three,
    }


def _table(report: dict[str, Any]) -> str:
    lines = [f"{'':24} {'found':>6} {'wrong':>6} {'coverage':>9} {'credits':>9} {'cr/hit':>7}"]
    for row in [*report["providers"], report["waterfall"]]:
        lines.append(
            f"{row['name']:24} {row['found']:6d} {row['wrong']:6d} {row['coverage']:9.1%} "
            f"{row['credits']:9.1f} {row['credits_per_hit'] or 0:7.3f}"
        )
    lines.append(f"{'all three, every row':24} {'':24} {report['all_three_credits']:9.1f}")
    lines.append("waterfall steps: attempts, hits, credits, credits per hit")
    for step in report["waterfall"]["steps"]:
        per_hit = step["credits_per_hit"]
        lines.append(
            f"  {step['id']:8} {step['attempts']:6d} {step['hits']:6d} {step['credits']:9.1f} "
            f"{per_hit if per_hit is not None else float('nan'):7.3f}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    report = main()
    print(_table(report), file=sys.stderr)
    print(orjson.dumps(report).decode())
