"""What a grid's window of rows holds beyond the stored rows: the rows not stored yet, listed as
pending, and each row's cost.

**Pending rows.** A dataset's rows are stored as they finish, so during a run the store holds
only the finished ones. The dataset's start says how many rows its input holds (the
``dataset`` event's ``total``, when known: a list, a CSV file); until the dataset completes,
a window lists that many rows: the stored ones (in the window's order), then a placeholder for
each row not stored yet (``PENDING_KEY`` and its position; no index, no values). Storing each
input row at its start would list them with their values, but doubles a run's row writes
and makes every reader of rows (exports, counts, resumes) tell a pending row from a finished
one. ``DeclaredRows`` reads the dataset events incrementally (after the last seq it read),
so a window does not scan a long run's events each time.

**Cost per row.** The credits (and dollars) the ledger holds for each row, over every
attempt: what the row drawer lists as its charges. ``RowCosts`` reads a run's ledger at most
once a second per run and only while its events change, and only for a grid that shows the
cost column.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from ..store import Store

__all__ = ["PENDING_KEY", "DeclaredRows", "RowCosts", "declared_columns", "pending_rows"]

# A placeholder row's key starts with NUL, which no stored row key holds (the engine refuses
# such keys), so it never names a stored row.
PENDING_KEY = "\x00pending:"
COSTS_EVERY = 1.0  # seconds: a running run's ledger is read again at most this often
COSTS_KEPT = 8  # runs whose costs are kept (the ones grids look at)
# the counts of a dataset's end event of the input rows it never stores: duplicate keys, rows
# an earlier run completed (net_new), rows with no key set aside (on_bad_key="skip")
_LEFT_OUT = ("rows_duplicate", "rows_seen", "rows_set_aside")


@dataclass
class _Declared:
    seq: int = 0  # the last event read
    total: int | None = None  # rows the input holds, as the last start said
    left_out: int = 0  # of them, never stored (_LEFT_OUT)
    completed: bool = False


class DeclaredRows:
    """How many rows each dataset lists while it runs (``expected``), per (run, dataset)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str], _Declared] = {}

    def expected(self, store: Store, run_id: str, dataset: str, *, seq: int) -> int | None:
        """The rows the dataset's input holds, less those it leaves out, while the dataset
        has not completed; None when unknown or completed (the stored rows are all of it).
        ``seq``: the run's last event, read before the window (events up to it are taken)."""
        key = (run_id, dataset)
        with self._lock:
            known = self._seen.get(key) or _Declared()
        if seq > known.seq:
            known = _read(store, run_id, dataset, known, seq)
            with self._lock:
                self._seen[key] = known
        if known.completed or known.total is None:
            return None
        return max(0, known.total - known.left_out)


def _read(store: Store, run_id: str, dataset: str, known: _Declared, seq: int) -> _Declared:
    """``known`` updated with the dataset's events after its seq, up to ``seq``."""
    new = _Declared(known.seq, known.total, known.left_out, known.completed)
    for event in store.read_events(run_id, after_seq=known.seq, kinds=["dataset"]):
        if event.seq > seq:
            break  # taken by a later window, which asks from ``new.seq``
        new.seq = event.seq
        if event.dataset != dataset:
            continue
        data = event.data or {}
        if event.status == "running":  # a start, or a resume's: the input's count again
            total = data.get("total")
            new.total = total if isinstance(total, int) else None
            new.left_out, new.completed = 0, False
        elif event.status == "completed":
            new.completed = True
        else:  # stopped, failed, waiting: its counts so far
            new.left_out = sum(int(data.get(n) or 0) for n in _LEFT_OUT)
    new.seq = max(new.seq, seq)
    return new


def declared_columns(store: Store, run_id: str, dataset: str) -> tuple[list[str], dict[str, Any]]:
    """What the dataset's starts declared of its columns: the computed ones (those whose cells
    have a state to filter by; the others are its input fields), and the fields a column's
    nested results are shown by, where its ``with_column`` named them (``fields=``); the grid
    chooses the others' from their values."""
    names: dict[str, None] = {}
    fields: dict[str, Any] = {}
    for event in store.read_events(run_id, kinds=["dataset"]):
        if event.dataset == dataset and event.status == "running":
            data = event.data or {}
            names.update(dict.fromkeys(data.get("columns") or ()))
            declared = data.get("fields")
            for name, shown in (declared if isinstance(declared, dict) else {}).items():
                if isinstance(shown, list):
                    fields[str(name)] = [str(f) for f in shown]
    return list(names), fields


def pending_rows(start: int, count: int) -> list[dict[str, Any]]:
    """``count`` placeholder rows from window position ``start``, as ``row_doc`` shapes rows."""
    return [
        {
            "key": f"{PENDING_KEY}{position}",
            "index": None,
            "status": "pending",
            "error": None,
            "values": {},
            "cells": {},
            "pending": True,
        }
        for position in range(start, start + count)
    ]


class RowCosts:
    """Each row's charges in the ledger, per run: ``{(dataset, row key): (credits, usd)}``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # run -> (the seq it was read at, when, the costs)
        self._runs: dict[str, tuple[int, float, dict[tuple[str, str], tuple[float, float]]]] = {}

    def of(
        self, store: Store, run_id: str, *, seq: int
    ) -> dict[tuple[str, str], tuple[float, float]]:
        """The run's costs per row as of event ``seq`` (at most ``COSTS_EVERY`` old)."""
        with self._lock:
            cached = self._runs.get(run_id)
        now = time.monotonic()
        if cached is not None and (cached[0] >= seq or now - cached[1] < COSTS_EVERY):
            return cached[2]
        costs: dict[tuple[str, str], tuple[float, float]] = {}
        for charge in store.read_ledger(run_id):
            if charge.dataset is None or charge.row_key is None:
                continue  # not a row's: made outside a dataset
            row = (charge.dataset, charge.row_key)
            credits, usd = costs.get(row, (0.0, 0.0))
            if charge.unit == "usd":
                usd += charge.credits
            else:
                credits += charge.credits
            costs[row] = (credits, usd)
        with self._lock:
            self._runs.pop(run_id, None)
            self._runs[run_id] = (seq, now, costs)  # the newest last
            while len(self._runs) > COSTS_KEPT:
                del self._runs[next(iter(self._runs))]
        return costs
