"""Runs and calls are held under leases their holder renews (one attempt at a time).

- two processes resuming the same run: one runs the attempt, the other says who holds it;
- an async job that outlives its receipt's lease is not taken over while its holder lives;
- a listener that raises does not change how the run ends.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import playline as pl
from playline.sim import serve
from playline.store import ReceiptStatus, RunStatus, open_store

from durability_helpers import query, wait_until

PLAY = """
import os, sys, time
from pathlib import Path
import playline as pl

HERE = Path(__file__).parent

@pl.tool("t.gated")
def gated(input):
    (HERE / "journal.log").open("a").write(f"{os.getpid()} {input['n']}\\n")
    while not (HERE / "go").exists():  # held until the test says go
        time.sleep(0.01)
    return {"n": input["n"]}

@pl.play(name="held-play")
async def held_play(ctx, input):
    await ctx.sleep(0)
    return (await ctx.tool("t.gated", {"n": 1})).data

if __name__ == "__main__":
    result = pl.run(held_play, store=sys.argv[1], run_id=sys.argv[2], tools=[gated])
    print(result.status, flush=True)
"""


def test_two_processes_resuming_one_run_one_runs_it_the_other_says_who_holds_it(
    tmp_path: Path, durable_store_url: str
) -> None:
    script = tmp_path / "held.py"
    script.write_text(PLAY)
    url = durable_store_url
    journal = tmp_path / "journal.log"
    first = subprocess.Popen(
        [sys.executable, str(script), url, "run-held"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(journal.exists, what="the first process inside its attempt", proc=first)

    # The second process resumes the same run while the first holds it: it refuses at once,
    # naming the holder, and runs nothing.
    second = subprocess.run(
        [sys.executable, str(script), url, "run-held"], capture_output=True, text=True, timeout=60
    )
    assert second.returncode != 0
    assert "RunHeld" in second.stderr and "is being run by another process" in second.stderr
    assert f"/{first.pid}/" in second.stderr  # who holds it: host/pid/attempt
    record = open_store(url).get_run("run-held")
    assert record is not None and record.status is RunStatus.RUNNING
    assert record.holder is not None and f"/{first.pid}/" in record.holder

    (tmp_path / "go").touch()
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert out.split() == ["completed"]
    assert journal.read_text().splitlines() == [f"{first.pid} 1"]  # executed once
    ended = open_store(url).get_run("run-held")
    assert ended is not None and ended.status is RunStatus.COMPLETED and ended.holder is None


def test_an_async_job_longer_than_its_lease_is_not_taken_over_while_its_holder_lives(
    durable_store_url: str,
) -> None:
    """A phone job polled every 0.4 s (done at the second poll) under a 0.3 s lease: without
    renewal a second run would take the call over as in doubt and send it again."""
    url = durable_store_url
    person = {"first_name": "Ada", "last_name": "Lovelace", "domain": "example.com"}

    @pl.play(name="lease-phone")
    async def phone(ctx: pl.Context, input: Any) -> Any:
        return (await ctx.tool("sim.phone.finder", person)).data

    async def both(gateway: pl.tools.Gateway) -> tuple[pl.RunResult, pl.RunResult]:
        first = asyncio.ensure_future(pl.arun(phone, store=url, tools=[gateway], lease=0.3))
        store = open_store(url)
        deadline = time.monotonic() + 30
        while not any(r.job for r in store.find_receipts(_receipt_keys(url)).values()):
            assert time.monotonic() < deadline and not first.done(), "the job was never saved"
            await asyncio.sleep(0.01)
        second = await pl.arun(phone, store=url, tools=[gateway], lease=0.3)
        return await first, second

    with serve(seed=7, latency_ms=0) as sim:
        gateway = pl.tools.Gateway(sim.url, token=sim.token, poll_interval=0.4)
        first, second = asyncio.run(both(gateway))
        ledger = sim.ledger()
    assert (first.status, second.status) == ("completed", "completed")
    assert second.stats.tool_calls_cached == 1 and second.stats.tool_calls_live == 0
    assert ledger["calls"]["sim.phone.finder"] == 1  # one submit: never sent again
    assert not ledger["replayed"].get("sim.phone.finder")


def _receipt_keys(url: str) -> list[str]:
    return [key for (key,) in query(url, "SELECT key FROM receipts")]


def test_a_listener_that_raises_does_not_change_how_the_run_ends(store_url: str) -> None:
    seen: list[str] = []

    def broken(event: pl.Event) -> None:
        seen.append(event.kind)
        raise RuntimeError("the display crashed")

    @pl.play(name="listened")
    async def listened(ctx: pl.Context, input: Any) -> Any:
        return await ctx.dataset("rows", [1, 2, 3]).with_column("y", lambda r: 2).run()

    store = open_store(store_url)
    result = pl.run(listened, store=store, tools=[], listeners=[broken])
    assert result.status == "completed", result.error
    assert len(result.output) == 3
    assert seen.count("rows") == 1  # it was still told every event (the rows: in one)
    logs = [e.preview or "" for e in store.read_events(result.run_id, kinds=["log"])]
    assert any("listener" in line and "RuntimeError" in line for line in logs)


def test_a_run_whose_process_died_is_taken_over_at_once(
    tmp_path: Path, durable_store_url: str
) -> None:
    """A running run whose holder's process is gone is not held: a resume takes it over."""
    script = tmp_path / "held.py"
    script.write_text(PLAY)
    url = durable_store_url
    journal = tmp_path / "journal.log"
    first = subprocess.Popen(
        [sys.executable, str(script), url, "run-died"], stdout=subprocess.PIPE, text=True
    )
    wait_until(journal.exists, what="the first process inside its attempt", proc=first)
    first.kill()
    first.wait()
    (tmp_path / "go").touch()
    second = subprocess.run(
        [sys.executable, str(script), url, "run-died"], capture_output=True, text=True, timeout=60
    )
    assert second.returncode == 0, second.stderr
    assert second.stdout.split() == ["completed"]
    receipts = open_store(url).find_receipts(_receipt_keys(url))
    assert {r.status for r in receipts.values()} == {ReceiptStatus.COMPLETED}
