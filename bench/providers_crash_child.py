"""The runner ``bench/providers_crash.py`` kills: one attempt of the work-email play over the
real providers' doubles, in its own process.

``python -m bench.providers_crash_child --store URL --run-id ID --people N --scale K
--origin T0`` runs (or resumes) run ``ID`` and prints one JSON line when the attempt ends. The
keys and base URLs come from the environment (``HUNTER_API_KEY``, ``PLAYLINE_HUNTER_URL``...),
as a user's would. The engine runs on a clock ``K`` times faster than real time from ``T0``,
as the doubles do (``playline sim --time-scale``): every documented rate, window and poll
interval is kept, in a ``K``-th of the time.

Per person: a work email through ``pl.waterfalls.work_email`` (hunter, prospeo, leadmagic,
dropcontact: an async batch), each catch-all or unknown address checked with zerobounce;
then a zerobounce verification of the email found.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from typing import Any

import orjson

import playline as pl
from playline.sim._world import world_for

FINDERS = ["hunter", "prospeo", "leadmagic", "dropcontact"]
EXIT = {"completed": 0, "completed_with_errors": 0, "suspended": 3, "failed": 1}


class FastClock(pl.SystemClock):
    """Wall time running ``scale`` times faster from ``origin`` (as the doubles' clock)."""

    def __init__(self, scale: float, origin: float) -> None:
        self._scale = scale
        self._origin = origin

    def now(self) -> float:
        return self._origin + (time.time() - self._origin) * self._scale

    def monotonic(self) -> float:
        return self.now()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds) / self._scale)


def people(count: int) -> list[dict[str, Any]]:
    return [
        {"n": p.ordinal, "first_name": p.first_name, "last_name": p.last_name, "domain": p.domain}
        for p in world_for(7).people[:count]
    ]


WATERFALL = pl.waterfalls.work_email(FINDERS, verify="zerobounce", catch_all="verify")


@pl.play(name="providers-crash")
async def play(ctx: pl.Context, input: Any) -> Any:
    return await (
        ctx.dataset("people", input["people"], key="n")
        .with_column("email", lambda row, ctx: ctx.waterfall(WATERFALL, dict(row)))
        .with_column(
            "verification",
            lambda row, ctx: ctx.tool("zerobounce.validate", {"email": row["email"]}),
            when=lambda row: bool(row["email"]),
        )
        .run(description="Work email over four providers, then its verification")
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.providers_crash_child")
    parser.add_argument("--store", required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--people", type=int, default=1000)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--origin", type=float, required=True)
    parser.add_argument("--retry-in-doubt", action="store_true")
    args = parser.parse_args(argv)
    tools = [pl.providers.named(n).tools() for n in (*FINDERS, "zerobounce")]
    result = pl.run(
        play,
        {"people": people(args.people)},
        store=args.store,
        run_id=args.run_id,
        tools=tools,
        clock=FastClock(args.scale, args.origin),
        retry_in_doubt=args.retry_in_doubt,
    )
    doc = {"run_id": result.run_id, "status": result.status, "error": result.error,
           "stats": result.stats.to_dict(), "pid": os.getpid()}  # fmt: skip
    print(orjson.dumps(doc).decode(), flush=True)
    return EXIT[result.status]


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
