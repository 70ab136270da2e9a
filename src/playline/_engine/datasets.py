"""How a dataset's rows run: streamed through a bounded window, column by column.

A row runs its columns in one synchronous step for as long as resolvers return plain values
(the fast path: no task, no coroutine). When a resolver returns a queued tool call (a
future), the row parks on that future; the rows whose calls settle in one turn of the loop
(a wave's answers) then go on together, as a group (``_go_on``). Any other awaitable (an
``async def`` resolver) gets a task. So a million pure rows cost a loop, and a row waiting
on a batched call costs neither a task nor a callback of its own.

Rows run one way: as a group, possibly of one (``_run``). A cell is set one way (``_set``),
and rows are recorded one way (``_record``). Cells set in one pass that say the same share
one metadata dict, so rows recorded together encode their cells once, as one page.

Events: each cell's final status is reported once. Cells set in the step that finishes their
row ride in the row's event (``data["cells"]``): nobody could have seen them change apart.
Cells set before the row parks on a call get a cell event each when it parks. What is queued
and sent is reported per batch (``batch`` events), not per cell: one event per row, not three,
is what keeps a 100,000-row run cheap to watch and to store.

Retrying failed rows (``retry_failed``, ``playline resume --retry-failed``): a resumed row that
failed before starts from its stored row: the cells before its first failed (or hidden) column
are kept as stored, tool results as the results they were, and the row goes on from there.

A cell's value is stored only up to ``cell_limit`` bytes (as JSON); a larger one fails that
cell, naming its size, and the row's other cells are kept.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import math
import operator
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from types import GeneratorType
from typing import Any, Literal, Protocol

from .._clock import Clock
from .._json import digest, dumps
from .._secrets import leaks, redact, storable_text
from ..errors import (
    BudgetExceeded,
    EventTimeout,
    LlmAnswerError,
    PlayDefinitionError,
    PlaylineError,
    RowFailed,
    SecretLeakError,
    ToolError,
)
from ..store import CellMeta, RowPage, RowRecord, Store, StoreIO
from ..tools import ToolResult
from .calls import CallExecutor, ToolCall, too_large
from .dispatch import Dispatcher
from .events import EventLog, error_text, preview
from .options import RunOptions
from .previous import EarlierRows, PreviousCell, previous_cell
from .rows import DatasetKey, RowKeys
from .scope import RowScope, current_row
from .suspension import Suspension
from .taskgroups import unwrapped

__all__ = ["Column", "DatasetHost", "DatasetMode", "DatasetRun", "DatasetStats", "OnRowError"]

OnRowError = Literal["record", "raise"]
DatasetMode = Literal["all", "net_new"]
# keys refused: (recorded as, why, what to do)
_SECRET_KEY = (
    "secret",
    "holds a secret read with ctx.secrets",
    "Give the dataset a key= without secrets.",
)
_NUL_KEY = (
    "nul",
    "holds a NUL character (U+0000)",
    "Clean the key column, or choose another key=.",
)
_HALF_KEY = (
    "half",
    "holds half a character (a lone UTF-16 surrogate, as a broken decode leaves)",
    "Decode the key column again, or choose another key=.",
)
# Playline errors that belong to one row (its cell fails); any other stops the run. A cell that
# tries to leak a secret (a log line, str() of it) fails as a cell that returns one does.
ROW_ERRORS = (ToolError, EventTimeout, SecretLeakError)
_WRITE_EVERY = 1000
_WRITE_BACKLOG = 4 * _WRITE_EVERY  # finished rows that may wait for a write
WRITE_AFTER = 1.0  # seconds a finished row may wait for fewer than _WRITE_EVERY others
ROWS_PER_EVENT = 500  # completed rows reported in one "rows" event
REPORT_AFTER = 0.05  # seconds a completed row may wait to be reported with others


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    resolver: Callable[..., Any]
    takes_ctx: bool
    when: Callable[[Mapping[str, Any]], Any] | None
    else_value: Any
    # when a cell an earlier run stored is computed again (``_keeps``): older than
    # ``stale_after`` seconds, ``recompute(previous)`` true, failed and ``recompute_on_error``
    stale_after: float | None = None
    recompute: Callable[[PreviousCell], Any] | None = None
    recompute_on_error: bool = False
    # the fields a dict result is shown as (``company.name`` ...): a view, recorded in the
    # dataset's start event for exports and displays; the cell stores the whole result
    fields: tuple[str, ...] | None = None
    hidden: bool = field(init=False)  # not stored: its name starts with "_"
    fresh: bool = field(init=False)  # it keeps earlier runs' cells until they are due

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden", self.name.startswith("_"))
        fresh = self.stale_after is not None or self.recompute is not None
        object.__setattr__(self, "fresh", fresh or self.recompute_on_error)


@dataclass(kw_only=True)
class DatasetStats:
    """A dataset's rows: seen, executed (started), reused from an earlier attempt, failed,
    duplicates skipped, waiting for an event or a time, and pending: seen but not finished
    when the run stopped (a budget, a stop), started or not. ``rows_set_aside``: left out for
    having no key (``on_bad_key="skip"``, not counted in ``rows``). ``rows_seen``: skipped
    because an earlier run completed them (``mode="net_new"``, not counted in ``rows``);
    ``cells_kept`` and ``cells_recomputed``: cells of columns that say when to recompute, kept
    as an earlier run stored them, or computed again."""

    rows: int = 0
    rows_executed: int = 0
    rows_reused: int = 0
    rows_failed: int = 0
    rows_duplicate: int = 0
    rows_waiting: int = 0
    rows_pending: int = 0
    rows_seen: int = 0
    rows_set_aside: int = 0
    cells_kept: int = 0
    cells_recomputed: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class DatasetHost(Protocol):
    """What a dataset needs of its attempt."""

    events: EventLog
    dispatcher: Dispatcher
    executor: CallExecutor
    ctx: object  # the play's context, handed to resolvers that take it
    # why cells failed other than a tool's failure (a resolver's error): by "KeyError in
    # column 'email'", its count and the first message
    cell_errors: dict[str, tuple[int, str]]

    @property
    def run_id(self) -> str: ...
    @property
    def play_name(self) -> str: ...
    @property
    def store(self) -> Store: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def options(self) -> RunOptions:
        """Its row_window, retry_failed and cell_limit shape the rows."""
        ...

    @property
    def resuming(self) -> bool: ...

    def stored_result(self, tool: str | None, data: Any) -> ToolResult: ...

    def reused_row(self, record: RowRecord) -> None:
        """A row completed in an earlier attempt is reused as stored (its waterfalls count)."""
        ...


class DatasetRun:
    """One execution of a dataset: feeds rows through the window and records them."""

    def __init__(
        self,
        host: DatasetHost,
        name: str,
        columns: tuple[Column, ...],
        key: DatasetKey,
        on_row_error: OnRowError,
        mode: DatasetMode = "all",
    ) -> None:
        self.rt = host
        self._writer = _RowWriter(StoreIO(host.store), self._abort)
        self.name = name
        self.columns = columns
        self.on_row_error = on_row_error
        self.keys = RowKeys(name, key, [c.name for c in columns], host.events.log)
        self.stats = DatasetStats()
        self._active = 0  # rows started and not finished
        self._wakeup: asyncio.Future[None] | None = None
        self._fatal: BaseException | None = None
        self._waits: list[Suspension] = []
        self._tasks: asyncio.TaskGroup | None = None
        self._hidden = frozenset(c.name for c in columns if c.hidden)  # not stored
        self._budget: BudgetExceeded | None = None  # the budget stopped rows of this dataset
        self._pending = 0  # rows stopped by it, left for a resume
        self._done = _Completed(host.events, name)  # completed rows not yet reported
        self._restart: dict[str, RowRecord] = {}  # failed rows that go on from their stored row
        # what earlier runs of the play stored for these rows, read when the dataset skips
        # what they completed (net_new) or a column keeps their cells until due
        self._earlier = None
        if mode == "net_new" or any(c.fresh for c in columns):
            self._earlier = EarlierRows(
                host.store,
                self._writer.io,
                play=host.play_name,
                dataset=name,
                run_id=host.run_id,
                net_new=mode == "net_new",
            )
        # rows whose calls settled, to go on together (_go_on), in the dataset's own context
        self._arrivals: list[tuple[RowScope, int, asyncio.Future[Any]]] = []
        self._context = contextvars.copy_context()

    async def execute(
        self, items: Iterable[Any], description: str | None, total: int | None = None
    ) -> DatasetStats:
        """Run every row; ``total`` is how many rows the input holds, when known (progress
        displays show it)."""
        rt = self.rt
        if rt.resuming:
            await self._check_same_columns()
        rt.events.emit(
            "dataset",
            dataset=self.name,
            status="running",
            data={
                "description": description,
                "columns": [c.name for c in self.columns],
                "fields": {c.name: list(c.fields) for c in self.columns if c.fields},
                "total": total,
            },
        )
        try:
            await self._feed(items)
        except BaseException as error:  # the dataset ends early: its end is reported all the same
            self._report_end(error)
            raise
        if self.stats.rows_duplicate:
            rt.events.log(
                f"Dataset {self.name!r}: {self.stats.rows_duplicate} duplicate keys skipped."
            )
        if (aside := self.keys.summary()) is not None:
            rt.events.log(aside)
        rt.events.emit("dataset", dataset=self.name, status="completed", data=self._counts())
        return self.stats

    def _counts(self) -> dict[str, Any]:
        """What the dataset's end event says: its counts, and the rows it set aside."""
        return {**self.stats.to_dict(), **self.keys.report()}

    def _report_end(self, error: BaseException) -> None:
        """How a dataset that did not complete ended, with its counts (rows pending included):
        ``stopped`` by the budget or a stop (its rows go on in a resume), ``failed`` by an
        error that stops the run. Rows waiting for an event or a time said so already. Without
        this, a run the budget stopped had its datasets shown ``running`` for good."""
        if isinstance(error, Suspension) and self._waits:
            return  # reported "waiting"
        if isinstance(error, BudgetExceeded | asyncio.CancelledError | Suspension):
            status = "stopped"
            message = str(error) if isinstance(error, BudgetExceeded) else None
        else:
            status, message = "failed", error_text(error)  # as the run's error says it
        self.rt.events.emit(
            "dataset",
            dataset=self.name,
            status=status,
            error=message,
            data=self._counts(),
        )

    async def _check_same_columns(self) -> None:
        """A resume of a play that gained a column since an earlier attempt ran this dataset
        is refused: the rows that attempt completed are reused as stored, without it, so the
        dataset would be half with and half without it."""
        rt = self.rt
        events = await self._writer.io(rt.store.read_events, rt.run_id, kinds=["dataset"])
        earlier: list[str] | None = None
        for event in events:
            if event.dataset == self.name and event.status == "running":
                earlier = list((event.data or {}).get("columns") or ())
        if earlier is None:
            return
        new = [c.name for c in self.columns if not c.hidden and c.name not in earlier]
        if new:
            raise PlayDefinitionError(
                f"Dataset {self.name!r}: the play changed since this run started: column(s) "
                f"{', '.join(map(repr, new))} are new, and the rows an earlier attempt "
                "completed are reused as stored, without them. Start a new run instead "
                "(receipts answer every call this one bought: only the new columns are paid "
                "for), or resume with the play as it was."
            )

    async def _feed(self, items: Iterable[Any]) -> None:
        """Feed every row through the window and wait for the last; raise what stops them
        (the budget, an error, the wait of rows for an event or a time)."""
        rt = self.rt
        # The feeder counts as a busy row while it admits rows, so the dispatcher does not
        # flush a batch of one for each row it starts.
        rt.dispatcher.enter_row()
        feeding = True
        try:
            async with unwrapped(), asyncio.TaskGroup() as tasks:
                self._tasks = tasks
                seen: set[str] = set()
                for chunk in _chunks(self.keys.rows(items), rt.options.row_window):
                    if self._over_budget():  # the rest wait for a resume
                        self._pending += len(chunk)
                        continue
                    await self._feed_chunk(chunk, seen)
                    await self._keep_up()
                feeding = False
                rt.dispatcher.exit_row()
                await self._until(lambda: self._active == 0)
                self._check_fatal()
            if self._budget is not None:  # the rows paid for are kept; the rest wait
                raise self._budget
            if self._waits:  # every other row is done: the run waits once, for all of them
                rt.events.emit(
                    "dataset", dataset=self.name, status="waiting", data=self.stats.to_dict()
                )
                raise Suspension.merge(self._waits)
        finally:
            if feeding:
                rt.dispatcher.exit_row()
            self.stats.rows_pending = self._active + self._pending  # left for a resume
            self.stats.rows_set_aside = self.keys.set_aside  # no key (on_bad_key="skip")
            self._done.report()
            await self._flush()

    async def _feed_chunk(
        self, chunk: list[tuple[int, str, dict[str, Any]]], seen: set[str]
    ) -> None:
        """Start a chunk's rows (not those ``seen`` before) as the window makes room."""
        rt = self.rt
        fresh = []
        for row in chunk:
            if row[1] not in seen:
                seen.add(row[1])
                fresh.append(row)
        self.stats.rows_duplicate += len(chunk) - len(fresh)
        done = (
            await self._writer.io(
                rt.store.load_rows, rt.run_id, self.name, [k for _, k, _ in fresh]
            )
            if rt.resuming
            else {}
        )
        if self._earlier is not None:
            fresh = await self._look_back(fresh, done)
        todo = self._admit(fresh, done)
        try:
            while todo and not self._over_budget():
                room = rt.options.row_window - self._active
                if room <= 0:
                    rt.dispatcher.exit_row()
                    # refill in bulk: rows admitted together queue their calls
                    # together, so the next pass is big, not one call per row
                    await self._until(lambda: self._active <= rt.options.row_window // 2)
                    rt.dispatcher.enter_row()
                    self._check_fatal()  # _until returns at once after a fatal error
                    continue
                self._check_fatal()
                group, todo = todo[:room], todo[room:]
                self._start(group)
                self._check_fatal()
        finally:  # rows admitted, not started (the budget, a stop, an error): a resume runs them
            self._pending += len(todo)

    async def _look_back(
        self, fresh: list[tuple[int, str, dict[str, Any]]], done: dict[str, RowRecord]
    ) -> list[tuple[int, str, dict[str, Any]]]:
        """What earlier runs stored for the rows of ``fresh`` this run has not stored
        (``done``): each row's previous row, kept for its columns, and in ``net_new`` mode the
        rows an earlier run completed, left out (counted as seen)."""
        assert self._earlier is not None
        seen = await self._earlier.look_up([key for _, key, _ in fresh if key not in done])
        if seen:
            self.stats.rows_seen += len(seen)
            fresh = [row for row in fresh if row[1] not in seen]
        return fresh

    def _admit(
        self, fresh: list[tuple[int, str, dict[str, Any]]], done: dict[str, RowRecord]
    ) -> list[tuple[int, str, dict[str, Any]]]:
        """The rows of ``fresh`` to run: not those an earlier attempt completed (reused), nor
        those whose keys cannot be stored (failed here). ``done``: the stored rows."""
        self.stats.rows += len(fresh)
        keys = "".join(map(_key, fresh))
        if not done and "\x00" not in keys and _whole(keys) and not leaks(keys):
            return fresh  # a new run's rows, none refused: the common case, checked at once
        todo = []
        for index, key, values in fresh:
            if key in done and done[key].status == "completed":
                self.stats.rows_reused += 1
                self.rt.reused_row(done[key])
            elif leaks(key):
                self._refuse_row(index, key, *_SECRET_KEY)
            elif "\x00" in key:
                self._refuse_row(index, key, *_NUL_KEY)
            elif not _whole(key):
                self._refuse_row(index, key, *_HALF_KEY)
            else:
                if self.rt.options.retry_failed and key in done and done[key].status == "failed":
                    self._restart[key] = done[key]
                todo.append((index, key, values))
        return todo

    async def _keep_up(self) -> None:
        """Between chunks: give the writers their turn and wait for them when they fall behind.

        Rows that finish in one synchronous step (pure columns) never make the feeder wait, so
        without this a million rows would be computed before the first one is written: memory
        would hold them all and the writes would not overlap the work.
        """
        await self._writer.keep_up()
        await self.rt.events.keep_up()

    def _over_budget(self) -> bool:
        """Whether the budget stopped rows of this dataset (it can happen at any await)."""
        return self._budget is not None

    # waiting for rows, without polling
    async def _until(self, ready: Callable[[], bool]) -> None:
        while not ready() and self._fatal is None:
            self._wakeup = asyncio.get_running_loop().create_future()
            await self._wakeup

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def _check_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    def _abort(self, error: BaseException) -> None:
        """An error that stops the run, raised where no caller can take it (a callback)."""
        if self._fatal is None:
            self._fatal = error
        self._wake()

    # rows
    def _start(self, group: list[tuple[int, str, dict[str, Any]]]) -> None:
        """Run a group of rows column by column (``_run``)."""
        self.stats.rows_executed += len(group)
        self._active += len(group)
        self.rt.dispatcher.enter_rows(len(group))
        name = self.name
        live = [RowScope(dataset=name, row_key=k, index=i, values=v) for i, k, v in group]
        if self._earlier is not None:
            for row in live:
                row.view.previous_row = self._earlier.previous.pop(row.row_key, None)
        if self._restart:
            live = [row for row in live if not self._restarted(row)]
        self._run(live, 0)

    def _run(self, live: list[RowScope], start: int) -> None:
        """Run ``live`` rows column by column from column ``start``: a column's resolver for
        every row, then the next column. A group may be of one row.

        A row whose resolver returns something to wait for (a queued tool call, a coroutine)
        leaves the group there; it goes on with the rows whose calls settle in the same turn
        of the loop (``_go_on``). A row whose cell fails is finished alone. The rows that
        never wait finish together, recorded and reported at once."""
        for position in range(start, len(self.columns)):
            if not live:
                return
            live = self._column(live, position)
        if live:
            self._record(live)
            self._finished(len(live))

    def _column(self, live: list[RowScope], position: int) -> list[RowScope]:
        """Run column ``position`` for every row of ``live``; return the rows that go on."""
        ctx, now = self.rt.ctx, self.rt.clock.now()
        column = self.columns[position]
        name, resolver, when = column.name, column.resolver, column.when
        takes_ctx, visible, fresh = column.takes_ctx, not column.hidden, column.fresh
        # the pass's cells that say the same share one metadata dict (see _set)
        metas: dict[tuple[Any, ...], CellMeta] = {}
        plain = metas[_PLAIN_CELL] = {"status": "completed", "updated_at": now}
        still: list[RowScope] = []
        # the calls a resolver makes are collected in ``made`` (one list lent to each row
        # in turn, replaced once used); the rows whose cell is their one call go to
        # ``looked``, whose receipts are looked up together (``_look_up``)
        made: list[ToolCall] | None = [] if self.rt.executor.answers_groups else None
        looked: list[tuple[RowScope, ToolCall]] = []
        for row in live:
            token = current_row.set(row)
            try:
                row.column = name
                row.fresh_since = None  # a column that says when to recompute sets its own
                try:
                    if when is not None and not self._runs(row, column, now, metas):
                        still.append(row)
                        continue
                    if fresh and self._keeps(row, column, now, still):
                        continue
                    row.made = made
                    value = resolver(row.view, ctx) if takes_ctx else resolver(row.view)
                except Exception as exc:
                    if made:  # sent as made, though the row failed
                        self._queue(row, made)
                        made = []
                    if self._failed(row, column, exc):
                        self._finish(row)
                    continue
                finally:
                    row.made = None
                if made:
                    calls, made = made, []
                    if len(calls) == 1 and value is calls[0].future:
                        looked.append((row, calls[0]))
                        continue
                    self._queue(row, calls)
                if type(value) not in _PLAIN and _awaitable(value):
                    self._park(row, position, value)
                    continue
                if row.results or row.notes or type(value) is ToolResult:
                    self._set(row, column, value, now, metas)
                else:  # a plain value: the common case, kept lean
                    row.values[name] = value
                    row.cells[name] = plain
                    if visible:
                        row.unreported.append(name)
                still.append(row)
            finally:
                current_row.reset(token)
        if looked:
            self._look_up(position, looked)
        return still

    # a group's calls, looked up in the receipts before any is queued
    def _queue(self, row: RowScope, calls: list[ToolCall]) -> None:
        for call in calls:
            self.rt.dispatcher.submit(call, row)

    def _look_up(self, position: int, looked: list[tuple[RowScope, ToolCall]]) -> None:
        """The rows whose cell of column ``position`` is the one call they made: their
        receipts are looked up together (``_answer``); meanwhile they wait as rows whose
        calls are queued do (the dispatcher does not wait for them)."""
        assert self._tasks is not None
        answering = self._answer(position, looked)
        try:
            self._tasks.create_task(answering)
        except BaseException:  # the group is shutting down: the rows stay pending
            answering.close()
            raise
        self.rt.dispatcher.hold_rows(len(looked))

    async def _answer(self, position: int, looked: list[tuple[RowScope, ToolCall]]) -> None:
        """The rows whose calls receipts answer go on together from the next column; the
        others' calls are queued, and each row waits for its own (``_park``)."""
        try:
            try:
                await self.rt.executor.answer([call for _, call in looked])
            finally:
                self.rt.dispatcher.release_rows(len(looked))
            column, now = self.columns[position], self.rt.clock.now()
            metas: dict[tuple[Any, ...], CellMeta] = {}
            answered: list[RowScope] = []
            for row, call in looked:
                if call.future.done():
                    self._set(row, column, call.future.result(), now, metas)
                    answered.append(row)
                else:
                    self._park(row, position, self.rt.dispatcher.submit(call, row))
            self._run(answered, position + 1)
        except asyncio.CancelledError:
            raise  # the run is stopping: the rows stay pending for a resume
        except BaseException as exc:
            self._abort(exc)

    def _restarted(self, row: RowScope) -> bool:
        """A failed row being retried goes on alone from its stored row; False for others."""
        stored = self._restart.pop(row.row_key, None)
        if stored is None:
            return False
        start = len(self.columns)
        for position, column in enumerate(self.columns):
            meta = stored.cells.get(column.name)
            if column.hidden or meta is None or meta.get("status") == "failed":
                start = position  # hidden values are not stored: run from there
                break
            value = stored.values.get(column.name)
            if meta.get("result"):
                value = self.rt.stored_result(meta.get("provider"), value)
            row.keep(column.name, value)
            row.cells[column.name] = meta
        self._run([row], start)
        return True

    def _refuse_row(self, index: int, key: str, kind: str, why: str, fix: str) -> None:
        """A row whose key cannot be stored as it is (it holds a secret, a NUL character,
        which PostgreSQL's text refuses, or half a character, which no store's text keeps)
        fails, recorded under a digest of its key."""
        hidden = f"{kind}-" + digest("row key", key.encode("utf-8", "surrogatepass"))[:16]
        error = f"The key of row {index} {why}, so the row is recorded as {hidden!r}. {fix}"
        self.stats.rows_executed += 1
        self.stats.rows_failed += 1
        self._buffer(
            RowRecord(
                run_id=self.rt.run_id,
                dataset=self.name,
                key=hidden,
                index=index,
                status="failed",
                values={},
                cells={},
                error=error,
                updated_at=self.rt.clock.now(),
            )
        )
        self.rt.events.emit(
            "row", dataset=self.name, row_key=hidden, status="failed", error=error, data={}
        )

    def _park(self, row: RowScope, position: int, value: Any) -> None:
        """The row waits for ``value``; it goes on from ``position`` when that settles."""
        try:
            if row.unreported:
                self._report_cells(row)
        except BaseException:  # the run fails (its events cannot be written): it never runs
            _close(value)
            raise
        if isinstance(value, asyncio.Future):  # a queued tool call: no task needed
            if row.pending == 1 and not value.done():  # most likely its one queued call
                # the dispatcher says when the row's calls have settled, with no callback
                # scheduled on the future (_go_on checks that this one has)
                row.then = functools.partial(self._arrived, row, position, value)
            else:
                value.add_done_callback(functools.partial(self._arrived, row, position))
        else:
            assert self._tasks is not None
            waiting = self._await(row, position, value)
            try:
                task = self._tasks.create_task(waiting)
            except BaseException:  # the group is shutting down: neither will ever run
                waiting.close()
                _close(value)
                raise
            task.add_done_callback(functools.partial(_close_if_cancelled, value))

    def _arrived(self, row: RowScope, position: int, done: asyncio.Future[Any]) -> None:
        """What ``row`` waited on in column ``position`` settled (or the calls it queued,
        see ``_park``): the row goes on with the others that arrive in this turn of the
        loop (``_go_on``)."""
        self._arrivals.append((row, position, done))
        if len(self._arrivals) == 1:
            asyncio.get_running_loop().call_soon(self._go_on, context=self._context)

    def _go_on(self) -> None:
        """The rows whose calls settled since the last turn of the loop go on together: a row
        whose call failed is finished (its cell failed), the others set their cells and run
        their next columns as a group (``_run``), one for each column they waited in."""
        arrivals, self._arrivals = self._arrivals, []
        now = self.rt.clock.now()
        groups: dict[int, tuple[list[RowScope], dict[tuple[Any, ...], CellMeta]]] = {}
        columns, last, group = self.columns, -1, None
        for row, position, done in arrivals:
            if not done.done():  # the row's calls settled, not the future it waits on
                done.add_done_callback(functools.partial(self._arrived, row, position))
                continue
            if done.cancelled():
                continue  # the run is stopping; the row stays pending for a resume
            try:
                error = done.exception()
                if error is None:
                    if position != last:
                        group = groups.get(position)
                        if group is None:
                            group = groups[position] = [], {}
                        last = position
                    assert group is not None
                    self._set(row, columns[position], done.result(), now, group[1])
                    group[0].append(row)
                else:
                    self._fail_row(row, position, error)
            except BaseException as exc:
                self._abort(exc)
        for position, (rows, _) in groups.items():
            try:
                self._run(rows, position + 1)
            except BaseException as exc:
                self._abort(exc)

    async def _await(self, row: RowScope, position: int, awaitable: Awaitable[Any]) -> None:
        token = current_row.set(row)
        try:
            try:
                value = await awaitable
            except Exception as exc:
                self._fail_row(row, position, exc)
            else:
                self._set(row, self.columns[position], value, self.rt.clock.now(), {})
                self._run([row], position + 1)
        except asyncio.CancelledError:
            raise
        except Suspension as waiting:  # only this row waits; the others go on
            self._finish(row, waiting)
        except BaseException as exc:
            self._abort(exc)
        finally:
            current_row.reset(token)

    def _fail_row(self, row: RowScope, position: int, error: BaseException) -> None:
        """What the row waited for in column ``position`` failed: its cell fails."""
        if not isinstance(error, Exception):
            raise error
        if self._failed(row, self.columns[position], error):
            self._finish(row)

    def _runs(
        self,
        row: RowScope,
        column: Column,
        now: float,
        metas: dict[tuple[Any, ...], CellMeta],
    ) -> bool:
        """Whether the column runs for this row; if not, its cell is skipped."""
        if column.when is None:
            return True
        verdict = column.when(row.view)
        if verdict is True or (verdict is not False and _decided(column, verdict)):
            return True
        meta = metas.get(_SKIPPED_CELL)
        if meta is None:
            meta = metas[_SKIPPED_CELL] = {"status": "skipped", "updated_at": now}
        row.keep(column.name, column.else_value)
        row.cells[column.name] = meta
        if not column.hidden:
            row.unreported.append(column.name)
        return False

    def _keeps(self, row: RowScope, column: Column, now: float, still: list[RowScope]) -> bool:
        """Whether the row keeps the cell an earlier run stored for ``column`` (then set
        here, as it was stored, and the row goes on in ``still``, or is finished if the cell
        failed), or computes it again: when it is older than ``stale_after``,
        failed and ``recompute_on_error`` says so, or ``recompute(previous)`` is true. A cell
        computed again for ``stale_after`` buys its calls' receipts older than that again; one
        ``recompute`` asked for buys again those from before the cell it replaces."""
        stored = row.view.previous_row
        stored = stored if isinstance(stored, RowRecord) else None
        previous = previous_cell(stored, column.name, now)
        since = None if column.stale_after is None else now - column.stale_after
        row.fresh_since = since
        if previous is None:
            return False
        if (since is not None and previous.updated_at <= since) or (
            previous.status == "failed" and column.recompute_on_error
        ):
            self.stats.cells_recomputed += 1
            return False
        if column.recompute is not None and column.recompute(previous):
            redo = math.nextafter(previous.updated_at, math.inf)
            row.fresh_since = redo if since is None else max(since, redo)
            self.stats.cells_recomputed += 1
            return False
        self.stats.cells_kept += 1
        meta: CellMeta = dict(previous.meta or {})  # type: ignore[assignment]
        meta.pop("cost", None)  # paid by the run that computed it
        if meta["status"] == "completed":
            meta["status"] = "cached"
        meta["kept_from"] = previous.run_id
        value = previous.value
        if meta.get("result"):
            value = self.rt.stored_result(meta.get("provider"), value)
        row.keep(column.name, value)
        row.cells[column.name] = meta
        if not column.hidden:
            row.unreported.append(column.name)
        if meta["status"] == "failed":
            self._finish(row)  # kept as it failed (no recompute_on_error)
        else:
            still.append(row)
        return True

    def _set(
        self,
        row: RowScope,
        column: Column,
        value: Any,
        now: float,
        metas: dict[tuple[Any, ...], CellMeta],
    ) -> None:
        """Set the row's cell of ``column``. Cells of one pass (set at ``now``) that say the
        same share one metadata dict from ``metas``, so recording encodes it once."""
        results = row.results
        if results:
            row.results = []
        held = isinstance(value, ToolResult)
        provider: str | None
        if held and len(results) == 1 and results[0] is value:  # the one call it returned
            provider, cost = value.tool, value.cost
            if not value.found:
                status = "not_found"
            else:
                status = "cached" if value.execution.cached else "completed"
        else:
            status, provider, cost = _summary(results, value)
        waterfalls = row.notes.pop("waterfalls", None) if row.notes else None
        meta: CellMeta
        if waterfalls is not None:  # left by ctx.waterfall in this column: a cell of its own
            meta = _cell(status, provider, held, cost, now)
            _keep_waterfalls(meta, waterfalls)
            waterfall = waterfalls[-1]  # the last one run gives the cell its value
            meta.pop("provider", None)
            if waterfall.get("provider"):
                meta["provider"] = waterfall["provider"]
            if waterfall["winner"] is None and value is None:
                meta["status"] = "not_found"
                meta["reason"] = waterfall["reason"]
        else:
            key = (status, provider, held, cost)
            shared = metas.get(key)
            if shared is None:
                shared = metas[key] = _cell(status, provider, held, cost, now)
            meta = shared
        row.values[column.name] = value
        if held:
            row.held = True  # stored as its data
        row.cells[column.name] = meta
        if not column.hidden:
            row.unreported.append(column.name)

    def _failed(self, row: RowScope, column: Column, error: Exception) -> bool:
        """Record a failed cell (True: the row is to be finished); raise when the error must
        stop the run. Over budget the row stops unrecorded, pending (False): the other rows
        finish with what was already paid for, and a resume with a higher budget goes on."""
        row.results = []
        notes, row.notes = row.notes, {}
        if isinstance(error, BudgetExceeded):
            self._budget = self._budget or error
            self._pending += 1
            self._active -= 1
            self.rt.dispatcher.exit_row()
            self._wake()
            return False
        if isinstance(error, PlaylineError) and not isinstance(error, ROW_ERRORS):
            raise error  # governance and misuse stop the run whatever on_row_error says
        if self.on_row_error == "raise":
            raise RowFailed(self.name, row.row_key, column.name, error) from error
        meta: CellMeta = {
            "status": "failed",
            "error": redact(str(error) or type(error).__name__),
            "updated_at": self.rt.clock.now(),
        }
        # a tool's failures are counted by its calls; an LLM answer the calls paid for that
        # cannot be used (LlmAnswerError) is the cell's
        if not isinstance(error, ToolError) or isinstance(error, LlmAnswerError):
            self._count_cause(f"{type(error).__name__} in column {column.name!r}", meta["error"])
        if isinstance(error, ToolError):
            meta["tool"] = meta["provider"] = error.tool
            meta["http_status"] = error.status
            # the provider's words, as the message: a secret echoed in them is not stored
            meta["code"] = None if error.code is None else redact(str(error.code))
            meta["request_id"] = None if error.request_id is None else redact(str(error.request_id))
        if "waterfalls" in notes:  # the provenance of waterfalls that ran before the failure
            _keep_waterfalls(meta, notes["waterfalls"])
        row.values[column.name] = None
        row.cells[column.name] = meta
        if not column.hidden:
            row.unreported.append(column.name)
        return True

    def _report_cells(self, row: RowScope) -> None:
        """Report the cells set since the last report as cell events (the row waits)."""
        for name in row.unreported:
            meta = row.cells[name]
            self.rt.events.emit(
                "cell",
                dataset=self.name,
                row_key=row.row_key,
                column=name,
                status=meta["status"],
                provider=meta.get("provider"),
                error=meta.get("error"),
                preview=preview(row.values[name]),
            )
        row.unreported.clear()

    def _finish(self, row: RowScope, waiting: Suspension | None = None) -> None:
        """The row is done (or, with ``waiting``, waits for a time or an event): record it."""
        self._record([row], waiting)
        self._finished(1)

    def _record(self, rows: list[RowScope], waiting: Suspension | None = None) -> None:
        """Buffer finished rows for the store and report what changed since each reported.

        Rows whose cells are the same metadata dicts (``_set`` shares them within a pass)
        have them read once: completed, their cells are encoded once and the rows go to the
        store as one ``RowPage``, reported with others."""
        now, limit, hidden = self.rt.clock.now(), self.rt.options.cell_limit, self._hidden
        # by the ids of a row's cells' dicts: alive with the rows, so the ids are theirs; a
        # dict is set under one column only (see _set), so the ids say the names too
        pages: dict[tuple[int, ...], _Page] = {}
        for row in rows:
            values, cells = row.values, row.cells
            if row.held and not hidden:  # tool results are stored as their data
                values = {k: v.data if type(v) is ToolResult else v for k, v in values.items()}
            encoded = None if hidden else _encoded(values)
            if encoded is None or len(encoded) > limit:
                values, cells, encoded = self._stored(row)
            shared = tuple(map(id, cells.values()))
            page = pages.get(shared)
            if page is None:
                page = pages[shared] = _Page(cells)
            if waiting is not None or page.error is not None or encoded is None:
                self._record_one(row, values, cells, encoded, page.error, waiting, now)
                continue
            rows_page = page.rows
            if rows_page is None:
                if page.cells_json is None:  # left to the store, which says what it cannot
                    self._record_one(row, values, cells, encoded, None, None, now)
                    continue
                rows_page = page.rows = RowPage(
                    run_id=self.rt.run_id,
                    dataset=self.name,
                    cells_json=page.cells_json,
                    updated_at=now,
                )
                self._writer.rows.append(rows_page)
            rows_page.add(row.row_key, row.index, encoded)
            self._writer.unwritten += 1
            unreported = row.unreported
            if unreported != page.names:
                page.names = list(unreported)
                page.statuses = _statuses(cells, unreported)
            done = {"key": row.row_key, "cells": page.statuses}
            done["values"] = {c: values[c] for c in unreported}
            unreported.clear()
            self._done.later(done)

    def _record_one(
        self,
        row: RowScope,
        values: dict[str, Any],
        cells: dict[str, CellMeta],
        encoded: bytes | None,
        error: str | None,
        waiting: Suspension | None,
        now: float,
    ) -> None:
        """Buffer a row as a record of its own, and report it: a row that failed or waits
        (in an event of its own), or one whose cells the store is to encode."""
        if waiting is not None:
            status = "waiting"
            self.stats.rows_waiting += 1
            self._waits.append(waiting)
        elif error is not None:
            status = "failed"
            self.stats.rows_failed += 1
        else:
            status = "completed"
        self._buffer(
            RowRecord(
                run_id=self.rt.run_id,
                dataset=self.name,
                key=row.row_key,
                index=row.index,
                status=status,
                values=values,
                cells=cells,
                error=error,
                updated_at=now,
                values_json=encoded,
            )
        )
        # what changed since the row last reported: its cells' statuses, with their values
        data: dict[str, Any] = {
            "cells": _statuses(cells, row.unreported),
            "values": {c: values[c] for c in row.unreported if c in values},
        }
        row.unreported.clear()
        if status == "completed":  # reported with other rows, in one event
            self._done.later({"key": row.row_key, **data})
            return
        if waiting is not None:
            data["waiting"] = waiting.waiting()
        self.rt.events.emit(
            "row", dataset=self.name, row_key=row.row_key, status=status, error=error, data=data
        )

    def _stored(self, row: RowScope) -> tuple[dict[str, Any], dict[str, CellMeta], bytes | None]:
        """The row's values and cells as stored, and its values' JSON (None when a value
        cannot be stored: its cell fails, the row's other cells are kept)."""
        cells, hidden = row.cells, self._hidden
        values = row.values
        if hidden:  # hidden cells are not stored, unless they failed the row
            cells = {c: m for c, m in cells.items() if c not in hidden or m["status"] == "failed"}
        if hidden or row.held:  # an input field may start with "_": only hidden columns go
            values = {
                k: v.data if type(v) is ToolResult else v
                for k, v in values.items()
                if k not in hidden
            }
        encoded = _encoded(values)
        if encoded is None or len(encoded) > self.rt.options.cell_limit:
            self._fail_unstorable(values, cells)
            encoded = None
        return values, cells, encoded

    def _buffer(self, row: RowRecord) -> None:
        """Buffer a finished row for the store."""
        self._writer.rows.append(row)
        self._writer.unwritten += 1

    def _finished(self, count: int) -> None:
        """``count`` rows were recorded: start a write when enough wait, free their places."""
        self._writer.finished()
        self._active -= count
        self.rt.dispatcher.exit_rows(count)
        self._wake()

    def _fail_unstorable(self, values: dict[str, Any], cells: dict[str, CellMeta]) -> None:
        """Fail the cells whose values cannot be stored; the row's other cells stay."""
        for name, value in list(values.items()):
            try:
                size = len(dumps({name: value}, what=f"Column {name!r}", ordered=True))
                if size > self.rt.options.cell_limit:
                    why = f"Column {name!r}: {too_large(size, self.rt.options.cell_limit)}."
                else:
                    continue
            except SecretLeakError:
                why = f"Column {name!r} holds a secret read with ctx.secrets: it is never stored."
            except PlayDefinitionError as exc:
                if isinstance(value, dict | list):  # what inside it: a set, keys that collide
                    why = str(exc)
                else:
                    why = (
                        f"Column {name!r} returned a {type(value).__name__}, which cannot be "
                        "stored. Return plain dicts, lists, strings, numbers, booleans or None."
                    )
            values[name] = None
            cells[name] = {"status": "failed", "error": why, "updated_at": self.rt.clock.now()}
            self._count_cause(f"unstorable value in column {name!r}", why)

    def _count_cause(self, cause: str, message: str) -> None:
        """Count a cell failed by the play's own code (not a tool's), by cause, keeping the
        first message in one short line."""
        first = preview(" ".join(message.split()), 160) or ""
        count, first = self.rt.cell_errors.get(cause, (0, first))
        self.rt.cell_errors[cause] = (count + 1, first)

    async def _flush(self) -> None:
        await self._writer.flush()


class _Completed:
    """A dataset's completed rows waiting to be reported together, in one ``rows`` event: at
    ``ROWS_PER_EVENT`` of them, or ``REPORT_AFTER`` seconds after the first."""

    def __init__(self, events: EventLog, dataset: str) -> None:
        self._events = events
        self._dataset = dataset
        self._rows: list[dict[str, Any]] = []
        self._timer: asyncio.TimerHandle | None = None

    def later(self, done: dict[str, Any]) -> None:
        """A completed row's change, reported with others."""
        self._rows.append(done)
        if len(self._rows) >= ROWS_PER_EVENT:
            self.report()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(REPORT_AFTER, self.report)

    def report(self) -> None:
        """One event for the rows completed since the last one (a chunk's cells)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._rows:
            rows, self._rows = self._rows, []
            data = {"rows": rows}
            self._events.emit("rows", dataset=self._dataset, status="completed", data=data)


class _RowWriter:
    """A dataset's finished rows on their way to the store: written a thousand or more in
    a transaction, off the event loop, and within about ``WRITE_AFTER`` however few."""

    def __init__(self, io: StoreIO, abort: Callable[[BaseException], None]) -> None:
        self.io = io
        self._abort = abort  # a failed write ends the dataset's rows
        self.rows: list[RowRecord | RowPage] = []  # the finished rows not written yet
        self.unwritten = 0  # how many rows they are
        self._writing: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._error: BaseException | None = None

    def finished(self) -> None:
        """Rows were buffered: start a write when enough wait, else one a while later."""
        if self.unwritten >= _WRITE_EVERY and (self._writing is None or self._writing.done()):
            self._writing = asyncio.get_running_loop().create_task(self._write())
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(WRITE_AFTER, self._due)

    async def keep_up(self) -> None:
        """Wait for the write under way when too many rows wait for the next."""
        writing = self._writing
        if self.unwritten >= _WRITE_BACKLOG and writing is not None and not writing.done():
            await asyncio.shield(writing)

    def _due(self) -> None:
        """The rows finished a while ago are written, however few: a slow run's finished rows
        reach the store (and a live grid opened now) within about ``WRITE_AFTER``."""
        self._timer = None
        if self._writing is None or self._writing.done():
            self._writing = asyncio.get_running_loop().create_task(self._write(rest=True))
        elif self.unwritten:  # a write is under way: these go in the next one
            self._timer = asyncio.get_running_loop().call_later(WRITE_AFTER, self._due)

    async def _write(self, *, rest: bool = False) -> None:
        """Write the rows buffered, a thousand or more in a transaction (``rest``: whatever
        is left)."""
        while self.unwritten >= (1 if rest else _WRITE_EVERY):
            rows, self.rows, self.unwritten = self.rows, [], 0
            try:
                await self.io(self.io.store.save_rows, rows)
            except Exception as exc:  # raised at the dataset's end: the run fails with it
                self._error = self._error or exc
                self._abort(exc)
                return

    async def flush(self) -> None:
        """Write what is left; a failed write is raised here."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._writing is not None:
            await asyncio.shield(self._writing)
        await self._write(rest=True)
        if self._error is not None:
            raise self._error


_PLAIN = frozenset({str, int, float, bool, type(None), dict, list})  # never awaitable


def _keep_waterfalls(meta: CellMeta, provenances: list[dict[str, Any]]) -> None:
    """A cell keeps the provenance of its column's last waterfall (``waterfall``), and of
    each when its resolver ran more than one (``waterfalls``, in the order they ran)."""
    meta["waterfall"] = provenances[-1]
    if len(provenances) > 1:
        meta["waterfalls"] = provenances


def _awaitable(value: Any) -> bool:
    """Whether a resolver's value is to be awaited: a future, a coroutine, anything with
    ``__await__``, or a generator-based coroutine (``@types.coroutine``)."""
    return hasattr(type(value), "__await__") or (
        type(value) is GeneratorType and inspect.isawaitable(value)
    )


def _close(awaitable: Any) -> None:
    """Close a coroutine that will never be awaited (no 'never awaited' warning for it)."""
    if inspect.iscoroutine(awaitable):
        awaitable.close()


def _close_if_cancelled(awaitable: Any, task: asyncio.Task[None]) -> None:
    """A row's task cancelled before it awaited its resolver (the run stopping) leaves the
    resolver's coroutine unstarted: it is closed. One that ran has finished already."""
    if task.cancelled():
        _close(awaitable)


def _statuses(cells: dict[str, CellMeta], names: list[str]) -> dict[str, str]:
    return {c: cells[c]["status"] for c in names if c in cells}


def _summary(results: list[ToolResult], value: Any) -> tuple[str, str | None, float]:
    """A cell's status, the tool that gave its value, and its cost, from the results of the
    calls its resolver made (and ``value``, when it is a result got another way)."""
    held = isinstance(value, ToolResult)
    if held and not any(r is value for r in results):
        results = [*results, value]
    if not results:
        return "completed", None, 0.0
    if held and not value.found:
        status = "not_found"
    elif all(r.execution.cached for r in results):
        status = "cached"
    else:
        status = "completed"
    return status, results[-1].tool, sum(r.cost for r in results)


# the keys of a pass's plain and skipped cells among its shared metadata dicts (see _set)
_PLAIN_CELL: tuple[Any, ...] = ("completed", None, False, 0.0)
_SKIPPED_CELL: tuple[Any, ...] = ("skipped",)


def _cell(status: str, provider: str | None, result: bool, cost: float, now: float) -> CellMeta:
    """A cell's metadata: its status, the tool that gave its value, its cost."""
    meta: CellMeta = {"status": status}
    if provider is not None:
        meta["provider"] = provider
    if result:
        meta["result"] = True  # stored as its data; a retried row gets it back whole
    if cost:
        meta["cost"] = cost
    meta["updated_at"] = now
    return meta


class _Page:
    """What rows recorded together holding the same cells share: the row error the cells
    say, their JSON made once (None: the store encodes them), the page that takes the
    completed rows, the statuses of the cells last reported."""

    __slots__ = ("cells_json", "error", "names", "rows", "statuses")

    def __init__(self, cells: dict[str, CellMeta]) -> None:
        self.error: str | None = None
        for meta in cells.values():
            if meta["status"] == "failed":
                self.error = meta["error"]
                break
        self.cells_json = None if self.error is not None else _cells_json(cells)
        self.rows: RowPage | None = None
        self.names: list[str] | None = None
        self.statuses: dict[str, str] = {}


def _cells_json(cells: dict[str, CellMeta]) -> str | None:
    """The cells as stored, or None to leave them to the store (which says what it cannot
    encode)."""
    try:
        return dumps(cells, ordered=True).decode()
    except PlaylineError:
        return None


def _encoded(values: dict[str, Any]) -> bytes | None:
    """The row's values as stored (JSON), or None when they cannot be stored."""
    try:
        return dumps(values, ordered=True)
    except PlayDefinitionError:
        return None


_key = operator.itemgetter(1)  # a fed row's key


def _chunks(items: Iterator[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _whole(text: str) -> bool:
    """Whether ``text`` has no lone UTF-16 surrogate (a store keeps it as text)."""
    return text.isascii() or storable_text(text) == text


def _decided(column: Column, verdict: Any) -> bool:
    """A ``when=`` verdict other than a bool, as a condition: an awaitable (an async
    function's coroutine, always true) is refused before the column runs and pays."""
    if inspect.isawaitable(verdict):
        close = getattr(verdict, "close", None)
        if close is not None:
            close()
        raise PlayDefinitionError(
            f"Column {column.name!r}: when= returned an awaitable; a condition is decided from "
            "the row alone. Compute what it needs in a column before it, then e.g. "
            "when=lambda row: row['domain_ok']."
        )
    return bool(verdict)
