"""Reading a run back from the store: its summary, step trace, ledger, log and rows.

Everything here works after the process that ran the play is gone (SEMANTICS.md 34).
"""

from __future__ import annotations

import csv
import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._trace import flat
from ..store import RunRecord, Store
from ._load import CliError

__all__ = ["require_run", "when", "write_rows"]


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
            writer.writerow({k: flat(v) for k, v in row.items()})
            count += 1
    return count
