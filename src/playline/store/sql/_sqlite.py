"""The SQLite store: ``sqlite:///path/to/playline.db``, one file shared by processes on one
machine.

WAL mode, ``synchronous=NORMAL``, one connection per store object, guarded by a lock (the
store is thread-safe). Every batch is one transaction; a write transaction takes the write
lock first (``BEGIN IMMEDIATE``), so two processes claiming the same receipt key can never
both own it.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ...errors import StoreError
from ._base import Cursor, SQLStore
from ._schema import migrate
from ._sqlite_file import not_a_database, parse_url, prepare_folder

__all__ = ["SQLiteStore"]

# Primary SQLite result codes (the low byte of an extended code).
_BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 5, 6, 8, 10, 11, 13, 14, 26


class SQLiteStore(SQLStore):
    """``sqlite:///path.db`` (relative) or ``sqlite:////abs/path.db``: the embedded default.

    ``busy_timeout`` is how long to wait, in seconds, for another process's write to finish
    before giving up with ``StoreError`` (default 10; also ``?busy_timeout=N`` in the URL).
    """

    def __init__(self, url: str, *, busy_timeout: float | None = None) -> None:
        self.url = url
        self.path, from_url = parse_url(url)
        busy_timeout = busy_timeout if busy_timeout is not None else from_url
        self._busy_timeout = busy_timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        prepare_folder(Path(self.path))
        conn = None
        try:
            conn = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
            # Migrate (which refuses a foreign or newer database) before switching to WAL, so a
            # refused file is left exactly as it was.
            self.schema_version_found = migrate(conn, self.path)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            raise self._error("open the store", exc) from exc
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        self._conn = conn

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else "open"
        return f"SQLiteStore({self.url!r}) [{state}]"

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            with suppress(sqlite3.Error):  # only a planner hint; closing matters more
                conn.execute("PRAGMA optimize")
            conn.close()

    # the dialect
    @contextmanager
    def _transaction(self, what: str, *, write: bool) -> Iterator[Cursor]:
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield conn.cursor()
                except BaseException:
                    self._rollback(conn)
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback(conn)
                raise self._error(what, exc) from exc

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
        code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
        if code in (_BUSY, _LOCKED):
            return StoreError(
                f"The store {self.path} is locked by another process (waited "
                f"{self._busy_timeout:g} s to {what}). Let that process finish or stop it, "
                "or use another store path."
            )
        if code in (_CORRUPT, _NOTADB):
            return not_a_database(self.path)
        if code in (_READONLY, _IOERR, _FULL, _CANTOPEN):
            return StoreError(
                f"Could not {what} in the store {self.path}: {exc}. Check that the file and its "
                "folder are writable and that the disk has space."
            )
        return StoreError(f"Could not {what} in the store {self.path}: {exc}.")
