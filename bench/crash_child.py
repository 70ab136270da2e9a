"""The runner the crash suite kills: one attempt of a people play, in its own process.

``python -m bench.crash_child --store URL --run-id ID --gateway URL [options]`` runs (or
resumes) run ``ID`` against a simulator and prints one JSON line when the attempt ends:
``{"run_id", "status", "error", "stats", "pid"}``. Exit codes: 0 completed (with or without
errors), 3 stopped (suspended), 1 failed (a budget stop too).

SIGTERM and SIGHUP end the attempt cleanly through ``pl.arun(stop=...)``: no new paid call
starts, the calls already sent finish and are recorded (the CLI has no signal handling of its
own yet). SIGKILL is what a crash looks like.

Plays (``--play``):

- ``people`` (default): per person, firmographics (``sim.company.enrich``, bulk), a work email
  through the shipped ``work_email`` waterfall (beta bulk, alpha, gamma + verify) and its
  deliverability (``sim.email.verify``, bulk): the play issue 10 was filed against.
- ``single``: per person, one call to ``--tool`` alone (default ``sim.email.alpha``; e.g.
  ``sim.phone.finder``, an async job paid at submit and not safe to retry).

The people are the first ``--people`` of the simulator's world (they become the run's input;
a resume ignores them). ``--wait-go`` prints ``ready`` once the gateway's tools are known and
waits for a line on stdin, so a parent can start several runners at the same moment.
``--clock-skew S`` runs the engine on a clock ``S`` seconds behind real time: the leases it
grants look ``S`` seconds shorter to every other process (a lease expiring early, on demand).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from typing import Any

import httpx
import orjson

import playline as pl

FIELDS = ("first_name", "last_name", "domain")
EXIT = {"completed": 0, "completed_with_errors": 0, "suspended": 3, "failed": 1}


def person(row: Any) -> dict[str, Any]:
    return {k: row[k] for k in FIELDS}


@pl.play(name="crash-people")
async def people_play(ctx: pl.Context, input: Any) -> Any:
    return await (
        ctx.dataset("people", input["people"], key="email")
        .with_column(
            "company", lambda row, ctx: ctx.tool("sim.company.enrich", {"domain": row["domain"]})
        )
        .with_column("work_email", lambda row, ctx: ctx.waterfall("work_email", person(row)))
        .with_column(
            "verification",
            lambda row, ctx: ctx.tool("sim.email.verify", {"email": row["work_email"]}),
            when=lambda row: bool(row["work_email"]),
        )
        .run(description="Company, work email, verification")
    )


def single_play(tool: str) -> pl.Play:
    """Per person, one call to ``tool`` (the play's name says which, so resumes match)."""

    async def play(ctx: pl.Context, input: Any) -> Any:
        return await (
            ctx.dataset("people", input["people"], key="email")
            .with_column("found", lambda row, ctx: ctx.tool(tool, person(row)))
            .run()
        )

    return pl.play(name=f"crash-single-{tool}")(play)


class SkewedClock(pl.SystemClock):
    """Real time, read ``skew`` seconds late: its leases end ``skew`` seconds early for others."""

    def __init__(self, skew: float) -> None:
        self._skew = skew

    def now(self) -> float:
        return time.time() - self._skew


def world_people(url: str, count: int, offset: int) -> list[dict[str, Any]]:
    response = httpx.get(
        f"{url}/__world/people", params={"limit": count, "offset": offset}, timeout=30
    )
    response.raise_for_status()
    people: list[dict[str, Any]] = response.json()["people"]
    return people


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.crash_child")
    parser.add_argument("--store", required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--gateway", required=True)
    parser.add_argument("--token", default="dev")
    parser.add_argument("--play", choices=("people", "single"), default="people")
    parser.add_argument("--tool", default="sim.email.alpha", help="the tool of --play single")
    parser.add_argument("--people", type=int, default=100)
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--max-credits", type=float, default=None)
    parser.add_argument("--timeout", type=float, default=30.0, help="the gateway's timeout")
    parser.add_argument("--clock-skew", type=float, default=0.0)
    parser.add_argument("--retry-in-doubt", action="store_true")
    parser.add_argument("--wait-go", action="store_true")
    return parser.parse_args(argv)


async def attempt(args: argparse.Namespace, gateway: pl.Gateway, input: Any) -> pl.RunResult:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(signum, stop.set)
    clock = SkewedClock(args.clock_skew) if args.clock_skew else None
    return await pl.arun(
        people_play if args.play == "people" else single_play(args.tool),
        input,
        store=args.store,
        run_id=args.run_id,
        tools=[gateway],
        max_credits=args.max_credits,
        retry_in_doubt=args.retry_in_doubt,
        clock=clock,
        stop=stop,
    )


def main(argv: list[str]) -> int:
    args = parse(argv)
    gateway = pl.Gateway(args.gateway, token=args.token, timeout=args.timeout)
    gateway.specs()  # an unreachable gateway fails here, before the run is recorded
    input = {"people": world_people(args.gateway, args.people, args.offset)}
    if args.wait_go:
        print("ready", flush=True)
        sys.stdin.readline()
    result = asyncio.run(attempt(args, gateway, input))
    doc = {
        "run_id": result.run_id,
        "status": result.status,
        "error": result.error,
        "stats": result.stats.to_dict(),
        "pid": os.getpid(),
    }
    print(orjson.dumps(doc).decode(), flush=True)
    return EXIT[result.status]


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
