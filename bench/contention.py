"""contention: several processes run the same play on the same people, on one store.

The people play of the crash suite (``bench/crash_child.py``: company enrichment in bulk, the
``work_email`` waterfall, verification) over the simulator's first N people (1,000), against
a simulator process, each runner a process of its own with its own run id on one store. The
runs ask for the same calls: each is paid once (the receipts), and the processes share the
providers' rate limits (the shared gates), so P processes should take about as long as one.

Per store (SQLite, PostgreSQL), on a fresh store with the simulator reset:

- ``one``: a single runner (the reference wall time);
- ``many``: P runners (4) started at the same moment (``--wait-go``); the wall time is until
  the last one ends.

Reported per store: both walls and their ratio (goal <= 1.3), the simulator's duplicate
charges (goal 0) and 429s (rate-limited plus throttled; goal 0), its requests and credits,
each runner's live, cached and in-flight calls, and the CPU seconds the runners used.
``ratio`` is the worst store's.

``python -m bench contention`` (one JSON line). Smaller: ``BENCH_CONTENTION_PEOPLE``,
``BENCH_CONTENTION_PROCESSES``, ``BENCH_CONTENTION_STORES`` (comma-separated: sqlite,
postgres), ``BENCH_CONTENTION_RATE_SCALE`` (the providers' rates times this, published and
enforced; 1 by default). PostgreSQL: ``BENCH_POSTGRES_URL``, else a throwaway local server
(see ``bench/store.py``).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from playline.sim import SimProcess, spawn

from .store import _postgres_server

ROOT = Path(__file__).resolve().parents[1]
PEOPLE = int(os.environ.get("BENCH_CONTENTION_PEOPLE", "1000"))
PROCESSES = int(os.environ.get("BENCH_CONTENTION_PROCESSES", "4"))
STORES = [s for s in os.environ.get("BENCH_CONTENTION_STORES", "sqlite,postgres").split(",") if s]
SCALE = float(os.environ.get("BENCH_CONTENTION_RATE_SCALE", "1"))
RATES = {  # requests/s, published and enforced: the catalog's x SCALE
    "sim.email.alpha": 20,
    "sim.email.beta": 10,
    "sim.email.gamma": 5,
    "sim.company.enrich": 50,
    "sim.email.verify": 50,
}
GOAL_RATIO = 1.3
RUNNER_TIMEOUT = 1800.0  # seconds: a runner that takes longer has hung
_RUNNER_FIGURES = (
    "tool_calls_live",
    "tool_calls_cached",
    "tool_calls_in_flight",
    "tool_requests",
    "credits",
)


def _prepare(sim: SimProcess) -> None:
    sim.reset()
    if SCALE != 1:
        rates = {tool: r * SCALE for tool, r in RATES.items()}
        sim.faults(
            tools={t: {"rate_per_second": r, "burst": max(1, int(r))} for t, r in rates.items()}
        )


def _runner(sim: SimProcess, store_url: str, run_id: str) -> subprocess.Popen[str]:
    args = ["--store", store_url, "--run-id", run_id, "--gateway", sim.url, "--token", sim.token]
    return subprocess.Popen(
        [sys.executable, "-m", "bench.crash_child", *args, "--people", str(PEOPLE), "--wait-go"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _ended(proc: subprocess.Popen[str]) -> dict[str, Any]:
    try:
        out, err = proc.communicate(timeout=RUNNER_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise RuntimeError(f"a runner hung for {RUNNER_TIMEOUT:g}s:\n{err[-3000:]}") from None
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"a runner crashed (exit {proc.returncode}):\n{err[-3000:]}")
    doc: dict[str, Any] = orjson.loads(lines[-1])
    return doc


def trial(sim: SimProcess, store_url: str, processes: int) -> dict[str, Any]:
    """``processes`` runners started together on ``store_url``; wall until the last ends."""
    _prepare(sim)
    procs = [_runner(sim, store_url, f"contention-{i}") for i in range(processes)]
    for proc in procs:  # a barrier: each has its gateway's tools and waits
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if line != "ready":
            _, err = proc.communicate()
            raise RuntimeError(f"a runner did not start: {line!r}\n{err[-3000:]}")
    cpu = _cpu_children()
    start = time.perf_counter()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    ends = [_ended(proc) for proc in procs]
    wall = time.perf_counter() - start
    ledger = sim.ledger()
    statuses = sorted({e["status"] for e in ends})
    if statuses != ["completed"]:
        errors = [e["error"] for e in ends if e["status"] != "completed"]
        raise RuntimeError(f"runs ended {statuses}: {errors[:2]}")
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(_cpu_children() - cpu, 3),
        "requests": sum(ledger["calls"].values()),
        "rejected_429": sum(ledger["rejected"].values()) + sum(ledger["throttled"].values()),
        "rejected_by_tool": {**ledger["rejected"], **ledger["throttled"]},
        "conflicts_409": sum(ledger["conflicts"].values()),
        "duplicate_charges": ledger["duplicate_charges"],
        "credits": ledger["credits"],
        "runners": [{k: e["stats"].get(k, 0) for k in _RUNNER_FIGURES} for e in ends],
    }


@contextmanager
def _store_urls(kind: str, folder: Path) -> Iterator[tuple[str, str]]:
    """Two fresh, empty stores of ``kind``: one per trial."""
    if kind == "sqlite":
        yield f"sqlite:///{folder / 'one.db'}", f"sqlite:///{folder / 'many.db'}"
        return
    if kind != "postgres":
        raise ValueError(f"BENCH_CONTENTION_STORES: {kind!r} is not sqlite or postgres")
    with _postgres_server() as server:
        urls = server.new_database(), server.new_database()
        try:
            yield urls
        finally:
            for url in urls:
                server.drop_database(url)


def main() -> dict[str, Any]:
    stores: dict[str, Any] = {}
    with spawn(seed=7) as sim, tempfile.TemporaryDirectory(prefix="bench-contention-") as tmp:
        for kind in STORES:
            folder = Path(tmp) / kind
            folder.mkdir()
            with _store_urls(kind, folder) as (one_url, many_url):
                print(f"contention: {kind}, 1 runner ...", file=sys.stderr, flush=True)
                one = trial(sim, one_url, 1)
                print(f"contention: {kind}, {PROCESSES} runners ...", file=sys.stderr, flush=True)
                many = trial(sim, many_url, PROCESSES)
            stores[kind] = {
                "ratio": round(many["wall_s"] / one["wall_s"], 3),
                "one": one,
                "many": many,
            }
    ratio = max(s["ratio"] for s in stores.values())
    return {
        "bench": "contention",
        "ratio": ratio,
        "goal": (
            f"{PROCESSES} processes on the same people and store within {GOAL_RATIO}x of one "
            "process's wall; 0 duplicate charges; 0 responses 429"
        ),
        "met": ratio <= GOAL_RATIO
        and all(
            s["many"]["duplicate_charges"] == 0 and s["many"]["rejected_429"] == 0
            for s in stores.values()
        ),
        "people": PEOPLE,
        "processes": PROCESSES,
        "rate_scale": SCALE,
        **stores,
    }


if __name__ == "__main__":
    print(orjson.dumps(main()).decode())
