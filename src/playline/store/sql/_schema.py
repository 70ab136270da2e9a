"""The SQLite schema, as an ordered list of migrations applied in one transaction on open.

Migration ``i`` (0-based) brings a database from version ``i`` to ``i + 1``; the version is
kept in ``meta.schema_version``. Add a migration at the end; never edit a shipped one. Each
migration is a tuple of single statements because ``executescript`` would commit on its own.
"""

from __future__ import annotations

import sqlite3

from ._refusals import foreign_database, newer_schema

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate", "schema_version"]

_V1 = (
    """CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        play TEXT NOT NULL,
        status TEXT NOT NULL,
        input TEXT,
        output TEXT,
        error TEXT,
        stats TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        parent_run_id TEXT,
        waiting TEXT
    )""",
    "CREATE INDEX runs_created_at ON runs (created_at)",
    """CREATE TABLE receipts (
        key TEXT PRIMARY KEY,
        tool TEXT NOT NULL,
        status TEXT NOT NULL,
        owner TEXT NOT NULL,
        run_id TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        lease_until REAL,
        result BLOB,
        error TEXT,
        updated_at REAL NOT NULL
    )""",
    """CREATE TABLE rows (
        run_id TEXT NOT NULL,
        dataset TEXT NOT NULL,
        key TEXT NOT NULL,
        idx INTEGER NOT NULL,
        status TEXT NOT NULL,
        "values" TEXT NOT NULL,
        cells TEXT NOT NULL,
        error TEXT,
        updated_at REAL NOT NULL,
        PRIMARY KEY (run_id, dataset, key)
    )""",
    "CREATE INDEX rows_order ON rows (run_id, dataset, idx)",
    """CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        at REAL NOT NULL,
        dataset TEXT,
        row_key TEXT,
        "column" TEXT,
        status TEXT,
        provider TEXT,
        error TEXT,
        preview TEXT,
        data TEXT
    )""",
    "CREATE INDEX events_run ON events (run_id, seq)",
    """CREATE TABLE ledger (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        tool TEXT NOT NULL,
        receipt_key TEXT NOT NULL,
        credits REAL NOT NULL,
        found INTEGER NOT NULL,
        at REAL NOT NULL,
        dataset TEXT,
        row_key TEXT
    )""",
    "CREATE INDEX ledger_run ON ledger (run_id)",
    # Reserved for durable steps, sleeps and event waits; a later migration extends it.
    """CREATE TABLE boundaries (
        key TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        status TEXT NOT NULL,
        output BLOB,
        wake_at REAL,
        updated_at REAL NOT NULL
    )""",
)

# v2: an async tool's submitted job is kept on its receipt, so a resumed run polls it.
_V2 = ("ALTER TABLE receipts ADD COLUMN job BLOB",)

# v3: events sent to runs (``pl.send_event``), kept until a wait takes them.
_V3 = (
    """CREATE TABLE inbox (
        key TEXT PRIMARY KEY,
        payload BLOB NOT NULL,
        sent_at REAL NOT NULL,
        delivered_to TEXT,
        delivered_at REAL
    )""",
)

# v4: runs are held under leases, their waits are indexed, receipts know their generation and
# the request they went out in, the ledger counts a receipt's generation once, and events get
# their sequence numbers when emitted (a counter in meta).
_V4 = (
    "ALTER TABLE runs ADD COLUMN holder TEXT",
    "ALTER TABLE runs ADD COLUMN lease_until REAL",
    "ALTER TABLE runs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN stop_requested INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN counters TEXT",
    "ALTER TABLE runs ADD COLUMN wake_at REAL",
    "ALTER TABLE runs ADD COLUMN options TEXT",
    "UPDATE runs SET wake_at = json_extract(waiting, '$.wake_at') WHERE waiting IS NOT NULL",
    "CREATE INDEX runs_due ON runs (status, wake_at)",
    "CREATE INDEX runs_parent ON runs (parent_run_id)",
    "CREATE INDEX runs_holder ON runs (holder)",
    """CREATE TABLE run_waits (
        run_id TEXT NOT NULL,
        event_key TEXT NOT NULL,
        PRIMARY KEY (run_id, event_key)
    )""",
    "CREATE INDEX run_waits_event ON run_waits (event_key)",
    """INSERT INTO run_waits (run_id, event_key)
        SELECT runs.run_id, json_each.value FROM runs, json_each(runs.waiting, '$.events')
        WHERE runs.status = 'suspended'""",
    "ALTER TABLE receipts ADD COLUMN generation INTEGER NOT NULL DEFAULT 1",
    "ALTER TABLE receipts ADD COLUMN request TEXT",
    "CREATE INDEX receipts_owner ON receipts (owner) WHERE status = 'running'",
    "ALTER TABLE ledger ADD COLUMN generation INTEGER NOT NULL DEFAULT 1",
    "CREATE INDEX ledger_receipt ON ledger (receipt_key, generation)",
    "CREATE INDEX rows_page ON rows (run_id, dataset, idx, key)",
    "DROP INDEX rows_order",
    """INSERT INTO meta (key, value)
        SELECT 'event_seq', CAST(COALESCE(MAX(seq), 0) AS TEXT) FROM events""",
)

# v5: rate gates shared by every process on the store (``store/_gates.py``): a token bucket
# and what was learned per tool and provider account, and the calls each holder has in flight.
_V5 = (
    """CREATE TABLE rate_gates (
        key TEXT PRIMARY KEY,
        rate REAL NOT NULL,
        burst INTEGER NOT NULL,
        tokens REAL NOT NULL,
        stamp REAL NOT NULL,
        paused_until REAL NOT NULL DEFAULT 0,
        ceiling REAL NOT NULL DEFAULT 0,
        declared_cap INTEGER NOT NULL DEFAULT 0,
        cap INTEGER NOT NULL DEFAULT 0,
        cut_until REAL NOT NULL DEFAULT 0,
        cap_cut_until REAL NOT NULL DEFAULT 0,
        noise_until REAL NOT NULL DEFAULT 0,
        last_rate REAL NOT NULL DEFAULT 0,
        last_cap INTEGER NOT NULL DEFAULT 0,
        last_share REAL NOT NULL DEFAULT 0,
        granted INTEGER NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE gate_slots (
        key TEXT NOT NULL,
        holder TEXT NOT NULL,
        calls INTEGER NOT NULL,
        lease_until REAL NOT NULL,
        PRIMARY KEY (key, holder)
    )""",
    "CREATE INDEX gate_slots_holder ON gate_slots (holder)",
)

# v6: a ledger entry names the dataset column whose cell made the call, so the ledger by
# column puts each charge where it was spent (two columns of a row may use one tool); the
# receipts a run may have been charged for with no record (running or in doubt: few) are
# indexed by run, so a resumed run counts them against its budget.
_V6 = (
    'ALTER TABLE ledger ADD COLUMN "column" TEXT',
    "CREATE INDEX receipts_doubt ON receipts (run_id) WHERE status IN ('running', 'unknown')",
)

# v7: ``cache clear`` keeps a cleared receipt (status ``cleared``, no result) so that its
# next call is a new generation with a new idempotency key. Nothing changes in the tables: the
# version tells a Playline that does not know the status to refuse the store, not misread it.
_V7: tuple[str, ...] = ()

# v8: a dataset's rows are written in order and indexed by key later (``_rows.py``). A run's
# dataset is a row set with an integer id; its rows are numbered within it (``id``), so new
# rows go at the end of every index; their keys reach ``row_keys`` in sorted batches. The
# rows numbered above ``keyed_through`` (the tail) are not in ``row_keys`` yet.
_V8 = (
    "DROP INDEX rows_page",
    "ALTER TABLE rows RENAME TO rows_v7",
    """CREATE TABLE row_sets (
        set_id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL,
        dataset TEXT NOT NULL,
        keyed_through INTEGER NOT NULL DEFAULT 0,
        tail_owner TEXT,
        UNIQUE (run_id, dataset)
    )""",
    """CREATE TABLE rows (
        set_id INTEGER NOT NULL,
        id INTEGER NOT NULL,
        key TEXT NOT NULL,
        idx INTEGER NOT NULL,
        status TEXT NOT NULL,
        "values" TEXT NOT NULL,
        cells TEXT NOT NULL,
        error TEXT,
        updated_at REAL NOT NULL,
        PRIMARY KEY (set_id, id)
    )""",
    "CREATE INDEX rows_page ON rows (set_id, idx, key)",
    """CREATE TABLE row_keys (
        set_id INTEGER NOT NULL,
        key TEXT NOT NULL,
        id INTEGER NOT NULL,
        PRIMARY KEY (set_id, key)
    ) WITHOUT ROWID""",
    "INSERT INTO row_sets (run_id, dataset) SELECT DISTINCT run_id, dataset FROM rows_v7",
    """INSERT INTO rows (set_id, id, key, idx, status, "values", cells, error, updated_at)
        SELECT s.set_id, ROW_NUMBER() OVER (PARTITION BY s.set_id ORDER BY r.idx, r.key),
            r.key, r.idx, r.status, r."values", r.cells, r.error, r.updated_at
        FROM rows_v7 r JOIN row_sets s ON s.run_id = r.run_id AND s.dataset = r.dataset""",
    "INSERT INTO row_keys (set_id, key, id) SELECT set_id, key, id FROM rows",
    """UPDATE row_sets SET keyed_through =
        (SELECT COALESCE(MAX(id), 0) FROM rows WHERE rows.set_id = row_sets.set_id)""",
    "DROP TABLE rows_v7",
)

# v9: a ledger entry keeps what the provider reported it charged beside the declared cost
# (``credits`` is the higher of the two); both are NULL when the provider said nothing. A
# receipt may be ``lost`` (paid, its result gone: bought again only when asked). A gate with
# windows (500 requests a minute, 2,000 a day) keeps the requests it let out in ``gate_sends``
# for as long as its longest window.
_V9 = (
    "ALTER TABLE ledger ADD COLUMN declared REAL",
    "ALTER TABLE ledger ADD COLUMN reported REAL",
    """CREATE TABLE gate_sends (
        key TEXT NOT NULL,
        at REAL NOT NULL,
        n INTEGER NOT NULL
    )""",
    "CREATE INDEX gate_sends_key ON gate_sends (key, at)",
)

# v10: schedules (``triggers/_schedules.py``): a play run at the times of a cron expression;
# ``next_fire`` is moved on by compare-and-set, so workers sharing the store fire a time once.
_V10 = (
    """CREATE TABLE schedules (
        name TEXT PRIMARY KEY,
        play TEXT NOT NULL,
        source TEXT,
        cron TEXT NOT NULL,
        timezone TEXT NOT NULL,
        input TEXT NOT NULL,
        catch_up TEXT NOT NULL,
        paused INTEGER NOT NULL DEFAULT 0,
        next_fire REAL NOT NULL,
        cwd TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        last_fire REAL,
        last_run_id TEXT,
        notify TEXT
    )""",
    "CREATE INDEX schedules_due ON schedules (paused, next_fire)",
)

# v11: a ledger entry names the unit of its cost: ``credits`` (the providers' own) or ``usd``
# (money: LLM calls); budgets are per unit, so a run's spend is summed per unit.
_V11 = ("ALTER TABLE ledger ADD COLUMN unit TEXT NOT NULL DEFAULT 'credits'",)

# v12: a row's ``states`` (``_tables.row_states``): a bit for each cell state its cells are
# in (queued 1, running 2, completed 4, cached 8, not_found 16, skipped 32, failed 64) and 128
# for a waiting row, in the index of a set's rows in order, so that a grid's state filter and
# its count over a million rows read that index, not every row's cells. The rows there are
# given theirs here (a store of a million rows: about half a minute, once).
_V12 = (
    "ALTER TABLE rows ADD COLUMN states INTEGER NOT NULL DEFAULT 0",
    """UPDATE rows SET states = (CASE status WHEN 'waiting' THEN 128 ELSE 0 END) + COALESCE((
        SELECT SUM(bit) FROM (
            SELECT DISTINCT CASE json_extract(c.value, '$.status')
                WHEN 'queued' THEN 1 WHEN 'running' THEN 2 WHEN 'completed' THEN 4
                WHEN 'cached' THEN 8 WHEN 'not_found' THEN 16 WHEN 'skipped' THEN 32
                WHEN 'failed' THEN 64 END AS bit
            FROM json_each(rows.cells) c WHERE c.type = 'object')), 0)""",
    "DROP INDEX rows_page",
    "CREATE INDEX rows_page ON rows (set_id, idx, key, states)",
)

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    _V1,
    _V2,
    _V3,
    _V4,
    _V5,
    _V6,
    _V7,
    _V8,
    _V9,
    _V10,
    _V11,
    _V12,
)
SCHEMA_VERSION = len(MIGRATIONS)

_OURS = frozenset(
    {
        "meta",
        "runs",
        "run_waits",
        "receipts",
        "rows",
        "row_sets",
        "row_keys",
        "events",
        "ledger",
        "boundaries",
        "inbox",
        "rate_gates",
        "gate_slots",
        "gate_sends",
        "schedules",
        "sqlite_sequence",
    }
)


def schema_version(conn: sqlite3.Connection) -> int:
    """The version recorded in ``meta``; 0 for a database Playline never initialised."""
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    ).fetchone()
    if not has_meta:
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: sqlite3.Connection, path: str) -> int:
    """Bring the database at ``path`` to ``SCHEMA_VERSION``; return the version found.

    ``conn`` must be in autocommit mode (``isolation_level=None``). Raises ``StoreError`` for a
    database written by a newer Playline or a SQLite file that belongs to something else.
    """
    found = schema_version(conn)
    _refuse_newer(found, path)
    if found == SCHEMA_VERSION:
        return found
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Another process may have migrated while we waited for the write lock.
        found = schema_version(conn)
        _refuse_newer(found, path)
        if found == 0:
            _refuse_foreign(conn, path)
            conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        for statements in MIGRATIONS[found:]:
            for statement in statements:
                conn.execute(statement)
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(SCHEMA_VERSION),),
        )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return found


def _refuse_newer(found: int, path: str) -> None:
    if found > SCHEMA_VERSION:
        raise newer_schema(path, found, SCHEMA_VERSION)


def _refuse_foreign(conn: sqlite3.Connection, path: str) -> None:
    tables = {
        name
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    }
    foreign = tables - _OURS
    if foreign:
        raise foreign_database(
            path,
            "a SQLite database",
            foreign,
            "Choose another path for the store; Playline leaves this file untouched.",
        )
