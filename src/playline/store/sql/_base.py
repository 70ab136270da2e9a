"""Every store role on SQL, written once: a dialect supplies connections and transactions.

``SQLStore`` implements the store protocol with the statements of ``_tables.py`` (its rows
in ``_rows.py``, its rate gates in ``_gate_store.py``, its schedules in ``_schedules.py``);
its subclasses (``SQLiteStore``, ``PostgresStore``) say how to open a transaction, how to
lock the receipt keys a claim decides on, and how errors read. Each public method is one
transaction.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import Any

from ...errors import StoreError
from .._changes import EVENTS, RECEIPTS, ChangeFeed
from .._claims import ReceiptWrites, decide_claim, decide_run_claim, doubtful
from .._messages import empty_receipt_stats, lost_run, never_claimed
from .._records import (
    Answer,
    Boundary,
    Claim,
    ClaimResult,
    Completion,
    Event,
    Failure,
    LedgerEntry,
    LedgerTotals,
    Receipt,
    RunClaim,
    RunEnd,
    RunRecord,
    RunStatus,
)
from ._cursor import Cursor
from ._gate_store import GateRows
from ._rows import RowTables
from ._schedules import ScheduleRows
from ._tables import (
    CHUNK,
    COMPLETE_RECEIPT,
    EVENT_COLUMNS,
    INSERT_EVENT,
    INSERT_LEDGER,
    INSERT_NEW_RECEIPT,
    INSERT_RECEIPT,
    LEDGER_COLUMNS,
    RECEIPT_COLUMNS,
    RUN_COLUMNS,
    UPSERT_RECEIPT,
    UPSERT_RUN,
    chunks,
    event_from,
    event_params,
    ledger_from,
    ledger_params,
    marks,
    receipt_from,
    receipt_params,
    run_from,
    run_params,
)

__all__ = ["Cursor", "SQLStore"]


class _Stored(Exception):
    """A receipt written as if unread was not as assumed: the transaction is made again."""


class SQLStore(ReceiptWrites, GateRows, RowTables, ScheduleRows):
    url: str
    io_threads = 1
    io_inline = False  # called on a worker thread (the SQLite store: on the loop first)
    read_only = False  # opened only to be read: every write is refused
    damage: str | None = None  # what is wrong with a damaged store (then read-only too)
    shared = True  # a file or a server: other processes may use it too
    # Whether the last claims read found no receipt: a fresh run's next claims are written
    # without reading (a re-run's, whose keys have receipts, read them first as they must).
    _claims_unread = True

    # the dialect
    @abstractmethod
    def _transaction(self, what: str, *, write: bool) -> AbstractContextManager[Cursor]:
        """One transaction; a write one holds the write lock (or row locks) from its first
        read, so a read-decide-write cannot race another process. Errors become StoreError
        naming ``what``."""

    def _lock_keys(self, cur: Cursor, keys: Sequence[str]) -> None:
        """Serialise the transactions that decide on the same keys (receipt keys, ``run:ID``,
        ``event:KEY``) across connections: read, decide, write can then never race. Nothing to
        do where a write transaction holds the database's write lock, as SQLite's does."""

    def _announce(self, cur: Cursor, channel: str, keys: Sequence[str]) -> None:
        """Tell other processes, when the transaction commits, that ``keys`` changed on
        ``channel`` (``_changes.py``). Nothing to do where nobody can be told (SQLite)."""

    def changes(self) -> ChangeFeed | None:
        """The store's announcements of changes; None: waiters look at the store instead."""
        return None

    def inline(self) -> AbstractContextManager[None]:
        return nullcontext()  # not io_inline: never called

    @property
    @abstractmethod
    def closed(self) -> bool: ...

    @abstractmethod
    def close(self) -> None: ...

    def integrity_check(self) -> list[str]:
        """The problems a full check of the database finds; none where the database server
        keeps its own integrity (PostgreSQL)."""
        return []

    # runs
    def create_run(self, run: RunRecord) -> bool:
        with self._transaction(f"create run {run.run_id}", write=True) as cur:
            self._lock_keys(cur, [f"run:{run.run_id}"])
            if cur.execute("SELECT 1 FROM runs WHERE run_id = ?", (run.run_id,)).fetchone():
                return False
            cur.execute(UPSERT_RUN, run_params(run))
            self._set_waits(cur, run)
            return True

    def get_run(self, run_id: str) -> RunRecord | None:
        with self._transaction(f"read run {run_id}", write=False) as cur:
            return self._read_run(cur, run_id)

    def list_runs(
        self,
        *,
        limit: int = 50,
        status: RunStatus | None = None,
        play: str | None = None,
        roots_only: bool = False,
    ) -> list[RunRecord]:
        where, params = ["1 = 1"], []
        if status is not None:
            where.append("status = ?")
            params.append(status.value)
        if play is not None:
            where.append("play = ?")
            params.append(play)
        if roots_only:
            where.append("parent_run_id IS NULL")
        with self._transaction("list runs", write=False) as cur:
            rows = cur.execute(
                f"SELECT {RUN_COLUMNS} FROM runs WHERE {' AND '.join(where)} "
                "ORDER BY created_at DESC, run_id DESC LIMIT ?",
                (*params, limit),
            ).fetchall()
        return [run_from(row) for row in rows]

    def child_runs(self, run_id: str) -> list[RunRecord]:
        with self._transaction(f"list the child plays of run {run_id}", write=False) as cur:
            rows = cur.execute(
                f"SELECT {RUN_COLUMNS} FROM runs WHERE parent_run_id = ? "
                "ORDER BY created_at, run_id",
                (run_id,),
            ).fetchall()
        return [run_from(row) for row in rows]

    def claim_run(
        self,
        run_id: str,
        *,
        holder: str,
        lease_until: float,
        now: float,
        options: Mapping[str, Any] | None = None,
    ) -> RunClaim:
        with self._changing_tails():  # until the tails it adopts are known adopted (_Tails)
            with self._transaction(f"claim run {run_id}", write=True) as cur:
                claim, held = decide_run_claim(
                    self._locked_run(cur, run_id),
                    holder=holder,
                    lease_until=lease_until,
                    now=now,
                    options=options,
                )
                adopted: list[int] = []
                if held is not None:
                    cur.execute(UPSERT_RUN, run_params(held))
                    self._set_waits(cur, held)
                    adopted = self._adopt_run(cur, run_id)
            self._indexed(adopted)
        return claim

    def renew_runs(self, holder: str, *, lease_until: float) -> list[RunRecord]:
        with self._transaction("renew run leases", write=True) as cur:
            cur.execute(
                "UPDATE runs SET lease_until = ? WHERE holder = ? AND status = 'running'",
                (lease_until, holder),
            )
            rows = cur.execute(
                f"SELECT {RUN_COLUMNS} FROM runs WHERE holder = ? AND status = 'running'",
                (holder,),
            ).fetchall()
        return [run_from(row) for row in rows]

    def end_attempt(self, run_id: str, *, holder: str, end: RunEnd, now: float) -> None:
        with self._changing_tails():  # until the tails it indexes are known indexed (_Tails)
            with self._transaction(f"end the attempt of run {run_id}", write=True) as cur:
                run = self._locked_run(cur, run_id)
                if run is None or run.holder != holder:
                    raise StoreError(lost_run(run_id, run))
                ended = replace(
                    run,
                    status=end.status,
                    output=end.output,
                    error=end.error,
                    stats=end.stats,
                    waiting=end.waiting,
                    counters=end.counters,
                    holder=None,
                    lease_until=None,
                    stop_requested=False,
                    updated_at=now,
                )
                cur.execute(UPSERT_RUN, run_params(ended))
                self._set_waits(cur, ended)
                indexed = self._index_run(cur, run_id)
            self._indexed(indexed)

    def _locked_run(self, cur: Cursor, run_id: str) -> RunRecord | None:
        """The run's record, its key locked until the transaction ends (``claim_run`` and
        ``end_attempt`` decide on it)."""
        self._lock_keys(cur, [f"run:{run_id}"])
        return self._read_run(cur, run_id)

    @staticmethod
    def _read_run(cur: Cursor, run_id: str) -> RunRecord | None:
        row = cur.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else run_from(row)

    @staticmethod
    def _set_waits(cur: Cursor, run: RunRecord) -> None:
        """The events a suspended run waits for, indexed for ``due_runs``."""
        cur.execute("DELETE FROM run_waits WHERE run_id = ?", (run.run_id,))
        if run.status is RunStatus.SUSPENDED and run.awaited_events:
            cur.executemany(
                "INSERT INTO run_waits (run_id, event_key) VALUES (?, ?) ON CONFLICT DO NOTHING",
                [(run.run_id, key) for key in run.awaited_events],
            )

    def request_stop(self, run_id: str) -> bool:
        with self._transaction(f"ask run {run_id} to stop", write=True) as cur:
            cur.execute(
                "UPDATE runs SET stop_requested = 1 WHERE run_id = ? AND status = 'running'",
                (run_id,),
            )
            return bool(cur.rowcount == 1)

    def due_runs(self, *, now: float, limit: int = 100) -> list[RunRecord]:
        with self._transaction("find the runs that are due", write=False) as cur:
            rows = cur.execute(
                f"SELECT {RUN_COLUMNS} FROM runs r WHERE r.parent_run_id IS NULL AND ("
                "(r.status = 'suspended' AND ((r.wake_at IS NOT NULL AND r.wake_at <= ?) "
                "OR EXISTS (SELECT 1 FROM run_waits w JOIN inbox i ON i.key = w.event_key "
                "WHERE w.run_id = r.run_id AND i.delivered_to IS NULL))) "
                "OR (r.status = 'running' AND r.lease_until IS NOT NULL AND r.lease_until <= ?)) "
                "ORDER BY r.updated_at LIMIT ?",
                (now, now, limit),
            ).fetchall()
        return [run_from(row) for row in rows]

    # receipts
    def find_receipts(self, keys: Sequence[str]) -> dict[str, Receipt]:
        if not keys:
            return {}
        unique = list(dict.fromkeys(keys))
        with self._transaction(f"read {len(unique)} receipts", write=False) as cur:
            found = self._select_receipts(cur, unique)
        return {key: found[key] for key in unique if key in found}

    def find_answers(self, keys: Sequence[str]) -> dict[str, Answer]:
        unique = list(dict.fromkeys(keys))
        found: dict[str, Answer] = {}
        with self._transaction(f"read {len(unique)} receipts", write=False) as cur:
            for chunk in chunks(unique):
                for key, result, updated_at, run_id in cur.execute(
                    "SELECT key, result, updated_at, run_id FROM receipts "
                    f"WHERE status = 'completed' AND key IN ({marks(len(chunk))})",
                    chunk,
                ).fetchall():
                    found[key] = Answer(bytes(result), updated_at, run_id)
        return found

    def doubtful_receipts(self, run_id: str, *, now: float) -> dict[str, str]:
        # few receipts are running or in doubt: an index holds just those (schema 6)
        with self._transaction(f"find the calls in doubt of run {run_id}", write=False) as cur:
            rows = cur.execute(
                f"SELECT {RECEIPT_COLUMNS} FROM receipts "
                "WHERE status IN ('running', 'unknown') "
                "AND (run_id = ? OR (run_id >= ? AND run_id < ?))",
                (run_id, run_id + "/", run_id + "0"),
            ).fetchall()
        return {r.key: r.tool for r in map(receipt_from, rows) if doubtful(r, now)}

    def pending_jobs(self, run_id: str) -> list[Receipt]:
        # running or in doubt: the receipts the index of doubtful_receipts holds (schema 6)
        with self._transaction(f"find the jobs in progress of run {run_id}", write=False) as cur:
            rows = cur.execute(
                f"SELECT {RECEIPT_COLUMNS} FROM receipts "
                "WHERE status IN ('running', 'unknown') AND job IS NOT NULL "
                "AND (run_id = ? OR (run_id >= ? AND run_id < ?)) ORDER BY updated_at, key",
                (run_id, run_id + "/", run_id + "0"),
            ).fetchall()
        return [receipt_from(row) for row in rows]

    @staticmethod
    def _select_receipts(cur: Cursor, keys: Sequence[str]) -> dict[str, Receipt]:
        found: dict[str, Receipt] = {}
        for chunk in chunks(keys):
            for row in cur.execute(
                f"SELECT {RECEIPT_COLUMNS} FROM receipts WHERE key IN ({marks(len(chunk))})",
                chunk,
            ).fetchall():
                found[row[0]] = receipt_from(row)
        return found

    def write_receipts(
        self,
        *,
        completions: Sequence[Completion] = (),
        failures: Sequence[Failure] = (),
        claims: Sequence[Claim] = (),
        owner: str,
        now: float,
        lease_until: float | None = None,
    ) -> tuple[dict[str, bytes], list[ClaimResult]]:
        if not (completions or failures or claims):
            return {}, []
        charges = [c.charge for c in completions if c.charge is not None]
        charges += [f.charge for f in failures if f.charge is not None]
        what = ", ".join(
            f"{verb} {len(items)} receipts"
            for verb, items in (("complete", completions), ("fail", failures), ("claim", claims))
            if items
        )
        keys = [
            *(c.key for c in completions),
            *(f.key for f in failures),
            *(c.key for c in claims),
            *(e.receipt_key for e in charges),
        ]

        def write(unread: bool) -> tuple[dict[str, bytes], list[ClaimResult]]:
            with self._transaction(what, write=True) as cur:
                # Serialised with other transactions deciding on these keys (and the charges'
                # "once per generation" check with other processes' charges), locked at once.
                self._lock_keys(cur, keys)
                kept = self._complete(cur, completions, owner=owner, now=now, unread=unread)
                self._fail(cur, failures, owner=owner, now=now)
                self._charge(cur, charges)
                claimed = self._claim(
                    cur,
                    claims,
                    owner=owner,
                    lease_until=lease_until,
                    now=now,
                    unread=unread and self._claims_unread,
                )
            return kept, claimed

        # First as if each claimed key had no receipt and each completed one were still
        # this owner's (the common case: nothing is read before it is written, a tenth of a
        # live call's store time); where one is not, it is all made again on the receipts
        # read.
        try:
            return write(unread=True)
        except _Stored:  # rolled back
            return write(unread=False)

    def _claim(
        self,
        cur: Cursor,
        claims: Sequence[Claim],
        *,
        owner: str,
        lease_until: float | None,
        now: float,
        unread: bool,
    ) -> list[ClaimResult]:
        """Decide the claims on the receipts stored (``unread``: on none, and raise _Stored
        when a key has one) and write the receipts they change."""
        if not claims:
            return []
        if lease_until is None:
            raise ValueError("write_receipts: claims need lease_until")
        if unread:
            stored: dict[str, Receipt] = {}
        else:
            stored = self._select_receipts(cur, list(dict.fromkeys(c.key for c in claims)))
            self._claims_unread = not stored
        known: dict[str, Receipt | None] = dict(stored)
        results: list[ClaimResult] = []
        changed: dict[str, Receipt] = {}
        for claim in claims:
            result = decide_claim(
                known.get(claim.key), claim, owner=owner, lease_until=lease_until, now=now
            )
            if result.changed:
                # A later claim on the same key in this batch sees this one.
                known[claim.key] = changed[claim.key] = result.receipt
            results.append(result)
        if changed:
            new = [receipt_params(r) for key, r in changed.items() if key not in stored]
            if unread:
                cur.executemany(INSERT_NEW_RECEIPT, new)
                if cur.rowcount != len(new):
                    raise _Stored
            elif new:
                cur.executemany(INSERT_RECEIPT, new)
            if len(new) < len(changed):
                cur.executemany(
                    UPSERT_RECEIPT,
                    [receipt_params(r) for key, r in changed.items() if key in stored],
                )
        return results

    def _complete(
        self,
        cur: Cursor,
        completions: Sequence[Completion],
        *,
        owner: str,
        now: float,
        unread: bool,
    ) -> dict[str, bytes]:
        """Record results; a receipt another owner completed keeps its result, returned by
        key. ``unread``: write each without reading it first, and raise _Stored unless every
        one was written (none missing, none completed by another owner)."""
        if not completions:
            return {}
        writes, kept = (
            (completions, {}) if unread else self._read_completions(cur, completions, owner)
        )
        # guarded as the reads decide: a result another owner completed first is kept
        cur.executemany(COMPLETE_RECEIPT, [(c.result, now, c.key, owner) for c in writes])
        if unread and cur.rowcount != len(writes):
            raise _Stored
        self._announce(cur, RECEIPTS, [c.key for c in writes])
        return kept

    @staticmethod
    def _read_completions(
        cur: Cursor, completions: Sequence[Completion], owner: str
    ) -> tuple[list[Completion], dict[str, bytes]]:
        """The completions to write, and the results other owners completed first (kept),
        decided on the receipts read; raises when a key was never claimed."""
        keys = list(dict.fromkeys(c.key for c in completions))
        kept: dict[str, bytes] = {}
        # key -> (status, owner, the stored result when another owner completed it)
        state: dict[str, tuple[str, str, bytes | None]] = {}
        for chunk in chunks(keys):
            for key, status, current_owner, result in cur.execute(
                "SELECT key, status, owner, CASE WHEN status = 'completed' AND owner != ? "
                f"THEN result END FROM receipts WHERE key IN ({marks(len(chunk))})",
                (owner, *chunk),
            ).fetchall():
                state[key] = (status, current_owner, None if result is None else bytes(result))
        missing = [key for key in keys if key not in state]
        if missing:
            raise StoreError(never_claimed(missing))
        writes: list[Completion] = []
        for completion in completions:
            status, current_owner, stored = state[completion.key]
            if status == "completed" and current_owner != owner and stored is not None:
                kept[completion.key] = stored
                continue
            writes.append(completion)
            state[completion.key] = ("completed", current_owner, completion.result)
        return writes, kept

    @staticmethod
    def _charge(cur: Cursor, entries: Sequence[LedgerEntry]) -> None:
        if entries:
            cur.executemany(INSERT_LEDGER, [ledger_params(e) for e in entries])

    def _fail(self, cur: Cursor, failures: Sequence[Failure], *, owner: str, now: float) -> None:
        if not failures:
            return
        cur.executemany(
            "UPDATE receipts SET status = ?, error = ?, lease_until = NULL, updated_at = ?, "
            "generation = generation + ?, job = CASE WHEN ? = 1 THEN NULL ELSE job END "
            "WHERE key = ? AND owner = ? AND status = 'running'",
            [
                (
                    f.status.value,
                    f.error,
                    now,
                    int(f.rebuy),
                    int(f.rebuy),
                    f.key,
                    owner,
                )
                for f in failures
            ],
        )
        self._announce(cur, RECEIPTS, [f.key for f in failures])

    def save_jobs(self, jobs: Sequence[tuple[str, bytes | None]], *, owner: str) -> None:
        if not jobs:
            return
        with self._transaction(f"record {len(jobs)} submitted jobs", write=True) as cur:
            self._lock_keys(cur, [key for key, _ in jobs])
            cur.executemany(
                "UPDATE receipts SET job = ? WHERE key = ? AND owner = ? AND status = 'running'",
                [(job, key, owner) for key, job in jobs],
            )

    def release_receipts(self, keys: Sequence[str], *, owner: str) -> None:
        if not keys:
            return
        params = [(key, owner) for key in keys]
        with self._transaction(f"release {len(keys)} receipts", write=True) as cur:
            self._lock_keys(cur, keys)
            # Never sent anywhere: forget it. Sent before (a job, an earlier attempt): keep
            # its history, as failed, so the next claim takes it up again.
            cur.executemany(
                "DELETE FROM receipts WHERE key = ? AND owner = ? AND status = 'running' "
                "AND attempt = 1 AND job IS NULL",
                params,
            )
            cur.executemany(
                "UPDATE receipts SET status = 'failed', "
                "error = COALESCE(error, 'released before it was sent'), lease_until = NULL "
                "WHERE key = ? AND owner = ? AND status = 'running'",
                params,
            )
            self._announce(cur, RECEIPTS, keys)

    def renew_receipts(self, owner: str, *, lease_until: float) -> int:
        with self._transaction("renew receipt leases", write=True) as cur:
            cur.execute(
                "UPDATE receipts SET lease_until = ? WHERE owner = ? AND status = 'running'",
                (lease_until, owner),
            )
            return int(cur.rowcount)

    def receipt_stats(self) -> dict[str, dict[str, int]]:
        stats: dict[str, dict[str, int]] = {}
        with self._transaction("count receipts", write=False) as cur:
            rows = cur.execute(
                "SELECT tool, status, COUNT(*), COALESCE(SUM(LENGTH(result)), 0) FROM receipts "
                "WHERE status != 'cleared' GROUP BY tool, status ORDER BY tool"
            ).fetchall()
        for tool, status, count, size in rows:
            per = stats.setdefault(tool, empty_receipt_stats())
            per[status] = per.get(status, 0) + int(count)
            per["bytes"] += int(size)
        return stats

    def clear_receipts(self, tool: str | None = None) -> int:
        # kept as tombstones: the key's next call is a new generation (``decide_claim``);
        # running and in-doubt ones stay (their next call goes out under the same key)
        sql = (
            "UPDATE receipts SET status = 'cleared', result = NULL, job = NULL, error = NULL "
            "WHERE status NOT IN ('running', 'unknown', 'cleared')"
        )
        params: tuple[str, ...] = ()
        if tool is not None:
            sql, params = sql + " AND tool = ?", (tool,)
        with self._transaction("clear receipts", write=True) as cur:
            cur.execute(sql, params)
            return int(cur.rowcount)

    # events
    def reserve_seqs(self, count: int) -> int:
        with self._transaction(f"reserve {count} event numbers", write=True) as cur:
            return self._reserve(cur, count)

    @staticmethod
    def _reserve(cur: Cursor, count: int) -> int:
        row = cur.execute(
            "UPDATE meta SET value = CAST(CAST(value AS BIGINT) + ? AS TEXT) "
            "WHERE key = 'event_seq' RETURNING value",
            (count,),
        ).fetchone()
        return int(row[0]) - count + 1

    def append_events(self, events: Sequence[Event]) -> None:
        if not events:
            return
        with self._transaction(f"append {len(events)} events", write=True) as cur:
            unnumbered = [e for e in events if not e.seq]
            if unnumbered:
                first = self._reserve(cur, len(unnumbered))
                for offset, event in enumerate(unnumbered):
                    event.seq = first + offset
            cur.executemany(INSERT_EVENT, [event_params(e) for e in events])

    def read_events(
        self,
        run_id: str,
        *,
        after_seq: int = 0,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        sql = f"SELECT {EVENT_COLUMNS} FROM events WHERE run_id = ? AND seq > ?"
        params: list[Any] = [run_id, after_seq]
        if kinds is not None:
            wanted = list(dict.fromkeys(kinds))[:CHUNK]
            if not wanted:
                return []
            sql += f" AND kind IN ({marks(len(wanted))})"
            params.extend(wanted)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._transaction(f"read the events of run {run_id}", write=False) as cur:
            rows = cur.execute(sql, params).fetchall()
        return [event_from(row) for row in rows]

    def last_seq(self, run_id: str, *, kinds: Sequence[str] | None = None) -> int:
        # Newest first along the (run_id, seq) index: the first event of a wanted kind ends it.
        sql = "SELECT seq FROM events WHERE run_id = ?"
        params: list[Any] = [run_id]
        if kinds is not None:
            wanted = list(dict.fromkeys(kinds))[:CHUNK]
            sql += f" AND kind IN ({marks(len(wanted))})"
            params.extend(wanted)
        with self._transaction(f"find the last event of run {run_id}", write=False) as cur:
            row = cur.execute(sql + " ORDER BY seq DESC LIMIT 1", params).fetchone()
        return 0 if row is None else int(row[0])

    # ledger
    def read_ledger(self, run_id: str) -> list[LedgerEntry]:
        with self._transaction(f"read the ledger of run {run_id}", write=False) as cur:
            rows = cur.execute(
                f"SELECT {LEDGER_COLUMNS} FROM ledger WHERE run_id = ? ORDER BY id", (run_id,)
            ).fetchall()
        return [ledger_from(row) for row in rows]

    def spent(self, run_id: str, unit: str = "credits") -> float:
        # Child plays' ids extend their parent's with "/": the range "id/" .. "id0" holds them.
        with self._transaction(f"sum the {unit} of run {run_id}", write=False) as cur:
            row = cur.execute(
                "SELECT COALESCE(SUM(credits), 0) FROM ledger WHERE unit = ? AND (run_id = ? "
                "OR (run_id >= ? AND run_id < ?))",
                (unit, run_id, run_id + "/", run_id + "0"),
            ).fetchone()
        return float(row[0])

    def ledger_totals(self) -> dict[str, LedgerTotals]:
        with self._transaction("sum the ledger by tool", write=False) as cur:
            rows = cur.execute(
                "SELECT tool, COUNT(*), COALESCE(SUM(found), 0), COALESCE(SUM(credits), 0), "
                "MAX(unit) FROM ledger GROUP BY tool ORDER BY tool"
            ).fetchall()
        return {
            tool: LedgerTotals(
                calls=int(calls), found=int(found), credits=round(float(cr), 6), unit=unit
            )
            for tool, calls, found, cr, unit in rows
        }

    # boundaries and the event inbox
    def get_boundary(self, key: str) -> Boundary | None:
        with self._transaction(f"read boundary {key}", write=False) as cur:
            row = cur.execute(
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
            output=None if output is None else bytes(output),
            wake_at=wake_at,
            updated_at=updated_at,
        )

    def put_boundary(self, boundary: Boundary) -> None:
        with self._transaction(f"write boundary {boundary.key}", write=True) as cur:
            self._put_boundary(cur, boundary)

    @staticmethod
    def _put_boundary(cur: Cursor, b: Boundary) -> None:
        cur.execute(
            "INSERT INTO boundaries (key, run_id, kind, status, output, wake_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
            "status = excluded.status, output = excluded.output, wake_at = excluded.wake_at, "
            "updated_at = excluded.updated_at",
            (b.key, b.run_id, b.kind, b.status, b.output, b.wake_at, b.updated_at),
        )

    def send_event(self, key: str, payload: bytes, *, now: float) -> bool:
        with self._transaction(f"send event {key}", write=True) as cur:
            cur.execute(
                "INSERT INTO inbox (key, payload, sent_at) VALUES (?, ?, ?) "
                "ON CONFLICT (key) DO NOTHING",
                (key, payload, now),
            )
            sent = bool(cur.rowcount == 1)
            if sent:
                self._announce(cur, EVENTS, [key])
            return sent

    def deliver_event(self, key: str, boundary: Boundary) -> bytes | None:
        with self._transaction(f"deliver event {key}", write=True) as cur:
            self._lock_keys(cur, [f"event:{key}"])
            row = cur.execute(
                "SELECT payload, delivered_to FROM inbox WHERE key = ?", (key,)
            ).fetchone()
            if row is None or row[1] not in (None, boundary.key):
                return None
            payload = bytes(row[0])
            cur.execute(
                "UPDATE inbox SET delivered_to = ?, delivered_at = ? WHERE key = ?",
                (boundary.key, boundary.updated_at, key),
            )
            self._put_boundary(cur, replace(boundary, status="completed", output=payload))
            return payload

    def waiting_events(self, keys: Sequence[str]) -> set[str]:
        found: set[str] = set()
        with self._transaction(f"look for {len(keys)} events", write=False) as cur:
            for chunk in chunks(list(keys)):
                found.update(
                    key
                    for (key,) in cur.execute(
                        "SELECT key FROM inbox WHERE delivered_to IS NULL AND key IN "
                        f"({marks(len(chunk))})",
                        chunk,
                    ).fetchall()
                )
        return found
