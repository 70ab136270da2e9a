"""Datasets: a table mapped column by column, rows streaming through a bounded window."""

from __future__ import annotations

import asyncio
import csv
import datetime as dt
import inspect
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sized
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ._arity import check_args, takes_ctx
from ._csv import CsvRows, path_given
from ._engine.datasets import Column, DatasetMode, DatasetRun, DatasetStats, OnRowError
from ._engine.previous import PreviousCell
from ._engine.rows import DatasetKey
from ._engine.scope import current_row
from ._flatten import check_fields, dataset_fields, defused, flat, spread, spread_columns
from ._frames import FrameRows, frame_kind, rows_to_pandas, rows_to_polars
from ._secrets import check_stored_name
from .errors import PlayDefinitionError
from .store import RowRecord, Store, use_store

if TYPE_CHECKING:
    from ._engine.attempt import Attempt

__all__ = ["CellError", "Dataset", "DatasetBuilder", "DatasetStats", "PreviousCell", "revive"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CellError:
    row_key: str
    column: str
    message: str
    tool: str | None = None
    status: int | None = None
    code: str | None = None
    request_id: str | None = None


class DatasetBuilder:
    """What ``ctx.dataset(...)`` returns: add columns with ``with_column``, then ``run``."""

    def __init__(
        self,
        runtime: Attempt,
        name: str,
        rows: Iterable[Any],
        key: DatasetKey,
        columns: tuple[Column, ...] = (),
        mode: DatasetMode = "all",
    ) -> None:
        self._runtime = runtime
        self.name = name
        kind = frame_kind(rows)
        self._rows = FrameRows(rows, kind) if kind else rows  # a pandas/polars DataFrame
        self._key = key
        self._columns = columns
        self._mode = mode

    def with_column(
        self,
        name: str,
        resolver: Callable[..., Any],
        *,
        when: Callable[[Mapping[str, Any]], Any] | None = None,
        else_value: Any = None,
        stale_after: dt.timedelta | float | None = None,
        recompute: Callable[[PreviousCell], Any] | None = None,
        recompute_on_error: bool = False,
        fields: list[str] | tuple[str, ...] | None = None,
    ) -> DatasetBuilder:
        """Add a column computed by ``resolver(row)`` or ``resolver(row, ctx)``.

        By default every run computes every cell (its tool calls answered by receipts).
        A column that says when to recompute keeps the cell the newest earlier run of the play
        stored for the row (same dataset, same key) until then, without running the resolver:
        ``stale_after`` (a ``timedelta`` or seconds) recomputes a cell older than that, and its
        calls buy again the receipts older than that too; ``recompute(previous)`` (given a
        ``pl.PreviousCell``) recomputes when it returns true, buying again the receipts from
        before that cell; ``recompute_on_error=True`` recomputes cells that failed (kept
        failed otherwise). In such a dataset a resolver reads an earlier run's value with
        ``row.previous(column)``.

        ``fields=["name", "industry"]`` shows a dict result as the columns ``<column>.name``
        and ``<column>.industry`` in tables (CSV, Parquet, DataFrames, ``playline show
        --rows``, the grid): a view recorded with the column; the cell stores the whole
        result, and receipts are unchanged. A field the result lacks shows as None."""
        where = f"Dataset {self.name!r}"
        if not isinstance(name, str) or not name:
            raise PlayDefinitionError(f"{where}: with_column needs a non-empty column name.")
        check_stored_name(name, f"{where}: the column name")
        if any(c.name == name for c in self._columns):
            raise PlayDefinitionError(
                f"{where}: column {name!r} is defined twice; give each column its own name."
            )
        if not callable(resolver):
            raise PlayDefinitionError(
                f"{where}, column {name!r}: the resolver must be a function fn(row) or "
                f"fn(row, ctx), not {type(resolver).__name__}. For a constant, use "
                f"lambda row: {resolver!r}."
            )
        if when is not None:
            _check_when(when, f"{where}, column {name!r}: when=")
        stale = _seconds(stale_after, f"{where}, column {name!r}")
        if recompute is not None and not callable(recompute):
            raise PlayDefinitionError(
                f"{where}, column {name!r}: recompute= must be fn(previous) returning true to "
                f"compute the cell again, not {type(recompute).__name__}; e.g. "
                "recompute=lambda previous: previous.value is None."
            )
        if recompute_on_error is not True and recompute_on_error is not False:
            raise PlayDefinitionError(
                f"{where}, column {name!r}: recompute_on_error is True or False, not "
                f"{recompute_on_error!r}."
            )
        chosen = check_fields(fields, f"{where}, column {name!r}")
        column = Column(
            name=name,
            resolver=resolver,
            takes_ctx=takes_ctx(
                resolver, f"{where}, column {name!r}: the resolver", "(row) or (row, ctx)"
            ),
            when=when,
            else_value=else_value,
            stale_after=stale,
            recompute=recompute,
            recompute_on_error=recompute_on_error,
            fields=chosen,
        )
        return DatasetBuilder(
            self._runtime, self.name, self._rows, self._key, (*self._columns, column), self._mode
        )

    def run(
        self, *, description: str | None = None, on_row_error: OnRowError = "record"
    ) -> Coroutine[Any, Any, Dataset]:
        """Run every row through the columns; returns the finished ``Dataset`` (await it: a
        run never awaited fails the play's run when it ends, as its rows never ran)."""
        running = self._run(description, on_row_error)
        self._runtime.dataset_asked(self.name, running)
        return running

    async def _run(self, description: str | None, on_row_error: OnRowError) -> Dataset:
        if on_row_error not in ("record", "raise"):
            raise PlayDefinitionError(
                f'on_row_error={on_row_error!r}: use "record" (keep going) or "raise".'
            )
        if current_row.get() is not None:
            raise PlayDefinitionError(
                f"Dataset {self.name!r} was started inside a column. Datasets cannot be "
                "nested: flatten the work into columns of one dataset, or run it before."
            )
        self._runtime.claim_dataset_name(self.name, [c.name for c in self._columns])
        run = DatasetRun(
            self._runtime, self.name, self._columns, self._key, on_row_error, self._mode
        )
        # live counts: a run that stops or waits mid-dataset still reports its rows
        self._runtime.datasets[self.name] = run.stats
        total = await _total(self._rows)
        stats = await run.execute(self._rows, description, total=total)
        return Dataset(self._runtime.store, self._runtime.run_id, self.name, stats)


def _seconds(value: dt.timedelta | float | None, where: str) -> float | None:
    """``stale_after`` as seconds (a ``timedelta`` or a positive number of seconds)."""
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, dt.timedelta) else value
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not seconds > 0
        or seconds == float("inf")
    ):
        raise PlayDefinitionError(
            f"{where}: stale_after={value!r} must be a positive timedelta or number of "
            "seconds, e.g. stale_after=timedelta(days=90)."
        )
    return float(seconds)


async def _total(rows: Iterable[Any]) -> int | None:
    """How many rows the input holds, for progress displays: a list's (or a DataFrame's)
    length, a CSV file's rows counted ahead (off the event loop); None when unknown (a
    generator)."""
    if isinstance(rows, Sized):
        return len(rows)
    if isinstance(rows, CsvRows):
        try:
            count, _ = await asyncio.to_thread(rows.count)
        except (OSError, UnicodeDecodeError, csv.Error):  # the run itself will say what is wrong
            return None
        return count
    return None


@dataclass
class Dataset:
    """A finished dataset, read from the store: iterate it for its rows (hidden columns left
    out), or use ``to_list()``, ``to_csv(path)``, ``errors`` and ``stats``. When the run has
    closed its store (``pl.run`` with a store URL), each read opens it again, read-only."""

    store: Store = field(repr=False)
    run_id: str
    name: str
    stats: DatasetStats

    def __len__(self) -> int:
        return self.stats.rows

    def to_ref(self) -> dict[str, Any]:
        """How a play's output that is a dataset is stored: by reference to its rows."""
        return {"$dataset": self.name, "run_id": self.run_id, "rows": len(self)}

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for record in self._records():
            yield record.values

    def _records(self) -> Iterator[RowRecord]:
        """The rows as stored, read through the run's store, or, where the run closed it
        (``pl.run`` opened it from a URL), through that store opened again to be read."""
        source = self.store.url if self.store.closed else self.store
        with use_store(source, read_only=True) as store:
            yield from store.iter_rows(self.run_id, self.name)

    def to_list(self) -> list[dict[str, Any]]:
        return list(self)

    def _fields(self) -> dict[str, tuple[str, ...]]:
        """The ``fields=`` its columns are shown as (recorded when the dataset started)."""
        source = self.store.url if self.store.closed else self.store
        with use_store(source, read_only=True) as store:
            return dataset_fields(store, self.run_id, self.name)

    def _table(self, flatten: bool) -> _Table:
        return _Table(self, self._fields(), self._flatten(flatten))

    def _flatten(self, flatten: bool) -> bool:
        if flatten is not True and flatten is not False:
            raise PlayDefinitionError(
                f"Dataset {self.name!r}: flatten is True (spread every nested dict into "
                f"dotted columns) or False, not {flatten!r}."
            )
        return flatten

    def to_pandas(self, *, flatten: bool = False) -> Any:
        """The rows as a ``pandas.DataFrame`` (needs pandas: ``pip install 'playline[pandas]'``).
        Columns with ``fields=`` are spread into ``<column>.<field>`` columns; ``flatten=True``
        spreads every dict value (lists stay Python lists)."""
        return rows_to_pandas(self._table(flatten), f"Dataset {self.name!r}.to_pandas()")

    def to_polars(self, *, flatten: bool = False) -> Any:
        """The rows as a ``polars.DataFrame`` (needs polars: ``pip install 'playline[polars]'``);
        nested values polars cannot type as one column become JSON text. ``fields=`` and
        ``flatten=True`` spread dicts into dotted columns, as ``to_pandas`` does."""
        return rows_to_polars(self._table(flatten), f"Dataset {self.name!r}.to_polars()")

    @property
    def errors(self) -> list[CellError]:
        """The failed cells, each with its row key, column and message (and tool details)."""
        found = []
        for record in self._records():
            if record.status != "failed":
                continue
            for column, meta in record.cells.items():
                if meta.get("status") == "failed":
                    found.append(
                        CellError(
                            row_key=record.key,
                            column=column,
                            message=meta.get("error", ""),
                            tool=meta.get("tool"),
                            status=meta.get("http_status"),
                            code=meta.get("code"),
                            request_id=meta.get("request_id"),
                        )
                    )
        return found

    def to_csv(self, path: str | Path, *, flatten: bool = False, raw: bool = False) -> Path:
        """Write the rows as CSV (nested values as JSON); returns the path. Columns with
        ``fields=`` are written as ``<column>.<field>`` columns; ``flatten=True`` spreads every
        dict value into dotted columns (lists stay JSON). A text a spreadsheet would run as a
        formula (it starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return: a
        provider's answer may) gets a quote in front, as ``playline export`` does, unless
        ``raw=True``."""
        if raw is not True and raw is not False:
            raise PlayDefinitionError(
                f"Dataset {self.name!r}.to_csv: raw is True (write every text as it is) or "
                f"False (the default: texts a spreadsheet would run get a quote), not {raw!r}."
            )
        out = _out_file(path, f"Dataset {self.name!r}.to_csv", "leads.csv")
        table = self._table(flatten)
        cell = flat if raw else (lambda value: defused(flat(value)))
        with out.open("w", newline="", encoding="utf-8") as handle:
            if not table.columns:
                return out
            writer = csv.DictWriter(handle, fieldnames=table.columns, extrasaction="ignore")
            writer.writerow({name: cell(name) for name in table.columns})
            for row in table:
                writer.writerow({k: cell(v) for k, v in row.items()})
        return out

    def to_parquet(self, path: str | Path) -> Path:
        """Write the rows as a Parquet file, streamed in row groups; returns the path (needs
        pyarrow: ``pip install 'playline[parquet]'``). Nested values become structs and lists
        where pyarrow can type a column as one, else JSON text; columns with ``fields=`` as
        their fields' columns."""
        from ._writeback import write_parquet

        out = _out_file(path, f"Dataset {self.name!r}.to_parquet", "leads.parquet")
        fields = self._fields()
        rows = _Table(self, fields, False) if fields else self
        write_parquet(rows, out, f"Dataset {self.name!r}.to_parquet()")
        return out

    def to_sql(
        self,
        url: str,
        table: str,
        *,
        key: str | list[str],
        if_exists: Literal["upsert", "replace", "fail"] = "upsert",
        flatten: bool = False,
    ) -> int:
        """Upsert the rows into ``table`` of a SQLite (``sqlite:///path.db``) or PostgreSQL
        (``postgresql://...``, the postgres extra) database by ``key`` (a column or a list of
        columns); returns how many rows were written. Writing again updates the rows of known
        keys with the newest values. A missing table is created with a unique index on the
        key, missing columns are added; ``if_exists="replace"`` drops the table first (with no
        rows, empties it), ``"fail"`` refuses an existing one. A text SQLite would store as
        another number in an existing column of numbers ('007') is refused, nothing written.
        Columns with ``fields=`` are written as ``<column>.<field>`` columns, as ``to_csv``
        writes them; ``flatten=True`` spreads every nested dict (other nested values are JSON
        text). A blocking call: in a play, ``await asyncio.to_thread(ds.to_sql, ...)`` keeps
        the event loop free."""
        from ._writeback import write_sql

        fields, flatten = self._fields(), self._flatten(flatten)
        return write_sql(
            _Table(self, fields, flatten) if fields or flatten else self,
            url,
            table,
            key=key,
            if_exists=if_exists,
            what=f"Dataset {self.name!r}.to_sql({table!r})",
        )


def _out_file(path: object, what: str, example: str) -> Path:
    """The file ``to_csv`` or ``to_parquet`` writes: a path (text or ``pathlib.Path``) in a
    folder that exists, not a folder itself. Checked before any row is read, so the mistake
    is said as what to pass, not met as a TypeError or an OSError of the write."""
    given = path_given(path, what, example)
    out = Path(given)
    if out.is_dir():
        raise PlayDefinitionError(
            f"{what}({given!r}): that is a folder; give the path of a file in it, e.g. "
            f"{what}({str(out / example)!r})."
        )
    folder = out.parent
    if not folder.is_dir():
        raise PlayDefinitionError(
            f"{what}({given!r}): the folder {str(folder)!r} does not exist; create it first "
            "or give a path in a folder that does."
        )
    return out


class _Table:
    """A dataset's rows as a table: columns with ``fields=`` spread into their fields (and,
    with ``flatten``, every dict value), each row holding every column in order. It can be
    read more than once (Parquet reads twice); each pass reads the store."""

    def __init__(self, rows: Dataset, fields: dict[str, tuple[str, ...]], flatten: bool) -> None:
        self._rows = rows
        self._fields = fields
        self._flatten = flatten
        self.columns = spread_columns(rows, fields, flatten=flatten)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for row in self._rows:
            flat = spread(row, self._fields, flatten=self._flatten)
            yield {name: flat.get(name) for name in self.columns}


def revive(store: Store, output: Any) -> Any:
    """A stored output back as the play returned it: a dataset reference as a ``Dataset``."""
    if isinstance(output, dict) and "$dataset" in output and "run_id" in output:
        return Dataset(
            store, output["run_id"], output["$dataset"], DatasetStats(rows=output["rows"])
        )
    return output


def _check_when(when: Any, what: str) -> None:
    """``when=`` is a plain function of the row: an async one's coroutine is always true, so
    every row would run (and pay for) the column it was meant to skip."""
    check_args(when, 1, what, "fn(row) returning True or False")
    if inspect.iscoroutinefunction(when) or inspect.iscoroutinefunction(
        getattr(when, "__call__", None)  # noqa: B004 (an instance with an async __call__)
    ):
        raise PlayDefinitionError(
            f"{what} is an async function: a condition is decided from the row alone. Compute "
            "what it needs in a column before it (a column may call tools), then e.g. "
            "when=lambda row: row['domain_ok']."
        )
