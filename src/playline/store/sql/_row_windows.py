"""A grid's windows of a row set on SQL (``row_window``, ``count_rows``, ``row_counts``), for
both dialects, without reading every row of a set that holds a million.

- In order, unfiltered: ``rows_page`` (set, idx, key, states) gives the order; the count is
  the set's highest row number (rows are numbered 1, 2, ... within a set, never removed).
  A window's offset is skipped in that index, and its rows then read by (set, idx, key):
  PostgreSQL would otherwise read each skipped row from the table (offset 500,000: 57 ms,
  not 183). A window nearer the end than the start is read from the end (the count says
  where), so the last page skips nothing.
- Filtered by a state: each row's ``states`` bits (``_tables.row_states``) are in
  ``rows_page``, so a window walks that index in order and a count scans it, reading no row
  it does not return (~0.1 s a million rows; the count is kept until something is
  committed to the store, by any process, as the grid asks for it again with each window:
  ``_sql_version``). The status chips' counts (``row_counts(cells=False)``) group that
  index by ``states`` and the rows by status: no row's cells are read.
- Sorted by a column, or filtered on one column's cell state, in a set of ``INDEX_ROWS`` rows
  or more: the set gets an index of its own on that value (``CREATE INDEX ... WHERE set_id =
  N``), made by the first window that asks (a few seconds a million rows, once; PostgreSQL
  builds it CONCURRENTLY, so the set's writers go on meanwhile), then kept current by the
  database as rows are written: a row whose value or state changes moves in it. A sort has
  one index a direction (ties stay in input order both ways). A set holds at most
  ``MAX_INDEXES``; past them, in a smaller set, for a name no index expression can hold, or
  in a store opened read-only, a window reads the rows' JSON as before. (PostgreSQL reads a
  deep offset of a sorted window from the table: no index-only scan of an expression.)

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
_FROM_THE_END = 1000  # an offset from which a window in input order may be read from the end
# a row as row_from reads it, from ``rows r``
_R_COLUMNS = ", ".join(f"r.{c.strip()}" for c in ROW_COLUMNS.split(","))

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
        columns = f"{expression} {way}, idx, key, states"
        index = f"{name} ON rows ({columns}) WHERE set_id = {int(set_id)}"
        try:
            self._build_index(what, name, index)
        except StoreError:
            return False
        return True

    def _build_index(self, what: str, name: str, index: str) -> None:
        """``CREATE INDEX {index}`` unless the index ``name`` is there (SQLite: in a write
        transaction, which writers wait for)."""
        with self._transaction(what, write=True) as cur:
            self._before_long_work()
            cur.execute(f"CREATE INDEX IF NOT EXISTS {index}")

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
        what = f"read a window of dataset {dataset!r} in run {run_id}"
        if sort is None and cell is None and column is None:
            with self._transaction(what, write=False) as cur:
                rows = self._page_window(cur, set_id, where, offset, limit, descending, state)
            return [row_from(run_id, dataset, row) for row in rows]
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
        with self._transaction(what, write=False) as cur:
            rows = cur.execute(
                f"SELECT {ROW_COLUMNS} FROM {source} WHERE {where} ORDER BY {order} "
                "LIMIT ? OFFSET ?",
                (*params, limit, offset),
            ).fetchall()
        return [row_from(run_id, dataset, row) for row in rows]

    def _page_window(
        self,
        cur: Cursor,
        set_id: int,
        where: str,
        offset: int,
        limit: int,
        descending: bool,
        state: str | None,
    ) -> list[Any]:
        """A window in input order, of all the set's rows or those whose ``states`` say
        ``state``: what ``rows_page`` alone answers. The rows skipped are skipped in that index
        (the window's rows are then read by their (set, idx, key)), not read from the table,
        as PostgreSQL would read each of them; and a window nearer the end than the start is
        read from the end (the set's count says where), so the last page skips nothing."""
        backwards = False
        if offset >= _FROM_THE_END:
            total = self._count(cur, set_id, state, None, None)
            if offset >= total:
                return []
            if total - offset - limit < offset:  # fewer rows to skip from the end
                limit = min(limit, total - offset)
                offset, descending, backwards = total - offset - limit, not descending, True
        rows = self._page_rows(cur, set_id, where, offset, limit, descending)
        return rows[::-1] if backwards else rows

    def _page_rows(
        self, cur: Cursor, set_id: int, where: str, offset: int, limit: int, descending: bool
    ) -> list[Any]:
        """The table rows of a window in input order (or its reverse) of ``rows_page``."""
        order = "idx DESC, key DESC" if descending else "idx, key"
        if offset == 0:
            rows: list[Any] = cur.execute(
                f"SELECT {ROW_COLUMNS} FROM {self._sql_indexed_by('rows_page')} WHERE {where} "
                f"ORDER BY {order} LIMIT ?",
                (limit,),
            ).fetchall()
            return rows
        way = " DESC" if descending else ""
        rows = cur.execute(
            f"SELECT {_R_COLUMNS} FROM (SELECT idx, key FROM "
            f"{self._sql_indexed_by('rows_page')} WHERE {where} ORDER BY {order} LIMIT ? "
            f"OFFSET ?) w JOIN rows r ON r.set_id = {int(set_id)} AND r.idx = w.idx AND "
            f"r.key = w.key ORDER BY w.idx{way}, w.key{way}",
            (limit, offset),
        ).fetchall()
        return rows

    def count_rows(
        self, run_id: str, dataset: str, *, state: str | None = None, column: str | None = None
    ) -> int:
        check_window(0, 0, state, column=column)
        set_id, indexed = self._window_indexes(
            run_id, dataset, [] if column is None else [(_CELL, column)]
        )
        if set_id is None:
            return 0
        cell = indexed.get((_CELL, column or ""))
        with self._transaction(f"count the rows of dataset {dataset!r}", write=False) as cur:
            return self._count(cur, set_id, state, column, cell)

    def _count(
        self, cur: Cursor, set_id: int, state: str | None, column: str | None, cell: _Index | None
    ) -> int:
        """The rows of the set in ``state`` (of ``column``): the set's highest row number when
        unfiltered (rows are numbered 1, 2, ... in their set, and stay); else a scan of the
        set's index (~0.1 s a million rows), kept until something is committed to the store,
        as the grid asks again with each window (``_sql_version``)."""
        if state is None:
            (count,) = cur.execute(
                "SELECT COALESCE(MAX(id), 0) FROM rows WHERE set_id = ?", (set_id,)
            ).fetchone()
            return int(count)
        # the version is read before the count: a count made after a later commit is kept
        # under an older version, which no later read can find again (see _sql_version)
        asked = self._sql_version()
        version = None if asked is None else tuple(cur.execute(asked).fetchone())
        known = self._counted.get((set_id, state, column))
        if version is not None and known is not None and known[0] == version:
            return known[1]
        where, params = self._window_where(set_id, state, column, cell)
        source = self._sql_indexed_by(cell.name if cell else "rows_page")
        (count,) = cur.execute(f"SELECT COUNT(*) FROM {source} WHERE {where}", params).fetchone()
        if version is not None:
            if len(self._counted) >= _COUNTS_KEPT:
                self._counted.clear()
            self._counted[set_id, state, column] = (version, int(count))
        return int(count)

    def row_counts(self, run_id: str, dataset: str, *, cells: bool = True) -> RowCounts:
        statuses: dict[str, int] = {}
        tally: dict[str, int] = {}
        rows_with: dict[str, int] = {}
        with self._transaction(f"count the cells of dataset {dataset!r}", write=False) as cur:
            set_id = self._set_id(cur, run_id, dataset)
            if set_id is not None:
                for status, n in cur.execute(
                    "SELECT status, COUNT(*) FROM rows WHERE set_id = ? GROUP BY status",
                    (set_id,),
                ).fetchall():
                    statuses[str(status)] = int(n)
                if cells:
                    for status, n, rows in cur.execute(self._sql_cell_counts(), (set_id,)):
                        tally[str(status)] = int(n)
                        rows_with[str(status)] = int(rows)
                else:  # the rows' states bits, in the set's index: no cell is read
                    rows_with = self._state_counts(cur, set_id)
        for state in ROW_STATES:
            if statuses.get(state):
                rows_with[state] = statuses[state]
        return RowCounts(
            rows=sum(statuses.values()), statuses=statuses, cells=tally, rows_with=rows_with
        )

    def _state_counts(self, cur: Cursor, set_id: int) -> dict[str, int]:
        """The rows of the set in each cell state, from their ``states`` in ``rows_page``
        (one scan of it, the rows grouped by their few distinct ``states``), for the states
        some row is in."""
        counts = dict.fromkeys(CELL_BITS, 0)
        for states, n in cur.execute(
            f"SELECT states, COUNT(*) FROM {self._sql_indexed_by('rows_page')} "
            "WHERE set_id = ? GROUP BY states",
            (set_id,),
        ):
            for state, bit in CELL_BITS.items():
                if int(states) & bit:
                    counts[state] += int(n)
        return {state: n for state, n in counts.items() if n}
