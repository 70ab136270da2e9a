"""The PostgreSQL schema, as an ordered list of migrations applied in one transaction on open.

Migration ``i`` (0-based) brings a database from version ``i`` to ``i + 1``; the version is
kept in ``meta.schema_version``, next to the ``event_seq`` counter. Add a migration at the
end; never edit a shipped one. Version 1 is the whole of SQLite's version 4, with PostgreSQL's
types: ``BYTEA`` for blobs, ``DOUBLE PRECISION`` for times and credits, ``BIGINT`` for every
integer (SQLite's are 64-bit), and ``COLLATE "C"`` on text, so that ids compare byte by byte
as in SQLite whatever the database's locale (``spent`` finds child plays by the range
``"id/" <= run_id < "id0"``, which a linguistic collation would break).

DDL is transactional in PostgreSQL: a migration is applied whole or not at all, and an
advisory lock makes processes that open a new database at once migrate it one after the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import StoreError
from .._messages import NoStore
from ._refusals import foreign_database, newer_schema

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate", "schema_version", "tables"]

_T = 'TEXT COLLATE "C"'
_TIME = "DOUBLE PRECISION"

_V1 = (
    f"""CREATE TABLE runs (
        run_id {_T} PRIMARY KEY,
        play {_T} NOT NULL,
        status {_T} NOT NULL,
        input {_T},
        output {_T},
        error {_T},
        stats {_T} NOT NULL,
        created_at {_TIME} NOT NULL,
        updated_at {_TIME} NOT NULL,
        parent_run_id {_T},
        waiting {_T},
        holder {_T},
        lease_until {_TIME},
        attempts BIGINT NOT NULL DEFAULT 0,
        stop_requested BIGINT NOT NULL DEFAULT 0,
        counters {_T},
        wake_at {_TIME},
        options {_T}
    )""",
    "CREATE INDEX runs_created_at ON runs (created_at)",
    "CREATE INDEX runs_due ON runs (status, wake_at)",
    "CREATE INDEX runs_parent ON runs (parent_run_id)",
    "CREATE INDEX runs_holder ON runs (holder)",
    f"""CREATE TABLE run_waits (
        run_id {_T} NOT NULL,
        event_key {_T} NOT NULL,
        PRIMARY KEY (run_id, event_key)
    )""",
    "CREATE INDEX run_waits_event ON run_waits (event_key)",
    f"""CREATE TABLE receipts (
        key {_T} PRIMARY KEY,
        tool {_T} NOT NULL,
        status {_T} NOT NULL,
        owner {_T} NOT NULL,
        run_id {_T} NOT NULL,
        attempt BIGINT NOT NULL,
        lease_until {_TIME},
        result BYTEA,
        error {_T},
        updated_at {_TIME} NOT NULL,
        job BYTEA,
        generation BIGINT NOT NULL DEFAULT 1,
        request {_T}
    )""",
    "CREATE INDEX receipts_owner ON receipts (owner) WHERE status = 'running'",
    f"""CREATE TABLE rows (
        run_id {_T} NOT NULL,
        dataset {_T} NOT NULL,
        key {_T} NOT NULL,
        idx BIGINT NOT NULL,
        status {_T} NOT NULL,
        "values" {_T} NOT NULL,
        cells {_T} NOT NULL,
        error {_T},
        updated_at {_TIME} NOT NULL,
        PRIMARY KEY (run_id, dataset, key)
    )""",
    "CREATE INDEX rows_page ON rows (run_id, dataset, idx, key)",
    f"""CREATE TABLE events (
        seq BIGINT PRIMARY KEY,
        run_id {_T} NOT NULL,
        kind {_T} NOT NULL,
        at {_TIME} NOT NULL,
        dataset {_T},
        row_key {_T},
        "column" {_T},
        status {_T},
        provider {_T},
        error {_T},
        preview {_T},
        data {_T}
    )""",
    "CREATE INDEX events_run ON events (run_id, seq)",
    f"""CREATE TABLE ledger (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        run_id {_T} NOT NULL,
        tool {_T} NOT NULL,
        receipt_key {_T} NOT NULL,
        credits DOUBLE PRECISION NOT NULL,
        found BIGINT NOT NULL,
        at {_TIME} NOT NULL,
        dataset {_T},
        row_key {_T},
        generation BIGINT NOT NULL DEFAULT 1
    )""",
    "CREATE INDEX ledger_run ON ledger (run_id)",
    # A receipt's generation is charged once: the statement checks, the index guarantees.
    "CREATE UNIQUE INDEX ledger_receipt ON ledger (receipt_key, generation)",
    f"""CREATE TABLE boundaries (
        key {_T} PRIMARY KEY,
        run_id {_T} NOT NULL,
        kind {_T} NOT NULL,
        status {_T} NOT NULL,
        output BYTEA,
        wake_at {_TIME},
        updated_at {_TIME} NOT NULL
    )""",
    f"""CREATE TABLE inbox (
        key {_T} PRIMARY KEY,
        payload BYTEA NOT NULL,
        sent_at {_TIME} NOT NULL,
        delivered_to {_T},
        delivered_at {_TIME}
    )""",
    "INSERT INTO meta (key, value) VALUES ('event_seq', '0')",
)

# v2: rate gates shared by every process on the store (``store/_gates.py``), as SQLite's v5.
_V2 = (
    f"""CREATE TABLE rate_gates (
        key {_T} PRIMARY KEY,
        rate DOUBLE PRECISION NOT NULL,
        burst BIGINT NOT NULL,
        tokens DOUBLE PRECISION NOT NULL,
        stamp {_TIME} NOT NULL,
        paused_until {_TIME} NOT NULL DEFAULT 0,
        ceiling DOUBLE PRECISION NOT NULL DEFAULT 0,
        declared_cap BIGINT NOT NULL DEFAULT 0,
        cap BIGINT NOT NULL DEFAULT 0,
        cut_until {_TIME} NOT NULL DEFAULT 0,
        cap_cut_until {_TIME} NOT NULL DEFAULT 0,
        noise_until {_TIME} NOT NULL DEFAULT 0,
        last_rate DOUBLE PRECISION NOT NULL DEFAULT 0,
        last_cap INTEGER NOT NULL DEFAULT 0,
        last_share DOUBLE PRECISION NOT NULL DEFAULT 0,
        granted BIGINT NOT NULL DEFAULT 0
    )""",
    f"""CREATE TABLE gate_slots (
        key {_T} NOT NULL,
        holder {_T} NOT NULL,
        calls BIGINT NOT NULL,
        lease_until {_TIME} NOT NULL,
        PRIMARY KEY (key, holder)
    )""",
    "CREATE INDEX gate_slots_holder ON gate_slots (holder)",
)

# v3: a ledger entry names the dataset column whose cell made the call, and the receipts
# running or in doubt are indexed by run, as SQLite's v6.
_V3 = (
    f'ALTER TABLE ledger ADD COLUMN "column" {_T}',
    "CREATE INDEX receipts_doubt ON receipts (run_id) WHERE status IN ('running', 'unknown')",
)

# v4: a cleared receipt is kept (status ``cleared``), as SQLite's v7; no table changes.
_V4: tuple[str, ...] = ()

# v5: rows in row sets, numbered within them and indexed by key later, as SQLite's v8.
_V5 = (
    "DROP INDEX rows_page",
    "ALTER TABLE rows RENAME TO rows_v4",
    "ALTER TABLE rows_v4 RENAME CONSTRAINT rows_pkey TO rows_v4_pkey",
    f"""CREATE TABLE row_sets (
        set_id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        run_id {_T} NOT NULL,
        dataset {_T} NOT NULL,
        keyed_through BIGINT NOT NULL DEFAULT 0,
        tail_owner {_T},
        UNIQUE (run_id, dataset)
    )""",
    f"""CREATE TABLE rows (
        set_id BIGINT NOT NULL,
        id BIGINT NOT NULL,
        key {_T} NOT NULL,
        idx BIGINT NOT NULL,
        status {_T} NOT NULL,
        "values" {_T} NOT NULL,
        cells {_T} NOT NULL,
        error {_T},
        updated_at {_TIME} NOT NULL,
        PRIMARY KEY (set_id, id)
    )""",
    "CREATE INDEX rows_page ON rows (set_id, idx, key)",
    f"""CREATE TABLE row_keys (
        set_id BIGINT NOT NULL,
        key {_T} NOT NULL,
        id BIGINT NOT NULL,
        PRIMARY KEY (set_id, key)
    )""",
    "INSERT INTO row_sets (run_id, dataset) SELECT DISTINCT run_id, dataset FROM rows_v4",
    """INSERT INTO rows (set_id, id, key, idx, status, "values", cells, error, updated_at)
        SELECT s.set_id, ROW_NUMBER() OVER (PARTITION BY s.set_id ORDER BY r.idx, r.key),
            r.key, r.idx, r.status, r."values", r.cells, r.error, r.updated_at
        FROM rows_v4 r JOIN row_sets s ON s.run_id = r.run_id AND s.dataset = r.dataset""",
    "INSERT INTO row_keys (set_id, key, id) SELECT set_id, key, id FROM rows",
    """UPDATE row_sets SET keyed_through =
        (SELECT COALESCE(MAX(id), 0) FROM rows WHERE rows.set_id = row_sets.set_id)""",
    "DROP TABLE rows_v4",
)

# v6: the provider's reported charge beside the declared cost, lost receipts, and the
# requests gates with windows let out, as SQLite's v9.
_V6 = (
    "ALTER TABLE ledger ADD COLUMN declared DOUBLE PRECISION",
    "ALTER TABLE ledger ADD COLUMN reported DOUBLE PRECISION",
    f"""CREATE TABLE gate_sends (
        key {_T} NOT NULL,
        at {_TIME} NOT NULL,
        n BIGINT NOT NULL
    )""",
    "CREATE INDEX gate_sends_key ON gate_sends (key, at)",
)

# v7: schedules, as SQLite's v10.
_V7 = (
    f"""CREATE TABLE schedules (
        name {_T} PRIMARY KEY,
        play {_T} NOT NULL,
        source {_T},
        cron {_T} NOT NULL,
        timezone {_T} NOT NULL,
        input {_T} NOT NULL,
        catch_up {_T} NOT NULL,
        paused BIGINT NOT NULL DEFAULT 0,
        next_fire {_TIME} NOT NULL,
        cwd {_T},
        created_at {_TIME} NOT NULL,
        updated_at {_TIME} NOT NULL,
        last_fire {_TIME},
        last_run_id {_T},
        notify {_T}
    )""",
    "CREATE INDEX schedules_due ON schedules (paused, next_fire)",
)

# v8: the unit of a ledger entry's cost, as SQLite's v11.
_V8 = (f"ALTER TABLE ledger ADD COLUMN unit {_T} NOT NULL DEFAULT 'credits'",)

# v9: a row's ``states`` in the index of a set's rows in order, as SQLite's v12.
_V9 = (
    "ALTER TABLE rows ADD COLUMN states BIGINT NOT NULL DEFAULT 0",
    """UPDATE rows SET states = (CASE status WHEN 'waiting' THEN 128 ELSE 0 END) + COALESCE((
        SELECT SUM(bit) FROM (
            SELECT DISTINCT CASE c.value ->> 'status'
                WHEN 'queued' THEN 1 WHEN 'running' THEN 2 WHEN 'completed' THEN 4
                WHEN 'cached' THEN 8 WHEN 'not_found' THEN 16 WHEN 'skipped' THEN 32
                WHEN 'failed' THEN 64 END AS bit
            FROM jsonb_each(CASE jsonb_typeof(rows.cells::jsonb) WHEN 'object'
                THEN rows.cells::jsonb END) c
            WHERE jsonb_typeof(c.value) = 'object') bits), 0)""",
    "DROP INDEX rows_page",
    "CREATE INDEX rows_page ON rows (set_id, idx, key, states)",
)

Migration = Sequence[str]
MIGRATIONS: tuple[Migration, ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8, _V9)
SCHEMA_VERSION = len(MIGRATIONS)

# pg_advisory_xact_lock key held while migrating ("playline" in ASCII).
_MIGRATION_LOCK = 0x706C61796C696E65

_TABLES = """
    SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
"""
_META_COLUMNS = """
    SELECT column_name FROM information_schema.columns
    WHERE table_schema = current_schema() AND table_name = 'meta'
"""


def tables(conn: Any) -> set[str]:
    """The tables (and views) of the connection's current schema."""
    return {name for (name,) in conn.execute(_TABLES).fetchall()}


def schema_version(conn: Any) -> int | None:
    """The version recorded in ``meta``: 0 for an empty schema, None for tables that are not
    a Playline store's."""
    found = tables(conn)
    if not found:
        return 0
    if "meta" not in found:
        return None
    columns = {name for (name,) in conn.execute(_META_COLUMNS).fetchall()}
    if columns != {"key", "value"}:
        return None
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row and str(row[0]).isdigit() else None


def migrate(conn: Any, where: str, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Bring the database (``where`` names it in messages) to ``len(migrations)``; return the
    version found. ``conn`` is a psycopg connection in autocommit mode.

    Raises ``StoreError`` for a schema written by a newer Playline, or for a schema that holds
    another program's tables (nothing is created there).
    """
    known = len(migrations)
    found = _checked(conn, where, known)
    if found == known:
        return found
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        # Another process may have migrated while we waited for the lock.
        found = _checked(conn, where, known)
        if found == 0:
            conn.execute(f"CREATE TABLE meta (key {_T} PRIMARY KEY, value {_T} NOT NULL)")
        for statements in migrations[found:]:
            for statement in statements:
                conn.execute(statement)
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(known),),
        )
    return found


def readable_version(conn: Any, where: str, known: int = len(MIGRATIONS)) -> int:
    """The version of a schema opened only to be read: a Playline store's, at the current
    version (nothing is created or migrated)."""
    found = _checked(conn, where, known)
    if found == 0:
        raise NoStore(
            f"No store in {where}: it has no Playline tables. Check the URL (--store or "
            "PLAYLINE_STORE); a store is created by the first `playline run` that writes to it."
        )
    if found < known:
        raise StoreError(
            f"The store {where} was written by an older Playline (schema version {found}). "
            "Run a play on it once (playline run, or pl.run) to upgrade it, then read it."
        )
    return found


def _checked(conn: Any, where: str, known: int) -> int:
    found = schema_version(conn)
    if found is None:
        raise foreign_database(
            where,
            "a PostgreSQL database",
            tables(conn),
            "Choose another database for the store, or a schema of its own (create it, then "
            "add ?options=-csearch_path%3DNAME to the URL); Playline leaves this one untouched.",
        )
    if found > known:
        raise newer_schema(where, found, known)
    return found
