"""The simulator's mutable state: one world, and the ledger, buckets, jobs and faults over it.

Everything here is touched only from the server's event loop (the in-process handle hops onto
that loop to read or change it), so nothing needs a lock.
"""

from __future__ import annotations

import random
from typing import Any

import orjson

from ._catalog import ToolSpec, build_catalog
from ._faults import Faults, ToolFault
from ._jobs import Jobs
from ._ledger import Ledger
from ._limits import TokenBucket
from ._world import World, unit, world_for

DEFAULT_LATENCY_MS = 20.0


class SimState:
    """The state behind one running simulator."""

    def __init__(self, *, seed: int = 7, token: str = "dev", latency_ms: float | None = None):
        self.seed = seed
        self.token = token
        self.authorization = f"Bearer {token}"
        self.world: World = world_for(seed)
        self.catalog: dict[str, ToolSpec] = build_catalog()
        self.default_latency_ms = DEFAULT_LATENCY_MS if latency_ms is None else float(latency_ms)
        self.meta_json = {tid: orjson.dumps(spec.meta()) for tid, spec in self.catalog.items()}
        self.catalog_json = orjson.dumps({"tools": [s.meta() for s in self.catalog.values()]})
        self.ledger = Ledger()
        self.faults = Faults(self.catalog)
        self.jobs = Jobs()
        # (tool, Idempotency-Key) -> the 200 answer given: a repeat is replayed, not redone
        self.replies: dict[tuple[str, str], bytes] = {}
        self.buckets: dict[str, TokenBucket] = {}
        self._sequence: dict[str, int] = {}
        self._requests = 0
        self._jitter = random.Random(seed)

    def reset(self) -> None:
        """Forget the ledger, buckets, jobs, replies, faults and fault sequences (not the
        world)."""
        self.ledger = Ledger()
        self.faults.clear()
        self.jobs.clear()
        self.replies.clear()
        self.buckets.clear()
        self._sequence.clear()

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
        return self.faults.snapshot()

    def failure(self, spec: ToolSpec, fault: ToolFault) -> int | None:
        """The error status this request of ``spec`` fails with, if any.

        The n-th accepted request of a tool fails by a pure function of (seed, tool, n), so a
        given sequence of requests meets the same failures on every run.
        """
        n = self._sequence.get(spec.id, 0) + 1
        self._sequence[spec.id] = n
        if fault.error_rate and unit(self.seed, "fault", spec.id, n) < fault.error_rate:
            return fault.status
        if spec.transient_rate and unit(self.seed, "transient", spec.id, n) < spec.transient_rate:
            return 503
        return None

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
