"""`playline schedule add|list|pause|resume|delete`: plays that run themselves at cron times.

A schedule lives in the store; `playline worker` fires it (``playline.triggers`` says how).
With ``--temporal`` it is a Temporal Schedule instead: the server fires it and Temporal
workers (`playline worker --temporal`) run it; the Temporal SDK is imported only then.
"""

from __future__ import annotations

import json
import os
from contextlib import closing
from datetime import datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo

import typer
from rich.table import Table

from .. import triggers
from .._trace import run_status
from ..store import DEFAULT_STORE_URL, NoStore, ScheduleRecord, Store
from ._app import (
    InputJsonOpt,
    InputsOpt,
    JsonOpt,
    PlayArg,
    StoreOpt,
    app,
    command,
    console,
    store_at,
)
from ._load import CliError, load_play, parse_inputs
from ._runcmds import NotifyOpt
from ._tables import TsvOpt, print_table, table_output
from ._temporal import NamespaceOpt, TaskQueueOpt, TemporalOpt

__all__ = ["schedule_app"]

schedule_app = typer.Typer(help="Schedules: plays a worker runs at the times of a cron expression.")
app.add_typer(schedule_app, name="schedule", no_args_is_help=True)

NameArg = Annotated[str, typer.Argument(metavar="NAME", help="The schedule's name.")]


def _temporal() -> Any:
    """The Temporal backend, or the error saying which extra to install."""
    try:
        from ..backends import temporal
    except ImportError as exc:
        raise CliError(str(exc), code=1) from None
    return temporal


def _only_with_temporal(**given: str | None) -> None:
    named = [f"--{name.replace('_', '-')}" for name, value in given.items() if value]
    if named:
        raise CliError(f"{' and '.join(named)} go with --temporal HOST:PORT; add it or drop them.")


def _next_fire(s: ScheduleRecord) -> str:
    """When the schedule fires next, in its own timezone."""
    return datetime.fromtimestamp(s.next_fire, ZoneInfo(s.timezone)).strftime("%Y-%m-%d %H:%M %Z")


@schedule_app.command("add")
@command
def add(
    name: NameArg,
    play: PlayArg,
    cron: Annotated[
        str,
        typer.Option("--cron", metavar="EXPR", help='When: five cron fields, e.g. "0 9 * * MON".'),
    ],
    timezone: Annotated[
        str,
        typer.Option("--timezone", help="The IANA timezone of the cron times (Europe/Paris)."),
    ] = "UTC",
    inputs: InputsOpt = None,
    input_json: InputJsonOpt = None,
    catch_up: Annotated[
        str,
        typer.Option(
            "--catch-up",
            metavar="skip|one|all",
            help="After a worker was down through fire times: none, the latest, or all of them.",
        ),
    ] = "one",
    store: StoreOpt = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Replace a schedule of that name.")
    ] = False,
    notify: NotifyOpt = None,
    temporal: TemporalOpt = None,
    namespace: NamespaceOpt = None,
    task_queue: TaskQueueOpt = None,
) -> None:
    """Run PLAY.py at the times of --cron, from `playline worker` (or Temporal's).

    Relative paths the play reads (ctx.csv) are read from the current directory.
    """
    # what can be checked without the play file is checked first: usage errors, exit 2
    triggers.check_name(name)
    triggers.check_cron(cron)
    triggers.check_timezone(timezone)
    if catch_up not in triggers.CATCH_UP:
        raise CliError(f"--catch-up {catch_up!r}: give one of {', '.join(triggers.CATCH_UP)}.")
    input = parse_inputs(inputs or [], input_json)
    loaded = load_play(play)
    source = {"file": str(loaded.file), "function": loaded.function}
    if temporal is not None:
        if notify is not None:
            raise CliError("--notify is not available with --temporal yet: leave one out.")
        url = store or os.environ.get("PLAYLINE_STORE") or DEFAULT_STORE_URL
        if url.startswith("memory://"):
            raise CliError("--temporal needs a store the workers reach: give --store URL.")
        _temporal().add_schedule(
            temporal=temporal,
            namespace=namespace,
            task_queue=task_queue,
            store_url=url,
            name=name,
            play=loaded.play.name,
            source=source,
            input=input,
            cron=cron,
            timezone=timezone,
            catch_up=catch_up,
            cwd=os.getcwd(),
        )
        console.print(f"Temporal schedule {name!r}: {loaded.play.name} at {cron!r} ({timezone}).")
        return
    _only_with_temporal(namespace=namespace, task_queue=task_queue)
    with closing(store_at(store)) as db:
        saved = triggers.add_schedule(
            db,
            name=name,
            play=loaded.play.name,
            cron=cron,
            timezone=timezone,
            input=input,
            catch_up=catch_up,
            source=source,
            cwd=os.getcwd(),
            replace=replace,
            notify=notify,
        )
    console.print(
        f"Schedule {name!r}: {saved.play} at {saved.cron!r} ({saved.timezone}); next fire "
        f"{_next_fire(saved)}. `playline worker` starts its runs.",
        highlight=False,
    )


@schedule_app.command("list")
@command
def list_(
    store: StoreOpt = None,
    json_mode: JsonOpt = False,
    temporal: TemporalOpt = None,
    namespace: NamespaceOpt = None,
    tsv: TsvOpt = False,
) -> None:
    """List the schedules: when each fires next (in its timezone), and its last run."""
    with table_output(tsv, json_mode=json_mode):
        _list(store, json_mode, temporal, namespace)


def _list(store: str | None, json_mode: bool, temporal: str | None, namespace: str | None) -> None:
    if temporal is not None:
        found = _temporal().list_schedules(temporal=temporal, namespace=namespace)
        if json_mode:
            typer.echo(json.dumps(found, default=str, indent=2))
        else:
            _print_temporal(found)
        return
    _only_with_temporal(namespace=namespace)
    schedules: list[dict[str, Any]] = []
    try:
        db = store_at(store, read_only=True)
    except NoStore:
        pass  # no store yet: no schedules either
    else:
        with closing(db):
            schedules = [_listed(db, s) for s in db.list_schedules()]
    if json_mode:
        typer.echo(json.dumps(schedules, indent=2))
        return
    if not schedules:
        console.print("No schedules. Add one with `playline schedule add NAME PLAY.py --cron ...`.")
        return
    table = Table(title="Schedules")
    for column in ("name", "play", "cron", "timezone", "next fire", "paused", "last run"):
        table.add_column(column, no_wrap=column in ("name", "next fire", "last run"))
    for s in schedules:
        last = f"{s['last_run_id']} ({s['last_run_status']})" if s["last_run_id"] else "-"
        table.add_row(
            s["name"],
            s["play"],
            s["cron"],
            s["timezone"],
            "-" if s["paused"] else s["next_fire_local"],
            "yes" if s["paused"] else "no",
            last,
        )
    print_table(table)


def _listed(db: Store, s: ScheduleRecord) -> dict[str, Any]:
    last = db.get_run(s.last_run_id) if s.last_run_id else None
    return {
        "name": s.name,
        "play": s.play,
        "cron": s.cron,
        "timezone": s.timezone,
        "catch_up": s.catch_up,
        "paused": s.paused,
        "next_fire": s.next_fire,
        "next_fire_local": _next_fire(s),
        "input": s.input,
        "source": s.source,
        "cwd": s.cwd,
        "last_fire": s.last_fire,
        "last_run_id": s.last_run_id,
        "last_run_status": None if last is None else run_status(last),
    }


def _print_temporal(found: list[dict[str, Any]]) -> None:
    if not found:
        console.print("No Playline schedules on this Temporal namespace.")
        return
    table = Table(title="Temporal schedules")
    for column in ("name", "play", "cron", "timezone", "next fire", "paused", "last run"):
        table.add_column(column)
    for s in found:
        fires = s.get("next_fires") or []
        zone = ZoneInfo(s.get("timezone") or "UTC")
        upcoming = datetime.fromtimestamp(fires[0], zone).strftime("%Y-%m-%d %H:%M %Z")
        recent = s.get("recent_runs") or []
        table.add_row(
            str(s.get("name")),
            str(s.get("play")),
            str(s.get("cron")),
            str(s.get("timezone")),
            upcoming if fires else "-",
            "yes" if s.get("paused") else "no",
            str(recent[-1].get("run_id")) if recent else "-",
        )
    print_table(table)


def _pause(
    name: str, paused: bool, store: str | None, temporal: str | None, ns: str | None
) -> None:
    verb = "Paused" if paused else "Resumed"
    if temporal is not None:
        _temporal().pause_schedule(name, paused, temporal=temporal, namespace=ns)
        console.print(f"{verb} Temporal schedule {name!r}.", highlight=False)
        return
    _only_with_temporal(namespace=ns)
    with closing(store_at(store, create=False)) as db:  # a schedule's store: not made here
        saved = triggers.pause(db, name, paused)
    after = "" if paused else f"; next fire {_next_fire(saved)} (the paused time is not caught up)"
    console.print(f"{verb} schedule {name!r}{after}.", highlight=False)


@schedule_app.command("pause")
@command
def pause(
    name: NameArg,
    store: StoreOpt = None,
    temporal: TemporalOpt = None,
    namespace: NamespaceOpt = None,
) -> None:
    """Pause a schedule: it fires nothing until resumed."""
    _pause(name, True, store, temporal, namespace)


@schedule_app.command("resume")
@command
def resume(
    name: NameArg,
    store: StoreOpt = None,
    temporal: TemporalOpt = None,
    namespace: NamespaceOpt = None,
) -> None:
    """Resume a paused schedule from its next time after now (no catching up)."""
    _pause(name, False, store, temporal, namespace)


@schedule_app.command("delete")
@command
def delete(
    name: NameArg,
    store: StoreOpt = None,
    temporal: TemporalOpt = None,
    namespace: NamespaceOpt = None,
) -> None:
    """Delete a schedule. The runs it queued stay, and a worker still starts them."""
    if temporal is not None:
        _temporal().delete_schedule(name, temporal=temporal, namespace=namespace)
        console.print(f"Deleted Temporal schedule {name!r}.", highlight=False)
        return
    _only_with_temporal(namespace=namespace)
    with closing(store_at(store, create=False)) as db:  # a schedule's store: not made here
        if not db.delete_schedule(name):
            known = ", ".join(s.name for s in db.list_schedules()) or "none"
            raise CliError(f"No schedule named {name!r} (schedules: {known}).")
    console.print(f"Deleted schedule {name!r}; the runs it queued stay.", highlight=False)
