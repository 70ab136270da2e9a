"""The Playline program: the shipped ``work_email`` waterfall in one column of a play.

Beta, alpha, then gamma with its verification rule, as ``src/playline/waterfalls/simulated.py``
defines them; the gateway's metadata gives Playline each provider's rate, concurrency and bulk
operation. Receipts live in a SQLite store in ``--state``, so a second run with the same state
answers from them.

    python bench/peers/playline_job.py --url URL --token TOKEN --people people.json --state DIR

prints one JSON line: ``{"wall_s": ..., "found": [email or null, ...]}`` (input order).
Runs with the project's interpreter and only the public API (``import playline as pl``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import playline as pl

FIELDS = ("first_name", "last_name", "domain")


async def find(row: Any, ctx: pl.Context) -> Any:
    return await ctx.waterfall("work_email", {name: row[name] for name in FIELDS})


@pl.play(name="bench-peers-work-email")
async def work_email(ctx: pl.Context, input: dict[str, Any]) -> dict[str, Any]:
    ds = await ctx.dataset("people", input["people"], key="email").with_column("found", find).run()
    return {row["email"]: row["found"] for row in ds}


def main(url: str, token: str, people: list[dict[str, Any]], state: str) -> list[str | None]:
    result = pl.run(
        work_email,
        {"people": people},
        store=f"sqlite:///{os.path.join(state, 'playline.db')}",
        tools=[pl.tools.Gateway(url, token=token)],
    )
    if not result.ok:
        raise SystemExit(f"the play ended {result.status}: {result.error}")
    found: dict[str, Any] = result.output
    return [found.get(p["email"]) for p in people]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--people", required=True, help="JSON file: a list of people")
    parser.add_argument("--state", required=True, help="folder for the SQLite store")
    args = parser.parse_args()
    with open(args.people, encoding="utf-8") as f:
        people = json.load(f)
    start = time.perf_counter()
    found = main(args.url, args.token, people, args.state)
    print(json.dumps({"wall_s": time.perf_counter() - start, "found": found}))
