"""One process of the scale bench: a runner of the scale play, or a Temporal worker.

``python -m bench.scale_child run --store URL --run-id ID --gateway URL --input FILE`` runs
the play on the rows in ``FILE`` (JSON) and prints one JSON line when it ends:
``{"status", "error", "stats", "cpu_s", "gate"}``. It prints ``ready`` once the gateway's
tools are known and waits for a line on stdin, so the bench starts every runner at the same
moment.

``python -m bench.scale_child worker --temporal HOST:PORT --task-queue Q --store URL
--gateway URL`` serves the play's runs on Temporal (``TemporalWorker``, what ``playline
worker --temporal`` runs, here with the bench's tools: see :class:`Singles`) one run at a
time, prints ``ready``, and on a line on stdin (or its end) shuts down and prints
``{"cpu_s", "gate"}``.

The play (``bench-scale``): one dataset per provider, run at the same time, each row one call
to that provider. Each provider has a backlog of its own from the first second to the last,
so a run is bound by the providers' limits alone, whatever their ratios.

``cpu_s`` is this process's CPU time from ``go`` (the worker: from ``ready``) to its end;
``gate`` counts and times the store's rate-gate transactions (``lease_gate``, ``take_slots``
taking slots or looking, ``release_gate``: connection from the pool, round trips, waiting for
the gate's lock), how long the slots of a shared cap stay taken in the store, and the receipt
writes (``write_receipts``: the claims and records of calls), measured around the store's
methods in this process.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import resource
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

import playline as pl
from playline.store import GateGrant
from playline.store.sql._base import SQLStore
from playline.store.sql._gate_store import GateRows
from playline.tools import ToolSpec

PERSON = ("first_name", "last_name", "domain")
FIELDS: dict[str, tuple[str, ...]] = {  # what each provider takes
    "sim.email.alpha": PERSON,
    "sim.email.beta": PERSON,
    "sim.email.gamma": PERSON,
    "sim.company.enrich": ("domain",),
    "sim.email.verify": ("email",),
}
TOOLS = tuple(FIELDS)
_STATS = ("tool_calls_live", "tool_calls_cached", "tool_calls_in_flight", "tool_calls_failed",
          "tool_requests", "credits")  # fmt: skip


@pl.play(name="bench-scale")
async def scale_play(ctx: pl.Context, input: Any) -> Any:
    """``input["rows"][tool]``: the rows of ``tool``'s dataset, each one call of it."""

    async def calls(tool: str) -> int:
        fields = FIELDS[tool]
        ds = await (
            ctx.dataset(tool.rsplit(".", 1)[1], input["rows"][tool], key="id")
            .with_column("answer", lambda row, ctx: ctx.tool(tool, {k: row[k] for k in fields}))
            .run()
        )
        return len(ds)

    done = await asyncio.gather(*(calls(tool) for tool in TOOLS if tool in input["rows"]))
    return sum(done)


class Singles:
    """The gateway's five tools, each call one request (their bulk operations left out).

    The providers' limits count requests, and a bulk request carries up to 200 calls: with
    them a run at the limits would make 50-200 times the calls and be bound by the CPU."""

    def __init__(self, gateway: pl.Gateway) -> None:
        self._gateway = gateway

    def specs(self) -> Iterable[ToolSpec]:
        return [replace(s, batch=None) for s in self._gateway.specs() if s.id in FIELDS]


class GateClock:
    """Counts and times this process's rate-gate transactions (they run in store threads),
    and how long the slots of a shared cap stay taken in the store (from the transaction
    that took them to the one that gave them back: a slot kept for this process's next call
    serves several in a row)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.figures: dict[str, float] = {
            "leases": 0, "leases_empty": 0, "leases_full": 0, "leases_reserved": 0,
            "leases_locked": 0, "lease_s": 0.0, "lease_max_s": 0.0, "takes": 0, "take_s": 0.0,
            "releases": 0, "release_s": 0.0, "slot_holds": 0, "slot_hold_s": 0.0,
            "looks": 0, "look_s": 0.0, "writes": 0, "write_s": 0.0,
        }  # fmt: skip
        self._held: dict[str, collections.deque[float]] = {}  # per gate: when slots were taken

    def _add(self, kind: str, seconds: float) -> None:
        with self._lock:
            self.figures[f"{kind}s"] += 1
            self.figures[f"{kind}_s"] += seconds
            if kind == "lease":
                self.figures["lease_max_s"] = max(self.figures["lease_max_s"], seconds)

    def _count(self, grant: GateGrant, now: float) -> None:
        with self._lock:
            f = self.figures
            f["leases_empty"] += not grant.granted
            f["leases_full"] += not grant.granted and grant.state.wait(now) <= 0  # cap full
            f["leases_reserved"] += grant.due > now

    def _took(self, key: str, count: int) -> None:
        with self._lock:
            self._held.setdefault(key, collections.deque()).extend([time.perf_counter()] * count)

    def _gave(self, key: str, count: int) -> None:
        now = time.perf_counter()
        with self._lock:
            held = self._held.get(key, collections.deque())
            for _ in range(min(count, len(held))):
                self.figures["slot_hold_s"] += now - held.popleft()
                self.figures["slot_holds"] += 1

    def install(self) -> None:
        """Wrap the SQL stores' gate methods (both dialects share them) in this process."""
        lease, take, release = GateRows.lease_gate, GateRows.take_slots, GateRows.release_gate

        @functools.wraps(lease)
        def timed_lease(store: GateRows, key: str, *args: Any, **kwargs: Any) -> GateGrant:
            start = time.perf_counter()
            grant = lease(store, key, *args, **kwargs)
            self._add("lease", time.perf_counter() - start)
            self._count(grant, kwargs["now"])
            if kwargs.get("slots", True) and grant.state.cap > 0:
                with self._lock:
                    self.figures["leases_locked"] += 1  # with slots of a shared cap: locked
            if grant.slots:
                self._took(key, grant.slots)
            return grant

        @functools.wraps(take)
        def timed_take(store: GateRows, key: str, *args: Any, **kwargs: Any) -> GateGrant:
            start = time.perf_counter()
            grant = take(store, key, *args, **kwargs)
            self._add("take" if args[0] else "look", time.perf_counter() - start)
            if grant.granted and grant.state.cap > 0:
                self._took(key, grant.granted)
            return grant

        @functools.wraps(release)
        def timed_release(store: GateRows, key: str, count: int, **kwargs: Any) -> None:
            start = time.perf_counter()
            release(store, key, count, **kwargs)
            self._add("release", time.perf_counter() - start)
            self._gave(key, count)

        write = SQLStore.write_receipts

        @functools.wraps(write)
        def timed_write(store: Any, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            out = write(store, *args, **kwargs)
            self._add("write", time.perf_counter() - start)
            return out

        setattr(SQLStore, "write_receipts", timed_write)  # noqa: B010
        setattr(GateRows, "lease_gate", timed_lease)  # noqa: B010 - a bench's instrument
        setattr(GateRows, "take_slots", timed_take)  # noqa: B010
        setattr(GateRows, "release_gate", timed_release)  # noqa: B010

    def report(self) -> dict[str, float]:
        with self._lock:
            return {k: round(v, 4) if isinstance(v, float) else v for k, v in self.figures.items()}


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.scale_child")
    parser.add_argument("mode", choices=("run", "worker"))
    parser.add_argument("--store", required=True)
    parser.add_argument("--gateway", required=True)
    parser.add_argument("--token", default="dev")
    parser.add_argument("--run-id", help="run: the run's id")
    parser.add_argument("--input", type=Path, help="run: a JSON file with the play's input")
    parser.add_argument("--temporal", help="worker: the Temporal server, HOST:PORT")
    parser.add_argument("--task-queue", help="worker: the task queue to serve")
    return parser.parse_args(argv)


def _ready_then(wait: Callable[[], object]) -> None:
    print("ready", flush=True)
    wait()


async def _run(args: argparse.Namespace, tools: list[Any]) -> dict[str, Any]:
    input = orjson.loads(args.input.read_bytes())
    _ready_then(sys.stdin.readline)
    cpu = cpu_s()
    result = await pl.arun(
        scale_play, input, store=args.store, run_id=args.run_id, tools=tools, stall_after=None
    )
    stats = result.stats.to_dict()
    return {
        "status": result.status,
        "error": result.error,
        "stats": {**{k: stats.get(k, 0) for k in _STATS}, "errors": stats.get("errors", {})},
        "cpu_s": round(cpu_s() - cpu, 3),
    }


async def _serve(args: argparse.Namespace, tools: list[Any]) -> dict[str, Any]:
    from playline.backends import temporal

    settings = temporal.WorkerSettings(concurrency=1)  # one run each: the runs spread out
    worker = temporal.TemporalWorker(args.temporal, store=args.store, plays=[scale_play],
                                     tools=tools, task_queue=args.task_queue,
                                     settings=settings)  # fmt: skip
    await worker.start()
    cpu = cpu_s()
    await asyncio.to_thread(_ready_then, sys.stdin.readline)
    await worker.shutdown()
    return {"cpu_s": round(cpu_s() - cpu, 3)}


def main(argv: list[str]) -> int:
    args = parse(argv)
    gateway = pl.Gateway(args.gateway, token=args.token)
    gateway.specs()  # an unreachable gateway fails here, before anything is recorded
    clock = GateClock()
    clock.install()
    tools: list[Any] = [Singles(gateway)]
    doc = asyncio.run(_run(args, tools) if args.mode == "run" else _serve(args, tools))
    doc["gate"] = clock.report()
    if args.mode == "worker":
        import gc

        gc.collect()  # the Temporal SDK's native objects, freed while the interpreter is whole
    print(orjson.dumps(doc).decode(), flush=True)
    return 0 if doc.get("status", "completed") in ("completed", "completed_with_errors") else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
