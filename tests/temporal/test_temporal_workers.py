"""Two `playline worker --temporal` processes, one Temporal dev server, one PostgreSQL store, the
provider simulator: a worker killed mid-run (SIGKILL) or stopped (SIGTERM) loses nothing and
pays for nothing twice, and runs submitted together spread over the workers.

The simulator holds one provider's requests where they are worked (its ``hold`` fault), so a
run is stopped at a known point with calls in flight; its ledger is the judge of what was
paid and what was repeated.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from playline.backends import temporal
from playline.cli._load import load_play
from playline.sim import Simulator, serve
from playline.store import RunRecord, RunStatus, Store, open_store
from services import TemporalServer

from temporalhelp import task_queue, until

pytestmark = pytest.mark.anyio

PLAY = """
import playline as pl


def person(row):
    return {"first_name": row["first_name"], "last_name": row["last_name"],
            "domain": row["domain"]}


@pl.play(name="temporal-t3-people")
async def people(ctx, input):
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
        .run()
    )
"""

TOOLS = ("sim.company.enrich", "sim.email.alpha", "sim.email.beta", "sim.email.gamma",
         "sim.email.verify")  # fmt: skip
PLAYLINE = Path(sys.executable).with_name("playline")


class WorkerProcess:
    """`playline worker --temporal ... --json` in a process of its own."""

    def __init__(self, folder: Path, name: str, args: list[str]) -> None:
        self.log = folder / f"{name}.stderr"
        with self.log.open("wb") as err:
            self.proc = subprocess.Popen(
                [str(PLAYLINE), "worker", *args, "--json"],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env={**os.environ, "PLAYLINE_GATEWAY_TOKEN": "dev"},
            )
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        if not first:
            raise AssertionError(f"worker {name} did not start: {self.log.read_text()[-2000:]}")
        self.serving = json.loads(first)
        assert self.serving["status"] == "serving"
        self.identity: str = self.serving["worker"]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def lines(self, timeout: float = 60) -> tuple[int, list[dict[str, Any]]]:
        """Wait for it to exit; its exit code and its JSON lines."""
        out, _ = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, [json.loads(line) for line in out.splitlines() if line]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with serve(seed=7) as simulator:
        fast = {"rate_per_second": 2000, "burst": 2000}  # the test is about failures, not rates
        simulator.faults(tools=dict.fromkeys(TOOLS, fast))
        yield simulator


@pytest.fixture
def store(postgres_url: str) -> Iterator[Store]:
    db = open_store(postgres_url)
    yield db
    db.close()


@pytest.fixture
def workers(
    tmp_path: Path, temporal_server: TemporalServer, postgres_url: str, sim: Simulator
) -> Iterator[Any]:
    """Starts two workers on one fresh task queue; stops whatever is left of them after."""
    play = tmp_path / "people.py"
    play.write_text(PLAY, encoding="utf-8")
    queue = task_queue()
    started: list[WorkerProcess] = []

    def start(*extra: str) -> tuple[WorkerProcess, WorkerProcess, str, Path]:
        args = ["--temporal", temporal_server.target, "--task-queue", queue, "--store",
                postgres_url, "--gateway", sim.url, *extra, str(play)]  # fmt: skip
        for name in ("a", "b"):
            started.append(WorkerProcess(tmp_path, name, args))
        return started[-2], started[-1], queue, play

    yield start
    for worker in started:
        worker.stop()


def holder_of(store: Store, run_id: str, *procs: WorkerProcess) -> tuple[WorkerProcess, Any]:
    record = store.get_run(run_id)
    assert record is not None and record.holder is not None
    pid = int(record.holder.split("/")[1])
    (holder,) = [p for p in procs if p.pid == pid]
    (other,) = [p for p in procs if p.pid != pid]
    return holder, other


def attempts_by_worker(store: Store, run_id: str) -> list[str]:
    """The worker of each attempt, in order (the activity logs it in the run's events)."""
    return [
        (e.data or {})["temporal"]["worker"]
        for e in store.read_events(run_id, kinds=["log"])
        if "temporal" in (e.data or {})
    ]


def check_rows(store: Store, run_id: str, people: list[dict[str, Any]]) -> None:
    rows = list(store.iter_rows(run_id, "people"))
    assert len(rows) == len(people)
    failed = [(r.key, r.error, r.cells) for r in rows if r.status != "completed"]
    assert not failed, failed[:3]
    for row in rows:
        values = row.values
        assert "company" in values
        assert "work_email" in values
        assert (values.get("verification") is not None) == bool(values["work_email"])


def repeats(ledger: dict[str, Any]) -> int:
    """Requests and bulk items the simulator answered again from their idempotency keys."""
    return sum(ledger["replayed"].values()) + sum(ledger["replayed_items"].values())


def calls_in_flight(store: Store) -> int:
    """Calls claimed whose results are not recorded yet (sent, or about to be)."""
    return sum(per.get("running", 0) for per in store.receipt_stats().values())


async def submit(
    client: Client,
    store: Store,
    play: Path,
    queue: str,
    people: list[dict[str, Any]],
    *,
    heartbeat_timeout: float = 2.0,  # a dead worker is noticed 2 s after its last heartbeat
) -> str:
    loaded = load_play(str(play))
    return await temporal.start(
        loaded.play,
        {"people": people},
        temporal=client,
        store=store,
        task_queue=queue,
        heartbeat_timeout=heartbeat_timeout,
    )


async def run_until_held(
    client: Client, store: Store, sim: Simulator, workers: Any, people: list[dict[str, Any]]
) -> tuple[str, WorkerProcess, WorkerProcess]:
    """Two workers; a run of ``people`` stopped with alpha's requests held at the provider."""
    sim.faults(tools={"sim.email.alpha": {"hold": True}})
    a, b, queue, play = workers()
    run_id = await submit(client, store, play, queue, people)
    await until(
        lambda: sim.ledger()["inflight"].get("sim.email.alpha"),
        what="alpha's requests held at the provider",
    )
    holder, other = holder_of(store, run_id, a, b)
    return run_id, holder, other


async def test_a_killed_worker_loses_nothing_and_pays_for_nothing_twice(
    temporal_client: Client, store: Store, sim: Simulator, workers: Any
) -> None:
    people = sim.people(500)
    run_id, holder, other = await run_until_held(temporal_client, store, sim, workers, people)
    os.kill(holder.pid, signal.SIGKILL)
    holder.proc.communicate()
    assert holder.proc.returncode == -signal.SIGKILL
    in_flight = calls_in_flight(store)  # claimed, not yet recorded: what a resume may resend
    assert in_flight > 0
    sim.faults(tools={"sim.email.alpha": {"hold": None}})  # the held requests complete

    ended = await temporal_client.get_workflow_handle(run_id).result()
    assert ended["status"] == "completed"
    record = store.get_run(run_id)
    assert record is not None and record.status is RunStatus.COMPLETED
    check_rows(store, run_id, people)

    ledger = sim.ledger()
    assert ledger["duplicate_charges"] == 0
    # At most the calls in flight at the kill were sent again, and their keys made them free.
    assert repeats(ledger) <= in_flight
    # The killed worker's attempt was retried on the other one.
    assert attempts_by_worker(store, run_id) == [holder.identity, other.identity]


async def test_a_stopped_worker_hands_its_run_over_without_repeating_a_call(
    temporal_client: Client, store: Store, sim: Simulator, workers: Any
) -> None:
    people = sim.people(500)
    run_id, holder, other = await run_until_held(temporal_client, store, sim, workers, people)
    holder.proc.send_signal(signal.SIGTERM)
    sim.faults(tools={"sim.email.alpha": {"hold": None}})  # the calls in flight settle

    code, lines = holder.lines()
    assert code == 0
    (handed,) = [line for line in lines if line.get("kind") == "attempt"]
    assert handed["run_id"] == run_id and handed["waiting"]["stop"] == "yield"
    assert lines[-1] == {"kind": "worker", "status": "stopped"}

    ended = await temporal_client.get_workflow_handle(run_id).result()
    check_rows(store, run_id, people)  # (first: it says why a row failed)
    assert ended["status"] == "completed", ended
    ledger = sim.ledger()
    assert ledger["duplicate_charges"] == 0
    assert repeats(ledger) == 0  # nothing sent twice: every call in flight was recorded
    assert attempts_by_worker(store, run_id) == [holder.identity, other.identity]


async def test_runs_submitted_together_spread_over_the_workers(
    temporal_client: Client, store: Store, sim: Simulator, workers: Any
) -> None:
    """Twenty runs, two workers that take ten attempts each at most: with every run held at
    its first provider call (in flight, or waiting for room under the tool's cap on calls in
    flight, which the workers share through the store), each worker holds ten of them."""
    sim.faults(tools={"sim.company.enrich": {"hold": True}})
    a, b, queue, play = workers("--concurrency", "10")
    people = sim.people(200)
    # No worker dies here: a 2 s heartbeat timeout (which Temporal's SDK meets by sending
    # at most every 1.6 s) timed out a live attempt on a loaded machine, and its retry made
    # one worker's count 11.
    run_ids = [
        await submit(
            temporal_client,
            store,
            play,
            queue,
            people[10 * i : 10 * i + 10],
            heartbeat_timeout=30.0,
        )
        for i in range(20)
    ]
    await until(
        lambda: (
            len({w for r in run_ids for w in attempts_by_worker(store, r)}) == 2
            and all(len(attempts_by_worker(store, r)) == 1 for r in run_ids)
            and sim.ledger()["inflight"].get("sim.company.enrich.bulk", 0) > 0
        ),
        what="all twenty runs at their first call",
    )
    sim.faults(tools={"sim.company.enrich": {"hold": None}})
    for run_id in run_ids:
        ended = await temporal_client.get_workflow_handle(run_id).result()
        assert ended["status"] == "completed", ended
    records: list[RunRecord] = [r for r in map(store.get_run, run_ids) if r is not None]
    assert [r.status for r in records] == [RunStatus.COMPLETED] * 20
    by_worker = Counter(worker for r in run_ids for worker in attempts_by_worker(store, r))
    assert by_worker == {a.identity: 10, b.identity: 10}
    assert sim.ledger()["duplicate_charges"] == 0
