"""The read model: a run, read back from the store, as the command line and the web show it.

Everything here works after the process that ran the play is gone (SEMANTICS.md 34), from
any process that can read the store: a run's status as a person should see it (a run whose
holder died is ``interrupted``, not ``running``), its step trace (datasets, requests and
charges per tool, waterfalls, child plays), and its rows for export.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ._json import canonical
from ._runner import gate_statistics
from .store import RunRecord, RunStatus, Store
from .store._claims import lease_live

__all__ = [
    "INTERRUPTED",
    "SOURCE_KIND",
    "Trace",
    "columns_of",
    "export_rows",
    "flat",
    "gate_statistics",
    "run_status",
    "trace_of",
]

SOURCE_KIND = "source"  # the event `playline run` writes: which file and function ran
INTERRUPTED = "interrupted"


def run_status(run: RunRecord, now: float | None = None) -> str:
    """The status to show: a ``running`` run whose holder is gone (its process died, or its
    lease ran out unrenewed) was interrupted; resuming it continues where it stopped."""
    if run.status is RunStatus.RUNNING and not lease_live(
        run.holder, run.lease_until, time.time() if now is None else now
    ):
        return INTERRUPTED
    return run.status.value


@dataclass
class DatasetTrace:
    name: str
    description: str | None = None
    columns: list[str] = field(default_factory=list)
    status: str = "running"
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class ToolTrace:
    requests: int = 0
    inputs: int = 0
    calls: int = 0  # live calls in the ledger (charged or not)
    found: int = 0
    credits: float = 0.0


@dataclass
class Trace:
    """A run's step trace: its datasets, its batches and charges per tool, its other steps."""

    source: dict[str, Any] | None = None
    datasets: dict[str, DatasetTrace] = field(default_factory=dict)
    tools: dict[str, ToolTrace] = field(default_factory=lambda: defaultdict(ToolTrace))
    other: Counter[str] = field(default_factory=Counter)
    logs: int = 0
    attempts: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "attempts": self.attempts,
            "datasets": [vars(d) for d in self.datasets.values()],
            "tools": {tool: vars(t) for tool, t in sorted(self.tools.items())},
            "steps": dict(self.other),
            "log_lines": self.logs,
        }


def trace_of(store: Store, run_id: str) -> Trace:
    trace = Trace()
    for event in store.read_events(run_id, kinds=None):
        kind = event.kind
        if kind in ("row", "cell"):
            continue
        data = event.data or {}
        if kind == SOURCE_KIND:
            trace.source = data
        elif kind == "run" and event.status == "running":
            trace.attempts += 1
        elif kind == "dataset" and event.dataset:
            ds = trace.datasets.setdefault(event.dataset, DatasetTrace(event.dataset))
            if event.status == "running":
                ds.description = data.get("description")
                ds.columns = list(data.get("columns") or [])
            ds.status = event.status or ds.status
            if event.status == "completed":
                ds.stats = data
        elif kind == "batch" and event.provider:
            tool = trace.tools[event.provider]
            tool.requests += 1
            tool.inputs += int(data.get("size", 1))
        elif kind == "log":
            trace.logs += 1
        elif kind != "run":
            trace.other[kind] += 1
    for entry in store.read_ledger(run_id):
        tool = trace.tools[entry.tool]
        tool.calls += 1
        tool.found += int(entry.found)
        tool.credits += entry.credits
    return trace


def flat(value: Any) -> Any:
    """A cell value as one CSV field: nested values as canonical JSON."""
    return value if value is None or isinstance(value, str | int | float) else canonical(value)


def export_rows(
    store: Store, run_id: str, dataset: str, *, with_status: bool
) -> Iterator[dict[str, Any]]:
    """The rows of ``dataset``: cell values, and with ``with_status`` the row's key, status
    and error plus each computed column's ``<column>.status`` and ``<column>.provider``."""
    for record in store.iter_rows(run_id, dataset):
        if not with_status:
            yield dict(record.values)
            continue
        row: dict[str, Any] = {"_key": record.key, "_status": record.status}
        row["_error"] = record.error
        for column, value in record.values.items():
            row[column] = value
            meta = record.cells.get(column)
            if meta is not None:
                row[f"{column}.status"] = meta.get("status")
                row[f"{column}.provider"] = meta.get("provider")
        yield row


def columns_of(rows: Iterator[dict[str, Any]]) -> list[str]:
    """Every column, in the order first seen (rows may differ)."""
    seen: dict[str, None] = {}
    for row in rows:
        for name in row:
            seen.setdefault(name, None)
    return list(seen)
