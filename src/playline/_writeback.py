"""Results written back: a dataset's rows to a Parquet file or upserted into a SQL table.

Both read the rows twice, page by page as ``Dataset`` streams them from the store, and never
hold them all: a first pass learns each column's type over every row, a second writes.

Parquet (``write_parquet``): pyarrow types each column, nested values as structs and lists
where it can; a column whose values it cannot type as one (a number here, a text there,
shapes that do not merge) is written as text, nested values as JSON.

SQL (``write_sql``): rows are upserted by key into a SQLite (``sqlite:///path.db``) or
PostgreSQL (``postgresql://...``) table, ``INSERT ... ON CONFLICT (key) DO UPDATE``, so a
second run of the same rows leaves one row per key with the newest values. A missing table is
created (with a unique index on the key), missing columns are added; every batch of rows is one
transaction.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import IO, Any, Literal

from ._json import canonical
from .errors import PlayDefinitionError, PlaylineError, StoreError

__all__ = ["IfExists", "write_parquet", "write_sql"]

_PAGE = 5000  # rows per Parquet row group and per pass of type learning
_BATCH = 500  # rows per SQL transaction
_PG_NAME_BYTES = 63  # PostgreSQL cuts longer identifiers, which could merge two columns

IfExists = Literal["upsert", "replace", "fail"]


def _needs(module: str, extra: str, what: str) -> ModuleType:
    """``module``, imported when first used; missing, an error saying which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        package = module.partition(".")[0]
        raise PlayDefinitionError(
            f"{what} needs {package}, which is not installed. Install it with "
            f"`pip install 'playline[{extra}]'` (or `pip install {package}`)."
        ) from None


def _pages(rows: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    page: list[dict[str, Any]] = []
    for row in rows:
        page.append(row)
        if len(page) >= size:
            yield page
            page = []
    if page:
        yield page


def _as_text(value: Any) -> Any:
    """A value of a column written as text: texts as they are, anything else as JSON."""
    return value if value is None or isinstance(value, str) else canonical(value)


# --------------------------------------------------------------------------------------------
# Parquet


def write_parquet(rows: Iterable[dict[str, Any]], out: str | Path | IO[bytes], what: str) -> int:
    """Write ``rows`` (iterated twice) as a Parquet file; returns how many were written."""
    pa = _needs("pyarrow", "parquet", what)
    pq = _needs("pyarrow.parquet", "parquet", what)
    types = _arrow_types(pa, rows)
    schema = pa.schema([(name, pa.string() if kind is None else kind) for name, kind in types])
    count = 0
    with pq.ParquetWriter(out, schema) as writer:
        for page in _pages(rows, _PAGE):
            columns = []
            for name, kind in types:
                values = [row.get(name) for row in page]
                if kind is None:
                    columns.append(pa.array([_as_text(v) for v in values], type=pa.string()))
                else:
                    columns.append(pa.array(values, type=kind))
            writer.write_table(pa.Table.from_arrays(columns, schema=schema))
            count += len(page)
    return count


def _arrow_types(pa: Any, rows: Iterable[dict[str, Any]]) -> list[tuple[str, Any]]:
    """Each column (in the order first seen) with the Arrow type of all its values, or None
    where they have none in common (the column is then written as text)."""
    types: dict[str, Any] = {}
    for page in _pages(rows, _PAGE):
        for row in page:
            for name in row:
                types.setdefault(name, pa.null())
        for name, known in types.items():
            if known is None:
                continue
            try:
                found = pa.array([row.get(name) for row in page]).type
                merged = (
                    pa.unify_schemas(
                        [pa.schema([(name, known)]), pa.schema([(name, found)])],
                        promote_options="permissive",
                    )
                    .field(name)
                    .type
                )
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
                merged = None
            types[name] = merged if merged is None or _writable(pa, merged) else None
    return list(types.items())


def _writable(pa: Any, kind: Any) -> bool:
    """Whether Parquet can hold the Arrow type ``kind`` (it has no struct without fields)."""
    if pa.types.is_struct(kind):
        return kind.num_fields > 0 and all(
            _writable(pa, kind.field(i).type) for i in range(kind.num_fields)
        )
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return bool(_writable(pa, kind.value_type))
    return True


# --------------------------------------------------------------------------------------------
# SQL


@dataclass
class _Column:
    """A column to write: what its values are (learned over every row) and how the table
    holds it (``declared``, read from an existing table, or the type it is created with)."""

    name: str
    kind: str = "null"  # null, boolean, integer, real, text, json
    declared: str = ""
    numeric_text: str | None = None  # a text a column of numbers would store as another

    def see(self, value: Any) -> None:
        if value is None:
            return
        if self.numeric_text is None and isinstance(value, str) and _changed_as_number(value):
            self.numeric_text = value
        if isinstance(value, bool):
            found = "boolean"
        elif isinstance(value, int):
            found = "integer" if -(2**63) <= value < 2**63 else "text"
        elif isinstance(value, float):
            found = "real"
        elif isinstance(value, dict | list):
            found = "json"
        else:
            found = "text"
        if self.kind in ("null", found):
            self.kind = found
        elif {self.kind, found} == {"integer", "real"}:
            self.kind = "real"
        else:
            self.kind = "text"  # a column of mixed types is written as text


_NUMBER = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\s*")


def _changed_as_number(text: str) -> bool:
    """Whether SQLite would store ``text`` in a column of numbers (INTEGER, REAL or NUMERIC
    affinity) as a number that does not read back as the text: '+336...', '007', '1.50'
    (https://www.sqlite.org/datatype3.html#type_affinity)."""
    if not _NUMBER.fullmatch(text):
        return False
    number = float(text)
    if number.is_integer() and abs(number) < 2**63:
        return str(int(number)) != text
    return repr(number) != text


def _numeric_affinity(declared: str) -> bool:
    """Whether a SQLite column so declared stores number-like texts as numbers."""
    kind = declared.upper()
    if "INT" in kind:
        return True
    return bool(kind) and not any(t in kind for t in ("CHAR", "CLOB", "TEXT", "BLOB"))


@dataclass
class _Target:
    """What a SQL URL connects to, and the SQL that differs between the two databases."""

    url: str
    postgres: bool
    connect: Any = field(repr=False)
    conn: Any = field(default=None, repr=False)

    def quote(self, name: str) -> str:
        """An identifier quoted for this database: by psycopg for PostgreSQL, else in double
        quotes (a quote inside doubled), which SQLite reads as a name, never as SQL."""
        if self.postgres:
            from psycopg import sql

            return str(sql.Identifier(name).as_string(self.conn))
        return '"' + name.replace('"', '""') + '"'

    def mark(self) -> str:
        return "%s" if self.postgres else "?"

    def type_of(self, kind: str) -> str:
        if self.postgres:
            return {
                "boolean": "boolean",
                "integer": "bigint",
                "real": "double precision",
                "json": "jsonb",
            }.get(kind, "text")
        # JSON as TEXT: a type SQLite does not know gets NUMERIC affinity, which turns texts
        # that look like numbers into numbers
        return {"boolean": "BOOLEAN", "integer": "INTEGER", "real": "REAL"}.get(kind, "TEXT")


def write_sql(
    rows: Iterable[dict[str, Any]],
    url: str,
    table: str,
    *,
    key: str | Sequence[str],
    if_exists: IfExists,
    what: str,
) -> int:
    """Upsert ``rows`` (iterated twice) into ``table`` by ``key``; returns the rows written."""
    keys = _keys(key, what)
    if not isinstance(table, str) or not table.strip() or "\x00" in table:
        raise PlayDefinitionError(f"{what}: give the table's name as text, e.g. 'leads'.")
    if if_exists not in ("upsert", "replace", "fail"):
        raise PlayDefinitionError(
            f"{what}: if_exists={if_exists!r}; use 'upsert' (the default: insert new keys, "
            "update known ones), 'replace' (drop the table and write it anew) or 'fail'."
        )
    target = _target(url, what)
    columns = _learn(rows, keys, what)
    if not columns:  # no rows: no columns to create a table with
        _check_name(target, table, what)
        with _connected(target, what) as conn:
            _prepare_empty(target, conn, table, if_exists, what)
        return 0
    for name in columns:
        _check_name(target, name, what)
    _check_name(target, table, what)
    _check_distinct(target, columns, what)
    with _connected(target, what) as conn:
        _prepare(target, conn, table, columns, keys, if_exists, what)
        return _upsert(target, conn, table, columns, keys, rows)


def _keys(key: str | Sequence[str], what: str) -> list[str]:
    keys = [key] if isinstance(key, str) else list(key) if isinstance(key, list | tuple) else []
    if not keys or not all(isinstance(k, str) and k for k in keys) or len(set(keys)) < len(keys):
        raise PlayDefinitionError(
            f"{what}: key={key!r}; give the column (key='email') or the columns "
            "(key=['domain', 'name']) whose values name a row of the table."
        )
    return keys


def _target(url: str, what: str) -> _Target:
    """The database ``url`` names: Playline's store URL forms, checked the same way."""
    if not isinstance(url, str):
        raise PlayDefinitionError(f"{what}: the URL must be text, not {type(url).__name__}.")
    try:
        if url.startswith("sqlite:"):
            from .store.sql._sqlite_file import parse_url as sqlite_url

            path, timeout = sqlite_url(url)
            if not Path(path).parent.is_dir():
                raise StoreError(
                    f"The folder of {path!r} does not exist; create it, or give another path."
                )
            return _Target(url, False, lambda: sqlite3.connect(path, timeout=timeout))
        if url.startswith(("postgresql://", "postgres://")):
            psycopg = _needs("psycopg", "postgres", what)
            from .store.sql._postgres_url import parse_url as pg_url

            parsed = pg_url(url)
            return _Target(
                parsed.display,
                True,
                lambda: psycopg.connect(parsed.conninfo, **parsed.connect_kwargs),
            )
    except StoreError as exc:
        raise PlayDefinitionError(f"{what}: {exc}") from None
    raise PlayDefinitionError(
        f"{what}: {url.split('://')[0]!r} is not a database URL Playline writes to. Use "
        "'sqlite:///path/to/file.db' or 'postgresql://user@host:port/database'."
    )


def _check_name(target: _Target, name: str, what: str) -> None:
    if "\x00" in name:
        raise PlayDefinitionError(f"{what}: the name {name!r} holds a NUL character.")
    if target.postgres and len(name.encode()) > _PG_NAME_BYTES:
        raise PlayDefinitionError(
            f"{what}: {name!r} is longer than PostgreSQL's {_PG_NAME_BYTES} bytes for a name, "
            "which it would cut short; use a shorter table or column name."
        )


def _check_distinct(target: _Target, columns: dict[str, _Column], what: str) -> None:
    """SQLite reads names without case: 'Email' and 'email' would be one column."""
    if target.postgres:
        return
    seen: dict[str, str] = {}
    for name in columns:
        other = seen.setdefault(name.lower(), name)
        if other != name:
            raise PlayDefinitionError(
                f"{what}: the rows have the columns {other!r} and {name!r}, which SQLite takes "
                "for one (its names ignore case); rename one (e.g. with a column of the play) "
                "before writing; nothing was written."
            )


def _learn(rows: Iterable[dict[str, Any]], keys: list[str], what: str) -> dict[str, _Column]:
    """Every column (in the order first seen) and its kind; a row without a key refused."""
    columns: dict[str, _Column] = {}
    for number, row in enumerate(rows, 1):
        for name, value in row.items():
            column = columns.get(name)
            if column is None:
                column = columns[name] = _Column(name)
            column.see(value)
        missing = [k for k in keys if row.get(k) is None]
        if missing:
            raise PlayDefinitionError(
                f"{what}: row {number} has no value for the key column {missing[0]!r}, so it "
                "could not be matched on a later write. Fill it in, or choose another key; "
                "nothing was written."
            )
    return columns


@contextlib.contextmanager
def _connected(target: _Target, what: str) -> Iterator[Any]:
    try:
        conn = target.conn = target.connect()
    except Exception as exc:  # sqlite3.Error, psycopg.OperationalError: first line only
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PlaylineError(f"{what}: could not connect to {target.url}: {reason}") from None
    try:
        yield conn
    finally:
        conn.close()


def _prepare(
    target: _Target,
    conn: Any,
    table: str,
    columns: dict[str, _Column],
    keys: list[str],
    if_exists: IfExists,
    what: str,
) -> None:
    """The table ready to take the rows: created, or checked and given the missing columns."""
    q = target.quote
    existing = _table_columns(target, conn, table)
    _refuse_existing(existing, table, if_exists, what)
    statements = []
    if existing and if_exists == "replace":
        statements.append(f"DROP TABLE {q(table)}")
        existing = {}
    for name in keys:
        if name not in columns and _find(existing, name, target) is None:
            raise PlayDefinitionError(
                f"{what}: the key column {name!r} is in no row (columns: "
                f"{', '.join(columns) or 'none'}); choose key= among them."
            )
    if not existing:
        defs = ", ".join(f"{q(c.name)} {target.type_of(c.kind)}" for c in columns.values())
        statements.append(f"CREATE TABLE {q(table)} ({defs})")
        index = q(_index_name(table, keys))
        statements.append(
            f"CREATE UNIQUE INDEX {index} ON {q(table)} ({', '.join(q(k) for k in keys)})"
        )
        for column in columns.values():
            column.declared = target.type_of(column.kind)
    else:
        if not _has_unique_index(target, conn, table, keys, existing):
            raise PlayDefinitionError(
                f"{what}: table {table!r} has no unique index on ({', '.join(keys)}), which "
                "an upsert by key needs. Add one, e.g. CREATE UNIQUE INDEX "
                f"{q(table + '_key')} ON {q(table)} ({', '.join(q(k) for k in keys)}); "
                "(remove duplicate keys first), or write to a new table."
            )
        for column in columns.values():
            found = _find(existing, column.name, target)
            if found is None:
                column.declared = target.type_of(column.kind)
                statements.append(
                    f"ALTER TABLE {q(table)} ADD COLUMN {q(column.name)} {column.declared}"
                )
            else:
                column.name, column.declared = found, existing[found]
                _refuse_numeric_text(target, table, column, what)
    _in_transaction(target, conn, statements, [], prepare=table)


def _refuse_numeric_text(target: _Target, table: str, column: _Column, what: str) -> None:
    """A text a SQLite column of numbers would store as a number that reads back otherwise
    ('+33...' as 33..., '007' as 7) is refused before anything is written: never lost."""
    if target.postgres or column.numeric_text is None:
        return  # (PostgreSQL refuses text in a column of numbers by itself)
    if _numeric_affinity(column.declared):
        raise PlayDefinitionError(
            f"{what}: column {column.name!r} of table {table!r} holds numbers "
            f"({column.declared.upper()}), and SQLite would store the text "
            f"{column.numeric_text!r} as a number, losing its form (a '+', leading zeros). "
            "Write to a new table (its column is created as TEXT), use if_exists='replace', "
            "or write numbers; nothing was written."
        )


def _index_name(table: str, keys: list[str]) -> str:
    """The key's unique index: named after the table and keys, with a digest of both, so
    that table 'a' keyed by 'b_c' and table 'a_b' keyed by 'c' never want one name."""
    digest = hashlib.sha256(canonical([table, keys]).encode()).hexdigest()[:8]
    readable = f"{table}_{'_'.join(keys)}"[: _PG_NAME_BYTES - 14]
    while len(readable.encode()) > _PG_NAME_BYTES - 14:  # a name cut inside a character
        readable = readable[:-1]
    return f"{readable}_key_{digest}"


def _refuse_existing(existing: dict[str, str], table: str, if_exists: IfExists, what: str) -> None:
    if existing and if_exists == "fail":
        raise PlayDefinitionError(
            f"{what}: table {table!r} exists and if_exists='fail'; use if_exists='upsert' to "
            "update it by key, or 'replace' to write it anew."
        )


def _prepare_empty(target: _Target, conn: Any, table: str, if_exists: IfExists, what: str) -> None:
    """No rows to write: 'replace' leaves the table empty (its columns as they were: no row
    says what new ones would be), 'fail' refuses an existing one, 'upsert' changes nothing."""
    existing = _table_columns(target, conn, table)
    _refuse_existing(existing, table, if_exists, what)
    if existing and if_exists == "replace":
        _in_transaction(target, conn, [f"DELETE FROM {target.quote(table)}"], [], prepare=table)


def _find(existing: dict[str, str], name: str, target: _Target) -> str | None:
    """The existing column ``name`` refers to (SQLite matches names without case)."""
    if name in existing:
        return name
    if not target.postgres:
        return next((n for n in existing if n.lower() == name.lower()), None)
    return None


def _table_columns(target: _Target, conn: Any, table: str) -> dict[str, str]:
    """The existing table's columns and their declared types ({} when there is no table)."""
    if target.postgres:
        found = conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = %s ORDER BY ordinal_position",
            (table,),
        ).fetchall()
        conn.rollback()
    else:
        found = [(r[1], r[2]) for r in conn.execute(f"PRAGMA table_info({target.quote(table)})")]
    return {name: str(kind).lower() for name, kind in found}


def _has_unique_index(
    target: _Target, conn: Any, table: str, keys: list[str], existing: dict[str, str]
) -> bool:
    """Whether a unique index (or primary key) covers exactly the key columns: what
    ``ON CONFLICT (key)`` needs to find the row to update."""
    wanted = {(_find(existing, k, target) or k) for k in keys}
    if target.postgres:
        sets = conn.execute(
            "SELECT array_agg(a.attname::text) FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            "WHERE c.relname = %s AND n.nspname = current_schema() AND i.indisunique "
            "AND i.indpred IS NULL AND i.indexprs IS NULL GROUP BY i.indexrelid",
            (table,),
        ).fetchall()
        conn.rollback()
        return any(set(names) == wanted for (names,) in sets)
    q = target.quote
    info = list(conn.execute(f"PRAGMA table_info({q(table)})"))
    if {r[1] for r in info if r[5]} == wanted:  # the primary key (also a rowid alias)
        return True
    for index in conn.execute(f"PRAGMA index_list({q(table)})"):
        unique, partial = index[2], index[4] if len(index) > 4 else 0
        if unique and not partial:
            names = {r[2] for r in conn.execute(f"PRAGMA index_info({q(index[1])})")}
            if names == wanted:
                return True
    return False


def _upsert(
    target: _Target,
    conn: Any,
    table: str,
    columns: dict[str, _Column],
    keys: list[str],
    rows: Iterable[dict[str, Any]],
) -> int:
    q = target.quote
    names = list(columns.values())
    key_names = [(_find({c.name: "" for c in names}, k, target) or k) for k in keys]
    updates = [c.name for c in names if c.name not in key_names]
    action = (
        "DO UPDATE SET " + ", ".join(f"{q(n)} = excluded.{q(n)}" for n in updates)
        if updates
        else "DO NOTHING"
    )
    statement = (
        f"INSERT INTO {q(table)} ({', '.join(q(c.name) for c in names)}) "
        f"VALUES ({', '.join(target.mark() for _ in names)}) "
        f"ON CONFLICT ({', '.join(q(k) for k in key_names)}) {action}"
    )
    by_source = list(columns)  # the rows' own names (SQLite may have matched other cases)
    convert = [_converter(target, c) for c in names]
    count = 0
    for page in _pages(rows, _BATCH):
        params = [
            tuple(f(row.get(n)) for f, n in zip(convert, by_source, strict=True)) for row in page
        ]
        _in_transaction(target, conn, [statement], params)
        count += len(page)
    return count


def _converter(target: _Target, column: _Column) -> Any:
    """How a value is handed to the driver for the column as the table declares it."""
    declared = column.declared.lower()
    if target.postgres and declared in ("jsonb", "json"):
        from psycopg.types.json import Json, Jsonb

        wrap = Jsonb if declared == "jsonb" else Json
        return lambda v: None if v is None else wrap(v)
    if column.kind in ("text", "json") or any(t in declared for t in ("text", "char", "json")):
        return _as_text
    return lambda v: v


def _in_transaction(
    target: _Target,
    conn: Any,
    statements: list[str],
    params: list[Any],
    *,
    prepare: str | None = None,
) -> None:
    """Run ``statements`` (the last one once per item of ``params``, if any) as one
    transaction; a database error says what was kept: a batch of rows rolled back, or, while
    the table ``prepare`` was made ready, nothing written."""
    try:
        if target.postgres:
            with conn.transaction(), conn.cursor() as cur:
                _execute(cur, statements, params)
        else:
            with conn:  # sqlite3: commits, or rolls back on an error
                _execute(conn, statements, params)
    except (sqlite3.Error, _pg_error()) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if prepare is not None:
            raise PlaylineError(
                f"Making table {prepare!r} ready in {target.url} failed: {reason}. Nothing "
                "was written."
            ) from None
        raise PlaylineError(
            f"Writing to {target.url} failed: {reason}. This batch was rolled back; the "
            "batches before it are kept, and writing again upserts them by key."
        ) from None


def _execute(cur: Any, statements: list[str], params: list[Any]) -> None:
    last = len(statements) - 1
    for i, statement in enumerate(statements):
        if i == last and params:
            cur.executemany(statement, params)
        else:
            cur.execute(statement)


def _pg_error() -> type[Exception]:
    try:
        import psycopg
    except ImportError:
        return sqlite3.Error
    return psycopg.Error
