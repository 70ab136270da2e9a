"""How a dataset's rows run: streamed through a bounded window, column by column.

A row runs its columns in one synchronous step for as long as resolvers return plain values
(the fast path: no task, no coroutine). When a resolver returns a queued tool call (a
future), the row parks on that future; the rows whose calls settle in one turn of the loop
(a wave's answers) then go on together, as a group (``_go_on``). Any other awaitable (an
``async def`` resolver) gets a task. So a million pure rows cost a loop, and a row waiting
on a batched call costs neither a task nor a callback of its own.

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
import operator
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from types import GeneratorType
from typing import Any, Literal, Protocol

from .._clock import Clock
from .._json import digest, dumps
from .._secrets import leaks, redact
from ..errors import (
    BudgetExceeded,
    EventTimeout,
    PlayDefinitionError,
    PlaylineError,
    SecretLeakError,
    ToolError,
    full_stop,
)
from ..store import CellMeta, RowPage, RowRecord, Store, StoreIO
from ..tools import ToolResult
from .calls import CallExecutor, ToolCall, too_large
from .dispatch import Dispatcher
from .events import EventLog, error_text, preview
from .options import RunOptions
from .rows import KeySpec, as_row, row_key_function
from .scope import RowScope, current_row
from .suspension import Suspension
from .taskgroups import unwrapped

__all__ = ["Column", "DatasetHost", "DatasetRun", "DatasetStats", "OnRowError", "RowFailed"]

OnRowError = Literal["record", "raise"]
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
# Playline errors that belong to one row (its cell fails); any other stops the run. A cell that
# tries to leak a secret (a log line, str() of it) fails as a cell that returns one does.
ROW_ERRORS = (ToolError, EventTimeout, SecretLeakError)
_WRITE_EVERY = 1000
_WRITE_BACKLOG = 4 * _WRITE_EVERY  # finished rows that may wait for a write
WRITE_AFTER = 1.0  # seconds a finished row may wait for fewer than _WRITE_EVERY others
ROWS_PER_EVENT = 500  # completed rows reported in one "rows" event
REPORT_AFTER = 0.05  # seconds a completed row may wait to be reported with others


class RowFailed(PlaylineError):
    """A row failed and the dataset was run with ``on_row_error="raise"``."""

    def __init__(self, dataset: str, row_key: str, column: str, error: BaseException) -> None:
        self.dataset = dataset
        self.row_key = row_key
        self.column = column
        super().__init__(
            f"Dataset {dataset!r}, row {row_key!r}, column {column!r} failed: "
            f"{full_stop(str(error))} "
            'Use on_row_error="record" to record failed rows and let the others finish.'
        )


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    resolver: Callable[..., Any]
    takes_ctx: bool
    when: Callable[[Mapping[str, Any]], Any] | None
    else_value: Any

    @property
    def hidden(self) -> bool:
        return self.name.startswith("_")


@dataclass(kw_only=True)
class DatasetStats:
    """A dataset's rows: seen, executed (started), reused from an earlier attempt, failed,
    duplicates skipped, waiting for an event or a time, and pending: started but not
    finished when the run stopped (a budget, a stop)."""

    rows: int = 0
    rows_executed: int = 0
    rows_reused: int = 0
    rows_failed: int = 0
    rows_duplicate: int = 0
    rows_waiting: int = 0
    rows_pending: int = 0

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
        key: KeySpec,
        on_row_error: OnRowError,
    ) -> None:
        self.rt = host
        self._io = StoreIO(host.store)
        self._writing: asyncio.Task[None] | None = None
        self._write_error: BaseException | None = None
        self.name = name
        self.columns = columns
        self.on_row_error = on_row_error
        self.key_of = row_key_function(name, key, [c.name for c in columns])
        self.stats = DatasetStats()
        self._writes: list[RowRecord | RowPage] = []  # the finished rows not written yet
        self._unwritten = 0  # how many rows they are
        self._active = 0  # rows started and not finished
        self._wakeup: asyncio.Future[None] | None = None
        self._fatal: BaseException | None = None
        self._waits: list[Suspension] = []
        self._tasks: asyncio.TaskGroup | None = None
        self._hidden = frozenset(c.name for c in columns if c.hidden)  # not stored
        self._budget: BudgetExceeded | None = None  # the budget stopped rows of this dataset
        self._pending = 0  # rows stopped by it, left for a resume
        self._done: list[dict[str, Any]] = []  # completed rows not yet reported
        self._done_timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._restart: dict[str, RowRecord] = {}  # failed rows that go on from their stored row
        # rows whose calls settled, to go on together (_go_on), in the dataset's own context
        self._arrivals: list[tuple[RowScope, int, asyncio.Future[Any]]] = []
        self._context = contextvars.copy_context()

    async def execute(
        self, items: Iterable[Any], description: str | None, total: int | None = None
    ) -> DatasetStats:
        """Run every row; ``total`` is how many rows the input holds, when known (progress
        displays show it)."""
        rt = self.rt
        rt.events.emit(
            "dataset",
            dataset=self.name,
            status="running",
            data={
                "description": description,
                "columns": [c.name for c in self.columns],
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
        rt.events.emit("dataset", dataset=self.name, status="completed", data=self.stats.to_dict())
        return self.stats

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
            data=self.stats.to_dict(),
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
                for chunk in _chunks(_keyed(items, self.key_of), rt.options.row_window):
                    if self._over_budget():  # the rest wait for a resume
                        self._pending += len(chunk)
                        continue
                    fresh = []
                    for row in chunk:
                        if row[1] not in seen:
                            seen.add(row[1])
                            fresh.append(row)
                    self.stats.rows_duplicate += len(chunk) - len(fresh)
                    done = (
                        await self._io(
                            rt.store.load_rows, rt.run_id, self.name, [k for _, k, _ in fresh]
                        )
                        if rt.resuming
                        else {}
                    )
                    todo = self._admit(fresh, done)
                    while todo:
                        if self._over_budget():
                            self._pending += len(todo)
                            break
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
            self._report_done()
            await self._flush()

    def _admit(
        self, fresh: list[tuple[int, str, dict[str, Any]]], done: dict[str, RowRecord]
    ) -> list[tuple[int, str, dict[str, Any]]]:
        """The rows of ``fresh`` to run: not those an earlier attempt completed (reused), nor
        those whose keys cannot be stored (failed here). ``done``: the stored rows."""
        self.stats.rows += len(fresh)
        keys = "".join(map(_key, fresh))
        if not done and "\x00" not in keys and not leaks(keys):
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
        writing = self._writing
        if self._unwritten >= _WRITE_BACKLOG and writing is not None and not writing.done():
            await asyncio.shield(writing)
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
        """Run a group of rows column by column: a column's resolver for every row, then the
        next column. A row whose resolver returns something to wait for (a queued tool call,
        a coroutine) leaves the group there and goes on alone when it settles; the rows that
        never wait finish together, in one progress event."""
        self.stats.rows_executed += len(group)
        self._active += len(group)
        self.rt.dispatcher.enter_rows(len(group))
        name = self.name
        live = [RowScope(dataset=name, row_key=k, index=i, values=v) for i, k, v in group]
        if self._restart:
            live = [row for row in live if not self._restarted(row)]
        self._run(live, 0, set())

    def _run(self, live: list[RowScope], start: int, bespoke: set[int] | None) -> None:
        """Run ``live`` rows column by column from column ``start`` (see ``_start``).

        A resolver's tool call (``ctx.tool``, returned as the cell's value) is not queued at
        once: the group's calls of a column are looked up in the receipts together
        (``_answer``), the answered rows go on together, and only the others are queued.

        ``bespoke``: the ids of the rows whose cells so far are their own; the others hold
        the same cells, one metadata dict a column (this pass's plain ones, and one result's
        that _set_results shared), which _record_together encodes once. None: every row's
        cells are its own. Each pass has a set of its own: a row that waits keeps it
        (``RowScope.shares``), and the rows that waited from one pass in one column go on
        together (``_go_on``), their cells still shared."""
        ctx = self.rt.ctx
        collecting = self.rt.executor.answers_groups
        made: list[ToolCall] = []  # one list lent to each row in turn, replaced once used
        for position in range(start, len(self.columns)):
            if not live:
                return
            column = self.columns[position]
            plain: CellMeta = {"status": "completed", "updated_at": self.rt.clock.now()}
            name, resolver, when, takes_ctx = (
                column.name,
                column.resolver,
                column.when,
                column.takes_ctx,
            )
            visible = not column.hidden
            still: list[RowScope] = []
            looked: list[tuple[RowScope, ToolCall]] = []
            for row in live:
                token = current_row.set(row)
                try:
                    row.column = name
                    try:
                        if when is not None and not self._runs(row, column, row.view):
                            if bespoke is not None:
                                bespoke.add(id(row))
                            still.append(row)
                            continue
                        row.collect = made if collecting else None  # the resolver's calls
                        value = resolver(row.view, ctx) if takes_ctx else resolver(row.view)
                    except Exception as exc:
                        if made:
                            calls, made = made, []
                            self._queue(row, calls)  # sent as made, though the row failed
                        if self._failed(row, column, exc):
                            self._finish(row)
                        continue
                    finally:
                        row.collect = None
                    if made:
                        calls, made = made, []
                        if len(calls) == 1 and value is calls[0].future:
                            looked.append((row, calls[0]))
                            continue
                        self._queue(row, calls)  # more than a call to look up alone
                    if type(value) not in _PLAIN and _awaitable(value):
                        self._park(row, position, value, bespoke)
                        continue
                    if row.results or row.notes or type(value) is ToolResult:
                        self._set(row, column, value)
                        if bespoke is not None:
                            bespoke.add(id(row))
                    else:  # a plain value: the common case, kept lean
                        row.values[name] = value
                        row.cells[name] = plain
                        if visible:
                            row.unreported.append(name)
                    still.append(row)
                finally:
                    current_row.reset(token)
            if looked:
                self._look_up(position, looked, bespoke)
            live = still
        if live:  # the rows that never waited: recorded and reported together
            self._record_together(live, bespoke)
            self._finished(len(live))

    # a group's calls, looked up in the receipts before any is queued
    def _queue(self, row: RowScope, calls: list[ToolCall]) -> None:
        for call in calls:
            self.rt.dispatcher.submit(call, row)

    def _look_up(
        self, position: int, looked: list[tuple[RowScope, ToolCall]], bespoke: set[int] | None
    ) -> None:
        """Find the receipts of a group's calls of column ``position`` in one lookup; when
        the last lookup found none (a first run), queue them at once: their claims say which
        receipts there are, and a claim that finds one turns the lookups on again."""
        if not self.rt.executor.answers_likely:
            for row, call in looked:
                self._park_call(row, position, call, bespoke, looked_up=True)
            return
        assert self._tasks is not None
        self.rt.dispatcher.hold_rows(len(looked))
        self._tasks.create_task(self._answer(position, looked, bespoke))

    def _park_call(
        self,
        row: RowScope,
        position: int,
        call: ToolCall,
        bespoke: set[int] | None,
        *,
        looked_up: bool,
    ) -> None:
        """Queue the row's call (``looked_up``: its receipt was looked for already, or will
        be by its claim); the row goes on from column ``position`` when it settles, with the
        rows of its pass (``bespoke``'s) that wait there too."""
        call.looked_up = looked_up
        row.shares = _shares(row, bespoke)
        self._report_cells(row)  # it waits for its call, as _park reports
        self.rt.dispatcher.submit(
            call, row, then=functools.partial(self._arrived, row, position, call.future)
        )

    async def _answer(
        self, position: int, looked: list[tuple[RowScope, ToolCall]], bespoke: set[int] | None
    ) -> None:
        """The rows whose calls receipts answer go on together from the next column, their
        cells ``cached``; the others' calls are queued (marked looked up: not looked up
        again) and each row waits for its own, as a call queued at once would have."""
        dispatcher, executor = self.rt.dispatcher, self.rt.executor
        column = self.columns[position]
        try:
            looked_up = True
            try:
                found = await executor.find_answers([call.key for _, call in looked])
            except PlaylineError:  # queued as they are, their execution meets the error
                found, looked_up = {}, False
            finally:
                dispatcher.release_rows(len(looked))
            answered: list[tuple[RowScope, ToolResult]] = []
            for row, call in looked:
                answer = found.get(call.key)
                if answer is None:
                    self._park_call(row, position, call, bespoke, looked_up=looked_up)
                else:
                    answered.append((row, executor.answer_from(call, answer.result)))
            # the answered rows' next pass, with a set of its own (see _run)
            mine = None if bespoke is None else {id(r) for r, _ in answered if id(r) in bespoke}
            self._set_results(column, answered, mine)
            self._run([row for row, _ in answered], position + 1, mine)
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
        self._advance(row, start)
        return True

    def _refuse_row(self, index: int, key: str, kind: str, why: str, fix: str) -> None:
        """A row whose key cannot be stored as it is (it holds a secret, or a NUL character,
        which PostgreSQL's text refuses) fails, recorded under a digest of its key."""
        hidden = f"{kind}-" + digest("row key", key)[:16]
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

    def _park(
        self, row: RowScope, position: int, value: Any, bespoke: set[int] | None = None
    ) -> None:
        """The row waits for ``value``; it goes on from ``position`` when that settles (with
        the rows of its pass, ``bespoke``'s, that wait there too, when it is a call's)."""
        row.shares = _shares(row, bespoke)
        try:
            self._report_cells(row)
        except BaseException:  # the run fails (its events cannot be written): it never runs
            _close(value)
            raise
        if isinstance(value, asyncio.Future):  # a queued tool call: no task needed
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

    def _advance(self, row: RowScope, start: int) -> None:
        """Run the row's remaining columns from ``start`` until it waits or finishes."""
        token = current_row.set(row)
        try:
            view = row.view
            for position in range(start, len(self.columns)):
                column = self.columns[position]
                row.column = column.name
                try:
                    if not self._runs(row, column, view):
                        continue
                    value = (
                        column.resolver(view, self.rt.ctx)
                        if column.takes_ctx
                        else column.resolver(view)
                    )
                except Exception as exc:
                    if self._failed(row, column, exc):
                        self._finish(row)
                    return
                if type(value) not in _PLAIN and _awaitable(value):
                    self._park(row, position, value)
                    return
                self._set(row, column, value)
            self._finish(row)
        finally:
            current_row.reset(token)

    def _arrived(self, row: RowScope, position: int, done: asyncio.Future[Any]) -> None:
        """The call ``row`` waited on in column ``position`` settled: the row goes on with the
        others that arrive in this turn of the loop (``_go_on``)."""
        self._arrivals.append((row, position, done))
        if len(self._arrivals) == 1:
            asyncio.get_running_loop().call_soon(self._go_on, context=self._context)

    def _go_on(self) -> None:
        """The rows whose calls settled since the last turn of the loop go on together: a row
        whose call failed is finished (its cell failed), the others run their next columns in
        groups (``_run``), one for each column and pass they waited from, so a wave's answers
        go on as a group, not a callback each."""
        arrivals, self._arrivals = self._arrivals, []
        # by column and by the pass they waited from: such rows hold the same cells so far
        groups: dict[tuple[int, int], list[tuple[RowScope, Any]]] = {}
        for row, position, done in arrivals:
            if done.cancelled():
                continue  # the run is stopping; the row stays pending for a resume
            try:
                error = done.exception()
                if error is None:
                    group = groups.setdefault((position, id(row.shares)), [])
                    group.append((row, done.result()))
                else:
                    self._settled(row, position, error, None)
            except BaseException as exc:
                self._abort(exc)
        for (position, _), group in groups.items():
            try:
                self._go_on_from(position, group)
            except BaseException as exc:
                self._abort(exc)

    def _go_on_from(self, position: int, group: list[tuple[RowScope, Any]]) -> None:
        """Rows that waited in column ``position`` from one pass: their cells set to what
        they waited for, they run their next columns as a pass of their own."""
        column, rows = self.columns[position], [row for row, _ in group]
        # None: the rows hold cells of their own
        bespoke: set[int] | None = None if rows[0].shares is None else set()
        results: list[tuple[RowScope, ToolResult]] = []
        for row, value in group:
            if type(value) is ToolResult:
                results.append((row, value))
            else:
                self._set(row, column, value)
                if bespoke is not None:
                    bespoke.add(id(row))
        self._set_results(column, results, bespoke)
        self._run(rows, position + 1, bespoke)

    async def _await(self, row: RowScope, position: int, awaitable: Awaitable[Any]) -> None:
        token = current_row.set(row)
        try:
            try:
                value = await awaitable
            except Exception as exc:
                self._settled(row, position, exc, None)
            else:
                self._settled(row, position, None, lambda: value)
        except asyncio.CancelledError:
            raise
        except Suspension as waiting:  # only this row waits; the others go on
            self._finish(row, waiting)
        except BaseException as exc:
            self._abort(exc)
        finally:
            current_row.reset(token)

    def _settled(
        self,
        row: RowScope,
        position: int,
        error: BaseException | None,
        value: Callable[[], Any] | None,
    ) -> None:
        column = self.columns[position]
        if error is not None:
            if not isinstance(error, Exception):
                raise error
            if self._failed(row, column, error):
                self._finish(row)
            return
        assert value is not None
        self._set(row, column, value())
        self._advance(row, position + 1)

    def _set_results(
        self,
        column: Column,
        answers: list[tuple[RowScope, ToolResult]],
        bespoke: set[int] | None,
    ) -> None:
        """Set each row's cell of ``column`` to the result of the one call its resolver made:
        ``_set``'s common case, kept lean. The cells that say the same as the first (status,
        tool, no cost) share its metadata dict; a row whose cell says something else, or more
        (a cost, a waterfall's notes, other results), goes into ``bespoke`` (see ``_run``)."""
        if not answers:
            return
        name, visible = column.name, not column.hidden
        now = self.rt.clock.now()
        common: CellMeta | None = None
        for row, result in answers:
            results = row.results
            if row.notes or result.cost or len(results) != 1 or results[0] is not result:
                self._set(row, column, result)
                if bespoke is not None:
                    bespoke.add(id(row))
                continue
            row.results = []
            if not result.found:
                status = "not_found"
            else:
                status = "cached" if result.execution.cached else "completed"
            if (
                common is not None
                and common["status"] == status
                and common["provider"] == result.tool
            ):
                meta = common
            else:
                meta = {
                    "status": status,
                    "provider": result.tool,
                    "result": True,
                    "updated_at": now,
                }
                if common is None:
                    common = meta
                elif bespoke is not None:
                    bespoke.add(id(row))
            row.values[name] = result
            row.held = True
            row.cells[name] = meta
            if visible:
                row.unreported.append(name)

    def _runs(self, row: RowScope, column: Column, view: Mapping[str, Any]) -> bool:
        """Whether the column runs for this row; if not, its cell is skipped."""
        if column.when is None or column.when(view):
            return True
        row.keep(column.name, column.else_value)
        row.cells[column.name] = {"status": "skipped", "updated_at": self.rt.clock.now()}
        if not column.hidden:
            row.unreported.append(column.name)
        return False

    def _set(self, row: RowScope, column: Column, value: Any) -> None:
        results = row.results
        if results:
            row.results = []
        if isinstance(value, ToolResult) and not any(r is value for r in results):
            results = [*results, value]  # a result the resolver got without ctx.tool here
        meta: CellMeta
        if results:
            if isinstance(value, ToolResult) and not value.found:
                status = "not_found"
            elif all(r.execution.cached for r in results):
                status = "cached"
            else:
                status = "completed"
            meta = {"status": status, "provider": results[-1].tool}
            if isinstance(value, ToolResult):
                meta["result"] = True  # stored as its data; a retried row gets it back whole
            cost = sum(r.cost for r in results)
            if cost:
                meta["cost"] = cost
        else:
            meta = {"status": "completed"}
        waterfalls = row.notes.pop("waterfalls", None)  # left by ctx.waterfall in this column
        if waterfalls is not None:
            _keep_waterfalls(meta, waterfalls)
            waterfall = waterfalls[-1]  # the last one run gives the cell its value
            meta.pop("provider", None)
            if waterfall.get("provider"):
                meta["provider"] = waterfall["provider"]
            if waterfall["winner"] is None and value is None:
                meta["status"] = "not_found"
                meta["reason"] = waterfall["reason"]
        meta["updated_at"] = self.rt.clock.now()
        row.keep(column.name, value)
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
        if not isinstance(error, ToolError):  # a tool's failures are counted by the calls
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
        self._record(row, waiting)
        self._finished(1)

    def _record_together(self, rows: list[RowScope], bespoke: set[int] | None) -> None:
        """Record rows that finished together, none of them waiting (``_run``): ``_record``'s
        common case with its checks made once. They have no failed cell (a row whose cell
        fails is finished alone) and finished at one moment; a dataset with hidden columns,
        or a row whose values cannot be stored as they are, goes through ``_record``.

        The rows not in ``bespoke`` (None: none) hold the same cell metadata, one dict a
        column (see ``_run``): their cells are encoded once, and their statuses made once,
        for all of them (encoding them each was a tenth of a pure map's time), and they are
        written as one ``RowPage`` (a record each was about 8% of a pure map's time)."""
        if self._hidden:
            for row in rows:
                self._record(row)
            return
        run_id, name, limit = self.rt.run_id, self.name, self.rt.options.cell_limit
        now = self.rt.clock.now()
        shared: tuple[dict[str, str], str | None] | None = None  # the shared cells' statuses, JSON
        page: RowPage | None = None  # the rows that hold them
        for row in rows:
            values = row.values
            if row.held:  # tool results are stored as their data
                values = {k: v.data if type(v) is ToolResult else v for k, v in values.items()}
            encoded = _encoded(values)
            if encoded is None or len(encoded) > limit:
                self._record(row)  # its unstorable cells fail, the others are kept
                continue
            cells, unreported = row.cells, row.unreported
            if bespoke is None or id(row) in bespoke:
                statuses, cells_json = _statuses(cells, unreported), None
            else:
                if shared is None:
                    shared = _statuses(cells, unreported), _cells_json(cells)
                statuses, cells_json = shared
            if cells_json is None:  # cells of its own, or cells the store says it cannot encode
                self._buffer(
                    RowRecord(
                        run_id=run_id,
                        dataset=name,
                        key=row.row_key,
                        index=row.index,
                        status="completed",
                        values=values,
                        cells=cells,
                        error=None,
                        updated_at=now,
                        values_json=encoded,
                    )
                )
            else:
                if page is None:
                    page = RowPage(
                        run_id=run_id, dataset=name, cells_json=cells_json, updated_at=now
                    )
                    self._writes.append(page)
                page.add(row.row_key, row.index, encoded)
                self._unwritten += 1
            self._report_later(
                {
                    "key": row.row_key,
                    "cells": statuses,
                    "values": {c: values[c] for c in unreported},
                }
            )
            unreported.clear()

    def _record(self, row: RowScope, waiting: Suspension | None = None) -> None:
        """Buffer the row for the store and report what changed since it last reported."""
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
        error = None
        for meta in cells.values():
            if meta["status"] == "failed":
                error = meta["error"]
                break
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
                updated_at=self.rt.clock.now(),
                values_json=encoded,
            )
        )
        # what changed since the row last reported: its cells' statuses, with their values
        cells_now = {c: cells[c]["status"] for c in row.unreported if c in cells}
        values_now = {c: values[c] for c in row.unreported if c in values}
        row.unreported.clear()
        if status == "completed":  # reported with other rows, in one event
            self._report_later({"key": row.row_key, "cells": cells_now, "values": values_now})
        else:
            data: dict[str, Any] = {"cells": cells_now, "values": values_now}
            if waiting is not None:
                data["waiting"] = waiting.waiting()
            self.rt.events.emit(
                "row",
                dataset=self.name,
                row_key=row.row_key,
                status=status,
                error=error,
                data=data,
            )

    def _buffer(self, row: RowRecord) -> None:
        """Buffer a finished row for the store."""
        self._writes.append(row)
        self._unwritten += 1

    def _finished(self, count: int) -> None:
        """``count`` rows were recorded: start a write when enough wait, free their places."""
        if self._unwritten >= _WRITE_EVERY and (self._writing is None or self._writing.done()):
            self._writing = asyncio.get_running_loop().create_task(self._write())
        elif self._write_timer is None:
            self._write_timer = asyncio.get_running_loop().call_later(WRITE_AFTER, self._write_due)
        self._active -= count
        self.rt.dispatcher.exit_rows(count)
        self._wake()

    def _report_later(self, done: dict[str, Any]) -> None:
        """A completed row's change, reported with others: at ``ROWS_PER_EVENT`` of them, or
        ``REPORT_AFTER`` seconds after the first."""
        self._done.append(done)
        if len(self._done) >= ROWS_PER_EVENT:
            self._report_done()
        elif self._done_timer is None:
            self._done_timer = asyncio.get_running_loop().call_later(
                REPORT_AFTER, self._report_done
            )

    def _report_done(self) -> None:
        """One event for the rows completed since the last one (a chunk's cells)."""
        if self._done_timer is not None:
            self._done_timer.cancel()
            self._done_timer = None
        if self._done:
            rows, self._done = self._done, []
            self.rt.events.emit("rows", dataset=self.name, status="completed", data={"rows": rows})

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

    def _write_due(self) -> None:
        """The rows finished a while ago are written, however few: a slow run's finished rows
        reach the store (and a live grid opened now) within about ``WRITE_AFTER``."""
        self._write_timer = None
        if self._writing is None or self._writing.done():
            self._writing = asyncio.get_running_loop().create_task(self._write(rest=True))
        elif self._unwritten:  # a write is under way: these go in the next one
            self._write_timer = asyncio.get_running_loop().call_later(WRITE_AFTER, self._write_due)

    async def _write(self, *, rest: bool = False) -> None:
        """Write the finished rows buffered, a thousand or more in a transaction (``rest``:
        whatever is left), off the event loop."""
        while self._unwritten >= (1 if rest else _WRITE_EVERY):
            rows, self._writes, self._unwritten = self._writes, [], 0
            try:
                await self._io(self.rt.store.save_rows, rows)
            except Exception as exc:  # raised at the dataset's end: the run fails with it
                self._write_error = self._write_error or exc
                self._abort(exc)
                return

    async def _flush(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        if self._writing is not None:
            await asyncio.shield(self._writing)
        await self._write(rest=True)
        if self._write_error is not None:
            raise self._write_error


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


def _shares(row: RowScope, bespoke: set[int] | None) -> set[int] | None:
    """What a row that waits holds of its pass's cells: its set, or None (its own)."""
    return None if bespoke is None or id(row) in bespoke else bespoke


def _statuses(cells: dict[str, CellMeta], names: list[str]) -> dict[str, str]:
    return {c: cells[c]["status"] for c in names}


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


def _keyed(
    items: Iterable[Any], key_of: Callable[[dict[str, Any], int], str]
) -> Iterator[tuple[int, str, dict[str, Any]]]:
    for index, item in enumerate(items):
        values = as_row(item)
        yield index, key_of(values, index), values


def _chunks(items: Iterator[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
