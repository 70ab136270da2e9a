"""The PostgreSQL fixtures: a real server, reached through psycopg, a fresh database each."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from services import PostgresServer, postgres_bindir

USER_TABLES = (
    "SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
)


def test_select_1(postgres_server: PostgresServer) -> None:
    assert postgres_server.url.startswith("postgresql://postgres@127.0.0.1:")
    assert (postgres_server.bindir / "initdb").exists()
    with psycopg.connect(postgres_server.url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_each_new_database_is_separate_and_empty(postgres_server: PostgresServer) -> None:
    first, second = postgres_server.new_database(), postgres_server.new_database()
    assert first != second
    with psycopg.connect(first) as conn:
        assert conn.execute(USER_TABLES).fetchone() == (0,)
        conn.execute("CREATE TABLE t (x int)")
    with psycopg.connect(second) as conn:
        assert conn.execute(USER_TABLES).fetchone() == (0,)
        assert conn.execute("SELECT current_database()").fetchone() == (second.rsplit("/")[-1],)


def test_postgres_url_is_an_empty_database(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute(USER_TABLES).fetchone() == (0,)
        conn.execute("CREATE TABLE leftover (x int)")  # the next test's database lacks it


def test_the_next_postgres_url_is_empty_again(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute(USER_TABLES).fetchone() == (0,)


def test_a_wrong_bindir_fails_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PG_BINDIR", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match="has no initdb; point it at"):
        postgres_bindir()
