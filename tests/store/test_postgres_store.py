"""What only the PostgreSQL store promises: its URL, its schema and migrations, one pool per URL,
and one clear error for each way a server, a login or a database can be wrong."""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg import sql

from playline.errors import StoreError
from playline.store import (
    ClaimOutcome,
    Completion,
    GateConfig,
    ReceiptStatus,
    RowRecord,
    RunRecord,
    RunStatus,
    open_store,
)
from playline.store.sql import PostgresStore
from playline.store.sql._postgres_schema import MIGRATIONS, SCHEMA_VERSION, migrate
from services import PostgresServer, free_port

from storehelp import FAR, LEASE, ME, NOW, charge, claim


def admin(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url, autocommit=True)


def user_tables(url: str, schema: str = "public") -> set[str]:
    with admin(url) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchall()
    return {name for (name,) in rows}


def row(key: str, index: int) -> RowRecord:
    return RowRecord(
        run_id="r", dataset="d", key=key, index=index, status="completed", values={}, cells={}
    )


# URLs and the pool


def test_open_store_opens_postgresql_urls(postgres_url: str, monkeypatch: Any) -> None:
    with contextlib.closing(open_store(postgres_url)) as store:
        assert isinstance(store, PostgresStore)
    monkeypatch.setenv("PLAYLINE_STORE", postgres_url.replace("postgresql://", "postgres://"))
    with contextlib.closing(open_store()) as store:
        assert isinstance(store, PostgresStore) and store.get_run("r") is None


def test_a_dropped_store_releases_its_connections(postgres_url: str) -> None:
    # pl.run opens a store per call and leaves it to the collector.
    store = open_store(postgres_url)
    store.create_run(RunRecord(run_id="r", play="p", status=RunStatus.COMPLETED))
    assert _connections(postgres_url) == 1
    del store
    gc.collect()
    deadline = time.monotonic() + 30
    while _connections(postgres_url) and time.monotonic() < deadline:
        pass  # the pool closes on a thread of its own: poll what the server reports
    assert _connections(postgres_url) == 0


def _connections(url: str) -> int:
    """The store's connections to ``url``'s database (not counting this probe)."""
    with admin(url) as conn:
        found = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid != pg_backend_pid()"
        ).fetchone()
    return int(found[0]) if found else 0


def test_pool_size_sets_the_io_threads(postgres_url: str) -> None:
    with PostgresStore(postgres_url) as store:
        assert store.io_threads == 4
    with PostgresStore(postgres_url + "?pool_size=2&pool_timeout=5") as store:
        assert store.io_threads == 2
        store.create_run(RunRecord(run_id="r", play="p", status=RunStatus.COMPLETED))
    # libpq's own parameters pass through
    with PostgresStore(postgres_url + "?application_name=tested&pool_size=1") as store:
        assert store.get_run("r") is not None


@pytest.mark.parametrize(
    ("suffix", "message"),
    [
        ("?pool_size=0", "pool_size='0' .* must be a whole number >= 1"),
        ("?pool_timeout=soon", "pool_timeout='soon' .* must be a number of seconds > 0"),
        ("?sslmodes=require", "Invalid PostgreSQL store URL"),
        # an option libpq takes, with a value it does not: not "start the server"
        ("?sslmode=bogus", "has an option PostgreSQL cannot take .*sslmode"),
        # a schema that is not there: create it, or fix the search_path
        ("?options=-csearch_path%3Dnosuch", "does not exist: create it .*CREATE SCHEMA"),
    ],
)
def test_bad_options_in_the_url(postgres_url: str, suffix: str, message: str) -> None:
    with pytest.raises(StoreError, match=message):
        PostgresStore(postgres_url + suffix)


def test_a_bad_port_and_an_unknown_scheme() -> None:
    with pytest.raises(StoreError, match="Invalid PostgreSQL store URL"):
        PostgresStore("postgresql://u@localhost:port/db")
    with pytest.raises(StoreError, match=r"Unknown store URL 'mysql://.*postgresql://"):
        open_store("mysql://u@localhost/db")


def test_a_closed_store_refuses_calls(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    store.close()
    store.close()  # closing twice is fine
    with pytest.raises(StoreError, match="store is closed"):
        store.get_run("r")
    with pytest.raises(StoreError, match="store is closed"):
        claim(store, "k")
    assert "closed" in repr(store)


# the schema


def test_a_new_database_gets_the_schema(postgres_url: str) -> None:
    with PostgresStore(postgres_url) as store:
        assert store.schema_version_found == 0
    assert {
        "meta",
        "runs",
        "run_waits",
        "receipts",
        "row_sets",
        "row_keys",
        "rows",
        "events",
        "ledger",
        "boundaries",
        "inbox",
        "rate_gates",
        "gate_slots",
        "gate_sends",
        "schedules",
    } == user_tables(postgres_url)
    with admin(postgres_url) as conn:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        types = dict(
            conn.execute(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_name = 'receipts'"
            ).fetchall()
        )
    assert meta == {"schema_version": str(SCHEMA_VERSION), "event_seq": "0"}
    assert (types["result"], types["job"], types["updated_at"]) == (
        "bytea",
        "bytea",
        "double precision",
    )
    with PostgresStore(postgres_url) as store:
        assert store.schema_version_found == SCHEMA_VERSION


def test_read_only_creates_nothing_and_writes_nothing(postgres_url: str) -> None:
    with pytest.raises(StoreError, match="No store in"):
        open_store(postgres_url, read_only=True)
    assert user_tables(postgres_url) == set()  # the reading commands never create a store

    PostgresStore(postgres_url).close()
    reader = open_store(postgres_url, read_only=True)
    try:
        assert reader.list_runs() == []
        with pytest.raises(StoreError, match="opened read-only"):
            reader.create_run(
                RunRecord(
                    run_id="r", play="p", status=RunStatus.RUNNING, created_at=1, updated_at=1
                )
            )
    finally:
        reader.close()


def test_the_schema_migrates_from_its_first_version(postgres_url: str) -> None:
    # A database as the first PostgreSQL store left it, with a run and a receipt.
    with admin(postgres_url) as conn:
        assert migrate(conn, "db", MIGRATIONS[:1]) == 0
        conn.execute(
            "INSERT INTO runs (run_id, play, status, stats, created_at, updated_at) "
            "VALUES ('r', 'p', 'completed', '{}', 0, 0)"
        )
        conn.execute(
            "INSERT INTO receipts (key, tool, status, owner, run_id, attempt, result, "
            "updated_at) VALUES ('k', 't', 'completed', 'o', 'r', 1, '{}', 0)"
        )
    with PostgresStore(postgres_url) as store:
        assert store.schema_version_found == 1
        run = store.get_run("r")
        assert run is not None and run.status is RunStatus.COMPLETED
        assert store.find_receipts(["k"])["k"].result == b"{}"
        grant = store.lease_gate(
            "t@a", 4, config=GateConfig(ceiling=1.0, burst=4), holder=ME, lease_until=LEASE, now=NOW
        )
        assert grant.granted == 2
    # A later Playline's migration, applied to this database ...
    later = (*MIGRATIONS, ("ALTER TABLE runs ADD COLUMN note TEXT",))
    with admin(postgres_url) as conn:
        assert migrate(conn, "db", later) == SCHEMA_VERSION
        assert migrate(conn, "db", later) == SCHEMA_VERSION + 1  # nothing left to do
        columns = {
            name
            for (name,) in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'runs'"
            ).fetchall()
        }
        assert "note" in columns
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        assert version == (str(SCHEMA_VERSION + 1),)
        assert conn.execute("SELECT run_id FROM runs").fetchall() == [("r",)]
    # ... which this Playline refuses to open.
    newer = rf"schema version {SCHEMA_VERSION + 1}, newer .* \({SCHEMA_VERSION}\)"
    with pytest.raises(StoreError, match=newer + ".*Upgrade playline"):
        PostgresStore(postgres_url)


def test_a_newer_schema_is_refused_and_left_alone(postgres_url: str) -> None:
    PostgresStore(postgres_url).close()
    with admin(postgres_url) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="Upgrade playline") as caught:
        PostgresStore(postgres_url)
    assert "password" not in str(caught.value) and "\n" not in str(caught.value)
    with admin(postgres_url) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
            "99",
        )


@pytest.mark.parametrize(
    "ddl",
    [
        "CREATE TABLE invoices (id INTEGER)",
        "CREATE TABLE meta (name TEXT, body TEXT)",
        "CREATE TABLE runs (id INTEGER)",
    ],
)
def test_another_programs_database_is_refused_and_left_alone(postgres_url: str, ddl: str) -> None:
    with admin(postgres_url) as conn:
        conn.execute(ddl)
    before = user_tables(postgres_url)
    with pytest.raises(StoreError, match="is a PostgreSQL database that is not a Playline store"):
        PostgresStore(postgres_url)
    assert user_tables(postgres_url) == before


def test_a_schema_of_its_own_in_another_programs_database(postgres_url: str) -> None:
    with admin(postgres_url) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
        conn.execute("CREATE SCHEMA playline")
    with PostgresStore(postgres_url + "?options=-csearch_path%3Dplayline") as store:
        store.create_run(RunRecord(run_id="r", play="p", status=RunStatus.COMPLETED))
    assert user_tables(postgres_url) == {"invoices"}
    assert "runs" in user_tables(postgres_url, "playline")


def test_processes_opening_a_new_database_at_once_migrate_it_once(postgres_url: str) -> None:
    opened: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def open_it() -> None:
        start.wait()
        try:
            with PostgresStore(postgres_url) as store:
                opened.append(store.schema_version_found)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(opened) == [0, SCHEMA_VERSION, SCHEMA_VERSION, SCHEMA_VERSION]


def test_ids_compare_byte_by_byte_whatever_the_database_locale(
    postgres_server: PostgresServer,
) -> None:
    # A collation that ignores punctuation at first (glibc's en_US.UTF-8 does; here ICU's,
    # with punctuation "shifted") sorts "r1/a" after "r10": spent()'s range over child ids
    # would miss them if the columns followed the database's locale.
    name = "icu_english"
    with admin(postgres_server.url) as conn:
        conn.execute(
            sql.SQL(
                "CREATE DATABASE {} TEMPLATE template0 LOCALE_PROVIDER icu "
                "ICU_LOCALE 'en-US-u-ka-shifted' LOCALE 'C.UTF-8'"
            ).format(sql.Identifier(name))
        )
    url = postgres_server.url_for(name)
    try:
        with admin(url) as conn:
            assert conn.execute("SELECT 'r1/a' > 'r10'").fetchone() == (True,)
        with PostgresStore(url) as store:
            for run_id, key, credits in [("r1", "a", 1.0), ("r1/a", "b", 2.0), ("r10", "c", 4.0)]:
                claim(store, key, run_id=run_id)
                store.complete_receipts(
                    [Completion(key=key, result=b"{}", charge=charge(key, credits, run_id=run_id))],
                    owner=ME,
                    now=NOW,
                )
            assert store.spent("r1") == 3.0
            assert store.spent("r10") == 4.0
    finally:
        postgres_server.drop_database(url)


# one clear error per failure


def test_an_unreachable_server(postgres_server: PostgresServer) -> None:
    url = f"postgresql://postgres:secret@127.0.0.1:{free_port()}/playline"
    with pytest.raises(StoreError) as caught:
        PostgresStore(url)
    message = str(caught.value)
    assert message.startswith("Cannot reach the PostgreSQL server of the store ")
    assert "Connection refused" in message and "Start the server" in message
    assert "secret" not in message and "\n" not in message


def test_an_unknown_host() -> None:
    with pytest.raises(StoreError, match=r"Cannot reach the PostgreSQL server .*fix the host"):
        PostgresStore("postgresql://postgres@no-such-host.invalid:5432/db")


def test_a_missing_database(postgres_server: PostgresServer) -> None:
    with pytest.raises(StoreError, match=r'database "absent" does not exist.*Create it'):
        PostgresStore(postgres_server.url_for("absent"))


def test_an_unknown_user(postgres_server: PostgresServer) -> None:
    url = f"postgresql://nobody@127.0.0.1:{postgres_server.port}/postgres"
    with pytest.raises(StoreError, match=r'refused the login .*role "nobody" does not exist'):
        PostgresStore(url)


@contextmanager
def password_login(server: PostgresServer, user: str, password: str) -> Iterator[None]:
    """A role that must log in with its password (the test cluster trusts everyone else)."""
    hba = server.datadir / "pg_hba.conf"
    before = hba.read_text()
    rule = f"host all {user} 127.0.0.1/32 scram-sha-256\n"
    with admin(server.url) as conn:
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(user), sql.Literal(password)
            )
        )
        hba.write_text(rule + before)
        conn.execute("SELECT pg_reload_conf()")
    try:
        yield
    finally:
        with admin(server.url) as conn:
            hba.write_text(before)
            conn.execute("SELECT pg_reload_conf()")
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(user)))


def test_a_wrong_password(postgres_server: PostgresServer) -> None:
    port = postgres_server.port
    with password_login(postgres_server, "checked", "right"):
        with pytest.raises(StoreError) as caught:
            PostgresStore(f"postgresql://checked:wrong@127.0.0.1:{port}/postgres")
        message = str(caught.value)
        assert "refused the login" in message
        assert 'password authentication failed for user "checked"' in message
        assert ":wrong@" not in message
        # the right one works
        probe = psycopg.connect(f"postgresql://checked:right@127.0.0.1:{port}/postgres")
        probe.close()


def test_a_user_who_may_not_create_the_schema(postgres_server: PostgresServer) -> None:
    url = postgres_server.new_database()
    with admin(postgres_server.url) as conn:
        conn.execute("CREATE ROLE visitor LOGIN")
    try:
        visitor = url.replace("postgres@", "visitor@", 1)
        with pytest.raises(StoreError, match=r"permission denied for schema public.*Grant"):
            PostgresStore(visitor)
        assert user_tables(url) == set()
    finally:
        postgres_server.drop_database(url)
        with admin(postgres_server.url) as conn:
            conn.execute("DROP ROLE visitor")


def test_text_with_a_nul_character_is_refused_clearly(postgres_url: str) -> None:
    with PostgresStore(postgres_url) as store:
        with pytest.raises(StoreError, match="cannot hold the character U\\+0000"):
            store.save_rows([row("ok", 0), row("bad\x00key", 1)])
        assert list(store.iter_rows("r", "d")) == []
        store.save_rows([row("ok", 0)])  # the store goes on


def _wait_for_lock_wait(url: str) -> int:
    """The pid of the backend of ``url``'s database that waits for a lock (polled: a condition
    the server reports, not a sleep)."""
    name = url.rsplit("/", 1)[1]
    deadline = time.monotonic() + 30
    with admin(url) as conn:
        while time.monotonic() < deadline:
            found = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'",
                (name,),
            ).fetchone()
            if found:
                return int(found[0])
    raise AssertionError("the store's transaction never waited for the lock")


@pytest.mark.parametrize("batch", ["claims", "rows"])
def test_a_connection_dropped_mid_batch_writes_nothing_and_the_next_call_works(
    postgres_url: str, batch: str
) -> None:
    with PostgresStore(postgres_url) as store:
        claim(store, "locked", owner=FAR)
        store.save_rows([row("locked", 99)])
        # Another session holds one row the batch will write, after it has written others.
        blocker = admin(postgres_url)
        blocker.execute("BEGIN")
        if batch == "claims":
            blocker.execute("SELECT 1 FROM receipts WHERE key = 'locked' FOR UPDATE")
        else:
            blocker.execute("SELECT 1 FROM rows WHERE key = 'locked' FOR UPDATE")
        failure: list[BaseException] = []

        def write() -> None:
            try:
                if batch == "claims":
                    claim(store, "a", "b", "locked", "c", owner=ME, now=LEASE + 1)
                else:
                    store.save_rows([row("a", 0), row("b", 1), row("locked", 2), row("c", 3)])
            except BaseException as exc:  # reported below
                failure.append(exc)

        writer = threading.Thread(target=write)
        writer.start()
        try:
            pid = _wait_for_lock_wait(postgres_url)
            blocker.execute("SELECT pg_terminate_backend(%s)", (pid,))
        finally:
            writer.join()
            blocker.execute("ROLLBACK")
            blocker.close()
        [error] = failure
        assert isinstance(error, StoreError)
        message = str(error)
        assert "the connection to PostgreSQL was lost" in message
        assert "nothing of it was written" in message and "\n" not in message
        # Nothing half-written ...
        assert set(store.find_receipts(["a", "b", "c", "locked"])) == {"locked"}
        assert [r.key for r in store.iter_rows("r", "d")] == ["locked"]
        # ... and the next call works.
        results = claim(store, "a", "b", "locked", "c", owner=ME, now=LEASE + 1)
        assert [r.outcome for r in results] == [ClaimOutcome.OWNED] * 4
        store.save_rows([row("a", 0)])
        assert store.find_receipts(["locked"])["locked"].status is ReceiptStatus.RUNNING


def test_connections_killed_while_idle_are_replaced_unseen(postgres_url: str) -> None:
    with PostgresStore(postgres_url + "?pool_size=2", check_idle_after=0.0) as store:
        barrier = threading.Barrier(2)

        def use() -> None:  # two calls at once: the pool opens both of its connections
            barrier.wait()
            store.save_rows([row("a", 0)])

        threads = [threading.Thread(target=use) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with admin(postgres_url) as conn:
            killed = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid != pg_backend_pid()"
            ).fetchone()
        assert killed is not None and killed[0] >= 1
        # Connections idle longer than check_idle_after (here: any) are tested before use.
        assert store.get_run("r") is None
        assert [r.key for r in store.iter_rows("r", "d")] == ["a"]


def test_the_password_never_shows(postgres_url: str) -> None:
    url = postgres_url.replace("postgres@", "postgres:hunter2@", 1)  # trusted: not checked
    with PostgresStore(url) as store:
        assert "hunter2" not in repr(store) and "hunter2" not in store.where
        assert store.where == postgres_url
