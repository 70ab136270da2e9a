"""A grid's windows of a row set on SQL (``row_window``, ``count_rows``, ``row_counts``), for
both dialects, without reading every row of a set that holds a million.

- In order, unfiltered: ``rows_page`` (set, idx, key, states) gives the order; the count is
  the set's highest row number (rows are numbered 1, 2, ... within a set, never removed).
- Filtered by a state: each row's ``states`` bits (``_tables.row_states``) are in
  ``rows_page``, so a window walks that index in order and a count scans it, reading no row
  it does not return (SQLite: ~0.1 s a million rows; the count is kept until something is
  committed to the store, as the grid asks for it again with each window).
- Sorted by a column, or filtered on one column's cell state, in a set of ``INDEX_ROWS`` rows
  or more: the set gets an index of its own on that value (``CREATE INDEX ... WHERE set_id =
  N``), made by the first window that asks (a few seconds a million rows, once), then kept
  current by the database as rows are written: a row whose value or state changes moves in
  it. A sort has one index a direction (ties stay in input order both ways). A set holds at
  most ``MAX_INDEXES``; past them, in a smaller set, for a name no index expression can
  hold, or in a store opened read-only, a window reads the rows' JSON as before.

JSON inside SQL is what the dialects spell differently: the fragments here are SQLite's
(``json_extract``, ``json_each``); PostgreSQL overrides them with ``->``, ``->>`` and
``jsonb_each`` (``_postgres.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ...errors import StoreError
from .._records import RowRecord
from .._windows import ROW_STATES, RowCounts, check_window
from ._cursor import Cursor
from ._tables import CELL_BITS, ROW_BITS, ROW_COLUMNS, row_from

__all__ = ["INDEX_ROWS", "MAX_INDEXES", "RowWindows"]

INDEX_ROWS = 10_000  # rows of a set from which a sort or a column's filter gets an index
MAX_INDEXES = 8  # such indexes a set may hold (each costs its set's writes a little)
_COUNTS_KEPT = 256  # counts kept (see count_rows)

# an index made for a window: what it orders by, and of which column
_ASC, _DESC, _CELL = "asc", "desc", "cell"


@dataclass(frozen=True, slots=True)
class _Index:
    """An index made for windows: its name, and the expression it holds."""

    name: str
    expression: str


def literal(text: str) -> str:
    """``text`` as an SQL string literal (both dialects: standard strings)."""
    return "'" + text.replace("'", "''") + "'"


class RowWindows:
    """The window methods of ``SQLStore``; the dialect supplies what is declared here."""

    if TYPE_CHECKING:  # the dialect's (see SQLStore)

        def _transaction(self, what: str, *, write: bool) -> AbstractContextManager[Cursor]: ...
        def _before_long_work(self) -> None: ...
        def _set_id(self, cur: Cursor, run_id: str, dataset: str) -> int | None: ...

    # Each fragment takes its parameters in the order written.
    def _sql_value(self, name: str) -> str:
        """The value of the column ``name`` of a row (parameter: the name). A JSON path cannot
        hold a name with a double quote or a backslash: such a name is looked up by key."""
        if '"' in name or "\\" in name:
            return '(SELECT value FROM json_each("values") WHERE key = ?)'
        return "json_extract(\"values\", '$.\"' || ? || '\"')"

    def _sql_cell_counts(self) -> str:
        """Cells by status, and the rows with a cell in each (parameter: the set)."""
        return (
            "SELECT json_extract(c.value, '$.status'), COUNT(*), COUNT(DISTINCT rows.id) "
            "FROM rows, json_each(rows.cells) c WHERE rows.set_id = ? GROUP BY 1"
        )

    def _sql_cell_is(self, name: str) -> str:
        """Whether the cell of column ``name`` is in a status (parameters: the name, the
        status). A name no JSON path can hold is looked up by key, as in ``_sql_value``."""
        if '"' in name or "\\" in name:
            return (
                "(SELECT json_extract(c.value, '$.status') FROM json_each(rows.cells) c "
                "WHERE c.key = ?) = ?"
            )
        return "json_extract(rows.cells, '$.\"' || ? || '\".status') = ?"

    # the same, with the name written in (no parameter), as an index on them is declared and
    # used; None for a name that cannot be written so
    def _sql_value_of(self, name: str) -> str | None:
        if '"' in name or "\\" in name or "\0" in name:
            return None
        path = literal('$."' + name + '"')
        return f'json_extract("values", {path})'

    def _sql_cell_of(self, name: str) -> str | None:
        if '"' in name or "\\" in name or "\0" in name:
            return None
        path = literal('$."' + name + '".status')
        return f"json_extract(cells, {path})"

    def _sql_order(self, descending: bool) -> str:
        """A sort by value: nulls (and missing values) first ascending, last descending, as
        SQLite sorts them (and its indexes hold them) unasked."""
        return "DESC" if descending else "ASC"

    def _sql_indexes(self) -> str:
        """The names of the indexes in a range of names (parameters: its ends)."""
        return "SELECT name FROM sqlite_master WHERE type = 'index' AND name >= ? AND name < ?"

    def _sql_version(self) -> str | None:
        """A query whose answer changes whenever anything is committed to the store, by this
        connection (its changes) or another (the file's version), read in a count's
        transaction; None where there is none (each count is then made again)."""
        return "SELECT total_changes(), (SELECT data_version FROM pragma_data_version)"

    @cached_property
    def _counted(self) -> dict[tuple[int, str, str | None], tuple[tuple[Any, ...], int]]:
        """Counts made, by (set, state, column): the store's version then, and the count."""
        return {}

    def _sql_after_index(self) -> Sequence[str]:
        """What tells the planner of a new index's values (SQLite is told which index to
        read: nothing)."""
        return ()

    def _sql_indexed_by(self, name: str) -> str:
        """A table read through the index ``name``, as SQLite is told (its planner, with no
        statistics, reads a set by its id and sorts it rather than take a set's index)."""
        return f"rows INDEXED BY {name}"

    # indexes made for windows
    def _window_indexes(
        self, run_id: str, dataset: str, wanted: Sequence[tuple[str, str]]
    ) -> tuple[int | None, dict[tuple[str, str], _Index]]:
        """The set's id and the indexes ``wanted`` (kind, column) it has, made now where it
        is large enough and has room for them. None: no such set."""
        what = f"read a window of dataset {dataset!r} in run {run_id}"
        with self._transaction(what, write=False) as cur:
            set_id = self._set_id(cur, run_id, dataset)
            if set_id is None or not wanted:
                return set_id, {}
            (size,) = cur.execute(
                "SELECT COALESCE(MAX(id), 0) FROM rows WHERE set_id = ?", (set_id,)
            ).fetchone()
            if int(size) < INDEX_ROWS:
                return set_id, {}
            first = f"rows_w{set_id}_"
            names = {n for (n,) in cur.execute(self._sql_indexes(), (first, first[:-1] + "`"))}
        found: dict[tuple[str, str], _Index] = {}
        for kind, column in wanted:
            expression = self._sql_cell_of(column) if kind == _CELL else self._sql_value_of(column)
            if expression is None:
                continue
            name = f"{first}{kind}_{hashlib.sha256(column.encode()).hexdigest()[:16]}"
            if name not in names:
                if len(names) >= MAX_INDEXES or not self._make_index(
                    name, set_id, kind, expression, column
                ):
                    continue
                names.add(name)
            found[kind, column] = _Index(name, expression)
        return set_id, found

    def _make_index(self, name: str, set_id: int, kind: str, expression: str, column: str) -> bool:
        """Index the set's rows on ``expression`` for a window of ``kind``; whether it could
        (a store opened read-only cannot: its windows read the rows)."""
        way = self._sql_order(kind == _DESC) if kind != _CELL else ""
        what = f"index the rows of a large dataset by {column!r} for a window"
        try:
            with self._transaction(what, write=True) as cur:
                self._before_long_work()
                cur.execute(
                    f"CREATE INDEX IF NOT EXISTS {name} ON rows ({expression} {way}, idx, key, "
                    f"states) WHERE set_id = {int(set_id)}"
                )
                for statement in self._sql_after_index():
                    cur.execute(statement)
        except StoreError:
            return False
        return True

    # windows
    def _window_where(
        self,
        set_id: int,
        state: str | None,
        column: str | None,
        cell: _Index | None,
    ) -> tuple[str, list[Any]]:
        """The rows of the set in ``state`` (of ``column`` when given, its ``cell`` index's
        expression when it has one), and the parameters. The set is written in, as the set's
        own indexes say it."""
        where = f"set_id = {int(set_id)}"
        if state is None:
            return where, []
        if state in ROW_STATES:
            return f"{where} AND (states & {ROW_BITS[state]}) != 0", []
        # a bit of the row's states first: only the rows with a cell in the state are read
        where += f" AND (states & {CELL_BITS[state]}) != 0"
        if column is None:
            return where, []
        if cell is not None:
            return f"{where} AND {cell.expression} = ?", [state]
        return f"{where} AND {self._sql_cell_is(column)}", [column, state]

    def row_window(
        self,
        run_id: str,
        dataset: str,
        *,
        offset: int = 0,
        limit: int = 100,
        state: str | None = None,
        sort: str | None = None,
        descending: bool = False,
        column: str | None = None,
    ) -> list[RowRecord]:
        check_window(offset, limit, state, sort, column)
        way = _DESC if descending else _ASC
        wanted = [] if sort is None else [(way, sort)]
        wanted += [] if column is None else [(_CELL, column)]
        set_id, indexed = self._window_indexes(run_id, dataset, wanted)
        if set_id is None:
            return []
        cell = indexed.get((_CELL, column or ""))
        where, params = self._window_where(set_id, state, column, cell)
        order, through = ("idx DESC, key DESC" if descending else "idx, key"), "rows_page"
        if sort is not None:
            by = indexed.get((way, sort))
            if by is None:
                value, params, through = self._sql_value(sort), [*params, sort], ""
            else:
                value, through = by.expression, by.name
            order = f"{value} {self._sql_order(descending)}, idx, key"
        if cell is not None and not through:
            through = cell.name
        source = self._sql_indexed_by(through) if through else "rows"
        what = f"read a window of dataset {dataset!r} in run {run_id}"
        with self._transaction(what, write=False) as cur:
            rows = cur.execute(
                f"SELECT {ROW_COLUMNS} FROM {source} WHERE {where} ORDER BY {order} "
                "LIMIT ? OFFSET ?",
                (*params, limit, offset),
            ).fetchall()
        return [row_from(run_id, dataset, row) for row in rows]

    def count_rows(
        self, run_id: str, dataset: str, *, state: str | None = None, column: str | None = None
    ) -> int:
        check_window(0, 0, state, column=column)
        set_id, indexed = self._window_indexes(
            run_id, dataset, [] if column is None else [(_CELL, column)]
        )
        if set_id is None:
            return 0
        with self._transaction(f"count the rows of dataset {dataset!r}", write=False) as cur:
            if state is None:  # rows are numbered 1, 2, ... in their set, and stay
                (count,) = cur.execute(
                    "SELECT COALESCE(MAX(id), 0) FROM rows WHERE set_id = ?", (set_id,)
                ).fetchone()
                return int(count)
            # a filter's count scans the set's index (~0.1 s a million rows): the grid asks
            # again with each window, so it is kept until the store changes
            asked = self._sql_version()
            version = None if asked is None else tuple(cur.execute(asked).fetchone())
            known = self._counted.get((set_id, state, column))
            if version is not None and known is not None and known[0] == version:
                return known[1]
            cell = indexed.get((_CELL, column or ""))
            where, params = self._window_where(set_id, state, column, cell)
            source = self._sql_indexed_by(cell.name if cell else "rows_page")
            sql = f"SELECT COUNT(*) FROM {source} WHERE {where}"
            (count,) = cur.execute(sql, params).fetchone()
        if version is not None:
            if len(self._counted) >= _COUNTS_KEPT:
                self._counted.clear()
            self._counted[set_id, state, column] = (version, int(count))
        return int(count)

    def row_counts(self, run_id: str, dataset: str) -> RowCounts:
        statuses: dict[str, int] = {}
        cells: dict[str, int] = {}
        rows_with: dict[str, int] = {}
        with self._transaction(f"count the cells of dataset {dataset!r}", write=False) as cur:
            set_id = self._set_id(cur, run_id, dataset)
            if set_id is not None:
                for status, n in cur.execute(
                    "SELECT status, COUNT(*) FROM rows WHERE set_id = ? GROUP BY status",
                    (set_id,),
                ).fetchall():
                    statuses[str(status)] = int(n)
                for status, n, rows in cur.execute(self._sql_cell_counts(), (set_id,)):
                    cells[str(status)] = int(n)
                    rows_with[str(status)] = int(rows)
        for state in ROW_STATES:
            if statuses.get(state):
                rows_with[state] = statuses[state]
        return RowCounts(
            rows=sum(statuses.values()), statuses=statuses, cells=cells, rows_with=rows_with
        )
