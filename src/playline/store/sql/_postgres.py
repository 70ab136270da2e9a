"""The PostgreSQL store: ``postgresql://user@host:port/database``, one database shared by
processes on many machines.

psycopg 3 with a ``psycopg_pool.ConnectionPool``: the store is synchronous and thread-safe like
SQLite's, so one object serves several event loops, and the engine calls it from as many
worker threads as the pool has connections (``io_threads``; ``?pool_size=N`` in the URL,
default 4). Every write batch is one transaction; reads run in autocommit.

Concurrency: every batch that reads, decides and writes receipts or a run (claims,
completions, failures, jobs, releases, creating and ending runs, delivering an event) first
takes transaction-scoped advisory locks on the keys it decides on (``_lock_keys``), in one
statement and in a fixed order: two processes claiming the same receipt can never both own it,
and two such batches never deadlock on each other's keys. The rest are single statements
(lease renewals, stop requests, ``INSERT ... ON CONFLICT``); should one still meet a batch in a
deadlock, PostgreSQL aborts one of them and the store says to run it again.

Changes are announced with LISTEN/NOTIFY (``_postgres_listen.py``): completing, failing or
releasing receipts and sending an event NOTIFY in their transactions, and ``changes()`` is a
feed that a waiter (a receipt HELD by another process, a worker waiting for events) hears them
on, from a connection of its own outside the pool. Shared rate gates are the ``rate_gates``,
``gate_slots`` and ``gate_sends`` tables (``_gate_store.py``), leased with one ``UPDATE ...
RETURNING`` (and, for a gate with windows, under the gate's advisory lock).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import lru_cache
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from ...errors import StoreError
from .._changes import ChangeFeed
from .._protocol import ConnectionLost
from ._base import Cursor, SQLStore
from ._gate_tables import POSTGRES
from ._postgres_listen import Listener, announce
from ._postgres_schema import migrate, readable_version
from ._postgres_url import Target, connect_error, parse_url
from ._row_windows import literal

__all__ = ["PostgresStore"]

# SQLSTATE classes and codes that say what to do next.
_DEADLOCK, _SERIALIZATION = "40P01", "40001"
_PRIVILEGE = "42501"
_NO_SCHEMA = "3F000"  # invalid_schema_name: the search_path names no schema that exists
IDLE_CHECK_S = 2.0  # a connection idle longer is checked before use
# whether the index of a name (in the current schema) is valid; no row: there is none
_INDEX_VALID = (
    "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() "
    "AND c.relname = ?"
)


def _literal(text: str) -> str:
    """``text`` as a string literal with no ``?`` in it, which ``_paramstyle`` would take for
    a parameter: a Unicode escape string (``U&'why\\003F'``) where it holds one. See
    https://www.postgresql.org/docs/current/sql-syntax-lexical.html#SQL-SYNTAX-STRINGS-UESCAPE
    """
    if "?" not in text:
        return literal(text)
    escaped = text.replace("\\", "\\\\").replace("'", "''").replace("?", "\\003F")
    return f"U&'{escaped}'"


@lru_cache(maxsize=1024)
def _paramstyle(sql: str) -> str:
    """The shared statements' ``?`` placeholders as psycopg's ``%s`` (a literal ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class _IdleCheck:
    """Before a connection that sat idle is handed out, make sure it still works (the server
    may have restarted, or a proxy closed it): the pool replaces it if not. A busy store pays
    nothing; one that idled pays one round trip. Apart from the store, which the pool (this
    check) must not keep alive."""

    def __init__(self, after: float) -> None:
        self.after = after
        self._last_used: weakref.WeakKeyDictionary[psycopg.Connection[Any], float] = (
            weakref.WeakKeyDictionary()
        )

    def used(self, conn: psycopg.Connection[Any]) -> None:
        self._last_used[conn] = time.monotonic()

    def check(self, conn: psycopg.Connection[Any]) -> None:
        if time.monotonic() - self._last_used.get(conn, 0.0) >= self.after:
            ConnectionPool.check_connection(conn)


class _PgCursor:
    """A psycopg cursor speaking the shared code's ``?`` dialect."""

    __slots__ = ("_cur",)

    def __init__(self, cur: psycopg.Cursor[Any]) -> None:
        self._cur = cur

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount

    def execute(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        return self._cur.execute(_paramstyle(sql), params)

    def executemany(self, sql: str, params: Sequence[Sequence[Any]]) -> None:
        self._cur.executemany(_paramstyle(sql), params)

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cur.fetchall()


def _close_in_background(
    pool: ConnectionPool[psycopg.Connection[Any]], stop_listening: Callable[[], None]
) -> None:
    """Close a dropped store's pool without waiting for its threads: the collector may run
    this on any thread, one of the pool's own included."""
    stop_listening()
    threading.Thread(target=pool.close, name=f"{pool.name}-close", daemon=True).start()


class PostgresStore(SQLStore):
    """``postgresql://user[:password]@host[:port]/database[?pool_size=N&pool_timeout=S]``.

    Opening it connects once, checks the schema (creating or migrating it; refusing a database
    of another program or a newer Playline's) and opens the pool. Other query parameters go to
    libpq (``sslmode``, ``options=-csearch_path%3Dplayline`` for a schema of its own, ...).

    ``pool_size`` overrides the URL's; ``check_idle_after`` is how many seconds a pooled
    connection may sit idle before it is checked (one round trip) when next handed out.
    """

    _functions = POSTGRES
    _for_update = " FOR UPDATE"

    def __init__(
        self,
        url: str,
        *,
        pool_size: int | None = None,
        check_idle_after: float = IDLE_CHECK_S,
        read_only: bool = False,
    ) -> None:
        self.url = url
        self.read_only = read_only
        self._target: Target = parse_url(url)
        self.where = self._target.display
        self.io_threads = pool_size or self._target.pool_size
        self._lock = threading.Lock()
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        try:
            conn = psycopg.connect(
                self._target.conninfo, autocommit=True, **self._target.connect_kwargs
            )
        except psycopg.OperationalError as exc:
            raise connect_error(self._target, exc) from None
        try:
            with conn:
                if read_only:  # nothing is created: the schema must be there already
                    self.schema_version_found = readable_version(conn, self.where)
                else:
                    self.schema_version_found = migrate(conn, self.where)
        except psycopg.Error as exc:
            raise self._error("create or check the schema", exc) from exc
        self._idle = _IdleCheck(check_idle_after)
        pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            self._target.conninfo,
            kwargs={"autocommit": True, **self._target.connect_kwargs},
            min_size=0,  # connections are made when asked for: an idle store holds none open
            max_size=self.io_threads,
            timeout=self._target.pool_timeout,
            check=self._idle.check,
            name=f"playline {self.where}",
            open=False,
        )
        pool.open()
        self._pool = pool
        self._listener = Listener(
            self._target.conninfo, self._target.connect_kwargs, f"playline-listen {self.where}"
        )
        # pl.run opens a store per call and does not close it: when this object is dropped,
        # its pool (whose threads keep it alive) is closed too.
        self._release = weakref.finalize(self, _close_in_background, pool, self._listener.close)

    def __repr__(self) -> str:
        state = "closed" if self._pool is None else "open"
        return f"PostgresStore({self.where!r}) [{state}]"

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._pool is None

    def close(self) -> None:
        if self._pool is not None:
            self._close_tails()
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            self._release.detach()
            self._listener.close()
            pool.close()

    # LISTEN/NOTIFY (_postgres_listen.py)
    def changes(self) -> ChangeFeed | None:
        return None if self._pool is None else self._listener

    def _announce(self, cur: Cursor, channel: str, keys: Sequence[str]) -> None:
        announce(cur, channel, keys)

    # the dialect
    @contextmanager
    def _transaction(self, what: str, *, write: bool) -> Iterator[Cursor]:
        pool = self._pool
        if pool is None:
            raise self._closed()
        if write and self.read_only:
            raise StoreError(
                f"The store {self.where} was opened read-only, to be inspected: it cannot "
                f"{what}. Open it with open_store(url) to write to it."
            )
        committing = lost = False
        try:
            with pool.connection() as conn:
                try:
                    if write:
                        with conn.transaction():
                            yield _PgCursor(conn.cursor())
                            committing = True
                    else:
                        yield _PgCursor(conn.cursor())
                except psycopg.Error:
                    lost = conn.broken
                    raise
                finally:
                    self._idle.used(conn)
        except PoolClosed:
            raise self._closed() from None
        except PoolTimeout as exc:  # before anything was written: made again (StoreIO)
            raise ConnectionLost(
                f"Could not {what} in the store {self.where}: no connection to PostgreSQL within "
                f"{self._target.pool_timeout:g} s ({exc}). Check that the server is up; if all "
                f"{self.io_threads} connections are busy, raise pool_size in the store URL."
            ) from None
        except psycopg.Error as exc:
            if lost:
                # The server went away (a restart, a failover, a killed backend): the pool has
                # dropped this connection; check the idle ones too, so the next call gets a
                # working connection instead of the same failure.
                self._check_pool(pool)
            raise self._error(what, exc, lost=lost, committing=committing) from exc

    @staticmethod
    def _check_pool(pool: ConnectionPool[psycopg.Connection[Any]]) -> None:
        with suppress(Exception):  # best effort: the pool replaces what it finds broken
            pool.check()

    # the JSON of a row's values and cells (stored as text), in PostgreSQL's terms
    def _sql_value(self, name: str) -> str:  # a key, not a path: any name does
        return "NULLIF(\"values\"::jsonb -> ?, 'null'::jsonb)"

    def _sql_contains(self, column: str) -> str:
        return f"strpos({column}, ?) > 0"

    def _sql_cell_counts(self) -> str:
        return (
            "SELECT c.value->>'status', COUNT(*), COUNT(DISTINCT rows.id) "
            "FROM rows, jsonb_each(rows.cells::jsonb) c WHERE rows.set_id = ? GROUP BY 1"
        )

    def _sql_cell_is(self, name: str) -> str:  # a key, not a path: any name does
        return "rows.cells::jsonb -> ? ->> 'status' = ?"

    def _sql_value_of(self, name: str) -> str | None:
        if "\0" in name:
            return None
        return f"(NULLIF(\"values\"::jsonb -> {_literal(name)}, 'null'::jsonb))"

    def _sql_cell_of(self, name: str) -> str | None:
        if "\0" in name:
            return None
        return f"(cells::jsonb -> {_literal(name)} ->> 'status')"

    def _sql_order(self, descending: bool) -> str:  # PostgreSQL puts nulls last ascending
        return "DESC NULLS LAST" if descending else "ASC NULLS FIRST"

    def _sql_indexed_by(self, name: str) -> str:  # its planner weighs them itself
        return "rows"

    def _sql_version(self) -> str | None:
        # The snapshot a statement reads by (the transactions it sees as committed) is the
        # version of the whole database: it changes as soon as any transaction that wrote,
        # in any process, ends, and never comes back to an earlier value; two reads with the
        # same snapshot see the same data (https://www.postgresql.org/docs/current/
        # functions-info.html#FUNCTIONS-PG-SNAPSHOT). Reads do not change it.
        return "SELECT pg_current_snapshot()::text"

    def _build_index(self, what: str, name: str, index: str) -> None:
        """``CREATE INDEX CONCURRENTLY``: the set's writers go on while it is built (a plain
        one would hold them off for the seconds a million rows take). It cannot run in a
        transaction; one that failed (the server stopped, the process was killed) leaves an
        INVALID index behind, which is dropped and built again. Processes that want the
        same index take turns on an advisory lock of its name: the one that waited finds it
        built (an index being built is INVALID until done, so only the lock's holder drops
        one). See
        https://www.postgresql.org/docs/current/sql-createindex.html#SQL-CREATEINDEX-CONCURRENTLY
        """
        if self.read_only:
            raise StoreError(
                f"The store {self.where} was opened read-only: it cannot {what}. Open it with "
                "open_store(url) to write to it."
            )
        self._before_long_work()
        with self._transaction(what, write=False) as cur:  # autocommit: statements commit
            cur.execute("SELECT pg_advisory_lock(hashtextextended(?, 0))", (name,))
            try:
                valid = cur.execute(_INDEX_VALID, (name,)).fetchone()
                if valid is not None and not valid[0]:
                    cur.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                if valid is None or not valid[0]:
                    cur.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {index}")
                    # statistics of the new index's expression: without them a count by a
                    # column's cell state read a million rows of the heap (1.9 s); with
                    # them, the rows it counts (0.26 s)
                    cur.execute("ANALYZE rows")
            finally:
                cur.execute("SELECT pg_advisory_unlock(hashtextextended(?, 0))", (name,))

    def _sql_indexes(self) -> str:  # an INVALID index (being built, or failed) is not one
        return (
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() "
            "AND i.indisvalid AND c.relname >= ? AND c.relname < ?"
        )

    def _lock_keys(self, cur: Cursor, keys: Sequence[str]) -> None:
        """Transaction advisory locks on ``keys``, released at commit or rollback.

        One statement takes them all in the order of their 64-bit hashes (the lock identities),
        so two transactions that lock overlapping key sets always queue, never deadlock.
        PostgreSQL evaluates the volatile lock function after the ``ORDER BY`` sort.
        """
        if keys:
            cur.execute(
                "SELECT pg_advisory_xact_lock(h) FROM (SELECT DISTINCT hashtextextended(k, 0) "
                "AS h FROM unnest(?::text[]) AS k) AS locks ORDER BY h",
                (sorted(set(keys)),),
            )

    def _closed(self) -> StoreError:
        return StoreError(
            f"The store {self.where} is closed (store is closed). Open it again with "
            "open_store(url)."
        )

    def _error(
        self, what: str, exc: psycopg.Error, *, lost: bool = False, committing: bool = False
    ) -> StoreError:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        where = f"Could not {what} in the store {self.where}"
        if lost:
            written = (
                "it may have been committed just before: check, or run it again (claims and "
                "completions are safe to repeat)"
                if committing
                else "nothing of it was written (its transaction rolled back)"
            )
            # nothing written: the same call again is safe (StoreIO makes it, on a new one)
            lost_as = StoreError if committing else ConnectionLost
            return lost_as(
                f"{where}: the connection to PostgreSQL was lost ({reason}); {written}. Check "
                "that the server is up; the next call reconnects."
            )
        if exc.sqlstate in (_DEADLOCK, _SERIALIZATION):
            return StoreError(
                f"{where}: PostgreSQL aborted it because of a conflict with another process "
                f"({reason}); nothing of it was written. Run it again."
            )
        if exc.sqlstate == _PRIVILEGE:
            return StoreError(
                f"{where}: {reason}. Grant the store's user the privileges it needs on the "
                "database (CREATE on its schema when the store is new; SELECT, INSERT, UPDATE "
                "and DELETE on Playline's tables), or connect as another user."
            )
        if exc.sqlstate == _NO_SCHEMA:
            return StoreError(
                f"{where}: {reason}. The schema the store URL's search_path names does not "
                "exist: create it (CREATE SCHEMA name, as a user who may), or fix "
                "options=-csearch_path%3Dname in the URL."
            )
        if isinstance(exc, psycopg.DataError) and "NUL" in reason:
            return StoreError(
                f"{where}: {reason}. PostgreSQL text cannot hold the character U+0000: remove it "
                "from ids, names and messages (values inside rows and results may hold it)."
            )
        return StoreError(f"{where}: {reason}.")
