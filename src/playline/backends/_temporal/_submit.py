"""Submitting a run to Temporal and following it through the store.

``start`` records the run in the store (with where its workflow lives), then starts the
workflow whose id is the run id, or attaches to it if it is already running: submitting twice
is one run. ``follow`` reads the run's progress events from the store (the same events an
embedded run streams to its listeners) until the workflow ends or the run settles into a
durable wait, and returns the usual ``RunResult``: everything it reports is read from the
store, so any process that reaches the store and the server can follow any run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import shlex
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from ..._clock import SystemClock
from ..._dataset import revive
from ..._engine.attempt import RunStats, Status, check_same_input, open_run
from ..._engine.events import Listener
from ..._limits import check_budgets, is_amount
from ..._play import Play, PlayFn, get_play
from ..._run_id import check_new_run_id
from ..._runner import RunResult
from ..._trace import SOURCE_KIND
from ...errors import PlayDefinitionError, PlaylineError
from ...store import Event, RunRecord, RunStatus, Store, StoreIO, display_url, use_store
from ._connect import Endpoint, connect, endpoint
from ._messages import WORKFLOW, RunInput

__all__ = ["follow", "result_of", "start"]

_POLL = 0.25  # seconds between looks at the store while following
_PAGE = 5000
_STATUSES = {s.value for s in RunStatus} - {RunStatus.RUNNING.value}
_STAT_FIELDS = {f.name for f in dataclasses.fields(RunStats)}


async def start(
    play: Play | PlayFn | str,
    input: Any = None,
    *,
    temporal: str | Client,
    store: str | Store | None = None,
    run_id: str | None = None,
    namespace: str | None = None,
    task_queue: str | None = None,
    max_credits: float | None = None,
    max_usd: float | None = None,
    heartbeat_timeout: float = 30.0,
    attempt_timeout: float = 86_400.0,
    source: Mapping[str, Any] | None = None,
) -> str:
    """Record the run and start its workflow (or attach to the running one); returns the run
    id. ``source`` is recorded with a new run for workers that find plays by file."""
    target = get_play(play)
    where = endpoint(temporal, namespace=namespace, task_queue=task_queue)
    for name, seconds in (("heartbeat_timeout", heartbeat_timeout),
                          ("attempt_timeout", attempt_timeout)):  # fmt: skip
        if not is_amount(seconds, positive=True):
            raise PlayDefinitionError(f"{name} must be a number of seconds > 0.")
    check_budgets(max_credits, max_usd)
    with use_store(store) as db:
        io = StoreIO(db)
        client = await connect(temporal, where)  # an unreachable server fails before any record
        clock = SystemClock()
        run_id = run_id or f"run_{int(clock.now() * 1000):012x}{secrets.token_hex(4)}"
        existing = await io(db.get_run, run_id)
        if existing is not None:
            _check_endpoint(existing, where)
        else:
            check_new_run_id(run_id)  # a made one passes; an existing run resumes by its id
        options: dict[str, Any] = {"temporal": where.to_dict()}
        budgets = {"max_credits": max_credits, "max_usd": max_usd}
        options.update({name: value for name, value in budgets.items() if value is not None})
        record = await open_run(db, clock, run_id=run_id, play=target, input=input, options=options)
        check_same_input(record, input)
        if existing is None and source is not None:
            await io(
                db.append_events,
                [Event(kind=SOURCE_KIND, run_id=run_id, at=record.created_at, data=dict(source))],
            )
        await client.start_workflow(
            WORKFLOW,
            RunInput(
                run_id=run_id,
                heartbeat_timeout=float(heartbeat_timeout),
                attempt_timeout=float(attempt_timeout),
                max_credits=max_credits,
                max_usd=max_usd,
            ),
            id=run_id,
            task_queue=where.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        return run_id


def _check_endpoint(record: RunRecord, where: Endpoint) -> None:
    recorded = Endpoint.of(record.options)
    if recorded is None:
        raise PlayDefinitionError(
            f"Run {record.run_id} was started without Temporal. Resume it where it ran "
            f"(`playline resume {shlex.quote(record.run_id)}`), or start a new run on Temporal."
        )
    if (recorded.target, recorded.namespace, recorded.task_queue) != (
        where.target,
        where.namespace,
        where.task_queue,
    ):
        raise PlayDefinitionError(
            f"Run {record.run_id} runs on Temporal at {recorded.target} (namespace "
            f"{recorded.namespace!r}, task queue {recorded.task_queue!r}). Resume it there."
        )


async def follow(
    run_id: str,
    *,
    temporal: str | Client,
    store: str | Store | None = None,
    namespace: str | None = None,
    listeners: Sequence[Listener] = (),
    stop: asyncio.Event | None = None,
    poll: float = _POLL,
) -> RunResult:
    """Follow a run on Temporal until its workflow ends or it waits durably (a timer or an
    event: ``status == "suspended"``, and its workflow goes on without you).

    ``listeners`` get the run's events as they reach the store. Setting ``stop`` asks the run
    to stop cleanly (its calls in flight finish and are recorded; it ends suspended)."""
    with use_store(store) as db:
        io = StoreIO(db)
        where = endpoint(temporal, namespace=namespace)
        client = await connect(temporal, where)
        handle = client.get_workflow_handle(run_id)
        after = 0
        asked_to_stop = False
        while True:
            after = await _relay(io, db, run_id, after, listeners)
            try:
                description = await handle.describe()
            except RPCError as exc:
                if exc.status is not RPCStatusCode.NOT_FOUND:
                    raise
                raise PlaylineError(
                    f"Run {run_id} has no workflow on the Temporal server at {where.target} "
                    f"(namespace {where.namespace!r}). Submit it with `playline run PLAY.py "
                    f"--temporal {where.target} --run-id {run_id}`."
                ) from None
            if description.status != WorkflowExecutionStatus.RUNNING:
                failure: str | None = None
                try:
                    await handle.result()
                except WorkflowFailureError as exc:
                    failure = _innermost(exc)
                await _relay(io, db, run_id, after, listeners)
                record = await io(db.get_run, run_id)
                return result_of(db, record, run_id=run_id, failure=failure)
            record = await io(db.get_run, run_id)
            if record is not None and await _waits_durably(io, db, record):
                await _relay(io, db, run_id, after, listeners)
                return result_of(db, record, run_id=run_id)
            if stop is not None and stop.is_set() and not asked_to_stop and record is not None:
                asked_to_stop = await io(db.request_stop, run_id)
            await asyncio.sleep(poll)


async def _relay(
    io: StoreIO, db: Store, run_id: str, after: int, listeners: Sequence[Listener]
) -> int:
    """Hand the run's events since ``after`` to the listeners; the last seq seen."""
    while True:
        events = await io(db.read_events, run_id, after_seq=after, limit=_PAGE)
        for event in events:
            for listener in listeners:
                listener(event)
            after = max(after, event.seq)
        if len(events) < _PAGE:
            return after


async def _waits_durably(io: StoreIO, db: Store, record: RunRecord) -> bool:
    """A suspended run that waits for a time or an event that is not there yet (not a worker
    handing it over, not a stop, not an event that already arrived)."""
    waiting = record.waiting or {}
    if record.status is not RunStatus.SUSPENDED or waiting.get("stop"):
        return False
    wake_at = waiting.get("wake_at")
    if wake_at is not None and wake_at <= time.time():
        return False
    events = record.awaited_events
    if not events:
        return True
    arrived = await io(db.waiting_events, events)
    return not arrived


def result_of(
    store: Store, record: RunRecord | None, *, run_id: str, failure: str | None = None
) -> RunResult:
    """A run's ``RunResult`` as the store has it (``failure``: its workflow failed)."""
    if record is None:
        return RunResult(
            run_id=run_id,
            status="failed",
            output=None,
            stats=RunStats(),
            error=failure or f"Run {run_id} is not in the store {display_url(store.url)}.",
        )
    stats = RunStats(**{k: v for k, v in record.stats.items() if k in _STAT_FIELDS})
    status = cast(Status, record.status.value)
    error = record.error
    if failure is not None or status not in _STATUSES:
        status = "failed"
        error = f"The run's workflow ended without finishing it: {failure or 'it was stopped'}."
    ok = status in ("completed", "completed_with_errors")
    return RunResult(
        run_id=record.run_id,
        status=status,
        output=revive(store, record.output) if ok else None,
        stats=stats,
        error=error,
        waiting=record.waiting if status == "suspended" else None,
    )


def _innermost(exc: BaseException) -> str:
    """The message of the deepest cause (the activity's own error, not Temporal's wrappers)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return " ".join(str(exc).split()) or type(exc).__name__
