"""Injected faults: tools down, error rates, latency and rate-limit overrides.

``POST /__faults`` merges a document into the current faults::

    {"latency_ms": 0,
     "tools": {"sim.email.alpha": {"down": true, "error_rate": 0.3, "status": 503,
                                   "rate_per_second": 100, "burst": 100, "latency_ms": 5}}}

A key set to ``null`` is removed, a tool set to ``null`` loses all its faults, and a top-level
``latency_ms`` of ``null`` restores the default latency. A tool's faults also apply to its
operations (bulk, poll) unless the operation sets its own; rate overrides belong to whoever owns
the bucket (the base tool for bulk operations) and reset that bucket.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._catalog import Rate, ToolSpec

_RATE_KEYS = frozenset({"rate_per_second", "burst"})


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


NO_FAULT = ToolFault()


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _valid(key: str, v: Any) -> bool:
    if key == "down":
        return isinstance(v, bool)
    if key == "error_rate":
        return _number(v) and 0.0 <= v <= 1.0
    if key == "status":
        return _int(v) and 400 <= v <= 599
    if key == "rate_per_second":
        return _number(v) and v > 0
    if key == "burst":
        return _int(v) and v >= 1
    return _number(v) and v >= 0  # latency_ms


_KEYS = frozenset({"down", "error_rate", "status", "rate_per_second", "burst", "latency_ms"})


def _check(tool: str, key: str, value: Any) -> None:
    if key not in _KEYS:
        raise FaultError(
            f"unknown fault {key!r} for {tool}; use down, error_rate, status, "
            "rate_per_second, burst or latency_ms"
        )
    if not _valid(key, value):
        raise FaultError(
            f"bad value {value!r} for fault {key!r} of {tool}: down is a bool, error_rate "
            "is 0..1, status 400..599, rate_per_second > 0, burst an int >= 1, latency_ms >= 0"
        )


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
                if key in _RATE_KEYS:
                    if spec.bucket_id != tool:
                        raise FaultError(
                            f"{tool} shares the rate bucket of {spec.bucket_id}; "
                            f"set {key} on {spec.bucket_id}"
                        )
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
        return ToolFault(
            down=entry.get("down", False),
            error_rate=float(entry.get("error_rate", 0.0)),
            status=entry.get("status", 503),
            latency_ms=entry.get("latency_ms"),
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

    def snapshot(self) -> dict[str, Any]:
        """The ``GET /__faults`` document."""
        return {
            "latency_ms": self.latency_ms,
            "tools": {tool: dict(faults) for tool, faults in self._tools.items()},
        }
