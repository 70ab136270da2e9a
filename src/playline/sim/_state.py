"""The simulator's mutable state: one world, and the ledger, buckets, jobs, faults and
idempotency keys over it.

Everything here is touched only from the server's event loop (the in-process handle hops onto
that loop to read or change it), so nothing needs a lock.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import orjson

from ._catalog import ToolSpec, build_catalog
from ._doubles import Double, build_doubles, scaled_clock
from ._faults import Faults, ToolFault, injected_failure, throttled
from ._idempotency import KeyMemory
from ._jobs import Jobs
from ._ledger import Ledger
from ._limits import TokenBucket
from ._world import World, world_for

DEFAULT_LATENCY_MS = 20.0


class SimState:
    """The state behind one running simulator."""

    def __init__(
        self,
        *,
        seed: int = 7,
        token: str = "dev",
        latency_ms: float | None = None,
        providers: bool = False,
        time_scale: float = 1.0,
        time_origin: float | None = None,
    ):
        self.seed = seed
        self.token = token
        self.authorization = f"Bearer {token}"
        self.world: World = world_for(seed)
        self.catalog: dict[str, ToolSpec] = build_catalog()
        self.default_latency_ms = DEFAULT_LATENCY_MS if latency_ms is None else float(latency_ms)
        self.ledger = Ledger()
        self.faults = Faults(self.catalog)
        self.jobs = Jobs()
        self.keys = KeyMemory()
        self.buckets: dict[str, TokenBucket] = {}
        self._sequence: dict[str, int] = {}
        self._throttle_sequence: dict[str, int] = {}
        self._requests = 0
        self._jitter = random.Random(seed)
        self._faults_changed: asyncio.Event | None = None
        # the real providers' doubles (``--providers``), taking the token as their key
        self.doubles: dict[str, Double] = (
            build_doubles(self.world, token, clock=scaled_clock(time_scale, time_origin))
            if providers
            else {}
        )
        for double in self.doubles.values():
            double.latency = self.default_latency_ms / 1000
        self.meta_json: dict[str, bytes] = {}
        self.catalog_json = b""
        self._publish()

    def _publish(self) -> None:
        """Render the metadata the gateway serves, with the faults now in force (rate
        overrides, ``no_idempotency``), once per change rather than once per request."""
        metas = {}
        for tid, spec in self.catalog.items():
            bucket_id = spec.bucket_id
            bulk = f"{spec.base}.bulk" if spec.kind == "single" else spec.id
            metas[tid] = spec.meta(
                rate=self.faults.published_rate(bucket_id, self.catalog[bucket_id].rate),
                header_keys=not self.faults.for_tool(tid).no_idempotency,
                item_keys=not self.faults.for_tool(bulk).no_idempotency,
            )
        self.meta_json = {tid: orjson.dumps(meta) for tid, meta in metas.items()}
        self.catalog_json = orjson.dumps({"tools": list(metas.values())})

    def reset(self) -> None:
        """Forget the ledger, buckets, jobs, idempotency keys, faults and fault sequences (not
        the world)."""
        self.ledger = Ledger()
        self.faults.clear()
        self.jobs.clear()
        self.keys.clear()
        self.buckets.clear()
        self._sequence.clear()
        self._throttle_sequence.clear()
        self._publish()
        self._signal()

    def forget_jobs(self) -> int:
        """Drop every async job, as a provider restarted without persistence would; returns
        how many. Idempotency keys and the ledger stay."""
        n = len(self.jobs)
        self.jobs.clear()
        return n

    def request_id(self) -> str:
        # Request ids keep counting across resets: they name requests, not ledger entries.
        self._requests += 1
        return f"req_{self._requests}"

    def bucket(self, spec: ToolSpec) -> TokenBucket:
        bucket_id = spec.bucket_id
        bucket = self.buckets.get(bucket_id)
        if bucket is None:
            rate = self.faults.rate(bucket_id, self.catalog[bucket_id].rate)
            bucket = self.buckets[bucket_id] = TokenBucket(rate.per_second, rate.burst)
        return bucket

    def update_faults(self, doc: Any) -> dict[str, Any]:
        """Apply a fault document (raises ``FaultError``); returns the faults now in force."""
        for bucket_id in self.faults.update(doc):
            self.buckets.pop(bucket_id, None)
        self._publish()
        self._signal()
        return self.faults.snapshot()

    def _signal(self) -> None:
        """Wake the requests held by a ``hold`` fault so they look at the faults again."""
        if self._faults_changed is not None:
            self._faults_changed.set()
            self._faults_changed = None

    async def held(self, spec: ToolSpec) -> None:
        """Return once ``spec`` is not held (at once, unless a ``hold`` fault is on)."""
        while self.faults.for_tool(spec.id).hold:
            if self._faults_changed is None:
                self._faults_changed = asyncio.Event()
            await self._faults_changed.wait()

    def failure(self, spec: ToolSpec, fault: ToolFault) -> int | None:
        """The error status this request of ``spec`` fails with, if any.

        The n-th accepted request of a tool fails by a pure function of (seed, tool, n), so a
        given sequence of requests meets the same failures on every run.
        """
        n = self._sequence.get(spec.id, 0) + 1
        self._sequence[spec.id] = n
        return injected_failure(self.seed, spec, fault, n)

    def throttle(self, spec: ToolSpec, fault: ToolFault) -> bool:
        """Whether this request of ``spec``, past its rate bucket, is throttled anyway: the
        n-th such request by a pure function of (seed, tool, n)."""
        if not fault.throttle_rate:
            return False
        n = self._throttle_sequence.get(spec.id, 0) + 1
        self._throttle_sequence[spec.id] = n
        return throttled(self.seed, spec.id, fault, n)

    def latency(self, fault: ToolFault, items: int = 0) -> float:
        """Seconds to hold this request: the configured latency +-50% jitter, longer for bulk."""
        ms = fault.latency_ms
        if ms is None:
            ms = self.faults.latency_ms
        if ms is None:
            ms = self.default_latency_ms
        if ms <= 0:
            return 0.0
        return ms * (0.5 + self._jitter.random()) * (1.0 + items / 50) / 1000.0
