"""Dataset.to_sql on a real SQLite file and a real PostgreSQL database: written twice, one row
per key with the newest values; new columns added; composite keys; bad inputs refused."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import playline as pl


@pl.play(name="sql-play")
async def sql_play(ctx: pl.Context, input: dict[str, Any]) -> pl.Dataset:
    rows = [
        {"email": f"p{i}@x.com", "team": f"t{i % 2}", "n": i, **input.get("extra", {})}
        for i in range(input.get("rows", 5))
    ]
    return await (
        ctx.dataset("leads", rows, key="email")
        .with_column("score", lambda row: row["n"] * input["factor"])
        .with_column("ratio", lambda row: row["n"] / 2)
        .with_column("ok", lambda row: row["n"] % 2 == 0)
        .with_column(
            "info", lambda row: {"n": row["n"], "tags": ["a"]}, fields=input.get("info_fields")
        )
        .with_column("mixed", lambda row: row["n"] if row["n"] % 2 else "even")
        .with_column("none", lambda row: None)
        .run()
    )


def _dataset(tmp_path: Path, **input: Any) -> pl.Dataset:
    input.setdefault("factor", 1)
    result = pl.run(sql_play, input, store=f"sqlite:///{tmp_path}/store.db")
    assert result.ok, result.error
    assert isinstance(result.output, pl.Dataset)
    return result.output


class Db:
    """The database under test, read with its own driver."""

    def __init__(self, url: str, kind: str, path: Path | None = None) -> None:
        self.url, self.kind, self.path = url, kind, path

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        if self.kind == "sqlite":
            with sqlite3.connect(str(self.path)) as conn:
                return list(conn.execute(sql))
        import psycopg

        with psycopg.connect(self.url) as conn:
            return list(conn.execute(sql).fetchall())

    def run(self, sql: str) -> None:
        if self.kind == "sqlite":
            with sqlite3.connect(str(self.path)) as conn:
                conn.execute(sql)
            return
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(sql)

    def columns(self, table: str) -> list[str]:
        if self.kind == "sqlite":
            return [r[1] for r in self.rows(f"PRAGMA table_info({table})")]
        return [
            r[0]
            for r in self.rows(
                "SELECT column_name FROM information_schema.columns WHERE table_name = "
                f"'{table}' ORDER BY ordinal_position"
            )
        ]


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Db]:
    if request.param == "sqlite":
        path = tmp_path / "out.db"
        yield Db(f"sqlite:///{path}", "sqlite", path)
    else:
        yield Db(request.getfixturevalue("postgres_url"), "postgres")


def test_written_twice_leaves_one_row_per_key_with_the_newest_values(
    tmp_path: Path, db: Db
) -> None:
    first = _dataset(tmp_path, factor=1)
    assert first.to_sql(db.url, "leads", key="email") == 5
    assert db.rows("SELECT email, score FROM leads ORDER BY email")[1] == ("p1@x.com", 1)

    second = _dataset(tmp_path, factor=100, rows=7)  # two new keys, new values for the rest
    assert second.to_sql(db.url, "leads", key="email") == 7
    rows = db.rows("SELECT email, score, ratio, ok, info, mixed, none FROM leads ORDER BY n")
    assert len(rows) == 7
    assert [r[1] for r in rows] == [i * 100 for i in range(7)]
    email, score, ratio, ok, info, _, none = rows[3]
    assert (email, score, ratio, none) == ("p3@x.com", 300, 1.5, None)
    assert bool(ok) is False and bool(rows[2][3]) is True
    assert (json.loads(info) if isinstance(info, str) else info) == {"n": 3, "tags": ["a"]}
    assert [r[5] for r in rows[:2]] == ["even", "1"]  # a column of mixed types is text
    assert db.rows("SELECT count(DISTINCT email) FROM leads") == [(7,)]


def test_new_columns_are_added_to_an_existing_table(tmp_path: Path, db: Db) -> None:
    _dataset(tmp_path).to_sql(db.url, "leads", key="email")
    assert "city" not in db.columns("leads")
    _dataset(tmp_path, extra={"city": "Paris"}).to_sql(db.url, "leads", key="email")
    assert "city" in db.columns("leads")
    assert db.rows("SELECT count(*), min(city) FROM leads") == [(5, "Paris")]


def test_columns_with_fields_are_written_as_their_fields_and_flatten_spreads_every_dict(
    tmp_path: Path, db: Db
) -> None:
    _dataset(tmp_path, info_fields=["n"]).to_sql(db.url, "shown", key="email")
    columns = db.columns("shown")
    assert "info.n" in columns and "info" not in columns and "info.tags" not in columns
    assert db.rows("SELECT \"info.n\" FROM shown WHERE email = 'p3@x.com'") == [(3,)]

    _dataset(tmp_path).to_sql(db.url, "flat", key="email", flatten=True)
    assert {"info.n", "info.tags"} <= set(db.columns("flat"))
    [(tags,)] = db.rows("SELECT \"info.tags\" FROM flat WHERE email = 'p3@x.com'")
    assert (json.loads(tags) if isinstance(tags, str) else tags) == ["a"]  # a list: JSON
    with pytest.raises(pl.PlayDefinitionError, match="flatten is True"):
        _dataset(tmp_path).to_sql(db.url, "flat", key="email", flatten="yes")  # type: ignore[arg-type]


def test_a_composite_key(tmp_path: Path, db: Db) -> None:
    ds = _dataset(tmp_path, rows=6)
    assert ds.to_sql(db.url, "teams", key=["team", "n"]) == 6
    assert ds.to_sql(db.url, "teams", key=["team", "n"]) == 6
    assert db.rows("SELECT count(*) FROM teams") == [(6,)]


def test_an_existing_table_without_a_unique_index_on_the_key_is_refused(
    tmp_path: Path, db: Db
) -> None:
    db.run("CREATE TABLE plain (email TEXT, score INTEGER)")
    with pytest.raises(pl.PlayDefinitionError) as refused:
        _dataset(tmp_path).to_sql(db.url, "plain", key="email")
    assert "no unique index on (email)" in str(refused.value)
    assert 'CREATE UNIQUE INDEX "plain_key" ON "plain" ("email")' in str(refused.value)
    db.run('CREATE UNIQUE INDEX "plain_key" ON "plain" ("email")')  # as the message says
    assert _dataset(tmp_path).to_sql(db.url, "plain", key="email") == 5
    assert db.rows("SELECT count(*) FROM plain") == [(5,)]


def test_if_exists_replace_and_fail(tmp_path: Path, db: Db) -> None:
    ds = _dataset(tmp_path)
    ds.to_sql(db.url, "leads", key="email")
    db.run("INSERT INTO leads (email) VALUES ('stranger@x.com')")
    assert ds.to_sql(db.url, "leads", key="email", if_exists="replace") == 5
    assert db.rows("SELECT count(*) FROM leads") == [(5,)]
    with pytest.raises(pl.PlayDefinitionError, match="exists and if_exists='fail'"):
        ds.to_sql(db.url, "leads", key="email", if_exists="fail")


def test_names_are_quoted_not_run(tmp_path: Path, db: Db) -> None:
    table = 'odd "name"; DROP TABLE x; --'
    assert _dataset(tmp_path).to_sql(db.url, table, key="email") == 5
    quoted = '"' + table.replace('"', '""') + '"'
    assert db.rows(f"SELECT count(*) FROM {quoted}") == [(5,)]


@pytest.mark.parametrize(
    ("url", "table", "key", "says"),
    [
        ("mysql://x/y", "t", "email", "not a database URL"),
        ("sqlite:///", "t", "email", "Invalid SQLite"),
        ("sqlite:///{tmp}/missing/out.db", "t", "email", "does not exist"),
        ("sqlite:///{tmp}/out.db", "", "email", "table's name"),
        ("sqlite:///{tmp}/out.db", "t", "", "give the column"),
        ("sqlite:///{tmp}/out.db", "t", ["email", "email"], "give the column"),
        ("sqlite:///{tmp}/out.db", "t", "nope", "no value for the key column 'nope'"),
    ],
)
def test_bad_inputs_are_refused_before_anything_is_written(
    tmp_path: Path, url: str, table: str, key: Any, says: str
) -> None:
    ds = _dataset(tmp_path)
    with pytest.raises(pl.PlayDefinitionError, match=says):
        ds.to_sql(url.format(tmp=tmp_path), table, key=key)
    assert not (tmp_path / "out.db").exists()


def test_bad_if_exists_is_refused(tmp_path: Path) -> None:
    with pytest.raises(pl.PlayDefinitionError, match="if_exists='merge'"):
        _dataset(tmp_path).to_sql(f"sqlite:///{tmp_path}/o.db", "t", key="email", if_exists="merge")  # type: ignore[arg-type]


def test_an_empty_dataset_writes_nothing(tmp_path: Path) -> None:
    ds = _dataset(tmp_path, rows=0)
    assert ds.to_sql(f"sqlite:///{tmp_path}/o.db", "t", key="email") == 0


def test_a_postgres_server_that_is_not_there_says_so(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(pl.PlaylineError, match=r"could not connect to postgresql://u@127\.0\.0\.1"):
        _dataset(tmp_path).to_sql(f"postgresql://u:pw@127.0.0.1:{port}/db", "t", key="email")


def test_text_a_column_of_numbers_would_change_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    """SQLite stores '+33612345678' in an INTEGER column as 33612345678 and '0612345678' as
    612345678: such a write is refused whole, the table as it was."""
    url = f"sqlite:///{tmp_path}/out.db"
    _dataset(tmp_path, extra={"phone": 33612345678}).to_sql(url, "leads", key="email")
    for text in ("+33612345678", "0612345678", "1.50"):
        with pytest.raises(pl.PlayDefinitionError, match=f"the text '{re.escape(text)}'"):
            _dataset(tmp_path, extra={"phone": text}).to_sql(url, "leads", key="email")
    with sqlite3.connect(tmp_path / "out.db") as conn:
        assert {p for (p,) in conn.execute("SELECT phone FROM leads")} == {33612345678}
    # text a number column keeps as it is goes in, as does one a new table holds as TEXT
    assert _dataset(tmp_path, extra={"phone": "unknown"}).to_sql(url, "leads", key="email") == 5
    _dataset(tmp_path, extra={"phone": "007"}).to_sql(url, "fresh", key="email")
    with sqlite3.connect(tmp_path / "out.db") as conn:
        assert {p for (p,) in conn.execute("SELECT phone FROM fresh")} == {"007"}


def test_replace_with_no_rows_empties_the_table_and_fail_refuses_it(tmp_path: Path, db: Db) -> None:
    _dataset(tmp_path).to_sql(db.url, "leads", key="email")
    empty = _dataset(tmp_path, rows=0)
    with pytest.raises(pl.PlayDefinitionError, match="exists and if_exists='fail'"):
        empty.to_sql(db.url, "leads", key="email", if_exists="fail")
    assert empty.to_sql(db.url, "leads", key="email") == 0  # upsert: nothing changes
    assert db.rows("SELECT count(*) FROM leads") == [(5,)]
    assert empty.to_sql(db.url, "leads", key="email", if_exists="replace") == 0
    assert db.rows("SELECT count(*) FROM leads") == [(0,)]


def test_tables_whose_names_and_keys_join_alike_get_indexes_of_their_own(
    tmp_path: Path, db: Db
) -> None:
    """Table 't_email' keyed by 'n' and table 't' keyed by ('email', 'n'): 't_email_n'."""
    assert _dataset(tmp_path).to_sql(db.url, "t_email", key="n") == 5
    assert _dataset(tmp_path).to_sql(db.url, "t", key=["email", "n"]) == 5
    assert db.rows("SELECT count(*) FROM t") == db.rows("SELECT count(*) FROM t_email") == [(5,)]


def test_columns_sqlite_takes_for_one_are_refused(tmp_path: Path) -> None:
    ds = _dataset(tmp_path, extra={"Email": "X@x.com"})
    with pytest.raises(pl.PlayDefinitionError, match=r"'email' and 'Email'.*ignore case"):
        ds.to_sql(f"sqlite:///{tmp_path}/out.db", "leads", key="email")
