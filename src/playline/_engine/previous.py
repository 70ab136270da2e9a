"""What earlier runs of a play stored for a dataset's rows: incremental datasets and fresh cells.

A dataset in ``mode="net_new"`` runs only the rows whose key no earlier run of the same play
and dataset completed; a column that says when to recompute (``stale_after``, ``recompute``,
``recompute_on_error``) keeps the cell an earlier run stored for the row until then, and a
resolver reads it with ``row.previous(column)``. Both read the same thing, per chunk of rows as
the dataset admits them: the rows of the play's earlier runs (created before this one, newest
first) with those keys. A key's *previous row* is its row in the newest of them; it is *seen*
when any of them completed it.

Earlier runs are read one at a time, each by key (``load_rows``), and a key is looked for only
until it is found: a chunk costs a read per earlier run that holds the dataset only while some
of its keys are new. A play run every week for a year reads 52 sets at most per chunk.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..store import CellMeta, RowRecord, Store

__all__ = ["EarlierRows", "PreviousCell", "previous_cell"]

_EARLIER_RUNS = 10_000  # earlier runs of a play looked at, newest first


@dataclass(frozen=True, slots=True)
class PreviousCell:
    """The cell an earlier run stored for this row and column: what ``recompute=`` is given.

    ``status`` is the cell's (``completed``, ``cached``, ``not_found``, ``skipped``,
    ``failed``), ``updated_at`` when it was computed (kept cells keep the time they were first
    computed), ``age`` the seconds since then, ``error`` why it failed."""

    value: Any
    status: str
    updated_at: float
    age: float
    run_id: str
    error: str | None = None
    meta: Mapping[str, Any] | None = None  # the cell's stored metadata, as stored


class EarlierRows:
    """The rows earlier runs of ``play`` stored for ``dataset``, looked up by key: in
    ``net_new`` mode, which keys they completed (seen); for the others, each key's previous
    row, kept in ``previous`` until its row starts and takes it."""

    def __init__(
        self,
        store: Store,
        io: Callable[..., Any],
        *,
        play: str,
        dataset: str,
        run_id: str,
        net_new: bool,
    ) -> None:
        self._store = store
        self._io = io
        self._play = play
        self._dataset = dataset
        self._run_id = run_id
        self._net_new = net_new
        self._runs: list[str] | None = None  # the play's earlier runs, newest first
        self.previous: dict[str, RowRecord | None] = {}  # by key, for rows not started yet

    async def look_up(self, keys: Sequence[str]) -> set[str]:
        """Look up the previous rows of ``keys``; returns those seen (net_new: completed by
        an earlier run, so left out), whose previous rows are not kept."""
        previous: dict[str, RowRecord] = {}
        seen: set[str] = set()
        if not keys:
            return seen
        net_new = self._net_new
        for run_id in await self._earlier_runs():
            wanted = [k for k in keys if k not in previous or (net_new and k not in seen)]
            if not wanted:
                break
            found = await self._io(self._store.load_rows, run_id, self._dataset, wanted)
            for key, row in found.items():
                previous.setdefault(key, row)
                if net_new and row.status == "completed":
                    seen.add(key)
        for key in keys:
            if key not in seen:
                self.previous[key] = previous.get(key)
        return seen

    async def _earlier_runs(self) -> list[str]:
        if self._runs is None:
            self._runs = await self._io(self._find_runs)
        return self._runs

    def _find_runs(self) -> list[str]:
        store = self._store
        this = store.get_run(self._run_id)
        before = math.inf if this is None else this.created_at
        return [
            run.run_id
            for run in store.list_runs(limit=_EARLIER_RUNS, play=self._play)
            if run.run_id != self._run_id and run.created_at <= before
        ]


def previous_cell(row: RowRecord | None, column: str, now: float) -> PreviousCell | None:
    """The cell ``row`` (a previous row) holds for ``column``; None when it has none."""
    if row is None:
        return None
    meta: CellMeta | None = row.cells.get(column)
    if meta is None:
        return None
    updated = float(meta.get("updated_at", row.updated_at))
    return PreviousCell(
        value=row.values.get(column),
        status=meta["status"],
        updated_at=updated,
        age=max(0.0, now - updated),
        run_id=row.run_id,
        error=meta.get("error"),
        meta=meta,
    )
