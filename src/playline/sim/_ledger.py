"""The ledger: what every tool was asked, refused and charged, for tests to audit."""

from __future__ import annotations

import time
from typing import Any


class Ledger:
    """Counts per tool or operation id; charges per base tool in thousandths of a credit.

    A *duplicate charge* is a second (or later) charge of the same base tool for the same
    canonical input: exactly what a runtime that never pays twice must avoid.
    """

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.rejected: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.items: dict[str, int] = {}
        self.charges_milli: dict[str, int] = {}
        self.inputs: dict[str, dict[str, int]] = {}
        self.duplicate_charges = 0
        self.replayed: dict[str, int] = {}
        self.replayed_items: dict[str, int] = {}
        self.conflicts: dict[str, int] = {}
        self.throttled: dict[str, int] = {}
        self.inflight: dict[str, int] = {}
        self.max_inflight: dict[str, int] = {}
        self.first_last: dict[str, tuple[float, float]] = {}  # monotonic times of accepted calls

    def replay(self, tool: str) -> None:
        """A whole request answered from an ``Idempotency-Key`` header's first answer."""
        self.replayed[tool] = self.replayed.get(tool, 0) + 1

    def replay_items(self, tool: str, n: int) -> None:
        """Bulk items answered from their ``idempotency_keys``' first answers."""
        self.replayed_items[tool] = self.replayed_items.get(tool, 0) + n

    def conflict(self, tool: str) -> None:
        """A request refused (409) because a request in progress holds one of its keys."""
        self.conflicts[tool] = self.conflicts.get(tool, 0) + 1

    def throttle(self, tool: str) -> None:
        """A request refused (429 ``throttled``) by the ``throttle_rate`` fault."""
        self.throttled[tool] = self.throttled.get(tool, 0) + 1

    def call(self, tool: str) -> None:
        self.calls[tool] = self.calls.get(tool, 0) + 1
        now = time.monotonic()
        self.first_last[tool] = (self.first_last.get(tool, (now, now))[0], now)

    def reject(self, tool: str) -> None:
        self.rejected[tool] = self.rejected.get(tool, 0) + 1

    def error(self, tool: str) -> None:
        self.errors[tool] = self.errors.get(tool, 0) + 1

    def bulk_items(self, tool: str, n: int) -> None:
        self.items[tool] = self.items.get(tool, 0) + n

    def enter(self, tool: str) -> None:
        n = self.inflight.get(tool, 0) + 1
        self.inflight[tool] = n
        if n > self.max_inflight.get(tool, 0):
            self.max_inflight[tool] = n

    def leave(self, tool: str) -> None:
        self.inflight[tool] -= 1

    def charge(self, tool: str, key: str, milli: int) -> None:
        """Charge base tool ``tool`` ``milli`` thousandths of a credit for input ``key``."""
        if milli <= 0:
            return
        self.charges_milli[tool] = self.charges_milli.get(tool, 0) + milli
        per_input = self.inputs.setdefault(tool, {})
        times = per_input.get(key, 0) + 1
        per_input[key] = times
        if times > 1:
            self.duplicate_charges += 1

    def snapshot(self) -> dict[str, Any]:
        """The ``GET /__ledger`` document."""
        return {
            "calls": dict(self.calls),
            "rejected": dict(self.rejected),
            "errors": dict(self.errors),
            "items": dict(self.items),
            "charges": {tool: m / 1000 for tool, m in self.charges_milli.items()},
            "credits": sum(self.charges_milli.values()) / 1000,
            "duplicate_charges": self.duplicate_charges,
            "replayed": dict(self.replayed),
            "replayed_items": dict(self.replayed_items),
            "conflicts": dict(self.conflicts),
            "throttled": dict(self.throttled),
            "inputs": {tool: dict(keys) for tool, keys in self.inputs.items()},
            "inflight": {tool: n for tool, n in self.inflight.items() if n},
            "max_inflight": dict(self.max_inflight),
            # seconds from a tool's first accepted call to its last: its rate is calls / span
            "spans": {tool: last - first for tool, (first, last) in self.first_last.items()},
        }
