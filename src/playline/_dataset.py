"""Datasets: a table mapped column by column, rows streaming through a bounded window."""

from __future__ import annotations

import asyncio
import contextvars
import csv
import inspect
import itertools
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from ._events import preview
from ._rows import KeySpec, as_row, row_key_function
from ._scope import RowScope, current_row
from ._taskgroups import unwrapped
from .errors import PlayDefinitionError, PlaylineError, ToolError
from .store import RowRecord, Store
from .tools import ToolResult

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["CellError", "Dataset", "DatasetBuilder", "DatasetStats", "RowFailed"]

OnRowError = Literal["record", "raise"]
_WRITE_EVERY = 1000


class RowFailed(PlaylineError):
    """A row failed and the dataset was run with ``on_row_error="raise"``."""

    def __init__(self, dataset: str, row_key: str, column: str, error: BaseException) -> None:
        self.dataset = dataset
        self.row_key = row_key
        self.column = column
        super().__init__(
            f"Dataset {dataset!r}, row {row_key!r}, column {column!r} failed: {error}. "
            'Use on_row_error="record" to record failed rows and let the others finish.'
        )


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    resolver: Callable[..., Any]
    takes_ctx: bool
    when: Callable[[Mapping[str, Any]], Any] | None
    else_value: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class CellError:
    row_key: str
    column: str
    message: str
    tool: str | None = None
    status: int | None = None
    code: str | None = None
    request_id: str | None = None


@dataclass(kw_only=True)
class DatasetStats:
    rows: int = 0
    rows_executed: int = 0
    rows_reused: int = 0
    rows_failed: int = 0
    rows_duplicate: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def _arity(fn: Callable[..., Any], what: str) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if any(p.kind is p.VAR_POSITIONAL for p in params) or len(positional) >= 2 > len(required):
        return 2
    if len(required) in (1, 2):
        return len(required)
    raise PlayDefinitionError(
        f"{what} must take (row) or (row, ctx); it takes {len(required)} arguments."
    )


class DatasetBuilder:
    """What ``ctx.dataset(...)`` returns: add columns with ``with_column``, then ``run``."""

    def __init__(
        self,
        runtime: Runtime,
        name: str,
        rows: Iterable[Any],
        key: KeySpec,
        columns: tuple[Column, ...] = (),
    ) -> None:
        self._runtime = runtime
        self.name = name
        self._rows = rows
        self._key = key
        self._columns = columns

    def with_column(
        self,
        name: str,
        resolver: Callable[..., Any],
        *,
        when: Callable[[Mapping[str, Any]], Any] | None = None,
        else_value: Any = None,
    ) -> DatasetBuilder:
        """Add a column computed by ``resolver(row)`` or ``resolver(row, ctx)``."""
        where = f"Dataset {self.name!r}"
        if not isinstance(name, str) or not name:
            raise PlayDefinitionError(f"{where}: with_column needs a non-empty column name.")
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
        if when is not None and not callable(when):
            raise PlayDefinitionError(f"{where}, column {name!r}: when= must be fn(row).")
        column = Column(
            name=name,
            resolver=resolver,
            takes_ctx=_arity(resolver, f"{where}, column {name!r}: the resolver") == 2,
            when=when,
            else_value=else_value,
        )
        return DatasetBuilder(
            self._runtime, self.name, self._rows, self._key, (*self._columns, column)
        )

    async def run(
        self, *, description: str | None = None, on_row_error: OnRowError = "record"
    ) -> Dataset:
        """Run every row through the columns; returns the finished ``Dataset``."""
        if on_row_error not in ("record", "raise"):
            raise PlayDefinitionError(
                f'on_row_error={on_row_error!r}: use "record" (keep going) or "raise".'
            )
        if current_row.get() is not None:
            raise PlayDefinitionError(
                f"Dataset {self.name!r} was started inside a column. Datasets cannot be "
                "nested: flatten the work into columns of one dataset, or run it before."
            )
        self._runtime.claim_dataset_name(self.name)
        run = _DatasetRun(self._runtime, self.name, self._columns, self._key, on_row_error)
        return await run.execute(self._rows, description)


class _DatasetRun:
    """One execution of a dataset: feeds rows through the window and records them."""

    def __init__(
        self,
        runtime: Runtime,
        name: str,
        columns: tuple[Column, ...],
        key: KeySpec,
        on_row_error: OnRowError,
    ) -> None:
        self.rt = runtime
        self.name = name
        self.columns = columns
        self.on_row_error = on_row_error
        self.key_of = row_key_function(name, key, [c.name for c in columns])
        self.stats = DatasetStats()
        self._pending_writes: list[RowRecord] = []
        self._window = asyncio.Semaphore(runtime.row_window)

    async def execute(self, items: Iterable[Any], description: str | None) -> Dataset:
        rt = self.rt
        rt.events.emit(
            "dataset",
            dataset=self.name,
            status="running",
            data={"description": description, "columns": [c.name for c in self.columns]},
        )
        seen: set[str] = set()
        try:
            async with unwrapped(), asyncio.TaskGroup() as tg:
                for chunk in _chunks(_keyed(items, self.key_of), rt.row_window):
                    fresh = []
                    for index, key, row in chunk:
                        if key in seen:
                            self.stats.rows_duplicate += 1
                            continue
                        seen.add(key)
                        fresh.append((index, key, row))
                    done = (
                        rt.store.load_rows(rt.run_id, self.name, [k for _, k, _ in fresh])
                        if rt.resuming
                        else {}
                    )
                    for index, key, row in fresh:
                        self.stats.rows += 1
                        if key in done and done[key].status == "completed":
                            self.stats.rows_reused += 1
                            continue
                        await self._start(tg, index, key, row)
        finally:
            self._write(force=True)
        if self.stats.rows_duplicate:
            rt.events.log(
                f"Dataset {self.name!r}: {self.stats.rows_duplicate} duplicate keys skipped."
            )
        rt.events.emit("dataset", dataset=self.name, status="completed", data=self.stats.to_dict())
        rt.dataset_finished(self.name, self.stats)
        return Dataset(rt.store, rt.run_id, self.name, self.stats)

    async def _start(
        self, tg: asyncio.TaskGroup, index: int, key: str, row: dict[str, Any]
    ) -> None:
        scope = RowScope(dataset=self.name, row_key=key)
        cells: dict[str, dict[str, Any]] = {}
        self.stats.rows_executed += 1
        token = current_row.set(scope)
        try:
            rest = self._run_sync(scope, row, cells)
        finally:
            current_row.reset(token)
        if rest is None:
            self._finish(index, scope, row, cells)
            return
        await self._window.acquire()
        self.rt.dispatcher.enter_row()
        context = contextvars.copy_context()
        context.run(current_row.set, scope)
        tg.create_task(self._run_async(index, scope, row, cells, *rest), context=context)

    def _run_sync(
        self, scope: RowScope, row: dict[str, Any], cells: dict[str, dict[str, Any]]
    ) -> tuple[int, Awaitable[Any]] | None:
        """Run columns in this call while they return plain values (the fast path).

        Returns where to go on asynchronously when a resolver returned an awaitable.
        """
        view = MappingProxyType(row)
        for position, column in enumerate(self.columns):
            scope.column = column.name
            try:
                if not self._guard(scope.row_key, column, row, view, cells):
                    continue
                value = self._resolve(column, view)
            except Exception as exc:
                self._failed(scope, column, row, cells, exc)
                return None
            if inspect.isawaitable(value):
                return position, value
            self._set(scope, column, row, cells, value)
        return None

    def _guard(
        self,
        row_key: str,
        column: Column,
        row: dict[str, Any],
        view: Mapping[str, Any],
        cells: dict[str, dict[str, Any]],
    ) -> bool:
        """Whether the column runs for this row; if not, its cell is skipped."""
        if column.when is None or column.when(view):
            return True
        row[column.name] = column.else_value
        cells[column.name] = {"status": "skipped", "updated_at": self.rt.clock.now()}
        if not column.name.startswith("_"):
            self.rt.events.emit(
                "cell", dataset=self.name, row_key=row_key, column=column.name, status="skipped"
            )
        return False

    async def _run_async(
        self,
        index: int,
        scope: RowScope,
        row: dict[str, Any],
        cells: dict[str, dict[str, Any]],
        position: int,
        first: Awaitable[Any],
    ) -> None:
        view = MappingProxyType(row)
        pending: Awaitable[Any] | None = first  # the awaitable the fast path stopped at
        finished = False  # a row stopped by the run's end (a budget, a cancel) stays pending
        try:
            for column in self.columns[position:]:
                scope.column = column.name
                try:
                    if pending is None and not self._guard(scope.row_key, column, row, view, cells):
                        continue
                    if not column.name.startswith("_"):
                        self.rt.events.emit(
                            "cell",
                            dataset=self.name,
                            row_key=scope.row_key,
                            column=column.name,
                            status="running",
                        )
                    value = pending if pending is not None else self._resolve(column, view)
                    pending = None
                    if inspect.isawaitable(value):
                        value = await value
                except Exception as exc:
                    self._failed(scope, column, row, cells, exc)
                    break
                self._set(scope, column, row, cells, value)
            finished = True
        finally:
            self.rt.dispatcher.exit_row()
            self._window.release()
            if finished:
                self._finish(index, scope, row, cells)

    def _resolve(self, column: Column, view: Mapping[str, Any]) -> Any:
        return column.resolver(view, self.rt.ctx) if column.takes_ctx else column.resolver(view)

    def _set(
        self,
        scope: RowScope,
        column: Column,
        row: dict[str, Any],
        cells: dict[str, dict[str, Any]],
        value: Any,
    ) -> None:
        results, scope.results = scope.results, []
        if isinstance(value, ToolResult) and not any(r is value for r in results):
            results.append(value)  # a result the resolver got without ctx.tool in this row
        meta: dict[str, Any]
        if results:
            cost = sum(r.cost for r in results)
            if isinstance(value, ToolResult) and not value.found:
                status = "not_found"
            elif all(r.execution.cached for r in results):
                status = "cached"
            else:
                status = "completed"
            meta = {"status": status, "provider": results[-1].tool}
            if cost:
                meta["cost"] = cost
        else:
            meta = {"status": "completed"}
        meta["updated_at"] = self.rt.clock.now()
        row[column.name] = value
        cells[column.name] = meta
        if not column.name.startswith("_"):
            self.rt.events.emit(
                "cell",
                dataset=self.name,
                row_key=scope.row_key,
                column=column.name,
                status=meta["status"],
                provider=meta.get("provider"),
                preview=preview(value),
            )

    def _failed(
        self,
        scope: RowScope,
        column: Column,
        row: dict[str, Any],
        cells: dict[str, dict[str, Any]],
        error: Exception,
    ) -> None:
        """Record a failed cell; raise when the error must stop the run."""
        scope.results = []
        if isinstance(error, PlaylineError) and not isinstance(error, ToolError):
            raise error  # budgets, governance and misuse stop the run whatever on_row_error says
        if self.on_row_error == "raise":
            raise RowFailed(self.name, scope.row_key, column.name, error) from error
        meta: dict[str, Any] = {
            "status": "failed",
            "error": str(error) or type(error).__name__,
            "updated_at": self.rt.clock.now(),
        }
        if isinstance(error, ToolError):
            meta.update(
                tool=error.tool,
                provider=error.tool,
                http_status=error.status,
                code=error.code,
                request_id=error.request_id,
            )
        row[column.name] = None
        cells[column.name] = meta
        scope.column = None
        self.rt.events.emit(
            "cell",
            dataset=self.name,
            row_key=scope.row_key,
            column=column.name,
            status="failed",
            provider=meta.get("provider"),
            error=meta["error"],
        )

    def _finish(
        self, index: int, scope: RowScope, row: dict[str, Any], cells: dict[str, dict[str, Any]]
    ) -> None:
        failed = next((c for c, m in cells.items() if m["status"] == "failed"), None)
        status = "failed" if failed else "completed"
        if failed:
            self.stats.rows_failed += 1
        values = {k: _plain(v) for k, v in row.items() if not k.startswith("_")}
        self._pending_writes.append(
            RowRecord(
                run_id=self.rt.run_id,
                dataset=self.name,
                key=scope.row_key,
                index=index,
                status=status,
                values=values,
                cells={c: m for c, m in cells.items() if not c.startswith("_")},
                error=cells[failed]["error"] if failed else None,
                updated_at=self.rt.clock.now(),
            )
        )
        self.rt.events.emit("row", dataset=self.name, row_key=scope.row_key, status=status)
        self._write()

    def _write(self, *, force: bool = False) -> None:
        if self._pending_writes and (force or len(self._pending_writes) >= _WRITE_EVERY):
            rows, self._pending_writes = self._pending_writes, []
            self.rt.store.save_rows(rows)


def _plain(value: Any) -> Any:
    """A cell value as stored and exported: a tool result is its data."""
    return value.data if isinstance(value, ToolResult) else value


def _keyed(
    items: Iterable[Any], key_of: Callable[[dict[str, Any], int], str]
) -> Iterator[tuple[int, str, dict[str, Any]]]:
    for index, item in enumerate(items):
        row = as_row(item)
        yield index, key_of(row, index), row


def _chunks(items: Iterator[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


@dataclass
class Dataset:
    """A finished dataset, read from the store: iterate it for its rows (hidden columns left
    out), or use ``to_list()``, ``to_csv(path)``, ``errors`` and ``stats``."""

    store: Store = field(repr=False)
    run_id: str
    name: str
    stats: DatasetStats

    def __len__(self) -> int:
        return self.stats.rows

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for record in self.store.iter_rows(self.run_id, self.name):
            yield record.values

    def to_list(self) -> list[dict[str, Any]]:
        return list(self)

    @property
    def errors(self) -> list[CellError]:
        """The failed cells, each with its row key, column and message (and tool details)."""
        found = []
        for record in self.store.iter_rows(self.run_id, self.name):
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

    def to_csv(self, path: str | Path) -> Path:
        """Write the rows as CSV (nested values as JSON); returns the path."""
        from ._json import canonical

        out = Path(path)
        rows = iter(self)
        first = next(rows, None)
        with out.open("w", newline="", encoding="utf-8") as handle:
            if first is None:
                return out
            fields = list(first)
            writer = csv.DictWriter(handle, fieldnames=fields, extrasaction="ignore")
            writer.writeheader()
            for row in itertools.chain([first], rows):
                writer.writerow(
                    {
                        k: v if v is None or isinstance(v, str | int | float) else canonical(v)
                        for k, v in row.items()
                    }
                )
        return out
