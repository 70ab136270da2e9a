"""The row store on SQL (the ``RowStore`` role), for both dialects: rows written in order,
indexed by key in sorted batches.

A run's dataset is a row set (``row_sets``) with an integer id, and its rows are numbered
within it (``rows.id``) in the order they are first written. Every index of ``rows`` therefore
takes a new row at its end. The index by key, which a random key (a digest, the default) would
make a random insert per row, is ``row_keys``, written later: the process that writes a set
(its *tail owner*) remembers the keys of the rows it numbered above ``keyed_through`` (the
*tail*), and writes them to ``row_keys`` in key order once ``TAIL_ROWS`` of them wait, when the
run's attempt ends, when it closes, or never, if it dies. A set's next writer first indexes a
tail another left (``_adopt``): when it claims the run, or when it writes the set. So:

- a key has one row in its set: a writer finds a stored key in ``row_keys`` or in the tail it
  owns before numbering a new row;
- "this row by key" reads ``row_keys``, then the tail: from memory in its owner, by a scan of
  at most about ``TAIL_ROWS`` rows elsewhere (a live grid in another process);
- "rows of this run", windows and counts read the set's rows by its id, tail included.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ..._json import dumps, loads
from ...errors import StoreError
from .._protocol import WouldWait
from .._records import CellMeta, RowPage, RowRecord
from ._cursor import Cursor
from ._row_windows import RowWindows
from ._tables import ROW_COLUMNS, UPSERT_ROW, chunks, marks, page_fields, row_fields, row_from

__all__ = ["PAGE", "TAIL_ROWS", "RowTables"]

PAGE = 1000  # rows per page when streaming a dataset
TAIL_ROWS = 200_000  # rows of a set whose keys wait in memory before they go to row_keys
LONG_INDEX = 20_000  # keys indexed in one go that make a call long (see _before_long_work)

_SET = "SELECT set_id, keyed_through, tail_owner FROM row_sets WHERE run_id = ? AND dataset = ?"
# a row as row_from reads it, from ``rows r`` (and what the caller joins)
_SELECT_ROWS = "SELECT " + ", ".join(f"r.{c.strip()}" for c in ROW_COLUMNS.split(",")) + " FROM"


@dataclass
class _Tails:
    """What a store object knows of the tails it owns: per set, its rows' keys and numbers.

    ``writing`` is held by each write that changes a tail, from before its transaction until
    the tail is updated after its commit, and by each read by key: another thread of the same
    object that saved, or read, a key the moment after the commit would otherwise not find it
    (not indexed yet, not in the tail yet) and number a second row for it, or say it has none.
    Taken before any transaction, never inside one.
    """

    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    lock: threading.Lock = field(default_factory=threading.Lock)  # guards ``keys``
    writing: threading.Lock = field(default_factory=threading.Lock)
    keys: dict[int, dict[str, int]] = field(default_factory=dict)

    def forget(self) -> None:
        """Know no tail: this object then adopts its sets' tails from the store, as if
        another had left them (what a write that failed after its commit left is there)."""
        with self.lock:
            self.token = uuid.uuid4().hex
            self.keys = {}

    def known(self, set_id: int, owner: str | None) -> dict[str, int] | None:
        """The keys of the set's tail, when this object owns it; None when another does."""
        if owner != self.token:
            return None
        with self.lock:
            return self.keys.get(set_id, {})


class RowTables(RowWindows):
    """The row methods of ``SQLStore``; the dialect supplies what is declared here (the
    windows of a grid are ``RowWindows``')."""

    if TYPE_CHECKING:  # the dialect's (see SQLStore)

        def _transaction(self, what: str, *, write: bool) -> AbstractContextManager[Cursor]: ...
        def _lock_keys(self, cur: Cursor, keys: Sequence[str]) -> None: ...

    @cached_property
    def _tails(self) -> _Tails:
        return _Tails()

    def _writing(self) -> AbstractContextManager[Any]:
        """``_tails.writing``, to be held (a dialect may refuse to wait for it)."""
        return self._tails.writing

    @contextmanager
    def _changing_tails(self) -> Iterator[None]:
        """Hold ``_tails.writing`` for a write that changes tails. If it fails, maybe after
        its commit (an interrupt), before the tails were told, they are forgotten."""
        with self._writing():
            try:
                yield
            except WouldWait:  # nothing was written
                raise
            except BaseException:
                self._tails.forget()
                raise

    def _before_long_work(self) -> None:
        """Where a call is about to index many row keys; a dialect that calls the store on
        the event loop gives way here (``WouldWait``), before anything is committed."""

    def _upsert_rows(self, cur: Cursor, params: list[tuple[Any, ...]]) -> None:
        """Write rows (``set_id``, ``id`` and ``row_fields``): a row's number names it."""
        cur.executemany(UPSERT_ROW, params)

    # writing
    def save_rows(self, rows: Sequence[RowRecord | RowPage]) -> None:
        if not rows:
            return
        sets: dict[tuple[str, str], dict[str, tuple[Any, ...]]] = {}
        for row in rows:  # a later row of a key replaces an earlier
            fields = sets.setdefault((row.run_id, row.dataset), {})
            if isinstance(row, RowPage):
                fields.update(page_fields(row))
            else:
                fields[row.key] = row_fields(row)
        tails, count = self._tails, sum(map(len, sets.values()))
        with self._changing_tails():  # until the tail says what was committed (see _Tails)
            with self._transaction(f"save {count} rows", write=True) as cur:
                # two names that make one lock key only wait for each other
                self._lock_keys(cur, [f"rows:{run_id}:{dataset}" for run_id, dataset in sets])
                numbered = [self._write_set(cur, *names, fields) for names, fields in sets.items()]
            with tails.lock:  # committed: what this object now owns
                for set_id, new, fresh in numbered:
                    if fresh:
                        tails.keys[set_id] = new
                    else:
                        tails.keys.setdefault(set_id, {}).update(new)

    def _write_set(
        self, cur: Cursor, run_id: str, dataset: str, fields: dict[str, tuple[Any, ...]]
    ) -> tuple[int, dict[str, int], bool]:
        """Write one set's rows (``row_fields`` by key); returns the set, the keys numbered in
        its tail, and whether they replace those known before (the tail was adopted or
        indexed)."""
        set_id, keyed, owner = self._set(cur, run_id, dataset)
        known = self._tails.known(set_id, owner)
        fresh = known is None
        if known is None:
            keyed, known = self._adopt(cur, set_id, keyed), {}
        # keys written before the tail
        before = self._keyed(cur, set_id, [k for k in fields if k not in known]) if keyed else {}
        last = self._last(cur, set_id)
        new: dict[str, int] = {}
        params = []
        for key, row_values in fields.items():
            number = known.get(key) or before.get(key)
            if number is None:
                last += 1
                number = new[key] = last
            params.append((set_id, number, *row_values))
        self._upsert_rows(cur, params)
        if len(known) + len(new) >= TAIL_ROWS:
            self._before_long_work()
            self._index(cur, set_id, keyed, last)
            new, fresh = {}, True
        return set_id, new, fresh

    def _set(self, cur: Cursor, run_id: str, dataset: str) -> tuple[int, int, str | None]:
        """The row set of a run's dataset, made when it has none: (id, keyed_through,
        tail_owner)."""
        found = cur.execute(_SET, (run_id, dataset)).fetchone()
        if found is None:
            cur.execute(
                "INSERT INTO row_sets (run_id, dataset, tail_owner) VALUES (?, ?, ?)",
                (run_id, dataset, self._tails.token),
            )
            found = cur.execute(_SET, (run_id, dataset)).fetchone()
        return int(found[0]), int(found[1]), found[2]

    @staticmethod
    def _last(cur: Cursor, set_id: int) -> int:
        """The highest number of the set's rows; 0 for none."""
        (last,) = cur.execute(
            "SELECT COALESCE(MAX(id), 0) FROM rows WHERE set_id = ?", (set_id,)
        ).fetchone()
        return int(last)

    @staticmethod
    def _run_sets(cur: Cursor, run_id: str) -> list[tuple[int, int, str | None]]:
        """The run's sets: (id, keyed_through, tail_owner)."""
        return [
            (int(set_id), int(keyed), owner)
            for set_id, keyed, owner in cur.execute(
                "SELECT set_id, keyed_through, tail_owner FROM row_sets WHERE run_id = ?",
                (run_id,),
            ).fetchall()
        ]

    def _adopt(self, cur: Cursor, set_id: int, keyed: int) -> int:
        """Index the tail another writer left (it died, or closed, or gave the run up), and
        own the set's tail from now on; returns the new ``keyed_through``."""
        through = self._last(cur, set_id)
        if through - keyed > LONG_INDEX:
            self._before_long_work()
        self._index(cur, set_id, keyed, through)
        cur.execute(
            "UPDATE row_sets SET tail_owner = ? WHERE set_id = ?", (self._tails.token, set_id)
        )
        return through

    def _adopt_run(self, cur: Cursor, run_id: str) -> list[int]:
        """Own the tails of a run's sets (a run claimed for an attempt): its rows are then
        found by key without a scan. Returns the sets adopted (``_indexed`` after commit)."""
        adopted = []
        for set_id, keyed, owner in self._run_sets(cur, run_id):
            if owner != self._tails.token:
                self._adopt(cur, set_id, keyed)
                adopted.append(set_id)
        return adopted

    def _index_run(self, cur: Cursor, run_id: str) -> list[int]:
        """Index the tails of a run's sets that this object owns (its attempt ends): a run
        that is over leaves no rows to scan for. Returns those sets (``_indexed`` after
        commit)."""
        return [
            set_id
            for set_id, keyed, owner in self._run_sets(cur, run_id)
            if self._index_own(cur, set_id, keyed, owner)
        ]

    def _index_own(self, cur: Cursor, set_id: int, keyed: int, owner: str | None) -> bool:
        """Index the set's tail if this object owns it and it holds rows; whether it did."""
        tail = self._tails.known(set_id, owner)
        if not tail:
            return False
        if len(tail) > LONG_INDEX:
            self._before_long_work()
        self._index(cur, set_id, keyed, max(tail.values()))
        return True

    def _indexed(self, sets: Sequence[int]) -> None:
        """These sets' tails are empty now (indexed, or adopted with nothing left in them)."""
        with self._tails.lock:
            for set_id in sets:
                self._tails.keys[set_id] = {}

    def _keyed(self, cur: Cursor, set_id: int, keys: Sequence[str]) -> dict[str, int]:
        """The numbers of the rows of ``keys`` in ``row_keys``."""
        found: dict[str, int] = {}
        for chunk in chunks(keys):
            found.update(
                cur.execute(
                    "SELECT key, id FROM row_keys WHERE set_id = ? "
                    f"AND key IN ({marks(len(chunk))})",
                    (set_id, *chunk),
                ).fetchall()
            )
        return found

    def _index(self, cur: Cursor, set_id: int, keyed: int, through: int) -> None:
        """Write the keys of the set's rows numbered above ``keyed`` to ``row_keys``, sorted
        (each lands next to the last), and mark the rows up to ``through`` indexed."""
        cur.execute(
            "INSERT INTO row_keys (set_id, key, id) "
            "SELECT set_id, key, id FROM rows WHERE set_id = ? AND id > ? ORDER BY key "
            "ON CONFLICT (set_id, key) DO UPDATE SET id = excluded.id",
            (set_id, keyed),
        )
        cur.execute("UPDATE row_sets SET keyed_through = ? WHERE set_id = ?", (through, set_id))

    def _close_tails(self) -> None:
        """Index the tails this object owns, as it closes: none is left for a scan. Where
        another object took a set over, its tail is that object's now. A store that cannot
        be written now leaves them: the set's next writer indexes them (``_adopt``)."""
        tails = self._tails
        with self._changing_tails():
            with tails.lock:
                owned = [set_id for set_id, tail in tails.keys.items() if tail]
            if not owned:
                return
            with (
                suppress(StoreError),
                self._transaction("index the rows written", write=True) as cur,
            ):
                for set_id in owned:
                    keyed, owner = cur.execute(
                        "SELECT keyed_through, tail_owner FROM row_sets WHERE set_id = ?",
                        (set_id,),
                    ).fetchone()
                    self._index_own(cur, set_id, int(keyed), owner)
            with tails.lock:
                tails.keys = {}

    # reading
    def _set_id(self, cur: Cursor, run_id: str, dataset: str) -> int | None:
        found = cur.execute(
            "SELECT set_id FROM row_sets WHERE run_id = ? AND dataset = ?", (run_id, dataset)
        ).fetchone()
        return None if found is None else int(found[0])

    def load_rows(self, run_id: str, dataset: str, keys: Sequence[str]) -> dict[str, RowRecord]:
        if not keys:
            return {}
        unique = list(dict.fromkeys(keys))
        found: dict[str, RowRecord] = {}
        with (
            self._writing(),  # a row just committed is in the tail we read (see _Tails)
            self._transaction(f"load rows of dataset {dataset!r}", write=False) as cur,
        ):

            def read(where: str, first: tuple[Any, ...], items: Sequence[Any]) -> None:
                """The rows ``where ... IN (items)`` selects, a chunk of items at a time."""
                for part in chunks(items):
                    for row in cur.execute(
                        f"{_SELECT_ROWS} {where} IN ({marks(len(part))})", (*first, *part)
                    ).fetchall():
                        found[row[0]] = row_from(run_id, dataset, row)

            row_set = cur.execute(_SET, (run_id, dataset)).fetchone()
            if row_set is None:
                return {}
            set_id, keyed, owner = int(row_set[0]), int(row_set[1]), row_set[2]
            joined = "row_keys k JOIN rows r ON r.set_id = k.set_id AND r.id = k.id"
            read(f"{joined} WHERE k.set_id = ? AND k.key", (set_id,), unique)
            rest = [key for key in unique if key not in found]
            known = self._tails.known(set_id, owner)
            if rest and known is not None:  # our own tail: its numbers are in memory
                numbers = [known[key] for key in rest if key in known]
                read("rows r WHERE r.set_id = ? AND r.id", (set_id,), numbers)
            elif rest:  # another's tail: at most about TAIL_ROWS rows to look through
                read("rows r WHERE r.set_id = ? AND r.id > ? AND r.key", (set_id, keyed), rest)
        return {key: found[key] for key in unique if key in found}

    def iter_rows(self, run_id: str, dataset: str) -> Iterator[RowRecord]:
        # Keyset pages, each its own short read: nothing stays open between yields, so the
        # caller (or another process) may write rows while iterating.
        after: tuple[int, str] | None = None
        what = f"read rows of dataset {dataset!r} in run {run_id}"
        while True:
            with self._transaction(what, write=False) as cur:
                set_id = self._set_id(cur, run_id, dataset)
                if set_id is None:
                    return
                if after is None:
                    page = cur.execute(
                        f"SELECT {ROW_COLUMNS} FROM rows WHERE set_id = ? "
                        "ORDER BY idx, key LIMIT ?",
                        (set_id, PAGE),
                    ).fetchall()
                else:
                    page = cur.execute(
                        f"SELECT {ROW_COLUMNS} FROM rows WHERE set_id = ? "
                        "AND (idx > ? OR (idx = ? AND key > ?)) ORDER BY idx, key LIMIT ?",
                        (set_id, after[0], after[0], after[1], PAGE),
                    ).fetchall()
            for row in page:
                yield row_from(run_id, dataset, row)
            if len(page) < PAGE:
                return
            after = (page[-1][1], page[-1][0])

    def datasets(self, run_id: str) -> list[str]:
        with self._transaction(f"list the datasets of run {run_id}", write=False) as cur:
            # in the order of their first rows (the time of a set's row numbered first, not
            # the earliest of a million rows' times, which a grid's every window once read)
            rows = cur.execute(
                "SELECT s.dataset FROM row_sets s JOIN rows r ON r.set_id = s.set_id "
                "AND r.id = (SELECT MIN(id) FROM rows f WHERE f.set_id = s.set_id) "
                "WHERE s.run_id = ? ORDER BY r.updated_at, s.dataset",
                (run_id,),
            ).fetchall()
        return [name for (name,) in rows]

    def iter_cells(
        self, run_id: str, holding: str
    ) -> Iterator[tuple[str, str, dict[str, CellMeta]]]:
        # The cells' JSON text names the field as ``"holding":``: rows without it are skipped
        # in SQL, unread; a row whose text has it elsewhere (a column of that name) is read
        # and left out here.
        needle = dumps(holding).decode() + ":"
        after = (0, 0)
        what = f"read the cells of run {run_id}"
        while True:
            with self._transaction(what, write=False) as cur:
                page = cur.execute(
                    "SELECT s.dataset, r.key, r.cells, r.set_id, r.id FROM row_sets s "
                    "JOIN rows r ON r.set_id = s.set_id WHERE s.run_id = ? "
                    f"AND (r.set_id, r.id) > (?, ?) AND {self._sql_contains('r.cells')} "
                    "ORDER BY r.set_id, r.id LIMIT ?",
                    (run_id, *after, needle, PAGE),
                ).fetchall()
            for dataset, key, text, _, _ in page:
                cells: dict[str, CellMeta] = loads(text)
                if any(isinstance(m, dict) and holding in m for m in cells.values()):
                    yield dataset, key, cells
            if len(page) < PAGE:
                return
            after = (page[-1][3], page[-1][4])

    # the text of a column, as SQLite says it (PostgreSQL overrides it: ``_postgres.py``)
    def _sql_contains(self, column: str) -> str:
        """Whether the text of ``column`` contains a text (parameter: the text)."""
        return f"instr({column}, ?) > 0"
