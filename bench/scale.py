"""scale: 1, 4 and 16 processes (and 2 and 4 Temporal workers) on one PostgreSQL store, the
five simulator providers' limits shared through the store's rate gates.

Each configuration runs the scale play (``bench/scale_child.py``: one dataset per provider,
each row one call) over a fixed amount of work, split evenly between its processes: per
provider, its limit x ``PACE`` (0.95, the share of a declared rate the gates use) x
``BENCH_SCALE_SECONDS`` calls, so a configuration that holds the limits takes about that
long. The providers are ``sim.email.alpha``, ``.beta``, ``.gamma``, ``sim.company.enrich``
and ``sim.email.verify`` in one simulator process, 150 requests/s in all (``RATES``: a 2-core
machine spends 5-8 ms of CPU a call, so higher limits would measure the CPU, not the
gates), set (published and enforced) through its faults; each call is one request (the bulk
operations are left out: see ``Singles``). The processes are ``bench.scale_child run``
(``pl.arun``); the Temporal workers ``bench.scale_child worker`` (``TemporalWorker``, what
``playline worker --temporal`` runs, one run at a time, a run each). Each configuration gets
a fresh database on one throwaway PostgreSQL server (``tests/services.py``: fsync off;
``pg_stat_statements`` loaded, ``max_connections`` 200) and a reset simulator. Two more
configurations (``BENCH_SCALE_MORE``): 16 processes at half the limits and at 4 times them
(more than this machine holds: where it stops, and why).

Reference in the same run: the providers' summed limits. Reported per configuration:

- ``calls_per_s``: the simulator's accepted requests a second while the run is in its
  stride (between 10% and 90% of its requests, from its ledger read every second);
  ``ratio``: that over the summed limits (goal at 16 processes: >= 0.9, with 0 429s);
  ``overall_per_s``: all requests over the wall time (start-up and tail included);
- ``rejected_429`` (rate-limited plus throttled), ``duplicate_charges`` (goal 0) and the
  runs' failed calls;
- ``store_tx_per_s``: PostgreSQL's committed and rolled back transactions of the database
  (``pg_stat_database``) over the wall time, ``store_tx_per_call``, ``store_kb_per_call``
  (the database's growth), ``connections_max``: its connections, sampled;
- the gate, in the runners: ``gate_leases_per_call`` (the transactions that take tokens or
  slots: ``lease_gate``, and ``take_slots`` for the slots of tokens reserved behind others'),
  ``gate_lease_ms`` (mean time of a ``lease_gate``: a connection from the pool, its round
  trips, the wait for the gate's lock), the shares of leases that found nothing
  (``gate_leases_empty``), found the cap full (``gate_leases_full``), reserved tokens ahead
  (``gate_leases_reserved``) and took the gate's lock (``gate_leases_locked``); the looks at
  a full cap under no lock (``gate_looks_per_call``); ``gate_slot_hold_ms``, how long a
  slot of a shared cap stays taken in the store (from the lease to the release's commit:
  the claim's transaction, the request, the release), and the receipt writes that claim and
  record calls (``receipt_write_ms``); on the server (``pg_stat_statements``): the gate
  statements' executions and time, the advisory locks' (``advisory_lock_s``: time waiting
  for them, mostly the gates'), the costliest statements; and ``lock_waiting``: connections
  waiting for a lock, sampled 4 times a second and averaged;
- CPU: the runners' own from ``go`` (``runner_cpu_ms_per_call``, ``runner_core_share``: of
  one core, each), PostgreSQL's (the postmaster and its backends) and the simulator's, and
  how busy the machine's cores were (``cpu_busy``; the machine is shared: ``cpu_ours`` is
  this bench's share, ``load_before`` the load average as the configuration started);
- ``bound``: what held the configuration back, read from those figures.

``ratio`` is the 16-process configuration's (the largest of ``BENCH_SCALE_PROCESSES`` at the
limits); ``stops_scaling`` lists the configurations under the goal and why.

``python -m bench scale`` (one JSON line, a table on stderr; about 6 minutes). Smaller:
``BENCH_SCALE_PROCESSES`` (comma-separated, default 1,4,16), ``BENCH_SCALE_WORKERS`` (Temporal
workers, default 2,4; empty: none), ``BENCH_SCALE_MORE`` (empty: none),
``BENCH_SCALE_SECONDS`` (40), ``BENCH_SCALE_RATE_SCALE`` (the limits times this; 1).
PostgreSQL: ``BENCH_POSTGRES_URL``, else a throwaway server.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import psutil

from playline.sim import SimProcess, spawn
from playline.store import open_store
from playline.tools._declared import PACE

from .scale_child import FIELDS, scale_play
from .store import _postgres_server

ROOT = Path(__file__).resolve().parents[1]


def _counts(name: str, default: str) -> list[int]:
    text = os.environ.get(name, default)
    return [int(n) for n in text.split(",") if n.strip()]


PROCESSES = _counts("BENCH_SCALE_PROCESSES", "1,4,16")
WORKERS = _counts("BENCH_SCALE_WORKERS", "2,4")
SECONDS = float(os.environ.get("BENCH_SCALE_SECONDS", "40"))
RATE_SCALE = float(os.environ.get("BENCH_SCALE_RATE_SCALE", "1"))
# more configurations, "processes:limits multiplier:seconds": 16 processes at half the limits
# (is it their number or the calls a second?) and at 4 times them (the machine's ceiling)
MORE = os.environ.get("BENCH_SCALE_MORE", "16:0.5:40,16:4:12")
RATES = {  # requests/s per provider, published and enforced (x RATE_SCALE): 150 in all
    "sim.email.alpha": 30,
    "sim.email.beta": 20,
    "sim.email.gamma": 20,
    "sim.company.enrich": 40,
    "sim.email.verify": 40,
}
GOAL = 0.9
STRIDE = (0.1, 0.9)  # the share of a run's requests between which its rate is read
SAMPLE_S, LEDGER_S = 0.25, 1.0  # seconds between looks at the server, at the ledger
_ENDED = ("completed", "completed_with_errors")  # a failed call is reported, not fatal
CHILD_TIMEOUT = 900.0  # seconds: a runner or a run that takes longer has hung
_GATE_TABLES = ("rate_gates", "gate_slots", "gate_sends")


@dataclass(frozen=True)
class _Config:
    """A configuration: ``n`` processes (or Temporal workers) at the limits x ``scale``, on
    ``seconds`` of work at those limits."""

    n: int
    temporal: bool = False
    scale: float = RATE_SCALE
    seconds: float = SECONDS

    @property
    def name(self) -> str:
        one, many = ("Temporal worker", "Temporal workers") if self.temporal else (
            "process", "processes")  # fmt: skip
        what = many if self.n > 1 else one
        rates = f", limits x{self.scale / RATE_SCALE:g}" if self.scale != RATE_SCALE else ""
        return f"{self.n} {what}{rates}"

    def limits(self) -> dict[str, float]:
        return {tool: rate * self.scale for tool, rate in RATES.items()}


def _configs() -> list[_Config]:
    configs = [_Config(n) for n in PROCESSES] + [_Config(n, temporal=True) for n in WORKERS]
    for more in filter(None, MORE.split(",")):
        try:
            n, times, seconds = more.split(":")
            config = _Config(int(n), scale=RATE_SCALE * float(times), seconds=float(seconds))
        except ValueError:
            raise ValueError(
                f"BENCH_SCALE_MORE: {more!r} is not processes:limits multiplier:seconds, "
                "e.g. 16:4:12"
            ) from None
        configs.append(config)
    return configs


# ------------------------------------------------------------------------------------------
# the work


def _work(sim: SimProcess, config: _Config) -> dict[str, list[dict[str, Any]]]:
    """Per provider its rows: its limit x PACE x seconds calls, each input a new one."""
    sizes = {t: max(1, round(r * PACE * config.seconds)) for t, r in config.limits().items()}
    people = sim.people(max(sizes[t] for t in FIELDS if t != "sim.company.enrich"))
    companies = sim.companies(sizes["sim.company.enrich"])
    rows: dict[str, list[dict[str, Any]]] = {}
    for tool, n in sizes.items():
        source = companies if tool == "sim.company.enrich" else people
        if len(source) < n:
            raise RuntimeError(f"the simulator's world has {len(source)} rows for {tool}, not {n}")
        rows[tool] = [{"id": str(i), **{k: source[i][k] for k in FIELDS[tool]}} for i in range(n)]
    return rows


def _shares(rows: dict[str, list[dict[str, Any]]], n: int) -> list[dict[str, Any]]:
    """The work split evenly between ``n`` processes: each an input of the scale play."""
    return [{"rows": {tool: r[i::n] for tool, r in rows.items()}} for i in range(n)]


# ------------------------------------------------------------------------------------------
# the processes


class _Child:
    """A ``bench.scale_child`` process: stdout a pipe, stderr a file (a pipe could fill)."""

    def __init__(self, args: list[str], folder: Path, name: str) -> None:
        self.err = folder / f"{name}.stderr"
        with self.err.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "bench.scale_child", *args], cwd=ROOT,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
            )  # fmt: skip

    def _tail(self) -> str:
        return self.err.read_text(errors="replace")[-3000:]

    def ready(self) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            self.proc.kill()
            raise RuntimeError(f"a child did not start ({line!r}):\n{self._tail()}")

    def tell(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def ended(self) -> dict[str, Any]:
        try:
            out, _ = self.proc.communicate(timeout=CHILD_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise RuntimeError(f"a child hung for {CHILD_TIMEOUT:g}s:\n{self._tail()}") from None
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if not lines:
            raise RuntimeError(f"a child crashed (exit {self.proc.returncode}):\n{self._tail()}")
        doc: dict[str, Any] = orjson.loads(lines[-1])
        return doc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def _common(sim: SimProcess, store: str) -> list[str]:
    return ["--store", store, "--gateway", sim.url, "--token", sim.token]


# ------------------------------------------------------------------------------------------
# the server: what it did (pg_stat_database, pg_stat_statements, pg_stat_activity, CPU)


@dataclass
class _Server:
    """The PostgreSQL server of the bench: its admin URL and, when it is ours, its postmaster."""

    url: str
    postmaster: int | None
    statements: bool  # pg_stat_statements is loaded

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description is not None else []

    def cpu_s(self) -> float | None:
        """The postmaster's CPU, its ended backends' (reaped: in its children's times) and
        its live backends'."""
        if self.postmaster is None:
            return None
        main = psutil.Process(self.postmaster)
        times = main.cpu_times()
        total: float = times.user + times.system + times.children_user + times.children_system
        for child in main.children():
            with contextlib.suppress(psutil.NoSuchProcess):
                t = child.cpu_times()
                total += t.user + t.system
        return total

    def transactions(self, db: str) -> int:
        rows = self.query(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", db
        )
        return int(rows[0][0]) if rows else 0

    def size(self, db: str) -> int:
        return int(self.query("SELECT pg_database_size(%s)", db)[0][0])

    def settled(self, db: str) -> None:
        """Until the database has no connections: their statistics are written as they end."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            left = self.query("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", db)
            if not left[0][0]:
                return
            time.sleep(0.05)  # polling the server for an observable condition

    def statement_figures(self, db: str) -> dict[str, Any]:
        """The gate statements' executions and time, and the five costliest statements."""
        if not self.statements:
            return {"pg_stat_statements": "not loaded"}
        rows = self.query(
            "SELECT query, calls, total_exec_time FROM pg_stat_statements s "
            "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = %s "
            "ORDER BY total_exec_time DESC",
            db,
        )
        gate = [r for r in rows if any(t in r[0] for t in _GATE_TABLES)]
        lease = [r for r in gate if r[0].startswith("UPDATE rate_gates SET granted")]
        locks = [r for r in rows if "pg_advisory_xact_lock" in r[0]]
        return {
            "gate_statements": sum(r[1] for r in gate),
            "gate_statements_s": round(sum(r[2] for r in gate) / 1000, 3),
            "lease_updates": sum(r[1] for r in lease),
            "lease_update_ms": round(
                sum(r[2] for r in lease) / max(1, sum(r[1] for r in lease)), 3
            ),
            "advisory_locks": sum(r[1] for r in locks),
            "advisory_lock_s": round(sum(r[2] for r in locks) / 1000, 3),
            "statements_s": round(sum(r[2] for r in rows) / 1000, 3),
            "costliest": [
                {"query": " ".join(r[0].split())[:90], "calls": r[1], "s": round(r[2] / 1000, 3)}
                for r in rows[:5]
            ],
        }


@contextlib.contextmanager
def _postgres() -> Iterator[tuple[Any, _Server]]:
    """The bench's PostgreSQL server with ``pg_stat_statements`` loaded when it is its own."""
    with _postgres_server() as server:
        restart = getattr(server, "restart", None)
        if restart is not None:  # a throwaway server (tests/services.py): load the extension
            import psycopg

            with psycopg.connect(server.url, autocommit=True) as conn:
                conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
                conn.execute("ALTER SYSTEM SET max_connections = 200")
            restart()
        pid = None
        datadir = getattr(server, "datadir", None)
        if datadir is not None:
            pid = int((Path(datadir) / "postmaster.pid").read_text().split()[0])
        found = _Server(server.url, pid, statements=False)
        with contextlib.suppress(Exception):
            found.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            found.query("SELECT count(*) FROM pg_stat_statements")
            found.statements = True
        yield server, found


@dataclass
class _Sampler:
    """A thread that reads the simulator's ledger every ``LEDGER_S`` and the database's
    connections (and what they wait for) every ``SAMPLE_S``."""

    server: _Server
    db: str
    sim_url: str
    ledger: list[tuple[float, dict[str, int]]] = field(default_factory=list)
    samples: int = 0
    active: int = 0
    waits: dict[str, int] = field(default_factory=dict)
    connections_max: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> _Sampler:
        self._thread = threading.Thread(target=self._run, name="scale-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()

    def _run(self) -> None:
        import psycopg

        start, next_ledger = time.perf_counter(), 0.0
        with psycopg.connect(self.server.url, autocommit=True) as conn, httpx.Client() as http:
            while not self._stop.is_set():
                now = time.perf_counter() - start
                if now >= next_ledger:
                    with contextlib.suppress(httpx.HTTPError):  # a look missed, not the run
                        doc = http.get(f"{self.sim_url}/__ledger", timeout=30).json()
                        self.ledger.append((time.perf_counter() - start, dict(doc["calls"])))
                    next_ledger = now + LEDGER_S
                rows = conn.execute(
                    "SELECT state, wait_event_type, wait_event FROM pg_stat_activity "
                    "WHERE datname = %s",
                    (self.db,),
                ).fetchall()
                self.samples += 1
                self.connections_max = max(self.connections_max, len(rows))
                for state, kind, event in rows:
                    if state == "active":
                        self.active += 1
                        if kind == "Lock":
                            self.waits[event] = self.waits.get(event, 0) + 1
                self._stop.wait(SAMPLE_S)

    def figures(self) -> dict[str, Any]:
        n = max(1, self.samples)
        return {
            "connections_max": self.connections_max,
            "active_backends": round(self.active / n, 2),
            "lock_waiting": round(sum(self.waits.values()) / n, 3),
            "lock_waits_by_kind": {k: round(v / n, 3) for k, v in sorted(self.waits.items())},
        }

    def stride(self) -> tuple[float, dict[str, float]]:
        """Requests a second (all, and per tool) between ``STRIDE`` of the run's requests."""
        if not self.ledger:
            return 0.0, {}
        total = sum(self.ledger[-1][1].values())
        low, high = (total * s for s in STRIDE)
        inside = [(t, c) for t, c in self.ledger if low <= sum(c.values()) <= high]
        if len(inside) < 2 or inside[-1][0] - inside[0][0] < 2 * LEDGER_S:
            return math.nan, {}
        (t0, c0), (t1, c1) = inside[0], inside[-1]
        per_tool = {tool: (c1.get(tool, 0) - c0.get(tool, 0)) / (t1 - t0) for tool in c1}
        return sum(per_tool.values()), per_tool


# ------------------------------------------------------------------------------------------
# one configuration


@dataclass
class _Measure:
    """What a configuration is measured with, around its run."""

    sim: SimProcess
    server: _Server
    url: str

    @property
    def db(self) -> str:
        return self.url.rsplit("/", 1)[1].split("?", 1)[0]

    def around(self, run: Any) -> dict[str, Any]:
        """``run()`` with the server, the simulator and the machine measured around it; it
        returns the children's documents and the seconds until its runs ended."""
        sim_proc = psutil.Process(self.sim.pid)
        load = os.getloadavg()[0]
        tx, pg_cpu = self.server.transactions(self.db), self.server.cpu_s()
        size = self.server.size(self.db)
        sim_cpu, machine = sum(sim_proc.cpu_times()[:2]), psutil.cpu_times()
        with _Sampler(self.server, self.db, self.sim.url) as sampler:
            docs, wall = run()
        self.server.settled(self.db)
        busy = _busy(machine, psutil.cpu_times())
        pg_after = self.server.cpu_s()
        return {
            "wall": wall,
            "docs": docs,
            "sampler": sampler,
            "load_before": round(load, 2),
            "store_tx": self.server.transactions(self.db) - tx,
            "store_bytes": self.server.size(self.db) - size,
            "postgres_cpu_s": None if pg_cpu is None or pg_after is None else pg_after - pg_cpu,
            "sim_cpu_s": sum(sim_proc.cpu_times()[:2]) - sim_cpu,
            "cpu_busy": busy,
        }


def _busy(before: Any, after: Any) -> float:
    spent = {k: getattr(after, k) - getattr(before, k) for k in after._fields}
    idle = spent.get("idle", 0.0) + spent.get("iowait", 0.0)
    total = sum(v for k, v in spent.items() if k not in ("guest", "guest_nice"))
    return 1 - idle / total if total else 0.0


def _processes(m: _Measure, n: int, work: list[dict[str, Any]], folder: Path) -> dict[str, Any]:
    """``n`` runners, each a run of its share, started together."""
    children = []
    try:
        for i, share in enumerate(work):
            path = folder / f"input-{n}-{i}.json"
            path.write_bytes(orjson.dumps(share))
            args = ["run", *_common(m.sim, m.url), "--run-id", f"scale-{n}-{i}", "--input",
                    str(path)]  # fmt: skip
            children.append(_Child(args, folder, f"runner-{n}-{i}"))
        for child in children:
            child.ready()

        def run() -> tuple[list[dict[str, Any]], float]:
            start = time.perf_counter()
            for child in children:
                child.tell()
            docs = [child.ended() for child in children]
            return docs, time.perf_counter() - start

        measured = m.around(run)
    finally:
        for child in children:
            child.kill()
    bad = [d for d in measured["docs"] if d["status"] not in _ENDED]
    if bad:
        raise RuntimeError(f"runs ended {bad[0]['status']}: {bad[0]['error']}")
    return measured


def _temporal(
    m: _Measure, n: int, work: list[dict[str, Any]], folder: Path, temporal: Any
) -> dict[str, Any]:
    """``n`` Temporal workers, one run each (each worker takes one at a time), submitted
    together; the wall time is until the last run's workflow has ended."""
    from playline.backends import temporal as backend

    queue = f"scale-{n}-{os.getpid()}"
    args = ["worker", *_common(m.sim, m.url), "--temporal", temporal.target,
            "--task-queue", queue]  # fmt: skip
    workers = [_Child(args, folder, f"worker-{n}-{i}") for i in range(n)]
    try:
        for worker in workers:
            worker.ready()

        async def runs() -> list[str]:
            from temporalio.client import Client

            client = await Client.connect(temporal.target, namespace=temporal.namespace)
            ids = [
                await backend.start(
                    scale_play,
                    share,
                    temporal=client,
                    store=m.url,
                    task_queue=queue,
                    run_id=f"scale-t{n}-{i}",
                )
                for i, share in enumerate(work)
            ]
            for i in ids:
                await client.get_workflow_handle(i).result()
            return ids

        def run() -> tuple[list[dict[str, Any]], float]:
            start = time.perf_counter()
            ids = asyncio.run(runs())
            wall = time.perf_counter() - start
            for worker in workers:
                worker.tell()  # stop: each prints its figures
            docs = [worker.ended() for worker in workers]
            with contextlib.closing(open_store(m.url)) as store:  # the runs, as recorded
                records = [store.get_run(i) for i in ids]
            for doc, record in zip(docs, records, strict=True):
                assert record is not None, "a run on Temporal left no record in the store"
                doc.update(status=record.status.value, error=record.error, stats=record.stats)
            return docs, wall

        measured = m.around(run)
    finally:
        for worker in workers:
            worker.kill()
    bad = [d for d in measured["docs"] if d["status"] not in _ENDED]
    if bad:
        raise RuntimeError(f"runs on Temporal ended {bad[0]['status']}: {bad[0]['error']}")
    return measured


def _figures(config: _Config, measured: dict[str, Any], sim: SimProcess) -> dict[str, Any]:
    ledger, sampler = sim.ledger(), measured["sampler"]
    wall, docs, n = measured["wall"], measured["docs"], config.n
    limits = sum(config.limits().values())
    calls = sum(ledger["calls"].values())
    rate, per_tool = sampler.stride()
    gate = {k: sum(d["gate"][k] for d in docs) for k in docs[0]["gate"] if k != "lease_max_s"}
    runner_cpu = sum(d["cpu_s"] for d in docs)
    ours = runner_cpu + (measured["postgres_cpu_s"] or 0.0) + measured["sim_cpu_s"]
    return {
        "config": config.name,
        "processes": n,
        "temporal": config.temporal,
        "calls_per_s": round(rate, 1),
        "limits_per_s": limits,
        "ratio": round(rate / limits, 3),
        "overall_per_s": round(calls / wall, 1),
        "by_tool_ratio": {
            t.rsplit(".", 1)[1]: round(r / config.limits()[t], 3)
            for t, r in sorted(per_tool.items())
        },
        "wall_s": round(wall, 2),
        "requests": calls,
        "requests_by_tool": {t.rsplit(".", 1)[1]: c for t, c in sorted(ledger["calls"].items())},
        "rejected_429": sum(ledger["rejected"].values()) + sum(ledger["throttled"].values()),
        "rejected_by_tool": {
            t.rsplit(".", 1)[1]: c
            for t, c in sorted(_summed([ledger["rejected"], ledger["throttled"]]).items())
        },
        "duplicate_charges": ledger["duplicate_charges"],
        "failed_calls": sum(d["stats"].get("tool_calls_failed", 0) for d in docs),
        "errors": _summed([d["stats"].get("errors") or {} for d in docs]),
        "store_tx_per_s": round(measured["store_tx"] / wall),
        "store_tx_per_call": round(measured["store_tx"] / max(1, calls), 2),
        "store_kb_per_call": round(measured["store_bytes"] / 1024 / max(1, calls), 2),
        **sampler.figures(),
        "gate_lease_ms": round(1000 * gate["lease_s"] / max(1, gate["leases"]), 2),
        "gate_lease_max_ms": round(1000 * max(d["gate"]["lease_max_s"] for d in docs), 1),
        "gate_leases_per_call": round((gate["leases"] + gate["takes"]) / max(1, calls), 2),
        "gate_leases_empty": round(gate["leases_empty"] / max(1, gate["leases"]), 3),
        "gate_leases_full": round(gate["leases_full"] / max(1, gate["leases"]), 3),
        "gate_leases_reserved": round(gate["leases_reserved"] / max(1, gate["leases"]), 3),
        "gate_takes_per_call": round(gate["takes"] / max(1, calls), 2),
        "gate_looks_per_call": round(gate["looks"] / max(1, calls), 2),
        "gate_look_ms": round(1000 * gate["look_s"] / max(1, gate["looks"]), 2),
        "gate_leases_locked": round(gate["leases_locked"] / max(1, gate["leases"]), 3),
        "gate_take_ms": round(1000 * gate["take_s"] / max(1, gate["takes"]), 2),
        "gate_slot_hold_ms": round(1000 * gate["slot_hold_s"] / max(1, gate["slot_holds"]), 1),
        "gate_release_ms": round(1000 * gate["release_s"] / max(1, gate["releases"]), 2),
        "receipt_write_ms": round(1000 * gate["write_s"] / max(1, gate["writes"]), 2),
        "receipt_writes_per_call": round(gate["writes"] / max(1, calls), 2),
        "gate_s_per_process": round(
            (gate["lease_s"] + gate["take_s"] + gate["look_s"] + gate["release_s"]) / n, 2
        ),
        "runner_cpu_s": round(runner_cpu, 1),
        "runner_cpu_ms_per_call": round(1000 * runner_cpu / max(1, calls), 2),
        "runner_core_share": round(runner_cpu / (wall * n), 3),
        "postgres_cpu_s": _round(measured["postgres_cpu_s"]),
        "sim_cpu_s": round(measured["sim_cpu_s"], 1),
        "cpu_busy": round(measured["cpu_busy"], 3),
        "cpu_ours": round(ours / (wall * (os.cpu_count() or 1)), 3),
        "load_before": measured["load_before"],
    }


def _summed(counts: list[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for each in counts:
        for cause, n in each.items():
            total[cause] = total.get(cause, 0) + n
    return total


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _bound(f: dict[str, Any]) -> str:
    """What held a configuration back, read from its figures: each sign that was there."""
    if f["ratio"] >= GOAL and f["rejected_429"] == 0:
        return "the providers' limits (rate-bound)"
    signs = []
    if f["runner_core_share"] >= 0.6:
        signs.append(f"each process's own core ({f['runner_core_share']:.0%} of one, each)")
    if f["lock_waiting"] >= 1.0:
        signs.append(
            f"the gates' locks ({f['lock_waiting']:.1f} connections waiting on average, a "
            f"lease {f['gate_lease_ms']:.0f} ms, {f['gate_leases_per_call']:.1f} leases a call)"
        )
    if f["gate_leases_full"] >= 0.2:
        signs.append(
            f"the providers' caps of calls in flight ({f['gate_leases_full']:.0%} of leases "
            f"found one full; a slot stays taken {f['gate_slot_hold_ms']:.0f} ms)"
        )
    if f["cpu_busy"] >= 0.85:
        signs.append(
            f"the machine's CPU ({f['cpu_busy']:.0%} of {os.cpu_count()} cores busy, "
            f"{f['cpu_ours']:.0%} by this bench)"
        )
    if f["rejected_429"]:
        signs.append(f"{f['rejected_429']} requests answered 429")
    return "; ".join(signs) or "no sign in these figures"


# ------------------------------------------------------------------------------------------


def _measure_all(sim: SimProcess, folder: Path) -> list[dict[str, Any]]:
    results = []
    with contextlib.ExitStack() as stack:
        admin, server = stack.enter_context(_postgres())
        temporal = stack.enter_context(_temporal_server()) if WORKERS else None
        for config in _configs():
            print(f"scale: {config.name} ...", file=sys.stderr, flush=True)
            sim.reset()
            sim.faults(tools={t: {"rate_per_second": r, "burst": max(1, int(r))}
                              for t, r in config.limits().items()})  # fmt: skip
            work = _shares(_work(sim, config), config.n)
            url = admin.new_database()
            try:
                m = _Measure(sim, server, url)
                if config.temporal:
                    measured = _temporal(m, config.n, work, folder, temporal)
                else:
                    measured = _processes(m, config.n, work, folder)
                figures = _figures(config, measured, sim)
                figures.update(server.statement_figures(m.db))
                figures["bound"] = _bound(figures)
                results.append(figures)
            finally:
                admin.drop_database(url)
    return results


@contextlib.contextmanager
def _temporal_server() -> Iterator[Any]:
    sys.path.insert(0, str(ROOT / "tests"))
    from services import run_temporal_dev_server, temporal_binaries

    with run_temporal_dev_server(temporal_binaries()) as server:
        yield server


_COLUMNS = (
    ("config", "config", "{}"), ("calls/s", "calls_per_s", "{:.0f}"),
    ("limits", "limits_per_s", "{:.0f}"), ("ratio", "ratio", "{:.3f}"),
    ("429", "rejected_429", "{}"), ("dup", "duplicate_charges", "{}"),
    ("tx/s", "store_tx_per_s", "{}"), ("leases/call", "gate_leases_per_call", "{:.2f}"),
    ("lease ms", "gate_lease_ms", "{:.1f}"), ("lock wait", "lock_waiting", "{:.2f}"),
    ("slot ms", "gate_slot_hold_ms", "{:.0f}"),
    ("conns", "connections_max", "{}"), ("cpu ms/call", "runner_cpu_ms_per_call", "{:.1f}"),
    ("pg cpu-s", "postgres_cpu_s", "{:.0f}"), ("cpu busy", "cpu_busy", "{:.0%}"),
    ("wall s", "wall_s", "{:.1f}"),
)  # fmt: skip


def table(configs: list[dict[str, Any]]) -> str:
    """The configurations as a Markdown table (the guide's, docs/guide/scale.md)."""
    lines = ["| " + " | ".join(c[0] for c in _COLUMNS) + " |",
             "|" + "---|" * len(_COLUMNS)]  # fmt: skip
    for f in configs:
        cells = [fmt.format(f[key]) if f[key] is not None else "-" for _, key, fmt in _COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> dict[str, Any]:
    with spawn(seed=7) as sim, tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        configs = _measure_all(sim, Path(tmp))
    print(table(configs), file=sys.stderr, flush=True)
    base = [c for c in configs if c["limits_per_s"] == configs[0]["limits_per_s"]]
    by_processes = [c for c in base if not c["temporal"]] or base
    headline = max(by_processes, key=lambda c: c["processes"])
    return {
        "bench": "scale",
        "ratio": headline["ratio"],
        "goal": (
            f"{headline['config']} on one PostgreSQL store hold >= {GOAL} of the providers' "
            "summed limits; 0 responses 429; 0 duplicate charges"
        ),
        "met": headline["ratio"] >= GOAL
        and all(c["rejected_429"] == 0 and c["duplicate_charges"] == 0 for c in configs),
        "stops_scaling": [
            f"{c['config']}: {c['ratio']:.2f} of the limits, {c['bound']}"
            for c in configs
            if c["ratio"] < GOAL or c["rejected_429"]
        ],
        "limits": {t.rsplit(".", 1)[1]: r * RATE_SCALE for t, r in RATES.items()},
        "seconds": SECONDS,
        "machine": {"cpus": os.cpu_count(), "ram_gb": round(psutil.virtual_memory().total / 2**30)},
        "configs": configs,
    }


if __name__ == "__main__":
    print(orjson.dumps(main()).decode())
