"""The SQLite store: ``sqlite:///path/to/playline.db``, one file shared by processes on one
machine.

WAL mode, ``synchronous=NORMAL``, one connection per store object, guarded by a lock (the
store is thread-safe). Every batch is one transaction; a write transaction takes the write
lock first (``BEGIN IMMEDIATE``), so two processes claiming the same receipt key can never
both own it. The engine calls the store on its event loop first (``io_inline``): inside
``inline()``, until a call has committed a write, it does not wait for the connection or the
rows' tail (another thread's) or the write lock (another process's), nor index many row keys
at once, but rolls back and raises ``WouldWait``; the call is then made on the store's worker
thread, which waits as long as ``busy_timeout``.

A store refuses damage: opening it checks the file quickly (the header, the schema, and
SQLite's ``quick_check`` for files up to ``QUICK_CHECK_UP_TO``, or the first and last rows of
every table for bigger ones); ``integrity_check()`` is the full check, on demand. A damaged
file is opened read-only for inspection and never written, nor is one that SQLite finds damaged
later. Each write first makes sure the file is still the one that was opened: a store deleted
or replaced under a running play fails the run instead of writing into a file nobody can read.
``read_only=True`` opens an existing store with SQLite's read-only mode and creates nothing.
"""

from __future__ import annotations

import atexit
import functools
import os
import random
import sqlite3
import threading
import time
import urllib.parse
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Any

from ...errors import StoreError
from .._protocol import WouldWait
from ._base import Cursor, SQLStore
from ._checkpoints import BACKSTOP, LOG_LIMIT, Checkpointer
from ._schema import SCHEMA_VERSION, migrate, schema_version
from ._sqlite_file import (
    header_damage,
    no_store,
    not_a_database,
    parse_url,
    prepare_folder,
)
from ._tables import (
    ROW_OWN,
    ROW_PARAMS,
    ROW_SHARED,
    UPSERT_ROW,
    upsert_rows,
    upsert_shared_rows,
)

__all__ = ["QUICK_CHECK_UP_TO", "SQLiteStore", "damaged"]

_ROWS_PER_STATEMENT = 500  # rows written by one INSERT (as many as the variable limit allows)
_ALIKE_RUN = 50  # the fewest rows that hold the same cells worth a statement of their own

# Primary SQLite result codes (the low byte of an extended code).
_BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 5, 6, 8, 10, 11, 13, 14, 26
QUICK_CHECK_UP_TO = 16 * 1024 * 1024  # bytes: SQLite's quick_check reads it all in ~40 ms


class SQLiteStore(SQLStore):
    """``sqlite:///path.db`` (relative) or ``sqlite:////abs/path.db``: the embedded default.

    ``busy_timeout`` is how long to wait, in seconds, for another process's write to finish
    before giving up with ``StoreError`` (default 10; also ``?busy_timeout=N`` in the URL).
    """

    io_inline = True

    def __init__(
        self, url: str, *, busy_timeout: float | None = None, read_only: bool = False
    ) -> None:
        self.url = url
        self._inline = _Inline()
        self.path, from_url = parse_url(url)
        busy_timeout = busy_timeout if busy_timeout is not None else from_url
        self._busy_timeout = busy_timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._checkpoints: Checkpointer | None = None  # a writable store's (_checkpoints.py)
        self._variables = 999  # bound parameters a statement may hold, read once open
        self.read_only = read_only
        self._file: tuple[int, int] | None = None  # the file written to: (device, inode)
        path = Path(self.path)
        if read_only:
            if not path.is_file() or path.stat().st_size == 0:  # empty: none made in it yet
                raise no_store(path)
        else:
            prepare_folder(path)
        conn = None
        try:
            # An existing file is looked at read-only first: a file that is no database is
            # refused and a damaged one kept for inspection, neither ever opened to write.
            self.damage = None
            if path.exists():
                conn = self._connect(read_only=True)
                self.damage = _damage(conn, path)
            if self.damage is not None or read_only:
                assert conn is not None
                self.schema_version_found = self._readable_version(conn, path)
            else:
                if conn is not None:
                    conn.close()
                conn = self._connect(read_only=False)
                # Migrate (which refuses a foreign or newer database) before switching to WAL,
                # so a refused file is left exactly as it was.
                self.schema_version_found = migrate(conn, self.path)
                _use_wal(conn, self._busy_timeout)
                conn.execute("PRAGMA synchronous = NORMAL")
                # a larger page cache: big batches of rows and receipts cost less to write
                conn.execute("PRAGMA cache_size = -65536")
                # the log is checkpointed on a thread; a commit does it past BACKSTOP pages
                conn.execute(f"PRAGMA wal_autocheckpoint = {BACKSTOP}")
                # a log that grew past the limit (a reader held its start) is cut back to it
                # when it starts again, not kept at its largest
                conn.execute(f"PRAGMA journal_size_limit = {LOG_LIMIT}")
                self._checkpoints = Checkpointer(
                    functools.partial(sqlite3.connect, self.path, isolation_level=None)
                )
                weakref.finalize(self, self._checkpoints.stop)  # a store dropped unclosed
                _OPEN.add(self)  # and one still open as the process ends is closed then
                self._file = _identity(path)
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            raise self._error("open the store", exc) from exc
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        self._conn = conn
        self._variables = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)

    def _connect(self, *, read_only: bool) -> sqlite3.Connection:
        if not read_only:
            return self._sqlite(self.path)
        if not os.access(self.path, os.W_OK) and not self._log_pending():
            # A store this user cannot write (another user's, in a folder both write): the
            # -wal and -shm files SQLite would make for a reader would be this user's, and
            # its owner could not write to the store any more. With no log pending, the
            # file alone is the store: read it as is.
            return self._sqlite(self._uri("immutable=1"))
        conn = self._sqlite(self._uri("mode=ro"))
        try:
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.Error as exc:
            code = _code(exc)
            if code == _CORRUPT:
                return conn  # damaged, not unreadable: _damage says how
            conn.close()
            # A WAL store in a folder we cannot write: SQLite cannot make the -shm file a
            # reader needs. With no log pending, the file alone is the store: read it as is.
            if code not in (_READONLY, _CANTOPEN) or self._log_pending():
                raise
            conn = self._sqlite(self._uri("immutable=1"))
        return conn

    def _log_pending(self) -> bool:
        """Whether the store's write-ahead log holds writes not yet in its file."""
        wal = Path(f"{self.path}-wal")
        return wal.exists() and wal.stat().st_size > 0

    def _uri(self, query: str) -> str:
        return f"file:{urllib.parse.quote(os.path.abspath(self.path))}?{query}"

    def _sqlite(self, target: str) -> sqlite3.Connection:
        uri = target.startswith("file:")
        return sqlite3.connect(
            target,
            timeout=self._busy_timeout,
            isolation_level=None,
            check_same_thread=False,
            uri=uri,
        )

    def _readable_version(self, conn: sqlite3.Connection, path: Path) -> int:
        """The schema version of a store opened only to be read: it must be one already."""
        try:
            found = schema_version(conn)
        except sqlite3.DatabaseError:
            if self.damage is None:
                raise
            return 0  # damaged where the version is kept: read what can be read
        if found == 0 and self.damage is None:
            migrate(conn, self.path)  # refuses another program's database, else:
            raise no_store(f"{path} (an empty database)")
        if found > SCHEMA_VERSION:
            migrate(conn, self.path)  # refuses it with the message saying to upgrade
        if 0 < found < SCHEMA_VERSION and self.damage is None:
            raise StoreError(
                f"The store {path} was written by an older Playline (schema version {found}). "
                "Run a play on it once (playline run, or pl.run) to upgrade it, then read it."
            )
        return found

    def integrity_check(self) -> list[str]:
        """SQLite's full ``integrity_check`` (every page, every index entry), plus what the
        header says: the problems found, or an empty list for a sound store."""
        with self._lock:
            conn = self._connection()
            try:
                found = [p for p in [header_damage(conn, Path(self.path))] if p]
                found += [row[0] for row in conn.execute("PRAGMA integrity_check(100)")]
            except sqlite3.DatabaseError as exc:  # too damaged to go through: say what can be
                found = [str(exc), *([self.damage] if self.damage else [])]
        lines = [line for p in found for line in p.splitlines()]
        return [p for p in lines if p not in ("ok", "*** in database main ***")]

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else "open"
        return f"SQLiteStore({self.url!r}) [{state}]"

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._conn is None

    def close(self) -> None:
        if self._conn is not None:
            self._close_tails()
        with self._lock:
            conn, self._conn = self._conn, None
        _OPEN.discard(self)
        if conn is not None:
            if self._file is not None and self.damage is None:
                with suppress(sqlite3.Error):  # only a planner hint; closing matters more
                    conn.execute("PRAGMA optimize")
            if self._checkpoints is not None:  # closed first: the store's closes the log
                self._checkpoints.close()
            conn.close()

    # the dialect
    def _upsert_rows(self, cur: Cursor, params: list[tuple[Any, ...]]) -> None:
        # Many rows to a statement: SQLite inserts them in one step, where executemany
        # binds, steps and resets a statement per row (save_rows of 100k rows whose keys
        # come in order: 7.1 -> 5.9 us a row). A run of rows that hold the same set, status,
        # cells, error and time (a page's) has those bound once a statement, not once a row
        # (a pure map of 300k rows: 3.64 -> 3.44 s).
        each: list[tuple[Any, ...]] = []
        for shared, run in _alike(params):
            if len(run) >= _ALIKE_RUN:
                per = max(
                    1, min(_ROWS_PER_STATEMENT, (self._variables - len(shared)) // len(ROW_OWN))
                )
                statement = upsert_shared_rows(per)
                run = _by_statements(
                    cur, run, per, statement, functools.partial(_alike_params, shared)
                )
            each.extend(run)
        per = max(1, min(_ROWS_PER_STATEMENT, self._variables // ROW_PARAMS))
        rest = _by_statements(cur, each, per, upsert_rows(per), _params)
        if rest:  # as before: no statement prepared per count of rows
            cur.executemany(UPSERT_ROW, rest)

    @contextmanager
    def inline(self) -> Iterator[None]:
        self._inline.unchanged = True
        try:
            yield
        finally:
            self._inline.unchanged = False

    def _writing(self) -> AbstractContextManager[Any]:
        return _held(self._tails.writing, waits=not self._inline.unchanged)

    def _before_long_work(self) -> None:
        if self._inline.unchanged:
            raise WouldWait  # rolled back: the worker thread does it, off the loop

    @contextmanager
    def _transaction(self, what: str, *, write: bool) -> Iterator[Cursor]:
        waits = not self._inline.unchanged  # inside inline(), nothing waits until a commit
        with _held(self._lock, waits=waits):
            conn = self._connection()
            if write:
                self._check_writable(what)
            try:
                self._begin(conn, write=write, waits=waits)
                yield conn.cursor()
                conn.execute("COMMIT")
            except BaseException as exc:  # an interrupt too: no transaction is left open
                self._rollback(conn)
                if isinstance(exc, sqlite3.Error):
                    raise self._error(what, exc) from exc
                raise
            if write:
                self._inline.unchanged = False  # the call has changed the store
                if self._checkpoints is not None:
                    self._checkpoints.wrote(conn.total_changes)

    def _begin(self, conn: sqlite3.Connection, *, write: bool, waits: bool) -> None:
        """Begin a transaction; a write one takes the write lock at once, waiting for another
        process that holds it up to ``busy_timeout``, or (``waits`` False) not at all."""
        if not write:
            conn.execute("BEGIN")  # WAL: a reader never waits for a writer
        elif waits:
            conn.execute("BEGIN IMMEDIATE")
        else:
            try:
                conn.execute("PRAGMA busy_timeout = 0")
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if _code(exc) not in (_BUSY, _LOCKED):
                    raise
                raise WouldWait from None
            finally:
                conn.execute(f"PRAGMA busy_timeout = {round(self._busy_timeout * 1000)}")

    def _check_writable(self, what: str) -> None:
        if self.damage is not None:
            raise damaged(self.path, self.damage, what)
        if self._file is None:
            raise StoreError(
                f"The store {self.path} was opened read-only, to be inspected: it cannot "
                f"{what}. Open it with open_store(url) to write to it."
            )
        if _identity(self.path) != self._file:  # a str: no Path made per transaction
            raise StoreError(
                f"The store file {self.path} was deleted or replaced while this process was "
                f"using it, so Playline stopped rather than {what} in a file nobody will read: "
                "the run's records are in the file that was removed. Restore it from a backup, "
                "or run the play again on a new store; never delete or move a store that a play "
                "is using."
            )

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(
                f"The store {self.url} is closed (store is closed). "
                "Open it again with open_store(url)."
            )
        return self._conn

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            with suppress(sqlite3.Error):  # the original error is the one worth reporting
                conn.execute("ROLLBACK")

    def _error(self, what: str, exc: sqlite3.Error) -> StoreError:
        code = _code(exc)
        if code in (_BUSY, _LOCKED):
            return StoreError(
                f"The store {self.path} is locked by another process (waited "
                f"{self._busy_timeout:g} s to {what}). Let that process finish or stop it, "
                "or use another store path."
            )
        if "Could not decode to UTF-8" in str(exc):  # damage inside a record; never echo it
            self.damage = self.damage or f"a stored text is not UTF-8 (found trying to {what})"
            return damaged(self.path, self.damage, what)
        if code in (_CORRUPT, _NOTADB):
            if self._conn is None:  # on open: refused, nothing written
                return not_a_database(self.path)
            self.damage = self.damage or str(exc)  # found in use: nothing more is written
            return damaged(self.path, self.damage, what)
        if code in (_READONLY, _IOERR, _FULL, _CANTOPEN):
            return StoreError(
                f"Could not {what} in the store {self.path}: {exc}. Check that the file and its "
                "folder are writable and that the disk has space."
            )
        return StoreError(f"Could not {what} in the store {self.path}: {exc}.")


class _Inline(threading.local):
    unchanged = False  # a call inside inline() that has not committed a write yet


@contextmanager
def _held(lock: threading.Lock, *, waits: bool) -> Iterator[None]:
    """Hold ``lock``; when another thread holds it, wait for it or (``waits`` False) raise
    ``WouldWait``."""
    if not lock.acquire(blocking=waits):
        raise WouldWait
    try:
        yield
    finally:
        lock.release()


def _code(exc: sqlite3.Error) -> int:
    """SQLite's primary result code of the error."""
    return (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF


def damaged(path: str, damage: str, what: str) -> StoreError:
    return StoreError(
        f"The store {path} is damaged ({damage}), so Playline did not {what}: it opens a "
        "damaged store read-only, for inspection, and never writes to it. `playline runs`, "
        "`show` and `export` show what can still be read and `playline store check` lists the "
        "damage. Restore the file from a backup, or move it away and start a new store."
    )


def _summary(problems: list[str]) -> str:
    """The first problem SQLite found, short enough for one line, and how many more."""
    lines = [
        line for p in problems for line in p.splitlines() if line != "*** in database main ***"
    ]
    first = lines[0] if len(lines[0]) <= 100 else lines[0][:99] + "…"
    return first + (f", and {len(lines) - 1} more" if len(lines) > 1 else "")


_OPEN: weakref.WeakSet[SQLiteStore] = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    """Close the stores still open as the process ends (a command that never closed its
    store, a play that returned without ``close``): the last connection to a file closes its
    write-ahead log into it and deletes it. Left to the end of the process, the checkpoint
    thread's connection stayed open in a daemon thread, and the log (tens of megabytes) stayed
    beside the file."""
    for store in list(_OPEN):
        with suppress(Exception):  # the others still close
            store.close()


def _use_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Switch a file to WAL. Processes opening a new store at once race for the switch, which
    needs the file to themselves: SQLite may refuse the losers at once rather than wait into a
    deadlock. A loser tries again after a short random pause; by then the file is in WAL mode
    (the switch is a no-op), or it is its turn."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(random.uniform(0.005, 0.05))


def _identity(path: str | Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def _damage(conn: sqlite3.Connection, path: Path) -> str | None:
    """What a quick look finds wrong with the database, if anything (see the module
    docstring); None for a sound one."""
    try:
        found = header_damage(conn, path)
        if found is not None:
            return found
        tables = [
            (name, "1" if "WITHOUT ROWID" in sql.upper() else "rowid")  # how its pages go
            for (name, sql) in conn.execute(
                "SELECT name, sql FROM sqlite_master "
                "WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        if path.stat().st_size <= QUICK_CHECK_UP_TO:
            problems = [row[0] for row in conn.execute("PRAGMA quick_check(5)")]
            return None if problems == ["ok"] else _summary(problems)
        for table, first in tables:  # the first and the last rows: where new writes go
            for order in ("ASC", "DESC"):
                conn.execute(f'SELECT * FROM "{table}" ORDER BY {first} {order} LIMIT 1').fetchall()
    except sqlite3.DatabaseError as exc:
        if _code(exc) == _CORRUPT:
            return str(exc)
        raise  # no database at all (NOTADB): refused as one
    return None


_shared, _own = itemgetter(*ROW_SHARED), itemgetter(*ROW_OWN)


def _params(rows: list[tuple[Any, ...]]) -> list[Any]:
    """An ``upsert_rows`` statement's parameters: each row's, one after another."""
    return list(chain.from_iterable(rows))


def _alike_params(shared: tuple[Any, ...], rows: list[tuple[Any, ...]]) -> list[Any]:
    """An ``upsert_shared_rows`` statement's: the values the rows share, then each row's own."""
    return [*shared, *chain.from_iterable(map(_own, rows))]


def _by_statements(
    cur: Cursor,
    rows: list[tuple[Any, ...]],
    per: int,
    statement: str,
    params: Callable[[list[tuple[Any, ...]]], list[Any]],
) -> list[tuple[Any, ...]]:
    """Write ``rows`` ``per`` to a ``statement`` (bound to ``params`` of those rows); returns
    the rows left over, fewer than ``per``."""
    full = len(rows) - len(rows) % per
    for start in range(0, full, per):
        cur.execute(statement, params(rows[start : start + per]))
    return rows[full:]


def _alike(
    params: list[tuple[Any, ...]],
) -> Iterator[tuple[tuple[Any, ...], list[tuple[Any, ...]]]]:
    """``params`` (rows to write) in runs that hold the same ``ROW_SHARED`` values (as the
    rows of a page do), each with those values."""
    run: list[tuple[Any, ...]] = []
    last: tuple[Any, ...] = ()
    for row in params:
        shared = _shared(row)
        if shared != last and run:
            yield last, run
            run = []
        last = shared
        run.append(row)
    if run:
        yield last, run
