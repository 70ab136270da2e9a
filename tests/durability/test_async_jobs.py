"""Async tools keep their submitted job on the receipt: a resumed run polls, never resubmits.

The phone finder of the real simulator charges when a job is submitted. A child process
submits jobs and is killed while it waits to poll them; the resumed run polls the same jobs,
and the simulator's ledger shows each person charged once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

import playline as pl
from playline.sim import serve

from durability_helpers import query, wait_until

PLAY = """
import sys
import playline as pl

url, token, store, run_id, poll = sys.argv[1:6]
people = __import__("json").loads(sys.stdin.readline())


@pl.play(name="phones")
async def phones(ctx, input):
    return await (
        ctx.dataset("people", people, key="email")
        .with_column("phone", lambda row, ctx: ctx.tool("sim.phone.finder", {
            "first_name": row["first_name"], "last_name": row["last_name"],
            "domain": row["domain"]}))
        .run()
    )


gateway = pl.tools.Gateway(url, token=token, poll_interval=float(poll))
result = pl.run(phones, store=store, run_id=run_id, tools=[gateway])
print(result.status, result.stats.tool_calls_live)
"""

PEOPLE = 6


def _jobs_recorded(store_url: str) -> int:
    return len(query(store_url, "SELECT key FROM receipts WHERE job IS NOT NULL"))


def _people(url: str) -> list[dict[str, Any]]:
    body = httpx.get(f"{url}/__world/people", params={"limit": PEOPLE}).json()
    fields = ("first_name", "last_name", "domain", "email")
    return [{k: p[k] for k in fields} for p in body["people"]]


def test_a_killed_run_polls_its_submitted_jobs_instead_of_paying_again(
    tmp_path: Path, durable_store_url: str
) -> None:
    script = tmp_path / "phones.py"
    script.write_text(PLAY)
    store = durable_store_url
    with serve(seed=7, latency_ms=0) as sim:
        people = _people(sim.url)
        # The child polls once an hour: it submits every job, records it, then waits.
        child = subprocess.Popen(
            [sys.executable, str(script), sim.url, sim.token, store, "run-phones", "3600"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdin is not None
        child.stdin.write(json.dumps(people) + "\n")
        child.stdin.flush()
        wait_until(lambda: _jobs_recorded(store) == PEOPLE, what="every job recorded", proc=child)
        os.kill(child.pid, signal.SIGKILL)
        child.communicate()
        submitted = sim.ledger()

        gateway = pl.tools.Gateway(sim.url, token=sim.token, poll_interval=0.001)

        @pl.play(name="phones")
        async def phones(ctx: pl.Context, input: Any) -> Any:
            return await (
                ctx.dataset("people", people, key="email")
                .with_column(
                    "phone",
                    lambda row, ctx: ctx.tool(
                        "sim.phone.finder",
                        {k: row[k] for k in ("first_name", "last_name", "domain")},
                    ),
                )
                .run()
            )

        result = pl.run(phones, store=store, run_id="run-phones", tools=[gateway])
        ledger = sim.ledger()

    assert result.status == "completed", result.error
    assert submitted["calls"]["sim.phone.finder"] == PEOPLE
    assert ledger["calls"]["sim.phone.finder"] == PEOPLE  # no second submission
    assert ledger["duplicate_charges"] == 0
    assert ledger["charges"].get("sim.phone.finder", 0) == submitted["charges"].get(
        "sim.phone.finder", 0
    )
    phones_found = [row["phone"] for row in result.output]
    assert len(phones_found) == PEOPLE
    assert any(phones_found), "the seed should give at least one known phone among the people"
