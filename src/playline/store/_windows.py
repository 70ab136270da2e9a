"""Windows of a dataset's rows, for a grid: a page in some order, filtered by state, and counts.

A grid shows a few dozen rows of a dataset that may hold millions, so it asks the store for a
window (``offset``/``limit``) in input order or sorted by one column's value, optionally only
the rows in one *state*: a cell status (``failed``: the rows with a failed cell) or the row
status ``waiting``. A state can be scoped to one *column* (``not_found`` of ``email``: the rows
whose email cell was not found), so a grid isolates one column's misses. ``RowCounts`` gives
the numbers its status chips show. The SQL stores do this in the database; ``MemoryStore``
uses the helpers here, which define the same order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._json import dumps
from ..errors import StoreError
from ._records import CellMeta

__all__ = [
    "CELL_STATES",
    "ROW_STATES",
    "RowCounts",
    "check_window",
    "count_states",
    "has_state",
    "sort_key",
]

# What a cell can be (SEMANTICS.md 18), and the row statuses a window can filter on.
CELL_STATES = ("queued", "running", "completed", "cached", "not_found", "skipped", "failed")
ROW_STATES = ("waiting",)


@dataclass(frozen=True, slots=True, kw_only=True)
class RowCounts:
    """What a dataset's rows hold: ``rows`` in all, ``statuses`` by row status, ``cells`` by
    cell status, and ``rows_with`` the rows a state filter keeps (what a chip counts)."""

    rows: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    cells: dict[str, int] = field(default_factory=dict)
    rows_with: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "statuses": dict(self.statuses),
            "cells": dict(self.cells),
            "rows_with": dict(self.rows_with),
        }


def check_window(
    offset: int,
    limit: int,
    state: str | None,
    sort: str | None = None,
    column: str | None = None,
) -> None:
    """Refuse a window no grid asks for, saying what is allowed."""
    if sort is not None and not sort:
        raise StoreError("A row window sorted by a column needs the column's name (got '').")
    if offset < 0 or limit < 0:
        raise StoreError(f"A row window needs offset >= 0 and limit >= 0 (got {offset}, {limit}).")
    if state is not None and state not in CELL_STATES and state not in ROW_STATES:
        raise StoreError(
            f"Unknown row state {state!r}: use one of {', '.join(CELL_STATES + ROW_STATES)}."
        )
    if column is not None and (not column or state is None or state in ROW_STATES):
        raise StoreError(
            f"A row window scoped to a column ({column!r}) needs the column's name and a cell "
            f"state, one of {', '.join(CELL_STATES)} (got state={state!r})."
        )


def has_state(
    status: str, cells: Mapping[str, CellMeta], state: str, column: str | None = None
) -> bool:
    """Whether a row (its status and cells) is in ``state``; with ``column``, whether that
    column's cell is."""
    if state in ROW_STATES:
        return status == state
    if column is not None:
        meta = cells.get(column)
        return isinstance(meta, Mapping) and meta.get("status") == state
    return any(meta.get("status") == state for meta in cells.values())


def sort_key(value: Any) -> tuple[int, Any]:
    """The order of cell values when a window is sorted by a column, as SQLite's
    ``json_extract`` gives it: missing and null first, then numbers (booleans as 0 and 1),
    then text, with lists and objects as their JSON text."""
    if value is None:
        return (0, 0)
    if isinstance(value, bool | int | float):
        return (1, float(value))
    if isinstance(value, str):
        return (2, value)
    return (2, dumps(value, ordered=True).decode())


def count_states(rows: Iterable[tuple[str, Mapping[str, CellMeta]]]) -> RowCounts:
    """``RowCounts`` of (row status, cells) pairs."""
    total = 0
    statuses: dict[str, int] = {}
    cells: dict[str, int] = {}
    rows_with: dict[str, int] = {}
    for status, metas in rows:
        total += 1
        statuses[status] = statuses.get(status, 0) + 1
        seen: set[str] = set()
        for meta in metas.values():
            cell = str(meta.get("status"))
            cells[cell] = cells.get(cell, 0) + 1
            seen.add(cell)
        for cell in seen:
            rows_with[cell] = rows_with.get(cell, 0) + 1
    for state in ROW_STATES:
        if statuses.get(state):
            rows_with[state] = statuses[state]
    return RowCounts(rows=total, statuses=statuses, cells=cells, rows_with=rows_with)
