"""temporal: one 2,000-row enrichment run embedded, and on Temporal with one and two workers.

The play is the demo's: per simulated person the company (``sim.company.enrich``, bulk), a
work email through the shipped ``work_email`` waterfall (beta, alpha, gamma) and its
verification (``sim.email.verify``, bulk), against the simulator at its documented rate limits
(``BENCH_TEMPORAL_RATE_SCALE`` multiplies them). Each configuration gets a fresh PostgreSQL
database and a reset simulator, so each pays for its calls.

Reference in the same run: the embedded engine (``pl.arun`` in this process). Goal: the run
on Temporal with one worker within 1.2x of it. Also printed:

- ``provider_floor_s``: the slowest provider's requests divided by its rate limit, a lower
  bound on any run's wall time however many machines share the work;
- the CPU seconds the engine used (the worker's, or this process's when embedded; the
  simulator runs in a process of its own): what a second worker could take off it;
- the two-worker run: one run's rows stay in one attempt, so its wall time is the same;
- ``overhead_per_attempt_ms``: Temporal's own cost per attempt (a workflow start, an activity,
  the result), from ``ATTEMPTS`` plays that return at once, run one after the other both ways.

Servers: a throwaway PostgreSQL cluster and a Temporal dev server, started the way the test
suite starts them (tests/services.py), and the simulator (``playline.sim.spawn``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

import playline as pl
from playline.backends import temporal
from playline.cli._load import load_play
from playline.sim import SimProcess, spawn

ROWS = int(os.environ.get("BENCH_TEMPORAL_ROWS", "2000"))
ATTEMPTS = int(os.environ.get("BENCH_TEMPORAL_ATTEMPTS", "30"))
RATE_SCALE = float(os.environ.get("BENCH_TEMPORAL_RATE_SCALE", "1"))
GOAL = 1.2
RATES = {  # the simulator's documented limits (requests/s), scaled below
    "sim.email.alpha": 20,
    "sim.email.beta": 10,
    "sim.email.gamma": 5,
    "sim.company.enrich": 50,
    "sim.email.verify": 50,
}
BASES = {"sim.email.beta.bulk": "sim.email.beta", "sim.company.enrich.bulk": "sim.company.enrich",
         "sim.email.verify.bulk": "sim.email.verify"}  # fmt: skip

PLAY = """
import playline as pl


def person(row):
    return {"first_name": row["first_name"], "last_name": row["last_name"],
            "domain": row["domain"]}


@pl.play(name="bench-temporal-people")
async def people(ctx, input):
    ds = await (
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
    return len(ds)


@pl.play(name="bench-temporal-nothing")
async def nothing(ctx, input):
    return input
"""


@contextlib.contextmanager
def _servers() -> Iterator[tuple[Any, Any]]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from services import run_postgres, run_temporal_dev_server, temporal_binaries

    with run_postgres() as postgres, run_temporal_dev_server(temporal_binaries()) as server:
        yield postgres, server


class _Workers:
    """``n`` `playline worker --temporal` processes on one task queue; their CPU time."""

    def __init__(self, n: int, *, target: str, queue: str, store: str, sim: SimProcess,
                 play: Path, folder: Path) -> None:  # fmt: skip
        self.procs: list[subprocess.Popen[str]] = []
        args = ["--temporal", target, "--task-queue", queue, "--store", store,
                "--gateway", sim.url, "--json", str(play)]  # fmt: skip
        env = {**os.environ, "PLAYLINE_GATEWAY_TOKEN": sim.token}
        playline = Path(sys.executable).with_name("playline")
        for i in range(n):
            with (folder / f"worker-{queue}-{i}.stderr").open("wb") as err:
                proc = subprocess.Popen([str(playline), "worker", *args], stdout=subprocess.PIPE,
                                        stderr=err, text=True, env=env)  # fmt: skip
            assert proc.stdout is not None and json.loads(proc.stdout.readline())
            self.procs.append(proc)

    def cpu_s(self) -> list[float]:
        return [sum(psutil.Process(p.pid).cpu_times()[:2]) for p in self.procs]

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            proc.communicate(timeout=60)


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _floor_s(ledger: dict[str, Any]) -> float:
    """The slowest provider's requests over its (scaled) rate limit."""
    per_base: dict[str, int] = {}
    for tool, calls in ledger["calls"].items():
        base = BASES.get(tool, tool)
        per_base[base] = per_base.get(base, 0) + calls
    return max(calls / (RATES[base] * RATE_SCALE) for base, calls in per_base.items())


async def _embedded(play: pl.Play, input: Any, store: str, sim: SimProcess) -> dict[str, Any]:
    gateway = pl.Gateway(sim.url, token=sim.token)
    cpu, start = _cpu_self(), time.perf_counter()
    result = await pl.arun(play, input, store=store, tools=[gateway], stall_after=None)
    wall = time.perf_counter() - start
    assert result.status == "completed", result.error
    return {"wall_s": wall, "cpu_s": _cpu_self() - cpu, "result": result}


async def _on_temporal(
    play: pl.Play, input: Any, *, client: Any, store: str, queue: str, workers: _Workers
) -> dict[str, Any]:
    cpu, start = workers.cpu_s(), time.perf_counter()
    run_id = await temporal.start(play, input, temporal=client, store=store, task_queue=queue)
    ended = await client.get_workflow_handle(run_id).result()
    wall = time.perf_counter() - start
    assert ended["status"] == "completed", ended
    used = [after - before for before, after in zip(cpu, workers.cpu_s(), strict=True)]
    return {"wall_s": wall, "cpu_s": used, "attempts": ended["attempts"]}


async def _measure(postgres: Any, server: Any, sim: SimProcess, folder: Path) -> dict[str, Any]:
    from temporalio.client import Client

    play_file = folder / "people.py"
    play_file.write_text(PLAY, encoding="utf-8")
    people_play = load_play(f"{play_file}:people").play
    nothing_play = load_play(f"{play_file}:nothing").play
    people = {"people": sim.people(ROWS)}
    client = await Client.connect(server.target, namespace=server.namespace)
    figures: dict[str, Any] = {}

    def fresh() -> str:
        sim.reset()
        sim.faults(tools={t: {"rate_per_second": r * RATE_SCALE,
                              "burst": max(1, round(r * RATE_SCALE))}
                          for t, r in RATES.items()})  # fmt: skip
        url: str = postgres.new_database()
        return url

    url = fresh()
    figures["embedded"] = await _embedded(people_play, people, url, sim)
    figures["floor_s"] = _floor_s(sim.ledger())
    for n in (1, 2):
        url = fresh()
        queue = f"bench-{n}-{os.getpid()}"
        workers = _Workers(n, target=server.target, queue=queue, store=url, sim=sim,
                           play=play_file, folder=folder)  # fmt: skip
        try:
            figures[f"temporal_{n}"] = await _on_temporal(
                people_play, people, client=client, store=url, queue=queue, workers=workers
            )
            if n == 1:  # Temporal's own cost per attempt: plays that return at once
                start = time.perf_counter()
                for i in range(ATTEMPTS):
                    run_id = await temporal.start(
                        nothing_play, i, temporal=client, store=url, task_queue=queue
                    )
                    await client.get_workflow_handle(run_id).result()
                figures["temporal_nothing_s"] = time.perf_counter() - start
        finally:
            workers.stop()
    url = fresh()
    start = time.perf_counter()
    for i in range(ATTEMPTS):
        done = await pl.arun(nothing_play, i, store=url, stall_after=None)
        assert done.status == "completed", done.error
    figures["embedded_nothing_s"] = time.perf_counter() - start
    return figures


def main() -> dict[str, Any]:
    with _servers() as (postgres, server), spawn(seed=7) as sim, \
            tempfile.TemporaryDirectory() as tmp:  # fmt: skip
        figures = asyncio.run(_measure(postgres, server, sim, Path(tmp)))
        gc.collect()  # the SDK's native objects, freed while the interpreter is whole
    embedded, one, two = figures["embedded"], figures["temporal_1"], figures["temporal_2"]
    overhead_ms = 1000 * (figures["temporal_nothing_s"] - figures["embedded_nothing_s"]) / ATTEMPTS
    return {
        "bench": "temporal",
        "ratio": round(one["wall_s"] / embedded["wall_s"], 3),
        "goal": f"one run on Temporal (1 worker) within {GOAL:g}x of embedded",
        "met": one["wall_s"] <= GOAL * embedded["wall_s"],
        "rows": ROWS,
        "rate_scale": RATE_SCALE,
        "embedded_s": round(embedded["wall_s"], 2),
        "temporal_1_worker_s": round(one["wall_s"], 2),
        "temporal_2_workers_s": round(two["wall_s"], 2),
        "two_vs_one_worker": round(two["wall_s"] / one["wall_s"], 3),
        "provider_floor_s": round(figures["floor_s"], 2),
        "embedded_vs_floor": round(embedded["wall_s"] / figures["floor_s"], 3),
        "embedded_cpu_s": round(embedded["cpu_s"], 2),
        "worker_cpu_s_1_worker": [round(c, 2) for c in one["cpu_s"]],
        "worker_cpu_s_2_workers": [round(c, 2) for c in two["cpu_s"]],
        "worker_busy_share": round(max(one["cpu_s"]) / one["wall_s"], 3),
        "attempts_per_run": one["attempts"],
        "overhead_per_attempt_ms": round(overhead_ms, 1),
        "nothing_runs": ATTEMPTS,
        "embedded_nothing_ms": round(1000 * figures["embedded_nothing_s"] / ATTEMPTS, 1),
        "temporal_nothing_ms": round(1000 * figures["temporal_nothing_s"] / ATTEMPTS, 1),
    }


if __name__ == "__main__":
    print(json.dumps(main()))
