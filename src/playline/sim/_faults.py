"""Injected faults: what real providers do to their clients, switched on per tool.

``POST /__faults`` merges a document into the current faults::

    {"latency_ms": 0,
     "tools": {"sim.email.alpha": {"down": true, "error_rate": 0.3, "status": 503,
                                   "rate_per_second": 100, "burst": 100, "latency_ms": 5,
                                   "throttle_rate": 0.2, "throttle_retry_after_ms": 1500,
                                   "no_idempotency": true, "publish_rate": false,
                                   "hold": true}}}

Per tool (each optional):

- ``down`` (bool): every request answers 503 ``tool_down``.
- ``error_rate`` (0..1) and ``status`` (400..599, default 503): that share of accepted
  requests fails with ``status`` (before the work for retry-safe tools, after it otherwise).
- ``rate_per_second`` (> 0) and ``burst`` (int >= 1): a new token bucket. Published in the
  tool's metadata (and its bulk operation's) unless ``publish_rate`` is ``false``: a provider
  whose documented limits lag its real ones.
- ``latency_ms`` (>= 0): this tool's answer latency (+-50% jitter).
- ``throttle_rate`` (0..1): that share of requests answered 429 ``throttled`` before any
  work, whatever the rate (concurrency caps, bursts, shared quotas do this to real clients).
- ``throttle_retry_after_ms`` (>= 0): the ``Retry-After`` of those 429s (header in whole
  seconds, never 0; body ``retry_after_ms``). Absent or ``null``: neither header nor body
  field, a 429 that names no cause.
- ``hold`` (bool): accepted requests wait where the provider works (keys in progress, not yet
  charged) until the hold is lifted (``null`` or ``false``) or the simulator is reset; the
  ledger's ``inflight`` shows them. Deterministic in-flight requests for tests: a second
  request with the same key (409), a client killed while its call is in doubt.
- ``no_idempotency`` (bool): the tool ignores ``Idempotency-Key`` headers and bulk item keys
  (every request is worked and charged) and its metadata says
  ``"idempotency": {"header": false, "bulk_items": false}``.

Which requests fail or are throttled is a pure function of (seed, tool, n-th request), so a
given sequence of requests meets the same faults on every run.

A key set to ``null`` is removed, a tool set to ``null`` loses all its faults, and a top-level
``latency_ms`` of ``null`` restores the default latency. A tool's faults also apply to its
operations (bulk, poll) unless the operation sets its own; rate overrides (and
``publish_rate``) belong to whoever owns the bucket (the base tool for bulk operations) and
reset that bucket.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._catalog import Rate, ToolSpec
from ._world import unit

_RATE_KEYS = frozenset({"rate_per_second", "burst"})
# Keys that belong to the owner of a rate bucket (a bulk operation spends its base tool's).
_BUCKET_KEYS = _RATE_KEYS | {"publish_rate"}


class FaultError(ValueError):
    """A fault document that cannot be applied; ``code`` is the HTTP error code to answer."""

    def __init__(self, message: str, code: str = "invalid_input") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolFault:
    """The faults in force for one tool or operation."""

    down: bool = False
    error_rate: float = 0.0
    status: int = 503
    latency_ms: float | None = None
    throttle_rate: float = 0.0
    throttle_retry_after_ms: float | None = None
    no_idempotency: bool = False
    hold: bool = False


NO_FAULT = ToolFault()


def injected_failure(seed: int, spec: ToolSpec, fault: ToolFault, n: int) -> int | None:
    """The error status the ``n``-th accepted request of ``spec`` fails with, if any: the
    fault's ``error_rate``, then the tool's own transient failures (gamma's 5%)."""
    if fault.error_rate and unit(seed, "fault", spec.id, n) < fault.error_rate:
        return fault.status
    if spec.transient_rate and unit(seed, "transient", spec.id, n) < spec.transient_rate:
        return 503
    return None


def throttled(seed: int, tool: str, fault: ToolFault, n: int) -> bool:
    """Whether the ``n``-th request of ``tool`` to pass its rate bucket is throttled anyway."""
    return bool(fault.throttle_rate) and unit(seed, "throttle", tool, n) < fault.throttle_rate


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _share(v: Any) -> bool:
    return _number(v) and 0.0 <= v <= 1.0


_VALID: dict[str, Callable[[Any], bool]] = {
    "down": lambda v: isinstance(v, bool),
    "error_rate": _share,
    "status": lambda v: _int(v) and 400 <= v <= 599,
    "rate_per_second": lambda v: _number(v) and v > 0,
    "burst": lambda v: _int(v) and v >= 1,
    "latency_ms": lambda v: _number(v) and v >= 0,
    "throttle_rate": _share,
    "throttle_retry_after_ms": lambda v: _number(v) and v >= 0,
    "no_idempotency": lambda v: isinstance(v, bool),
    "publish_rate": lambda v: isinstance(v, bool),
    "hold": lambda v: isinstance(v, bool),
}
_EXPECTED = (
    "down, hold, no_idempotency and publish_rate are bools; error_rate and throttle_rate are 0..1; "
    "status 400..599; rate_per_second > 0; burst an int >= 1; latency_ms and "
    "throttle_retry_after_ms >= 0"
)


def _check(tool: str, key: str, value: Any) -> None:
    valid = _VALID.get(key)
    if valid is None:
        raise FaultError(f"unknown fault {key!r} for {tool}; use {', '.join(_VALID)}")
    if not valid(value):
        raise FaultError(f"bad value {value!r} for fault {key!r} of {tool}: {_EXPECTED}")


class Faults:
    """The current fault configuration, validated as a whole before it is applied."""

    def __init__(self, catalog: Mapping[str, ToolSpec]) -> None:
        self._catalog = catalog
        self.latency_ms: float | None = None
        self._tools: dict[str, dict[str, Any]] = {}
        self._effective: dict[str, ToolFault] = {}

    def clear(self) -> None:
        self.latency_ms = None
        self._tools = {}
        self._effective = {}

    def update(self, doc: Any) -> set[str]:
        """Merge ``doc`` in; returns the bucket ids whose rate override changed."""
        if not isinstance(doc, dict):
            raise FaultError("faults must be a JSON object like {'tools': {...}}")
        unknown = set(doc) - {"latency_ms", "tools"}
        if unknown:
            raise FaultError(
                f"unknown top-level fault keys {sorted(unknown)}; use latency_ms, tools"
            )
        latency = doc.get("latency_ms")
        if latency is not None and not (_number(latency) and latency >= 0):
            raise FaultError(f"latency_ms must be a number >= 0 or null, not {latency!r}")
        tools = doc.get("tools") or {}
        if not isinstance(tools, dict):
            raise FaultError("tools must map tool ids to fault objects")
        merged = {tool: dict(faults) for tool, faults in self._tools.items()}
        rebucket: set[str] = set()
        for tool, faults in tools.items():
            spec = self._catalog.get(tool)
            if spec is None:
                raise FaultError(f"no tool {tool!r}; GET /api/v2/integrations", "unknown_tool")
            if faults is None:
                if _RATE_KEYS & merged.pop(tool, {}).keys():
                    rebucket.add(tool)
                continue
            if not isinstance(faults, dict):
                raise FaultError(f"faults for {tool} must be an object or null")
            entry = merged.setdefault(tool, {})
            for key, value in faults.items():
                if key in _BUCKET_KEYS and spec.bucket_id != tool:
                    raise FaultError(
                        f"{tool} shares the rate bucket of {spec.bucket_id}; "
                        f"set {key} on {spec.bucket_id}"
                    )
                if key in _RATE_KEYS:
                    rebucket.add(tool)
                if value is None:
                    entry.pop(key, None)
                else:
                    _check(tool, key, value)
                    entry[key] = value
            if not entry:
                del merged[tool]
        if "latency_ms" in doc:
            self.latency_ms = None if latency is None else float(latency)
        self._tools = merged
        self._effective = {
            spec.id: self._resolve(spec)
            for spec in self._catalog.values()
            if spec.id in merged or spec.base in merged
        }
        return rebucket

    def _resolve(self, spec: ToolSpec) -> ToolFault:
        entry = {**self._tools.get(spec.base, {}), **self._tools.get(spec.id, {})}
        retry_after = entry.get("throttle_retry_after_ms")
        return ToolFault(
            down=entry.get("down", False),
            error_rate=float(entry.get("error_rate", 0.0)),
            status=entry.get("status", 503),
            latency_ms=entry.get("latency_ms"),
            throttle_rate=float(entry.get("throttle_rate", 0.0)),
            throttle_retry_after_ms=None if retry_after is None else float(retry_after),
            no_idempotency=entry.get("no_idempotency", False),
            hold=entry.get("hold", False),
        )

    def for_tool(self, tool: str) -> ToolFault:
        return self._effective.get(tool, NO_FAULT)

    def rate(self, bucket_id: str, default: Rate) -> Rate:
        """The rate of ``bucket_id``'s bucket: the catalog's, or the override."""
        entry = self._tools.get(bucket_id, {})
        if not _RATE_KEYS & entry.keys():
            return default
        per_second = float(entry.get("rate_per_second", default.per_second))
        burst = entry.get("burst")
        if burst is None:
            burst = max(1, int(per_second)) if "rate_per_second" in entry else default.burst
        return Rate(per_second=per_second, burst=int(burst))

    def published_rate(self, bucket_id: str, default: Rate) -> Rate:
        """The rate ``bucket_id``'s metadata states: the enforced one unless the override is
        set not to be published."""
        if self._tools.get(bucket_id, {}).get("publish_rate", True):
            return self.rate(bucket_id, default)
        return default

    def snapshot(self) -> dict[str, Any]:
        """The ``GET /__faults`` document."""
        return {
            "latency_ms": self.latency_ms,
            "tools": {tool: dict(faults) for tool, faults in self._tools.items()},
        }
