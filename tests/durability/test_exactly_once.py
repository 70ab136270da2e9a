"""Issue 10, "nothing paid twice, even mid-batch": runs that hang, processes that share a
store, claims and rate gates, killed runs, submits in doubt and budget stops, against the
simulator (which counts every input charged twice) with runners in child processes.

The runners are the crash suite's (``bench/crash_child.py``); see ``crash_helpers``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import playline as pl
from playline.cli import app
from playline.sim import Simulator, serve
from playline.store import RunStatus, open_store, owner_alive

from crash_helpers import (
    credits,
    eventually,
    fast_tools,
    finish,
    go,
    kill,
    start,
    stop_leftover_runners,
    wait_until,
)


@pytest.fixture(scope="module")
def running_sim() -> Iterator[Simulator]:
    with serve(seed=7, latency_ms=0) as sim:
        yield sim


@pytest.fixture
def sim(running_sim: Simulator) -> Iterator[Simulator]:
    running_sim.reset()
    running_sim.faults(tools=fast_tools())
    yield running_sim
    stop_leftover_runners()  # a failed test's runners must not call the next test's simulator


def _charged_once(ledger: dict[str, Any]) -> None:
    """The provider charged no input twice, and answered no request twice (no input was
    sent again: neither replayed from its key nor refused as in progress)."""
    assert ledger["duplicate_charges"] == 0
    assert all(n == 1 for per in ledger["inputs"].values() for n in per.values())
    assert ledger["replayed"] == {} and ledger["replayed_items"] == {}
    assert ledger["conflicts"] == {}


# the follower of a settled call


_batch_calls: list[int] = []


@pl.tool("eo.double", batch=pl.Batch(max_size=10))
def double(inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    _batch_calls.append(len(inputs))
    return [{"v": 2 * i["v"]} for i in inputs]


@pl.play(name="eo-duplicates")
async def duplicates_play(ctx: pl.Context, input: dict[str, Any]) -> int:
    rows = [{"k": k, "v": k % input["distinct"]} for k in range(input["rows"])]
    ds = await (
        ctx.dataset("rows", rows, key="k")
        .with_column("d", lambda row, ctx: ctx.tool("eo.double", {"v": row["v"]}))
        .with_column("again", lambda row, ctx: ctx.tool("eo.double", {"v": row["d"].data["v"]}))
        .run()
    )
    return len(ds)


def test_duplicate_inputs_in_a_small_row_window_never_hang(tmp_path: Path) -> None:
    """A local batch tool of 10 whose inputs repeat across rows, with a row window smaller
    than a batch: a call whose key is already in flight follows it, and a follower must never
    attach to a call that has settled. 200 runs, each bounded by a timeout."""
    url = f"sqlite:///{tmp_path}/p.db"

    async def runs() -> None:
        for n in range(200):
            shape = {"rows": 20 + n % 17, "distinct": 1 + n % 7}
            store = url if n % 4 == 0 else "memory://"  # SQLite's awaits reorder the tasks
            try:
                result = await asyncio.wait_for(
                    pl.arun(
                        duplicates_play, shape, store=store, tools=[double], row_window=1 + n % 5
                    ),
                    timeout=30,
                )
            except TimeoutError:
                raise AssertionError(f"run {n} ({shape}, row_window {1 + n % 5}) hung") from None
            assert result.status == "completed", result.error
            assert result.output == shape["rows"]

    asyncio.run(runs())
    assert _batch_calls and max(_batch_calls) <= 10


# processes sharing one store


@pytest.mark.parametrize("processes", [2, 4])
def test_processes_on_one_store_all_finish_and_pay_each_input_once(
    sim: Simulator, tmp_path: Path, processes: int
) -> None:
    """The play of the issue (company, work_email waterfall, verification) run by several
    processes at once, each its own run, on one SQLite file: every process finishes, each
    distinct input is sent once, and the runs' ledgers add up to the provider's."""
    people = 200 if processes == 2 else 120
    url = f"sqlite:///{tmp_path}/p.db"
    runs = [f"run-{i}" for i in range(processes)]
    procs = [start(url, run, sim.url, "--wait-go", people=people) for run in runs]
    go(procs)
    results = [finish(proc, timeout=90) for proc in procs]
    for result in results:
        assert result["status"] == "completed", result["error"]
        assert result["stats"]["rows"] == people and result["stats"]["rows_failed"] == 0
    ledger = sim.ledger()
    _charged_once(ledger)
    assert credits(url, *runs) == pytest.approx(ledger["credits"])
    # every run has every row: what one process bought, the others read from its receipts
    store = open_store(url)
    values = [
        {r.key: r.values["work_email"] for r in store.iter_rows(run, "people")} for run in runs
    ]
    assert all(v == values[0] for v in values) and len(values[0]) == people


# claims and rate gates


def test_a_claim_is_made_after_the_rate_gate_so_no_second_process_sends_it(
    sim: Simulator, tmp_path: Path
) -> None:
    """Runner A waits on a slow rate gate (sim.email.gamma: 5/s published) for 16 calls, and
    its receipts' leases look 1.5 s long to runner B (A's clock is 58.5 s late). Were A to claim
    its calls before its gate, B would see them expire while A waits and send them too. A
    claims each call only as it is sent, so B waits for A's call or makes it itself, and no
    input is sent twice."""
    sim.faults(tools={"sim.email.gamma": {"rate_per_second": 1000, "publish_rate": False}})
    url = f"sqlite:///{tmp_path}/p.db"
    single = ("--play", "single", "--tool", "sim.email.gamma")
    a = start(url, "run-a", sim.url, *single, "--clock-skew", "58.5", "--wait-go", people=16)
    b = start(url, "run-b", sim.url, *single, "--wait-go", people=16)
    go([a])
    wait_until(
        lambda: sim.ledger()["calls"].get("sim.email.gamma", 0) >= 1, what="A's first call", proc=a
    )
    go([b])
    results = [finish(a), finish(b)]
    for result in results:
        assert result["status"] == "completed", result["error"]
    ledger = sim.ledger()
    # gamma fails 5% of requests before doing any work (retry-safe): those are sent again
    transient = ledger["errors"].get("sim.email.gamma", 0)
    assert ledger["calls"]["sim.email.gamma"] == 16 + transient
    _charged_once(ledger)
    assert credits(url, "run-a", "run-b") == pytest.approx(ledger["credits"]) == 2.0 * 16


# a killed run


def _hold_until_in_flight(sim: Simulator, tool: str, proc: Any) -> None:
    wait_until(
        lambda: sim.ledger()["inflight"].get(tool, 0) >= 1,
        what=f"a {tool} request held by the provider",
        proc=proc,
    )


def _release(sim: Simulator, tool: str) -> None:
    """Lift the hold and let the provider finish (and charge) what it held: requests finishing
    after the next test's reset would charge that test's ledger."""
    sim.faults(tools={tool: {"hold": None}})
    eventually(lambda: not sim.ledger()["inflight"].get(tool), f"{tool}'s held requests done")


def test_a_killed_run_is_interrupted_and_a_resume_takes_over_at_once(
    sim: Simulator, tmp_path: Path
) -> None:
    sim.faults(tools={"sim.email.alpha": {"hold": True}})
    url = f"sqlite:///{tmp_path}/p.db"
    runner = start(url, "run-killed", sim.url, "--play", "single", people=10)
    _hold_until_in_flight(sim, "sim.email.alpha", runner)
    kill(runner)

    # The record still says running, under a lease that has not run out: a reader tells the
    # run is interrupted from its holder, whose process is gone.
    store = open_store(url)
    record = store.get_run("run-killed")
    assert record is not None and record.status is RunStatus.RUNNING
    assert record.holder is not None and f"/{runner.pid}/" in record.holder
    assert not owner_alive(record.holder)
    assert record.lease_until is not None and record.lease_until > pl.SystemClock().now()
    # the calls it had sent are in doubt (claimed by the dead process), none completed
    receipts = store.receipt_stats()["sim.email.alpha"]
    assert receipts["running"] >= 1 and receipts["completed"] == 0

    _release(sim, "sim.email.alpha")  # the provider finishes (and charges) them
    resumed = finish(start(url, "run-killed", sim.url, "--play", "single", people=10))
    assert resumed["status"] == "completed", resumed["error"]  # not "held by another process"
    record = store.get_run("run-killed")
    assert record is not None and record.status is RunStatus.COMPLETED
    assert record.attempts == 2  # the resume's own attempt, the lease notwithstanding
    # the requests in doubt were sent again with their keys: answered, not charged again
    ledger = sim.ledger()
    assert ledger["duplicate_charges"] == 0
    assert ledger["replayed"].get("sim.email.alpha", 0) >= 1
    assert credits(url, "run-killed") == pytest.approx(ledger["credits"])
    stats = store.receipt_stats()["sim.email.alpha"]
    assert stats["completed"] == 10 and stats["running"] == stats["unknown"] == 0


def test_playline_runs_shows_a_killed_run_as_interrupted(sim: Simulator, tmp_path: Path) -> None:
    sim.faults(tools={"sim.email.alpha": {"hold": True}})
    url = f"sqlite:///{tmp_path}/p.db"
    runner = start(url, "run-killed", sim.url, "--play", "single", people=3)
    _hold_until_in_flight(sim, "sim.email.alpha", runner)
    kill(runner)
    _release(sim, "sim.email.alpha")
    result = CliRunner().invoke(app, ["runs", "--json", "--store", url])
    assert result.exit_code == 0, result.output
    runs = {doc["run_id"]: doc for doc in map(json.loads, result.output.splitlines())}
    assert runs["run-killed"]["status"] == "interrupted"


# paid calls in doubt


def test_a_submit_in_doubt_at_a_kill_is_sent_again_with_its_key_and_paid_once(
    sim: Simulator, tmp_path: Path
) -> None:
    """sim.phone.finder charges at submit and is not safe to retry. A runner killed while its
    submits are with the provider leaves them in doubt; the provider finishes (and charges)
    them; the resume sends them again with the same keys and is answered, not charged."""
    sim.faults(tools={"sim.phone.finder": {"hold": True}})
    url = f"sqlite:///{tmp_path}/p.db"
    phone = ("--play", "single", "--tool", "sim.phone.finder")
    runner = start(url, "run-phone", sim.url, *phone, people=8)
    _hold_until_in_flight(sim, "sim.phone.finder", runner)
    kill(runner)
    _release(sim, "sim.phone.finder")
    resumed = finish(start(url, "run-phone", sim.url, *phone, people=8))
    assert resumed["status"] == "completed", resumed["error"]
    ledger = sim.ledger()
    assert ledger["replayed"].get("sim.phone.finder", 0) >= 1
    assert ledger["duplicate_charges"] == 0
    assert all(n == 1 for n in ledger["inputs"]["sim.phone.finder"].values())
    assert credits(url, "run-phone") == pytest.approx(ledger["credits"])


# a budget stop with bulk batches in flight


def test_a_budget_stop_with_bulk_in_flight_then_a_resume_pays_each_input_once(
    sim: Simulator, tmp_path: Path
) -> None:
    """The issue's first report: a budget stop while bulk batches were in flight, then a
    resume with a higher cap. The provider answers with latency, so requests are in flight
    when the budget stops the run; they finish and are recorded before it ends."""
    sim.faults(latency_ms=20)
    url = f"sqlite:///{tmp_path}/p.db"
    first = finish(start(url, "run-budget", sim.url, "--max-credits", "250", people=200))
    assert first["status"] == "failed" and "Budget" in (first["error"] or ""), first["error"]
    after_stop = sim.ledger()
    assert 0 < after_stop["credits"] <= 250
    assert credits(url, "run-budget") == pytest.approx(after_stop["credits"])  # attempt by attempt

    again = finish(start(url, "run-budget", sim.url, "--max-credits", "1000", people=200))
    assert again["status"] == "completed", again["error"]
    ledger = sim.ledger()
    assert ledger["duplicate_charges"] == 0
    assert all(n == 1 for per in ledger["inputs"].values() for n in per.values())
    assert credits(url, "run-budget") == pytest.approx(ledger["credits"])
    store = open_store(url)
    rows = list(store.iter_rows("run-budget", "people"))
    assert len(rows) == 200 and all(r.status == "completed" for r in rows)
    assert all(s["running"] == s["unknown"] == 0 for s in store.receipt_stats().values())
