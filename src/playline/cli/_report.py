"""Reading a run back from the store: its summary, step trace, ledger, log and rows.

Everything here works after the process that ran the play is gone (SEMANTICS.md 34).
"""

from __future__ import annotations

import csv
import datetime as dt
import json
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._json import canonical
from ..store import RunRecord, Store
from ._load import CliError

__all__ = [
    "SOURCE_KIND",
    "Trace",
    "columns_of",
    "export_rows",
    "require_run",
    "trace_of",
    "when",
    "write_rows",
]

SOURCE_KIND = "source"  # the event `playline run` writes: which file and function ran


def when(at: float) -> str:
    return dt.datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M:%S") if at else "-"


def require_run(store: Store, run_id: str) -> RunRecord:
    run = store.get_run(run_id)
    if run is None:
        raise CliError(
            f"No run {run_id!r} in the store {store.url}. List runs with `playline runs` "
            "(and check --store / PLAYLINE_STORE).",
            code=1,
        )
    return run


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


def _flat(value: Any) -> Any:
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


def write_rows(rows: Iterator[dict[str, Any]], out: Path, fields: list[str]) -> int:
    """Write ``rows`` as CSV or JSON lines (by the file's suffix); returns the row count."""
    count = 0
    with out.open("w", newline="", encoding="utf-8") as handle:
        if out.suffix.lower() == ".jsonl":
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
                count += 1
            return count
        writer = csv.DictWriter(handle, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _flat(v) for k, v in row.items()})
            count += 1
    return count


def columns_of(rows: Iterator[dict[str, Any]]) -> list[str]:
    """Every column, in the order first seen (rows may differ)."""
    seen: dict[str, None] = {}
    for row in rows:
        for name in row:
            seen.setdefault(name, None)
    return list(seen)
