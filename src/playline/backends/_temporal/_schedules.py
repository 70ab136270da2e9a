"""Schedules on Temporal: a Playline schedule as a Temporal Schedule, and the run each fire
records.

A Temporal Schedule starts workflows by itself, with ids it derives (the action's id and the
fire time: ``sched-NAME-2024-01-08T08:00:00Z``), so no run record can be written before: the
run workflow gets a ``NewRun`` instead, and its first attempt records the run (run id = the
workflow id) in the worker's store, once, with where its play is (``source``), its input and
what queued it (``origin``: the schedule and the fire). From there it is a run like the ones
`playline run --temporal` submits.

How ``catch_up`` maps to Temporal's policies (Temporal's scheduler runs in the server: it
starts each fire's workflow on time even while no Playline worker is up, and that workflow
waits on the task queue until one is):

- ``all``: overlap ``ALLOW_ALL``, catch-up window a year (Temporal's default). Every fire is
  its own run, even while an earlier one still runs or waits durably; fires missed while the
  server was down run when it is back; fires during a worker outage run when a worker is.
- ``one``: overlap ``SKIP``, catch-up window a year. After an outage (server or workers) one
  run catches up: the *earliest* missed fire's (the embedded worker runs the latest), Temporal
  skipping the later ones while it is open. Unlike the embedded worker, a fire is also
  skipped while the schedule's previous run is still open (running, or waiting durably on a
  sleep or an event): Temporal has no "coalesce missed fires" policy.
- ``skip``: overlap ``ALLOW_ALL``, catch-up window a minute (the embedded ``GRACE``), and a
  fire no worker took within a minute of its workflow's start records no run (its workflow
  ends ``skipped``). Fires *backfilled* on purpose (``temporal schedule backfill``) run:
  their workflows start late, but a worker takes them at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import re
import zoneinfo
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from temporalio.api.common.v1 import Payload
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleDescription,
    ScheduleHandle,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.service import RPCError, RPCStatusCode

from ..._json import dumps, loads
from ...errors import PlayDefinitionError, PlaylineError, StoreError
from ...store import RunRecord, RunStatus, Store, StoreIO, display_url
from ._connect import connect, endpoint
from ._messages import UNRUNNABLE, WORKFLOW, AttemptInput, AttemptResult, NewRun, RunInput

__all__ = [
    "CATCH_UP",
    "aadd_schedule",
    "add_schedule",
    "adelete_schedule",
    "alist_schedules",
    "apause_schedule",
    "delete_schedule",
    "list_schedules",
    "pause_schedule",
    "record_new_run",
    "schedule_id",
    "unrunnable",
]

_log = logging.getLogger("playline.worker")

T = TypeVar("T")

PREFIX = "playline:"  # Playline's Schedules among the namespace's others
RUN_PREFIX = "sched-"  # runs sched-NAME-2026-01-05T08:00:00Z (embedded: ...-20260105T080000Z)
_MEMO = "playline"  # the action's memo key: what `list` shows (Temporal keeps no cron text)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_YEAR = timedelta(days=365)
_LATE = timedelta(minutes=1)
# catch_up -> (overlap policy, catch-up window, a fire no worker took for this long is skipped)
CATCH_UP: dict[str, tuple[ScheduleOverlapPolicy, timedelta, timedelta | None]] = {
    "all": (ScheduleOverlapPolicy.ALLOW_ALL, _YEAR, None),
    "one": (ScheduleOverlapPolicy.SKIP, _YEAR, None),
    "skip": (ScheduleOverlapPolicy.ALLOW_ALL, _LATE, _LATE),
}
_ENDED = {RunStatus.COMPLETED, RunStatus.COMPLETED_WITH_ERRORS, RunStatus.FAILED}


def schedule_id(name: str) -> str:
    """The Temporal Schedule id of the Playline schedule ``name``."""
    return PREFIX + name


# --------------------------------------------------------------------------------------------
# The client's side: add, list, pause, delete


def add_schedule(
    *,
    temporal: str,
    namespace: str | None,
    task_queue: str | None,
    store_url: str,
    name: str,
    play: str,
    source: Mapping[str, Any] | None,
    input: Any,
    cron: str,
    timezone: str,
    catch_up: str,
    cwd: str,
) -> None:
    """Create the Temporal Schedule of ``name``, or update it (its paused state and history
    kept): at each time of ``cron`` in ``timezone`` it starts a run of the play ``play``
    (found by workers through ``source``: ``{"file", "function"}``) with ``input``."""
    _sync(
        lambda: aadd_schedule(
            temporal=temporal,
            namespace=namespace,
            task_queue=task_queue,
            store_url=store_url,
            name=name,
            play=play,
            source=source,
            input=input,
            cron=cron,
            timezone=timezone,
            catch_up=catch_up,
            cwd=cwd,
        )
    )


def list_schedules(*, temporal: str, namespace: str | None) -> list[dict[str, Any]]:
    """Playline's schedules on the server, by name: each a dict with ``name``, ``play``,
    ``cron``, ``timezone``, ``catch_up``, ``paused``, ``input``, ``task_queue``,
    ``next_fires`` (epoch seconds) and ``recent_runs`` (``run_id``, ``fire``, ``started``).
    Temporal lists schedules from its visibility store: one added a moment ago may show a
    second later."""
    return _sync(lambda: alist_schedules(temporal=temporal, namespace=namespace))


def pause_schedule(name: str, paused: bool, *, temporal: str, namespace: str | None) -> None:
    """Pause the schedule ``name`` (``paused=False``: resume it). Fires while it is paused
    are skipped, not caught up: Temporal drops them."""
    _sync(lambda: apause_schedule(name, paused, temporal=temporal, namespace=namespace))


def delete_schedule(name: str, *, temporal: str, namespace: str | None) -> None:
    """Delete the schedule ``name``. Its runs already started go on."""
    _sync(lambda: adelete_schedule(name, temporal=temporal, namespace=namespace))


def _sync(call: Callable[[], Awaitable[T]]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        try:
            return asyncio.run(_awaited(call))
        finally:
            gc.collect()  # the SDK's native objects, freed while the interpreter is whole
    raise PlayDefinitionError(
        "The Temporal schedule functions were called inside a running event loop; call "
        "them from a thread (await asyncio.to_thread(...))."
    )


async def _awaited(call: Callable[[], Awaitable[T]]) -> T:
    return await call()


async def aadd_schedule(
    *,
    temporal: str | Client,
    namespace: str | None,
    task_queue: str | None,
    store_url: str,
    name: str,
    play: str,
    source: Mapping[str, Any] | None,
    input: Any,
    cron: str,
    timezone: str,
    catch_up: str,
    cwd: str,
) -> None:
    """``add_schedule`` for async code (``temporal`` may be a connected client)."""
    _check_name(name)
    if not isinstance(play, str) or not play.strip():
        raise PlayDefinitionError("A schedule needs the name of the play it runs.")
    if not isinstance(cron, str) or not cron.strip():
        raise PlayDefinitionError('A schedule needs a cron expression, e.g. "0 9 * * MON".')
    _check_timezone(timezone)
    if catch_up not in CATCH_UP:
        raise PlayDefinitionError(
            f"catch_up={catch_up!r}: give one of {', '.join(sorted(CATCH_UP))}."
        )
    if source is not None and not all(isinstance(source.get(k), str) for k in ("file", "function")):
        raise PlayDefinitionError(
            f"source={dict(source)!r}: give the play's file and function, "
            '{"file": "/path/play.py", "function": "enrich"}.'
        )
    text = dumps({} if input is None else input, what="The schedule's input").decode()
    where = endpoint(temporal, namespace=namespace, task_queue=task_queue)
    overlap, window, late = CATCH_UP[catch_up]
    about = {"name": name, "play": play, "cron": cron, "timezone": timezone,
             "catch_up": catch_up, "input": text, "store": display_url(store_url)}  # fmt: skip
    new_run = NewRun(
        play=play,
        input=text,
        source=None if source is None else {"file": source["file"], "function": source["function"]},
        cwd=cwd,
        origin={"kind": "schedule", "name": name},
        temporal=where.to_dict(),
        late_after=None if late is None else late.total_seconds(),
    )
    schedule = Schedule(
        action=ScheduleActionStartWorkflow(
            WORKFLOW,
            RunInput(new_run=new_run),
            id=RUN_PREFIX + name,  # Temporal adds the fire time: the run id
            task_queue=where.task_queue,
            memo={_MEMO: about},
        ),
        spec=ScheduleSpec(cron_expressions=[cron.strip()], time_zone_name=timezone),
        policy=SchedulePolicy(overlap=overlap, catchup_window=window),
    )
    client = await connect(temporal, where)
    try:
        try:
            await client.create_schedule(schedule_id(name), schedule)
        except ScheduleAlreadyRunningError:

            def keep_state(current: ScheduleUpdateInput) -> ScheduleUpdate:
                kept = current.description.schedule.state  # paused or not, as it was
                return ScheduleUpdate(schedule=dataclasses.replace(schedule, state=kept))

            await client.get_schedule_handle(schedule_id(name)).update(keep_state)
    except RPCError as exc:
        if exc.status is RPCStatusCode.UNIMPLEMENTED:  # e.g. the time-skipping test server
            raise PlaylineError(
                f"The Temporal server at {where.target} does not implement Schedules "
                f"({' '.join(exc.message.split())}). Use a Temporal server or cluster "
                "(`temporal server start-dev` for development)."
            ) from None
        if exc.status is RPCStatusCode.INVALID_ARGUMENT:
            raise PlayDefinitionError(
                f"Temporal refused schedule {name!r}: {' '.join(exc.message.split())}. Check "
                f'the cron expression ({cron!r}: five fields, e.g. "0 9 * * MON") and the '
                f"timezone ({timezone!r})."
            ) from None
        raise


async def alist_schedules(*, temporal: str | Client, namespace: str | None) -> list[dict[str, Any]]:
    """``list_schedules`` for async code."""
    where = endpoint(temporal, namespace=namespace)
    client = await connect(temporal, where)
    found = []
    async for entry in await client.list_schedules():
        if not entry.id.startswith(PREFIX):
            continue
        try:
            description = await client.get_schedule_handle(entry.id).describe()
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:  # deleted since it was listed
                continue
            raise
        found.append(_summary(client, entry.id, description))
    return sorted(found, key=lambda s: str(s["name"]))


async def apause_schedule(
    name: str, paused: bool, *, temporal: str | Client, namespace: str | None
) -> None:
    """``pause_schedule`` for async code."""

    async def pause(handle: ScheduleHandle) -> None:
        if paused:
            await handle.pause(note="Paused by Playline (playline schedule pause).")
        else:
            await handle.unpause(note="Resumed by Playline (playline schedule resume).")

    await _on_schedule(name, temporal, namespace, pause)


async def adelete_schedule(name: str, *, temporal: str | Client, namespace: str | None) -> None:
    """``delete_schedule`` for async code."""
    await _on_schedule(name, temporal, namespace, lambda handle: handle.delete())


async def _on_schedule(
    name: str,
    temporal: str | Client,
    namespace: str | None,
    do: Callable[[ScheduleHandle], Awaitable[None]],
) -> None:
    """``do`` to the schedule ``name``; an error that says what to do if there is none."""
    _check_name(name)
    where = endpoint(temporal, namespace=namespace)
    client = await connect(temporal, where)
    try:
        await do(client.get_schedule_handle(schedule_id(name)))
    except RPCError as exc:
        if exc.status is not RPCStatusCode.NOT_FOUND:
            raise
        raise PlaylineError(
            f"No schedule {name!r} on the Temporal server at {where.target} (namespace "
            f"{where.namespace!r}). `playline schedule list --temporal {where.target}` lists "
            "the schedules there."
        ) from None


def _summary(client: Client, sid: str, description: ScheduleDescription) -> dict[str, Any]:
    schedule = description.schedule
    action = schedule.action
    about: dict[str, Any] = {}
    if isinstance(action, ScheduleActionStartWorkflow) and action.memo and _MEMO in action.memo:
        raw = action.memo[_MEMO]
        if isinstance(raw, Payload):
            about = dict(client.data_converter.payload_converter.from_payload(raw) or {})
    info = description.info
    queue = action.task_queue if isinstance(action, ScheduleActionStartWorkflow) else None
    return {
        "name": about.get("name", sid.removeprefix(PREFIX)),
        "play": about.get("play"),
        "cron": about.get("cron"),
        "timezone": about.get("timezone") or schedule.spec.time_zone_name,
        "catch_up": about.get("catch_up"),
        "input": loads(about["input"]) if isinstance(about.get("input"), str) else None,
        "paused": schedule.state.paused,
        "task_queue": queue,
        "next_fires": [t.timestamp() for t in info.next_action_times],
        "recent_runs": [
            {
                "run_id": result.action.workflow_id
                if isinstance(result.action, ScheduleActionExecutionStartWorkflow)
                else None,
                "fire": result.scheduled_at.timestamp(),
                "started": result.started_at.timestamp(),
            }
            for result in info.recent_actions
        ],
    }


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise PlayDefinitionError(
            f"Schedule name {name!r}: use letters, digits, '.', '_' and '-' (up to 100, "
            "starting with a letter or digit), e.g. weekly-leads."
        )


def _check_timezone(timezone: str) -> None:
    try:
        zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        raise PlayDefinitionError(
            f"Unknown timezone {timezone!r}: give an IANA name such as UTC or Europe/Paris."
        ) from None


# --------------------------------------------------------------------------------------------
# The worker's side: the first attempt of a fire records its run


def unrunnable(why: str) -> ApplicationError:
    """The error that ends a run's workflow because no worker can run it (``UNRUNNABLE``, not
    retried), said as one line on the worker's log: the SDK logs it at debug level only, so
    its traceback (of the activity, not of the play) does not bury the reason."""
    _log.warning("%s", why)
    return ApplicationError(
        why, type=UNRUNNABLE, non_retryable=True, category=ApplicationErrorCategory.BENIGN
    )


async def record_new_run(
    store: Store, inp: AttemptInput, record: RunRecord | None
) -> tuple[RunRecord | None, AttemptResult | None]:
    """The run of a workflow Temporal started by itself (``inp.new_run``), recorded now if it
    is not yet; or how the attempt ends without running it (the second result): a fire
    started again after its run ended (that run is the fire's one run), or a late fire of a
    schedule that skips them."""
    new = inp.new_run
    assert new is not None
    if record is not None:
        if record.play != new.play:
            raise unrunnable(
                f"Run {record.run_id} exists for play {record.play!r}, not {new.play!r}: "
                "rename the schedule, whose name its run ids start with."
            )
        if record.status in _ENDED:  # this fire ran already: one run per fire
            return record, AttemptResult(status=record.status.value, error=record.error)
        return record, None
    if new.late_after is not None and new.started is not None:
        waited = inp.now - new.started
        if waited > new.late_after:
            return None, AttemptResult(
                status="skipped",
                error=f"No worker took this fire for {waited:.0f} s (more than "
                f"{new.late_after:.0f} s); its schedule skips late fires (catch-up skip).",
            )
    origin: dict[str, Any] = dict(new.origin)
    if new.fire is not None:  # in UTC, as the embedded worker writes it
        origin["fire"] = f"{datetime.fromtimestamp(new.fire, UTC):%Y-%m-%dT%H:%M:%SZ}"
    options: dict[str, Any] = {"temporal": dict(new.temporal), "origin": origin}
    if new.cwd is not None:
        options["cwd"] = new.cwd
    if new.source is not None:
        options["source"] = dict(new.source)
    made = RunRecord(
        run_id=inp.run_id,
        play=new.play,
        status=RunStatus.RUNNING,  # as `start` records a run: its workflow holds it from now
        input=loads(new.input),
        created_at=inp.now,
        updated_at=inp.now,
        options=options,
    )
    io = StoreIO(store)
    if await io(store.create_run, made):
        return made, None
    existing = await io(store.get_run, inp.run_id)  # recorded meanwhile (a retried attempt)
    if existing is None:
        raise StoreError(f"Run {inp.run_id} could not be recorded in {display_url(store.url)}.")
    return await record_new_run(store, inp, existing)
