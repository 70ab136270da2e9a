"""Helpers of the issue-10 gateway tests: a simulator without real rate limits, the play the
issue was filed against, and waiting for an observable condition."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import playline as pl
from playline.sim import Simulator

from gwhelp import people_play, person_input

PROVIDERS = (
    "sim.email.alpha",
    "sim.email.beta",
    "sim.email.gamma",
    "sim.company.enrich",
    "sim.email.verify",
    "sim.phone.finder",
)
# Enforced limits out of the way, published rates unchanged: the gateway paces as usual.
UNPUBLISHED = {"rate_per_second": 1_000_000, "burst": 1_000_000, "publish_rate": False}


def fast(sim: Simulator, faults: dict[str, dict[str, Any]] | None = None) -> None:
    """Lift the simulator's rate limits (runs on a test clock pace in virtual time, so their
    requests go out back to back), then merge ``faults`` per tool."""
    tools: dict[str, Any] = {tool: dict(UNPUBLISHED) for tool in PROVIDERS}
    for tool, fault in (faults or {}).items():
        tools[tool] = {**tools.get(tool, {}), **fault}
    sim.faults(tools=tools)


def enrichment_play(name: str, people: list[dict[str, Any]]) -> pl.Play:
    """The play of issue 10: company (bulk), the work_email waterfall, verification (bulk)."""
    return people_play(
        name,
        people,
        [
            (
                "company",
                lambda row, ctx: ctx.tool("sim.company.enrich", {"domain": row["domain"]}),
                None,
            ),
            ("work_email", lambda row, ctx: ctx.waterfall("work_email", person_input(row)), None),
            (
                "verification",
                lambda row, ctx: ctx.tool("sim.email.verify", {"email": row["work_email"]}),
                lambda row: bool(row["work_email"]),
            ),
        ],
    )


def eventually(check: Callable[[], bool], what: str, within: float = 30.0) -> None:
    """Return once ``check()`` holds (an observable condition, polled); ``within`` seconds
    only bound a broken test."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.005)
