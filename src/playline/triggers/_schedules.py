"""Schedules: a play run at the times of a cron expression, fired by the embedded worker.

A schedule is a row in the store (``ScheduleRecord``) whose ``next_fire`` is the next time a
run is due. Each look of a worker (``pl.Worker``, ``playline worker``) fires the schedules
that are due: a fire queues a run (``queue_run``) whose id is the schedule's name and the fire
time (``sched-weekly-20260105T080000Z``), then moves ``next_fire`` on by compare-and-set.
Two workers on one store therefore fire each time once: the second run id is refused by the
store, the second advance too. A worker that dies between the two leaves the run queued and
the schedule where it was: the next look queues nothing new for that time and advances it.

Times are the wall-clock times of ``cron`` in the schedule's IANA ``timezone``, across
daylight-saving changes: each wall-clock time the expression names fires once. When the
clocks go back, a time in the repeated hour fires at its first occurrence; when they go
forward, a time the clocks skip fires at the change (``30 2 * * *`` in Europe/Paris fires at
03:00 on the last Sunday of March).

A worker that was down through fire times catches up as the schedule says (``catch_up``):

- ``"all"``: a run for each missed time, oldest first;
- ``"one"`` (the default): a run for the latest missed time only;
- ``"skip"``: none of them, except a fire at most ``GRACE`` seconds late (a worker up on time
  still fires it; one busy with a long run for longer than that skips it).

Then ``next_fire`` is the first time after now. A paused schedule does not fire, and resuming
it does not catch up the time it was paused. Deleting a schedule leaves the runs it queued.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, CroniterError, croniter  # type: ignore[import-untyped]

from .._clock import Clock, SystemClock
from .._json import dumps
from .._notify import check_notify
from .._play import Play, get_play
from .._play import play as make_play
from .._run_id import SCHEDULE_PREFIX
from ..errors import PlayDefinitionError
from ..store import RunStatus, ScheduleRecord, Store, use_store
from ._queue import queue_run

__all__ = [
    "CATCH_UP",
    "GRACE",
    "add_schedule",
    "check_cron",
    "check_name",
    "check_timezone",
    "fire_schedules",
    "next_fire_time",
    "pause",
    "schedule",
    "schedule_run_id",
]

CATCH_UP = ("skip", "one", "all")
GRACE = 60.0  # seconds: under catch_up="skip", a fire this late still fires
_BATCH = 100  # missed times queued before the schedule is advanced (catch_up="all")
_LOOK = 100  # due schedules fired per look
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_ALIASES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")


def schedule(
    name: str,
    play: Play | Callable[..., Any] | str,
    *,
    cron: str,
    timezone: str = "UTC",
    input: Any = None,
    catch_up: str = "one",
    store: str | Store | None = None,
    replace: bool = True,
    notify: str | None = None,
    clock: Clock | None = None,
) -> ScheduleRecord:
    """Run ``play`` at the times of ``cron`` (five fields: minute hour day-of-month month
    day-of-week, e.g. ``"0 9 * * MON"``) in ``timezone``, with ``input``; a worker on the
    store (``pl.Worker``, ``playline worker``) starts the runs. ``catch_up`` is what a worker
    that was down through fire times queues: ``"all"`` of them, ``"one"`` (the latest) or
    ``"skip"``. A schedule of that name is replaced (its paused state and last run kept),
    unless ``replace=False``, which refuses it. ``notify``: a URL each run POSTs its summary
    to when it ends (as ``pl.run(notify=)``). Relative paths in its runs are read from the
    current directory; ``clock`` (tests: a ``pl.ManualClock``) says when now is. Returns the
    schedule as stored."""
    if isinstance(play, Play | str):
        found = get_play(play)
    elif callable(play):
        found = make_play(play)  # registered, so the worker finds it by name
    else:
        raise PlayDefinitionError(
            f"play={play!r} is not a play: give a @pl.play function (or its registered name)."
        )
    with use_store(store) as db:
        return add_schedule(
            db,
            name=name,
            play=found.name,
            cron=cron,
            timezone=timezone,
            input=input,
            catch_up=catch_up,
            source=_source(found),
            cwd=os.getcwd(),
            replace=replace,
            notify=notify,
            clock=clock,
        )


def add_schedule(
    store: Store,
    *,
    name: str,
    play: str,
    cron: str,
    timezone: str = "UTC",
    input: Any = None,
    catch_up: str = "one",
    source: Mapping[str, str] | None = None,
    cwd: str | None = None,
    replace: bool = True,
    notify: str | None = None,
    clock: Clock | None = None,
) -> ScheduleRecord:
    """Validate and store a schedule (``schedule`` does it for a play object; the command
    line for a play file, with its ``source``). A schedule replaced with the same cron and
    timezone keeps its next fire (a fire still to catch up is not lost); another one fires
    next at the first time after now."""
    check_name(name)
    if not isinstance(play, str) or not play.strip():
        raise PlayDefinitionError("A schedule needs the name of the play it runs.")
    cron, zone = check_cron(cron), check_timezone(timezone)
    if catch_up not in CATCH_UP:
        raise PlayDefinitionError(
            f"catch_up={catch_up!r}: give one of {', '.join(CATCH_UP)} (what a worker that "
            "was down through fire times queues: none of them, the latest, or all)."
        )
    if replace not in (True, False):
        raise PlayDefinitionError(f"replace={replace!r} must be True or False.")
    if source is not None and not all(isinstance(source.get(k), str) for k in ("file", "function")):
        raise PlayDefinitionError(
            f"source={dict(source)!r}: give the play's file and function, "
            '{"file": "/path/play.py", "function": "enrich"}.'
        )
    dumps({} if input is None else input, what=f"The input of schedule {name!r}")
    notify = check_notify(notify)
    now = (clock or SystemClock()).now()
    old = store.get_schedule(name)
    same_times = old is not None and (old.cron, old.timezone) == (cron, timezone)
    record = ScheduleRecord(
        name=name,
        play=play,
        source=None if source is None else {"file": source["file"], "function": source["function"]},
        cron=cron,
        timezone=timezone,
        input={} if input is None else input,
        catch_up=catch_up,
        paused=old.paused if old is not None else False,
        next_fire=old.next_fire if old is not None and same_times else _next(cron, zone, now),
        cwd=cwd,
        created_at=old.created_at if old is not None else now,
        updated_at=now,
        last_fire=None if old is None else old.last_fire,
        last_run_id=None if old is None else old.last_run_id,
        notify=notify,
    )
    if not store.save_schedule(record, replace=replace):
        raise PlayDefinitionError(
            f"Schedule {name!r} exists. Replace it (replace=True, `--replace`), or give "
            "this one another name."
        )
    return record


def pause(store: Store, name: str, paused: bool, *, clock: Clock | None = None) -> ScheduleRecord:
    """Pause (or resume) the schedule ``name``; a resumed schedule fires next at the first time
    after now (the fires it was paused through are not caught up). Returns it as stored."""
    now = (clock or SystemClock()).now()
    found = _existing(store, name)
    upcoming = None if paused else _next(found.cron, check_timezone(found.timezone), now)
    if not store.pause_schedule(name, paused, now=now, next_fire=upcoming):
        _existing(store, name)  # deleted meanwhile: says so
    return _existing(store, name)


def _existing(store: Store, name: str) -> ScheduleRecord:
    found = store.get_schedule(name)
    if found is None:
        known = ", ".join(s.name for s in store.list_schedules()) or "none"
        raise PlayDefinitionError(f"No schedule named {name!r} (schedules: {known}).")
    return found


def fire_schedules(store: Store, *, clock: Clock) -> tuple[list[str], dict[str, str]]:
    """Fire every schedule due at ``clock.now()``: the runs queued (their ids, oldest first)
    and, by schedule name, why a schedule could not fire (it is tried again next look)."""
    now = clock.now()
    queued: list[str] = []
    failed: dict[str, str] = {}
    for due in store.due_schedules(now=now, limit=_LOOK):
        unstarted = _unstarted(store, due)
        try:
            queued += _fire(store, due, now, clock, queue=unstarted is None)
        except PlayDefinitionError as exc:  # its stored definition (a store error is raised)
            failed[due.name] = str(exc)
        else:
            if unstarted is not None:
                failed[due.name] = (
                    f"its run {unstarted} has not started yet, so its fires until then queue "
                    "no other (is its play found? `playline show` says); catch_up='all' "
                    "queues every fire"
                )
    return queued, failed


def _unstarted(store: Store, s: ScheduleRecord) -> str | None:
    """The schedule's last run when no worker has started it yet, unless it catches up all
    fires: its next fires queue nothing then (one run waits, not one per fire of a play
    that cannot be loaded), as a Temporal schedule skips a fire while its last run is open."""
    if s.catch_up == "all" or s.last_run_id is None:
        return None
    run = store.get_run(s.last_run_id)
    if run is None or run.attempts or run.status is not RunStatus.SUSPENDED:
        return None
    return s.last_run_id


def _fire(
    store: Store, s: ScheduleRecord, now: float, clock: Clock, *, queue: bool = True
) -> list[str]:
    """Queue the runs of the fires of ``s`` due at ``now`` and move it on; with ``queue``
    False, only move it on past them."""
    zone = check_timezone(s.timezone)
    expected, queued = s.next_fire, []
    while expected <= now:
        if not queue:
            times, upcoming = [], _next(s.cron, zone, now)
        elif s.catch_up == "all":
            times, upcoming = [expected], _next(s.cron, zone, expected)
            while upcoming <= now and len(times) < _BATCH:
                times.append(upcoming)
                upcoming = _next(s.cron, zone, upcoming)
        else:
            latest = max(expected, _latest(s.cron, zone, now))
            late = s.catch_up == "skip" and now - latest > GRACE
            times, upcoming = ([] if late else [latest]), _next(s.cron, zone, now)
        run_ids = [schedule_run_id(s.name, at) for at in times]
        for at, run_id in zip(times, run_ids, strict=True):
            if queue_run(
                store,
                run_id=run_id,
                play=s.play,
                input=s.input,
                at=at,
                origin={"kind": "schedule", "name": s.name, "fire": _iso(at)},
                source=s.source,
                cwd=s.cwd,
                notify=s.notify,
                clock=clock,
            ):
                queued.append(run_id)
        if not store.advance_schedule(
            s.name,
            expected_next=expected,
            next_fire=upcoming,
            last_fire=times[-1] if times else None,
            last_run_id=run_ids[-1] if run_ids else None,
        ):
            break  # another worker advanced it: the times it fires are its own
        expected = upcoming
    return queued


def schedule_run_id(name: str, fire: float) -> str:
    """The run a schedule's fire queues: ``sched-NAME-20260105T080000Z`` (the fire in UTC)."""
    return f"{SCHEDULE_PREFIX}{name}-{datetime.fromtimestamp(fire, UTC):%Y%m%dT%H%M%SZ}"


def next_fire_time(cron: str, timezone: str, after: float) -> float:
    """The first time of ``cron`` in ``timezone`` after ``after`` (seconds since the epoch)."""
    return _next(check_cron(cron), check_timezone(timezone), after)


# --------------------------------------------------------------------------------------------
# validation


def check_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise PlayDefinitionError(
            f"Schedule name {name!r}: use 1-100 letters, digits, '.', '_' or '-', starting "
            "with a letter or digit (e.g. 'weekly-leads'): it names the schedule's runs."
        )
    return name


def check_cron(cron: object) -> str:
    """``cron`` with its spaces normalised; a PlayDefinitionError saying what is wrong."""
    example = 'e.g. "0 9 * * MON" (09:00 every Monday) or "*/15 * * * *"'
    if not isinstance(cron, str) or not cron.strip():
        raise PlayDefinitionError(f"A schedule needs a cron expression, {example}.")
    text = " ".join(cron.split())
    if text.startswith("@") and text.lower() not in _ALIASES:
        raise PlayDefinitionError(
            f"cron={cron!r}: give one of {', '.join(_ALIASES)}, or five fields, {example}."
        )
    if not text.startswith("@") and len(text.split()) != 5:
        raise PlayDefinitionError(
            f"cron={cron!r} has {len(text.split())} fields; give five (minute hour "
            f"day-of-month month day-of-week), {example}."
        )
    _refuse_backward_ranges(cron, text)
    try:
        croniter(text, datetime(2000, 1, 1)).get_next(datetime)
    except CroniterBadDateError:
        raise PlayDefinitionError(
            f"cron={cron!r} names no date that exists, so it never fires; {example}."
        ) from None
    except (CroniterError, ValueError, TypeError, KeyError) as exc:
        raise PlayDefinitionError(
            f"cron={cron!r} is not a cron expression ({exc}); {example}."
        ) from None
    return text


_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")


def _refuse_backward_ranges(cron: object, text: str) -> None:
    """A range whose end comes before its start ("1-0"): croniter reads it as every value
    of the field, which is not what was written."""
    if text.startswith("@"):
        return
    for name, field in zip(_FIELDS, text.split(), strict=True):
        for part in field.split(","):
            low, dash, high = part.split("/", 1)[0].partition("-")
            if dash and low.isdigit() and high.isdigit() and int(low) > int(high):
                raise PlayDefinitionError(
                    f"cron={cron!r}: the range {low}-{high} of its {name} field runs "
                    f"backwards (cron would read it as every {name.split('-')[0]}); write "
                    f"the smaller first, e.g. {high}-{low}."
                )


def check_timezone(timezone: object) -> ZoneInfo:
    advice = "give an IANA timezone such as 'Europe/Paris', 'America/New_York' or 'UTC'"
    if not isinstance(timezone, str) or not timezone.strip():
        raise PlayDefinitionError(f"timezone={timezone!r}: {advice}.")
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise PlayDefinitionError(
            f"timezone={timezone!r} is not a known timezone: {advice}."
        ) from None


# --------------------------------------------------------------------------------------------
# fire times: cron runs over wall-clock times, mapped to instants in the schedule's timezone


def _wall(at: float, zone: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(at, zone).replace(tzinfo=None)


def _instant(wall: datetime, zone: ZoneInfo) -> float:
    """The first instant whose wall-clock time in ``zone`` is ``wall`` or later: ``wall``
    itself, its first occurrence when the clocks go back, the change when they skip it."""
    at = wall.replace(tzinfo=zone).timestamp()  # fold 0: the first occurrence
    if _wall(at, zone) == wall:
        return at
    # A time the clocks skip: fold 0 reads it with the offset before the change (an instant
    # after it), fold 1 with the one after (an instant before it). The change is between.
    before, after = int(wall.replace(tzinfo=zone, fold=1).timestamp()), int(at)
    while after - before > 1:
        middle = (before + after) // 2
        if _wall(middle, zone) >= wall:
            after = middle
        else:
            before = middle
    return float(after)


def _next(cron: str, zone: ZoneInfo, after: float) -> float:
    """The first fire time after ``after``. Wall times up to ``after``'s own map to instants
    no later than it, so cron's next times from there are the candidates."""
    times = croniter(cron, _wall(after, zone))
    while True:
        at = _instant(times.get_next(datetime), zone)
        if at > after:
            return at


def _latest(cron: str, zone: ZoneInfo, at: float) -> float:
    """The last fire time at or before ``at``."""
    local = datetime.fromtimestamp(at, zone)
    start = local.replace(tzinfo=None)
    if local.fold:  # the clocks went back: the wall times of the hour before were reached too
        start += (local.replace(fold=0).utcoffset() or timedelta()) - (
            local.utcoffset() or timedelta()
        )
    times = croniter(cron, start + timedelta(microseconds=1))
    while True:
        found = _instant(times.get_prev(datetime), zone)
        if found <= at:
            return found


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _source(play: Play) -> dict[str, str] | None:
    """Where a play's code is, so a worker that loads plays by file (`playline worker`) finds
    it too: its module's file and its name there; None for a play with no file."""
    module = sys.modules.get(getattr(play.fn, "__module__", "") or "")
    file = getattr(module, "__file__", None)
    if module is None or not file:
        return None
    names = [n for n, v in vars(module).items() if v is play or v is play.fn]
    return {"file": os.path.abspath(file), "function": names[0] if names else play.fn.__name__}
