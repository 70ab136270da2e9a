"""`playline run`, `resume` and `worker`: running plays and resuming them.

A run records where its play came from (file, function) and the gateway it called: the URL
(not one holding a password) and where its token came from (``--gateway-token`` or
``$PLAYLINE_GATEWAY_TOKEN``), never the token. A resume, from this command or from the UI,
calls the same gateway unless told another, and asks for the token again if it has none.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

import playline as pl
from playline import Dataset

from .._trace import SOURCE_KIND, trace_of
from ..errors import PlayDefinitionError, PlaylineError
from ..store import Event, RunRecord, RunStatus, Store
from ._app import (
    EXIT_CODES,
    STATUS_STYLE,
    CreditsOpt,
    ForceOpt,
    GatewayOpt,
    GatewayTokenOpt,
    InDoubtOpt,
    InputJsonOpt,
    InputsOpt,
    JsonOpt,
    OutOpt,
    PlayArg,
    RawOpt,
    StoreOpt,
    UsdOpt,
    app,
    command,
    console,
    counted,
    export_dataset,
    failure_lines,
    resumable,
    stats_line,
    store_at,
)
from ._load import (
    CliError,
    LoadedPlay,
    connect_gateway,
    load_module,
    load_play,
    parse_inputs,
    read_gateway_token,
    split_ref,
)
from ._outfile import check_out, out_source
from ._progress import JsonLines, LiveProgress, drive
from ._report import (
    require_run,
    waiting_for,
    when,
)
from ._temporal import (
    ConcurrencyOpt,
    DetachOpt,
    NamespaceOpt,
    TaskQueueOpt,
    TemporalOpt,
    follow_run,
    recorded_endpoint,
    serve,
    submit,
)

NotifyOpt = Annotated[
    str | None,
    typer.Option(
        "--notify",
        metavar="URL",
        help="POST the run's summary (status, rows, failed, credits per tool) to this URL "
        "when it ends or is stopped, as a Slack incoming webhook takes it. The run keeps it: a "
        "worker that resumes it notifies too.",
    ),
]


class _RecordSource:
    """Writes which file and function a new run came from, so `playline resume` finds them."""

    def __init__(self, store: Store, data: dict[str, Any]) -> None:
        self._store = store
        self._data = data
        self._done = False

    def __call__(self, event: Event) -> None:
        if self._done or event.kind != "run":
            return
        self._done = True  # the root run's first event; a child play's come later
        if not (event.data or {}).get("resumed"):
            self._store.append_events(
                [Event(kind=SOURCE_KIND, run_id=event.run_id, at=event.at, data=self._data)]
            )


class _Started:
    """Learns the run's id from its first event (and, for people, prints it at once)."""

    def __init__(self, *, announce: bool, run_id: str | None) -> None:
        self.run_id = run_id  # the one given (None: a new id), until the first event says
        self._announce = announce
        self._seen = False

    def __call__(self, event: Event) -> None:
        if self._seen:
            return
        self._seen = True
        self.run_id = event.run_id
        resumable(event.run_id)  # an interrupted command names it from now on
        if self._announce:
            console.print(f"run [bold]{event.run_id}[/]", style="dim", highlight=False)


def _execute(
    loaded: LoadedPlay,
    input: Any,
    *,
    run_id: str | None,
    store: str | None,
    gateway: str | None,
    max_credits: float | None,
    json_mode: bool,
    out: Path | None,
    gateway_token: str | None = None,
    max_usd: float | None = None,
    force: bool = False,
    raw: bool = False,
    retry_in_doubt: bool = False,
    ui: bool = False,
    retry_failed: bool = False,
    refresh: list[str] | None = None,
    notify: str | None = None,
) -> pl.RunResult:
    check_out(out, force=force)  # before anything runs, and so before anything is paid
    # an unreachable gateway, or one that refuses the token, fails here: no run is recorded
    gw = connect_gateway(gateway, gateway_token, doing=_NOT_STARTED)
    tools: list[Any] = list(loaded.sources)
    if gw is not None:
        tools.append(gw)
    db = store_at(store)
    exists = run_id is not None and db.get_run(run_id) is not None
    if input is None and not exists:
        input = {}
    jsonl = JsonLines() if json_mode else None
    progress = LiveProgress(console, db) if not json_mode and console.is_terminal else None
    source = {
        "file": str(loaded.file),
        "function": loaded.function,
        "max_credits": max_credits,
        **_gateway_source(gw, gateway_token),
        **out_source(out, raw),
    }
    started = _Started(announce=not json_mode, run_id=run_id)
    resumable(run_id if exists else None)
    listeners = [
        listener
        for listener in (started, jsonl, progress, _RecordSource(db, source))
        if listener is not None
    ]
    if ui:  # a daemon thread: it ends with the command
        from ._ui import start_beside

        start_beside(db, store, gateway, gateway_token)
    try:
        result = asyncio.run(
            drive(
                lambda stop: pl.arun(
                    loaded.play,
                    input,
                    store=db,
                    run_id=run_id,
                    tools=tools,
                    max_credits=max_credits,
                    max_usd=max_usd,
                    listeners=listeners,
                    retry_in_doubt=retry_in_doubt,
                    stop=stop,
                    retry_failed=retry_failed,
                    refresh=refresh or None,
                    notify=notify,
                ),
                progress,
            )
        )
    except asyncio.CancelledError:
        if started.run_id is None:  # its id is pl.run's, and no event has said it yet
            raise CliError(
                "stopped at once, before the run recorded its first event: `playline runs` "
                "lists it if it was opened.",
                code=130,
            ) from None
        raise CliError(
            f"stopped at once: the calls in flight are in doubt (a resume re-sends them with "
            "their idempotency keys). Resume with "
            f"`playline resume {shlex.quote(started.run_id)}`.",
            code=130,
        ) from None
    # a Ctrl-C from here on (while the result prints) leaves a run to resume only if it ended
    # suspended (a stop, a wait) or failed
    resumable(result.run_id if result.status in ("suspended", "failed") else None)
    written = _write_output(db, result, out, force=force, raw=raw) if out is not None else None
    if jsonl is not None:
        jsonl.result(result)
    else:
        _print_result(result, db)
        if written is not None and out is not None:
            _print_written(result, written, out)
    return result


_NOT_STARTED = "no run was started, nothing was paid"


def _gateway_source(gw: pl.Gateway | None, token: str | None) -> dict[str, str]:
    """What a run records of its gateway for a resume: the URL (unless it holds a password,
    which is never stored) and where the token came from, never the token."""
    if gw is None:
        return {}
    recorded = {} if urllib.parse.urlsplit(gw.url).password else {"gateway": gw.url}
    came_from = read_gateway_token(token)[1]
    return {**recorded, "gateway_token": came_from} if came_from else recorded


def _resumed_gateway(
    run_id: str, source: dict[str, Any], gateway: str | None, token: str | None
) -> str | None:
    """The gateway a resume calls: ``--gateway``, else the one the run recorded (else
    ``$PLAYLINE_GATEWAY_URL``). A run that was given a token needs one again: it was never
    stored."""
    url = gateway or source.get("gateway")
    came_from = source.get("gateway_token")
    if url and came_from and not read_gateway_token(token)[1]:
        raise CliError(
            f"Run {run_id} called the gateway at {url} with a token (given with {came_from}), "
            "which is never stored: give it again with --gateway-token or "
            "PLAYLINE_GATEWAY_TOKEN."
        )
    return str(url) if url else None


def _remembered_out(run_id: str, source: dict[str, Any]) -> Path | None:
    """The ``--out`` file the run was started with, which its resume writes again (the rows
    of the attempt that stopped replaced by all of them); None when it had none, or when
    the file can no longer be written there (said on stderr: give --out)."""
    recorded = source.get("out")
    if not isinstance(recorded, str):
        return None
    out = Path(recorded)
    try:
        check_out(out, force=True)  # the run's own file: replaced, a link never followed
    except CliError as exc:
        typer.echo(
            f"warning: run {run_id} was started with --out {out}, which this resume cannot "
            f"write ({exc}); give another with --out.",
            err=True,
        )
        return None
    return out


def _write_output(
    db: Store, result: pl.RunResult, out: Path, *, force: bool, raw: bool
) -> tuple[str, int] | None:
    name = result.output.name if isinstance(result.output, Dataset) else None
    if name is None:
        names = db.datasets(result.run_id)
        if not names:
            typer.echo(f"warning: run {result.run_id} has no dataset to write to {out}", err=True)
            return None
        name = names[-1]
    return name, export_dataset(
        db, result.run_id, name, out, with_status=False, force=force, raw=raw
    )


def _print_written(result: pl.RunResult, written: tuple[str, int], out: Path) -> None:
    name, count = written
    console.print(
        f"Wrote {counted(count, 'row')} of dataset {name!r} to {out}",
        highlight=False,
        soft_wrap=True,
    )
    if result.stats.rows_pending:  # a stop left rows unfinished: the file lacks them
        console.print(
            f"  partial: {counted(result.stats.rows_pending, 'row')} pending; `playline resume "
            f"{result.run_id}` runs them and writes {out} again with all the rows",
            highlight=False,
        )


def _print_result(result: pl.RunResult, db: Store) -> None:
    style = STATUS_STYLE.get(result.status, "red")
    console.print(f"[bold {style}]{result.status}[/] run [bold]{result.run_id}[/]")
    attempts = trace_of(db, result.run_id).attempt_list
    this = attempts[-1].credits if len(attempts) > 1 else None
    console.print("  " + stats_line(result.stats, this), highlight=False)
    # errors as they are: "[secret NAME]" in a redacted one is not markup
    if result.error:
        console.print(f"  [red]error:[/red] {escape(result.error)}", highlight=False)
    for what, line in failure_lines(result.stats):  # calls or cells: not the rows above
        console.print(f"  [red]{what}:[/red] {escape(line)}", highlight=False)
    waiting = result.waiting or {}
    if result.status == "suspended" and waiting.get("stop"):
        console.print(
            "  stopped: the calls already sent were recorded; nothing paid is lost.",
            highlight=False,
        )
    elif result.status == "suspended":
        console.print(f"  waiting for: {waiting_for(waiting)}", highlight=False)
    if isinstance(result.exception, PlayDefinitionError):
        # resuming would stop at the same place: the play or its input must change first
        console.print(
            "  fix: change the play or its input as the error says, then run it again (what "
            "it paid for is answered from receipts); resuming as it is would stop there again",
            highlight=False,
        )
    elif result.status in ("failed", "suspended"):
        console.print(f"  resume: playline resume {shlex.quote(result.run_id)}", highlight=False)
        if result.status == "failed" and not isinstance(result.exception, PlaylineError | None):
            console.print(  # the play's own code raised it
                "  a resume runs the play's code again, with the same input: fix the code "
                "first, or start a new run for another input",
                highlight=False,
            )
    elif result.stats.cell_errors:  # the play failed them: as it is, it fails them again
        console.print(
            "  fix the play where the errors above say, then retry the failed cells: "
            f"playline resume {shlex.quote(result.run_id)} --retry-failed",
            highlight=False,
        )
    elif result.stats.rows_failed:
        used_up = any(
            word in line
            for _, line in failure_lines(result.stats)
            for word in ("account_used_up", "quota_exhausted", "insufficient_credits")
        )
        why = (
            "a provider account is used up: renew its quota or add credits, then "
            if used_up
            else ""
        )
        console.print(
            f"  {why}retry the failed cells: "
            f"playline resume {shlex.quote(result.run_id)} --retry-failed",
            highlight=False,
        )
    elif result.output is not None and not isinstance(result.output, Dataset):
        text = json.dumps(result.output, default=str, ensure_ascii=False)
        console.print(f"  output: {text[:300]}{'…' if len(text) > 300 else ''}", highlight=False)
    console.print(
        f"  details: playline show {shlex.quote(result.run_id)}", style="dim", highlight=False
    )


@app.command()
@command
def run(
    play: PlayArg,
    inputs: InputsOpt = None,
    input_json: InputJsonOpt = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Run id (an existing one resumes that run).")
    ] = None,
    out: OutOpt = None,
    force: ForceOpt = False,
    raw: RawOpt = False,
    store: StoreOpt = None,
    gateway: GatewayOpt = None,
    gateway_token: GatewayTokenOpt = None,
    max_credits: CreditsOpt = None,
    max_usd: UsdOpt = None,
    retry_in_doubt: InDoubtOpt = False,
    json_mode: JsonOpt = False,
    ui: Annotated[
        bool, typer.Option("--ui", help="Serve the live web UI beside the run; prints its URL.")
    ] = False,
    refresh: Annotated[
        list[str] | None,
        typer.Option(
            "--refresh",
            metavar="COLUMN",
            help="Buy this column's tool calls again (receipts older than the run are not "
            "used); the other columns reuse theirs. COLUMN or DATASET.COLUMN; repeatable.",
        ),
    ] = None,
    notify: NotifyOpt = None,
    temporal: TemporalOpt = None,
    namespace: NamespaceOpt = None,
    task_queue: TaskQueueOpt = None,
    detach: DetachOpt = False,
) -> None:
    """Run a play from a Python file, with live progress; exit 0/1/3 by its status.

    Ctrl-C, SIGTERM or SIGHUP stop it cleanly (the calls already sent finish and are
    recorded) and it exits 3; `playline resume RUN_ID` continues it.

    With --temporal the run becomes a Temporal workflow, which `playline worker --temporal`
    processes run; this command follows it (and exits 3 when it waits for a time or an event:
    its workflow resumes it then), or with --detach only submits it.
    """
    input = parse_inputs(inputs or [], input_json)
    if temporal is None:
        _only_with_temporal(namespace=namespace, task_queue=task_queue, detach=detach)
    else:
        _not_with_temporal(
            gateway=gateway,
            gateway_token=gateway_token,
            retry_in_doubt=retry_in_doubt,
            ui=ui,
            refresh=refresh,
            notify=notify,
        )
        if detach and out is not None:
            raise CliError("--out needs the run to finish: leave out --detach.")
    loaded = load_play(play)
    if temporal is not None:
        _on_temporal(
            loaded,
            input,
            temporal=temporal,
            namespace=namespace,
            task_queue=task_queue,
            detach=detach,
            run_id=run_id,
            store=store,
            max_credits=max_credits,
            max_usd=max_usd,
            json_mode=json_mode,
            out=out,
            force=force,
            raw=raw,
        )
    result = _execute(
        loaded,
        input,
        run_id=run_id,
        store=store,
        gateway=gateway,
        gateway_token=gateway_token,
        max_credits=max_credits,
        max_usd=max_usd,
        json_mode=json_mode,
        out=out,
        force=force,
        raw=raw,
        retry_in_doubt=retry_in_doubt,
        ui=ui,
        refresh=refresh,
        notify=notify,
    )
    _check_refreshed(store, result.run_id, refresh)
    raise typer.Exit(EXIT_CODES[result.status])


@app.command()
@command
def resume(
    run_id: Annotated[str, typer.Argument(help="The run to resume.")],
    out: OutOpt = None,
    force: ForceOpt = False,
    raw: RawOpt = False,
    store: StoreOpt = None,
    gateway: GatewayOpt = None,
    gateway_token: GatewayTokenOpt = None,
    max_credits: CreditsOpt = None,
    max_usd: UsdOpt = None,
    retry_in_doubt: InDoubtOpt = False,
    retry_failed: Annotated[
        bool,
        typer.Option(
            "--retry-failed",
            help="Run failed rows again from their failed cell, keeping their other cells "
            "(by default a failed row runs again from its first column).",
        ),
    ] = False,
    notify: NotifyOpt = None,
    json_mode: JsonOpt = False,
) -> None:
    """Resume a run started with `playline run`: finished rows and paid calls are reused,
    failed rows are tried again. It calls the gateway the run called (unless --gateway says
    another), with the token given again (--gateway-token or $PLAYLINE_GATEWAY_TOKEN). A run
    started with --out has that file written again with all its rows (--out FILE: that one
    instead)."""
    check_out(out, force=force)
    db = store_at(store, create=False)  # the run's store: a mistyped one is not made
    record = require_run(db, run_id)
    resumable(run_id)  # interrupted while its play loads, it is still there to resume
    loaded, source = _source_play(db, run_id)  # without --max-credits, its own budget stands
    if out is None and (remembered := _remembered_out(run_id, source)) is not None:
        out, force, raw = remembered, True, bool(source.get("raw"))  # the run's own --out
    where = recorded_endpoint(record)
    if where is not None:  # it runs on Temporal: resume it there
        _not_with_temporal(
            gateway=gateway,
            gateway_token=gateway_token,
            retry_in_doubt=retry_in_doubt,
            retry_failed=retry_failed,
            notify=notify,
        )
        _on_temporal(
            loaded,
            None,
            temporal=where["target"],
            namespace=where.get("namespace"),
            task_queue=where.get("task_queue"),
            detach=False,
            run_id=run_id,
            store=store,
            max_credits=max_credits,
            max_usd=max_usd,
            json_mode=json_mode,
            out=out,
            force=force,
            raw=raw,
        )
    result = _execute(
        loaded,
        None,
        run_id=run_id,
        store=store,
        gateway=_resumed_gateway(run_id, source, gateway, gateway_token),
        gateway_token=gateway_token,
        max_credits=max_credits,
        max_usd=max_usd,
        json_mode=json_mode,
        out=out,
        force=force,
        raw=raw,
        retry_in_doubt=retry_in_doubt,
        retry_failed=retry_failed,
        notify=notify,
    )
    raise typer.Exit(EXIT_CODES[result.status])


def _check_refreshed(store: str | None, run_id: str, refresh: list[str] | None) -> None:
    """Warn when a --refresh named no column the run has: nothing was bought again."""
    if not refresh:
        return
    trace = trace_of(store_at(store), run_id)
    known = {c for ds in trace.datasets.values() for c in ds.columns}
    known |= {f"{ds.name}.{c}" for ds in trace.datasets.values() for c in ds.columns}
    for name in refresh:
        if name not in known:
            typer.echo(
                f"warning: --refresh {name}: the run has no column {name!r} (its columns: "
                f"{', '.join(sorted(c for c in known if '.' not in c)) or 'none'}); nothing "
                "was bought again for it.",
                err=True,
            )


def _only_with_temporal(**given: Any) -> None:
    for name, value in given.items():
        if value:
            raise CliError(f"--{name.replace('_', '-')} goes with --temporal HOST:PORT.")


def _not_with_temporal(
    *, gateway: str | None, gateway_token: str | None = None, **embedded_only: Any
) -> None:
    if gateway is not None or gateway_token is not None:
        flag = "--gateway" if gateway is not None else "--gateway-token"
        raise CliError(
            f"{flag} belongs to the workers with --temporal: start them with `playline "
            "worker --temporal HOST:PORT --gateway URL --gateway-token TOKEN` (or "
            "PLAYLINE_GATEWAY_URL and PLAYLINE_GATEWAY_TOKEN)."
        )
    for name, value in embedded_only.items():
        if value:
            raise CliError(
                f"--{name.replace('_', '-')} is not available with --temporal: run the play "
                "without --temporal to use it."
            )


def _on_temporal(
    loaded: LoadedPlay,
    input: Any,
    *,
    temporal: str,
    namespace: str | None,
    task_queue: str | None,
    detach: bool,
    run_id: str | None,
    store: str | None,
    max_credits: float | None,
    json_mode: bool,
    out: Path | None,
    force: bool,
    raw: bool,
    max_usd: float | None = None,
) -> None:
    """Submit (or resume) the run on Temporal, follow it unless detached, and exit."""
    check_out(out, force=force)
    db = store_at(store)
    if input is None and (run_id is None or db.get_run(run_id) is None):
        input = {}
    submitted = submit(
        loaded,
        input,
        db=db,
        temporal=temporal,
        namespace=namespace,
        task_queue=task_queue,
        run_id=run_id,
        max_credits=max_credits,
        max_usd=max_usd,
        recorded=out_source(out, raw),
    )
    if detach:
        if json_mode:
            typer.echo(json.dumps({"run_id": submitted, "status": "submitted"}))
        else:
            console.print(
                f"submitted run [bold]{submitted}[/] to Temporal at {temporal}; see it with "
                f"`playline show {shlex.quote(submitted)}`",
                highlight=False,
            )
        raise typer.Exit(0)
    result, jsonl = follow_run(
        submitted, db=db, temporal=temporal, namespace=namespace, json_mode=json_mode
    )
    written = (
        _write_output(db, result, out, force=force, raw=raw)
        if out is not None and result.ok
        else None
    )
    if jsonl is not None:
        jsonl.result(result)
    else:
        _print_result(result, db)
        if result.status == "suspended" and not (result.waiting or {}).get("stop"):
            console.print(
                "  its workflow resumes it when that comes; nothing more to do here.",
                highlight=False,
            )
        if written is not None and out is not None:
            _print_written(result, written, out)
    raise typer.Exit(EXIT_CODES[result.status])


def _source_play(db: Store, run_id: str) -> tuple[LoadedPlay, dict[str, Any]]:
    """The play a `playline run` recorded for ``run_id`` (or the trigger that queued it, in
    the run's options), and the record (file, function, budget)."""
    record = db.get_run(run_id)
    queued = None if record is None else record.options.get("source")
    if isinstance(queued, dict) and queued.get("file"):
        return load_play(f"{queued['file']}:{queued['function']}", run_id=run_id), queued
    sources = db.read_events(run_id, kinds=[SOURCE_KIND])
    if not sources or not (sources[0].data or {}).get("file"):
        raise CliError(
            f"Run {run_id} was not started by `playline run`, so its play file is unknown. "
            f"Resume it with `playline run PLAY.py --run-id {shlex.quote(run_id)}` or "
            f"pl.run(play, run_id={run_id!r}).",
            code=1,
        )
    source = sources[0].data or {}
    return load_play(f"{source['file']}:{source['function']}", run_id=run_id), source


Plays = dict[str, tuple[pl.Play, tuple[Any, ...]]]


def play_resolver(
    db: Store, by_name: Plays, gateway: Any | None
) -> Callable[[RunRecord], tuple[pl.Play, list[Any]]]:
    """How a worker finds a run's play and tools: among the plays it loaded (``by_name``),
    else from the file the run recorded. A run whose file cannot be loaded is skipped
    (``PlaylineError``), and the worker goes on with the others."""

    def resolve(record: RunRecord) -> tuple[pl.Play, list[Any]]:
        if record.play in by_name:
            play, sources = by_name[record.play]
        else:
            try:
                found, _ = _source_play(db, record.run_id)
            except CliError as exc:
                raise PlaylineError(str(exc)) from None
            play, sources = found.play, found.sources
        return play, [*sources, *([gateway] if gateway else [])]

    return resolve


@app.command()
@command
def worker(
    plays: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[PLAY.py[:function] ...]",
            help="Play files to import first; runs started by `playline run` find their own.",
        ),
    ] = None,
    burst: Annotated[
        bool, typer.Option("--burst", help="Return once nothing is due (for cron and tests).")
    ] = False,
    interval: Annotated[
        float,
        typer.Option(
            "--interval", min=pl.Worker.MIN_INTERVAL, help="Seconds between checks for due runs."
        ),
    ] = 1.0,
    store: StoreOpt = None,
    gateway: GatewayOpt = None,
    gateway_token: GatewayTokenOpt = None,
    json_mode: JsonOpt = False,
    temporal: TemporalOpt = None,
    namespace: NamespaceOpt = None,
    task_queue: TaskQueueOpt = None,
    concurrency: ConcurrencyOpt = None,
) -> None:
    """Resume suspended runs when they are due: sleeps that ended, events that arrived; and
    runs whose process died, once their lease has run out. Each run is printed as its attempt
    ends; SIGTERM or Ctrl-C stops the attempt under way cleanly (it ends suspended).

    With --temporal: serve runs submitted with `playline run --temporal` (their attempts,
    timers and events) until SIGTERM or Ctrl-C, which hand the runs in progress to the other
    workers without paying twice.
    """
    if temporal is None:
        _only_with_temporal(namespace=namespace, task_queue=task_queue, concurrency=concurrency)
    elif burst:
        raise CliError("--burst is for the local worker; a Temporal worker serves until stopped.")
    # an unreachable gateway, or one that refuses the token, fails here
    gw = connect_gateway(gateway, gateway_token, doing="the worker did not start")
    db = store_at(store)
    by_name: Plays = {}
    for ref in plays or []:
        loaded = load_module(split_ref(ref)[0])  # PLAY.py[:function]: the file's plays
        by_name.update({p.name: (p, loaded.sources) for p in loaded.plays.values()})

    resolve = play_resolver(db, by_name, gw)
    if temporal is not None:
        serve(
            db=db,
            temporal=temporal,
            namespace=namespace,
            task_queue=task_queue,
            concurrency=concurrency,
            resolve=resolve,
            json_mode=json_mode,
        )
        return

    def skipped(name: str, why: str) -> None:  # as it is skipped
        typer.echo(f"skipped {name}: {' '.join(why.split())}", err=True)

    def report(result: pl.RunResult) -> None:  # each attempt as it ends
        if json_mode:
            typer.echo(json.dumps({"run_id": result.run_id, "status": result.status}))
        else:
            _print_result(result, db)

    runner = pl.Worker(store=db, interval=interval, resolve=resolve, on_skip=skipped)

    # SIGINT, SIGTERM and SIGHUP stop the attempt under way cleanly (`drive`): it ends
    # suspended, and the next worker goes on with it
    try:
        results = asyncio.run(
            drive(lambda stop: runner.run(burst=burst, stop=stop, report=report), None)
        )
    except asyncio.CancelledError:  # a second signal: at once
        raise CliError(
            "stopped at once: an attempt under way left its calls in flight in doubt (a "
            "resume re-sends them with their idempotency keys); the next worker goes on "
            "with its run.",
            code=130,
        ) from None
    if not results and not json_mode:
        console.print("Nothing is due." if burst else "Stopped; no run was due.")
        _say_held(db)


def _say_held(db: Store) -> None:
    """Runs another process holds (its lease not run out): one killed leaves its run so until
    the lease ends, and only then may a worker take it over; say when, and how to go on now."""
    now = time.time()
    for run in db.list_runs(limit=200, status=RunStatus.RUNNING, roots_only=True):
        if run.lease_until is not None and run.lease_until > now:
            console.print(
                f"Run {run.run_id} is held by another process until {when(run.lease_until)} "
                f"(its lease, renewed while it runs): if that process died, a worker takes "
                f"the run over then, or `playline resume {shlex.quote(run.run_id)}` on its "
                "machine goes on at once.",
                highlight=False,
                markup=False,
            )
