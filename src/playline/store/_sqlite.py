"""The SQLite store: ``sqlite:///path/to/playline.db``, one file shared by processes on one machine.

WAL mode, ``synchronous=NORMAL``, one connection per store object. Every batch method is one
transaction; those that read then write take the write lock first (``BEGIN IMMEDIATE``), so two
processes claiming the same receipt key can never both own it.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

from .._json import dumps, loads
from ..errors import StoreError
from ._claims import decide_claim
from ._records import (
    Boundary,
    Claim,
    ClaimOutcome,
    ClaimResult,
    Event,
    LedgerEntry,
    Receipt,
    ReceiptStatus,
    RowRecord,
    RunRecord,
    RunStatus,
)
from ._schema import migrate
from ._sqlite_file import not_a_database, parse_url, prepare_folder

__all__ = ["SQLiteStore"]

_CHUNK = 500  # keys per IN (...) list
_PAGE = 1000  # rows per page when streaming a dataset

# Primary SQLite result codes (the low byte of an extended code).
_BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 5, 6, 8, 10, 11, 13, 14, 26

_RUN_STATUS = {s.value: s for s in RunStatus}
_RECEIPT_STATUS = {s.value: s for s in ReceiptStatus}

_RUN_COLUMNS = (
    "run_id, play, status, input, output, error, stats, created_at, updated_at, "
    "parent_run_id, waiting"
)
_RECEIPT_COLUMNS = (
    "key, tool, status, owner, run_id, attempt, lease_until, result, error, updated_at, job"
)
_ROW_COLUMNS = 'key, idx, status, "values", cells, error, updated_at'
_EVENT_COLUMNS = (
    'seq, kind, run_id, at, dataset, row_key, "column", status, provider, error, preview, data'
)
_LEDGER_COLUMNS = "run_id, tool, receipt_key, credits, found, at, dataset, row_key"

_UPSERT_RUN = (
    f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run_id) DO UPDATE SET play = excluded.play, status = excluded.status, "
    "input = excluded.input, output = excluded.output, error = excluded.error, "
    "stats = excluded.stats, created_at = excluded.created_at, updated_at = excluded.updated_at, "
    "parent_run_id = excluded.parent_run_id, waiting = excluded.waiting"
)
_UPSERT_RECEIPT = (
    f"INSERT INTO receipts ({_RECEIPT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (key) DO UPDATE SET tool = excluded.tool, status = excluded.status, "
    "owner = excluded.owner, run_id = excluded.run_id, attempt = excluded.attempt, "
    "lease_until = excluded.lease_until, result = excluded.result, error = excluded.error, "
    "updated_at = excluded.updated_at, job = excluded.job"
)
_UPSERT_ROW = (
    'INSERT INTO rows (run_id, dataset, key, idx, status, "values", cells, error, updated_at) '
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, dataset, key) DO UPDATE SET "
    'idx = excluded.idx, status = excluded.status, "values" = excluded."values", '
    "cells = excluded.cells, error = excluded.error, updated_at = excluded.updated_at"
)


def _chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _marks(n: int) -> str:
    return ",".join("?" * n)


def _json(value: Any, what: str) -> str | None:
    return None if value is None else dumps(value, what=what).decode()


def _unjson(text: str | None) -> Any:
    return None if text is None else loads(text)


class SQLiteStore:
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
        if self.path != ":memory:":
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

    # plumbing
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

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(
                f"The store {self.url} is closed (store is closed). "
                "Open it again with open_store(url)."
            )
        return self._conn

    @contextmanager
    def _reading(self, what: str) -> Iterator[sqlite3.Connection]:
        """One read snapshot: several chunked queries see the same data."""
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN")
                try:
                    yield conn
                finally:
                    conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback(conn)
                raise self._error(what, exc) from exc

    @contextmanager
    def _writing(self, what: str) -> Iterator[sqlite3.Connection]:
        """One write transaction holding the write lock from its first read."""
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    self._rollback(conn)
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback(conn)
                raise self._error(what, exc) from exc

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            with suppress(sqlite3.Error):  # the original error is the one worth reporting
                conn.execute("ROLLBACK")

    # runs
    def create_run(self, run: RunRecord) -> None:
        params = self._run_params(run)
        with self._writing(f"create run {run.run_id}") as conn:
            conn.execute(_UPSERT_RUN, params)

    def get_run(self, run_id: str) -> RunRecord | None:
        with self._reading(f"read run {run_id}") as conn:
            row = conn.execute(
                f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
        return None if row is None else self._run(row)

    def update_run(self, run_id: str, **changes: Any) -> None:
        with self._writing(f"update run {run_id}") as conn:
            row = conn.execute(
                f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is None:
                raise StoreError(
                    f"Cannot update run {run_id}: no such run in {self.path}. "
                    "Create it first with create_run."
                )
            updated = replace(self._run(row), **changes)
            params = self._run_params(updated)
            conn.execute(
                "UPDATE runs SET run_id = ?, play = ?, status = ?, input = ?, output = ?, "
                "error = ?, stats = ?, created_at = ?, updated_at = ?, parent_run_id = ?, "
                "waiting = ? WHERE run_id = ?",
                (*params, run_id),
            )

    def list_runs(self, *, limit: int = 50) -> list[RunRecord]:
        with self._reading("list runs") as conn:
            rows = conn.execute(
                f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY created_at DESC, rowid LIMIT ?",
                (limit,),
            ).fetchall()
        return [self._run(row) for row in rows]

    @staticmethod
    def _run_params(run: RunRecord) -> tuple[Any, ...]:
        return (
            run.run_id,
            run.play,
            str(run.status),
            _json(run.input, "run input"),
            _json(run.output, "run output"),
            run.error,
            dumps(run.stats, what="run stats").decode(),
            run.created_at,
            run.updated_at,
            run.parent_run_id,
            _json(run.waiting, "run waiting"),
        )

    @staticmethod
    def _run(row: tuple[Any, ...]) -> RunRecord:
        run_id, play, status, input_, output, error, stats, created, updated, parent, waiting = row
        return RunRecord(
            run_id=run_id,
            play=play,
            status=_RUN_STATUS[status],
            input=_unjson(input_),
            output=_unjson(output),
            error=error,
            stats=loads(stats),
            created_at=created,
            updated_at=updated,
            parent_run_id=parent,
            waiting=_unjson(waiting),
        )

    # receipts
    def claim_receipts(
        self, claims: Sequence[Claim], *, owner: str, lease_until: float, now: float
    ) -> list[ClaimResult]:
        if not claims:
            return []
        keys = list(dict.fromkeys(c.key for c in claims))
        with self._writing(f"claim {len(claims)} receipts") as conn:
            known: dict[str, Receipt | None] = dict(self._select_receipts(conn, keys))
            results: list[ClaimResult] = []
            owned: dict[str, Receipt] = {}
            for claim in claims:
                result = decide_claim(
                    known.get(claim.key), claim, owner=owner, lease_until=lease_until, now=now
                )
                if result.outcome is ClaimOutcome.OWNED:
                    # A later claim on the same key in this batch sees this one, as in memory.
                    known[claim.key] = owned[claim.key] = result.receipt
                results.append(result)
            if owned:
                conn.executemany(
                    _UPSERT_RECEIPT,
                    [
                        (
                            r.key,
                            r.tool,
                            r.status.value,
                            r.owner,
                            r.run_id,
                            r.attempt,
                            r.lease_until,
                            r.result,
                            r.error,
                            r.updated_at,
                            r.job,
                        )
                        for r in owned.values()
                    ],
                )
        return results

    def complete_receipts(
        self,
        completions: Sequence[tuple[str, bytes]],
        *,
        owner: str,
        now: float,
        ledger: Sequence[LedgerEntry] = (),
    ) -> dict[str, bytes]:
        if not completions:
            self.append_ledger(ledger)
            return {}
        keys = list(dict.fromkeys(key for key, _ in completions))
        kept: dict[str, bytes] = {}
        with self._writing(f"complete {len(completions)} receipts") as conn:
            # key -> (status, owner, stored result if another owner completed it)
            state: dict[str, tuple[str, str, bytes | None]] = {}
            for chunk in _chunks(keys):
                for key, status, current_owner, result in conn.execute(
                    "SELECT key, status, owner, CASE WHEN status = 'completed' AND owner != ? "
                    f"THEN result END FROM receipts WHERE key IN ({_marks(len(chunk))})",
                    (owner, *chunk),
                ):
                    state[key] = (status, current_owner, result)
            missing = [key for key in keys if key not in state]
            if missing:
                raise StoreError(
                    f"Cannot complete receipts that were never claimed (or were released): "
                    f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}. "
                    "Claim a receipt before completing it."
                )
            updates: list[tuple[bytes, float, str]] = []
            for key, result in completions:
                status, current_owner, stored = state[key]
                if status == "completed" and current_owner != owner and stored is not None:
                    kept[key] = stored
                    continue
                updates.append((result, now, key))
                # The owner column is kept, so a repeat by another owner is kept too.
                state[key] = ("completed", current_owner, result)
            conn.executemany(
                "UPDATE receipts SET status = 'completed', result = ?, error = NULL, "
                "lease_until = NULL, updated_at = ? WHERE key = ?",
                updates,
            )
            self._insert_ledger(conn, ledger)
        return kept

    def fail_receipts(self, failures: Sequence[tuple[str, str]], *, owner: str, now: float) -> None:
        if not failures:
            return
        with self._writing(f"fail {len(failures)} receipts") as conn:
            conn.executemany(
                "UPDATE receipts SET status = 'failed', error = ?, lease_until = NULL, "
                "updated_at = ? WHERE key = ? AND owner = ? AND status = 'running'",
                [(error, now, key, owner) for key, error in failures],
            )

    def save_jobs(self, jobs: Sequence[tuple[str, bytes]], *, owner: str) -> None:
        if not jobs:
            return
        with self._writing(f"record {len(jobs)} submitted jobs") as conn:
            conn.executemany(
                "UPDATE receipts SET job = ? WHERE key = ? AND owner = ? AND status = 'running'",
                [(job, key, owner) for key, job in jobs],
            )

    def release_receipts(self, keys: Sequence[str], *, owner: str) -> None:
        if not keys:
            return
        params = [(key, owner) for key in keys]
        with self._writing(f"release {len(keys)} receipts") as conn:
            # Never executed anywhere: forget it. Executed before: keep its history, as failed.
            conn.executemany(
                "DELETE FROM receipts WHERE key = ? AND owner = ? AND status = 'running' "
                "AND attempt = 1 AND result IS NULL AND job IS NULL",
                params,
            )
            conn.executemany(
                "UPDATE receipts SET status = 'failed', error = 'released', lease_until = NULL "
                "WHERE key = ? AND owner = ? AND status = 'running'",
                params,
            )

    def get_receipts(self, keys: Sequence[str]) -> dict[str, Receipt]:
        if not keys:
            return {}
        unique = list(dict.fromkeys(keys))
        with self._reading(f"read {len(unique)} receipts") as conn:
            found = self._select_receipts(conn, unique)
        return {key: found[key] for key in unique if key in found}

    @staticmethod
    def _select_receipts(conn: sqlite3.Connection, keys: list[str]) -> dict[str, Receipt]:
        found: dict[str, Receipt] = {}
        for chunk in _chunks(keys):
            for (
                key,
                tool,
                status,
                owner,
                run_id,
                attempt,
                lease,
                result,
                error,
                at,
                job,
            ) in conn.execute(
                f"SELECT {_RECEIPT_COLUMNS} FROM receipts WHERE key IN ({_marks(len(chunk))})",
                chunk,
            ):
                found[key] = Receipt(
                    key=key,
                    tool=tool,
                    status=_RECEIPT_STATUS[status],
                    owner=owner,
                    run_id=run_id,
                    attempt=attempt,
                    lease_until=lease,
                    result=result,
                    error=error,
                    updated_at=at,
                    job=job,
                )
        return found

    # rows
    def save_rows(self, rows: Sequence[RowRecord]) -> None:
        if not rows:
            return
        params = [
            (
                row.run_id,
                row.dataset,
                row.key,
                row.index,
                row.status,
                dumps(row.values, what=f"row {row.key!r} values", ordered=True).decode(),
                dumps(row.cells, what=f"row {row.key!r} cells", ordered=True).decode(),
                row.error,
                row.updated_at,
            )
            for row in rows
        ]
        with self._writing(f"save {len(rows)} rows") as conn:
            conn.executemany(_UPSERT_ROW, params)

    def load_rows(self, run_id: str, dataset: str, keys: Sequence[str]) -> dict[str, RowRecord]:
        if not keys:
            return {}
        unique = list(dict.fromkeys(keys))
        found: dict[str, RowRecord] = {}
        with self._reading(f"load rows of dataset {dataset!r} in run {run_id}") as conn:
            for chunk in _chunks(unique):
                for row in conn.execute(
                    f"SELECT {_ROW_COLUMNS} FROM rows WHERE run_id = ? AND dataset = ? "
                    f"AND key IN ({_marks(len(chunk))})",
                    (run_id, dataset, *chunk),
                ):
                    found[row[0]] = self._row(run_id, dataset, row)
        return {key: found[key] for key in unique if key in found}

    def iter_rows(self, run_id: str, dataset: str) -> Iterator[RowRecord]:
        # Keyset pages, each its own short query: no read transaction stays open between
        # yields, so the caller may write rows (or another process may) while iterating.
        after: tuple[int, int] | None = None
        what = f"read rows of dataset {dataset!r} in run {run_id}"
        while True:
            with self._reading(what) as conn:
                if after is None:
                    page = conn.execute(
                        f"SELECT {_ROW_COLUMNS}, rowid FROM rows WHERE run_id = ? AND dataset = ? "
                        "ORDER BY idx, rowid LIMIT ?",
                        (run_id, dataset, _PAGE),
                    ).fetchall()
                else:
                    page = conn.execute(
                        f"SELECT {_ROW_COLUMNS}, rowid FROM rows WHERE run_id = ? AND dataset = ? "
                        "AND (idx, rowid) > (?, ?) ORDER BY idx, rowid LIMIT ?",
                        (run_id, dataset, *after, _PAGE),
                    ).fetchall()
            for row in page:
                yield self._row(run_id, dataset, row)
            if len(page) < _PAGE:
                return
            after = (page[-1][1], page[-1][-1])

    def datasets(self, run_id: str) -> list[str]:
        with self._reading(f"list datasets of run {run_id}") as conn:
            rows = conn.execute(
                "SELECT dataset FROM rows WHERE run_id = ? GROUP BY dataset ORDER BY MIN(rowid)",
                (run_id,),
            ).fetchall()
        return [name for (name,) in rows]

    @staticmethod
    def _row(run_id: str, dataset: str, row: tuple[Any, ...]) -> RowRecord:
        return RowRecord(
            run_id=run_id,
            dataset=dataset,
            key=row[0],
            index=row[1],
            status=row[2],
            values=loads(row[3]),
            cells=loads(row[4]),
            error=row[5],
            updated_at=row[6],
        )

    # events
    def append_events(self, events: Sequence[Event]) -> None:
        if not events:
            return
        params = [
            (
                e.kind,
                e.run_id,
                e.at,
                e.dataset,
                e.row_key,
                e.column,
                e.status,
                e.provider,
                e.error,
                e.preview,
                _json(e.data, f"{e.kind} event data"),
            )
            for e in events
        ]
        with self._writing(f"append {len(events)} events") as conn:
            conn.executemany(
                'INSERT INTO events (kind, run_id, at, dataset, row_key, "column", status, '
                "provider, error, preview, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                params,
            )

    def read_events(
        self, run_id: str, *, after_seq: int = 0, kinds: Sequence[str] | None = None
    ) -> list[Event]:
        sql = f"SELECT {_EVENT_COLUMNS} FROM events WHERE run_id = ? AND seq > ?"
        params: list[Any] = [run_id, after_seq]
        wanted = None if kinds is None else set(kinds)
        if wanted is not None and len(wanted) <= _CHUNK:
            sql += f" AND kind IN ({_marks(len(wanted))})"
            params.extend(wanted)
        with self._reading(f"read events of run {run_id}") as conn:
            rows = conn.execute(sql + " ORDER BY seq", params).fetchall()
        return [
            Event(
                seq=row[0],
                kind=row[1],
                run_id=row[2],
                at=row[3],
                dataset=row[4],
                row_key=row[5],
                column=row[6],
                status=row[7],
                provider=row[8],
                error=row[9],
                preview=row[10],
                data=_unjson(row[11]),
            )
            for row in rows
            if wanted is None or row[1] in wanted
        ]

    # ledger
    def append_ledger(self, entries: Sequence[LedgerEntry]) -> None:
        if entries:
            with self._writing(f"append {len(entries)} ledger entries") as conn:
                self._insert_ledger(conn, entries)

    @staticmethod
    def _insert_ledger(conn: sqlite3.Connection, entries: Sequence[LedgerEntry]) -> None:
        conn.executemany(
            f"INSERT INTO ledger ({_LEDGER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    e.run_id,
                    e.tool,
                    e.receipt_key,
                    e.credits,
                    int(e.found),
                    e.at,
                    e.dataset,
                    e.row_key,
                )
                for e in entries
            ],
        )

    def read_ledger(self, run_id: str) -> list[LedgerEntry]:
        with self._reading(f"read the ledger of run {run_id}") as conn:
            rows = conn.execute(
                f"SELECT {_LEDGER_COLUMNS} FROM ledger WHERE run_id = ? ORDER BY id", (run_id,)
            ).fetchall()
        return [
            LedgerEntry(
                run_id=rid,
                tool=tool,
                receipt_key=key,
                credits=credits,
                found=bool(found),
                at=at,
                dataset=dataset,
                row_key=row_key,
            )
            for rid, tool, key, credits, found, at, dataset, row_key in rows
        ]

    # boundaries and events
    def get_boundary(self, key: str) -> Boundary | None:
        with self._reading(f"read boundary {key}") as conn:
            row = conn.execute(
                "SELECT key, run_id, kind, status, output, wake_at, updated_at FROM boundaries "
                "WHERE key = ?",
                (key,),
            ).fetchone()
        if row is None:
            return None
        key, run_id, kind, status, output, wake_at, updated_at = row
        return Boundary(
            key=key,
            run_id=run_id,
            kind=kind,
            status=status,
            output=output,
            wake_at=wake_at,
            updated_at=updated_at,
        )

    def put_boundary(self, boundary: Boundary) -> None:
        with self._writing(f"write boundary {boundary.key}") as conn:
            self._put_boundary(conn, boundary)

    @staticmethod
    def _put_boundary(conn: sqlite3.Connection, b: Boundary) -> None:
        conn.execute(
            "INSERT INTO boundaries (key, run_id, kind, status, output, wake_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
            "status = excluded.status, output = excluded.output, wake_at = excluded.wake_at, "
            "updated_at = excluded.updated_at",
            (b.key, b.run_id, b.kind, b.status, b.output, b.wake_at, b.updated_at),
        )

    def send_event(self, key: str, payload: bytes, *, now: float) -> bool:
        with self._writing(f"send event {key}") as conn:
            cursor = conn.execute(
                "INSERT INTO inbox (key, payload, sent_at) VALUES (?, ?, ?) "
                "ON CONFLICT (key) DO NOTHING",
                (key, payload, now),
            )
            return cursor.rowcount == 1

    def deliver_event(self, key: str, boundary: Boundary) -> bytes | None:
        with self._writing(f"deliver event {key}") as conn:
            row = conn.execute(
                "SELECT payload, delivered_to FROM inbox WHERE key = ?", (key,)
            ).fetchone()
            if row is None or row[1] not in (None, boundary.key):
                return None
            payload: bytes = row[0]
            conn.execute(
                "UPDATE inbox SET delivered_to = ?, delivered_at = ? WHERE key = ?",
                (boundary.key, boundary.updated_at, key),
            )
            self._put_boundary(conn, replace(boundary, status="completed", output=payload))
            return payload

    def waiting_events(self, keys: Sequence[str]) -> set[str]:
        found: set[str] = set()
        with self._reading(f"look for {len(keys)} events") as conn:
            for chunk in _chunks(list(keys)):
                found.update(
                    key
                    for (key,) in conn.execute(
                        f"SELECT key FROM inbox WHERE delivered_to IS NULL AND key IN "
                        f"({_marks(len(chunk))})",
                        chunk,
                    )
                )
        return found

    # receipt maintenance
    def receipt_stats(self) -> dict[str, dict[str, int]]:
        stats: dict[str, dict[str, int]] = {}
        with self._reading("count receipts") as conn:
            rows = conn.execute(
                "SELECT tool, status, COUNT(*), COALESCE(SUM(LENGTH(result)), 0) FROM receipts "
                "GROUP BY tool, status ORDER BY tool"
            ).fetchall()
        for tool, status, count, size in rows:
            per = stats.setdefault(tool, {"completed": 0, "failed": 0, "running": 0, "bytes": 0})
            per[status] = per.get(status, 0) + count
            per["bytes"] += size
        return stats

    def clear_receipts(self, tool: str | None = None) -> int:
        sql = "DELETE FROM receipts WHERE status != 'running'"
        params: tuple[str, ...] = ()
        if tool is not None:
            sql, params = sql + " AND tool = ?", (tool,)
        with self._writing("clear receipts") as conn:
            return conn.execute(sql, params).rowcount
