"""Commands of the ``playline`` CLI (API.md section 7).

Exit codes: 0 completed (also with row errors), 1 failed, 2 usage, 3 suspended. An error is
one line on stderr (``error: ...``), never a traceback; ``PLAYLINE_DEBUG=1`` re-raises it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import click
import typer
from rich.console import Console
from rich.table import Table

import playline as pl

from .._dataset import Dataset
from ..errors import PlayDefinitionError, PlaylineError
from ..store import Event, RunRecord, Store, open_store
from ..tools import ToolSpec
from ._load import (
    CliError,
    LoadedPlay,
    gateway_from,
    load_module,
    load_play,
    parse_inputs,
    parse_json,
)
from ._progress import JsonLines, LiveProgress, drive
from ._report import (
    SOURCE_KIND,
    columns_of,
    export_rows,
    require_run,
    trace_of,
    when,
    write_rows,
)

app = typer.Typer(
    help="Playline: durable data-enrichment plays: batched, rate-limited, never paying twice.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
cache_app = typer.Typer(help="Receipts: what each tool's stored results hold; clear them.")
tools_app = typer.Typer(help="The tools a play can call: local ones and the gateway's.")
event_app = typer.Typer(help="Events for runs waiting in ctx.wait_for_event(key).")
app.add_typer(cache_app, name="cache", no_args_is_help=True)
app.add_typer(tools_app, name="tools")
app.add_typer(event_app, name="event", no_args_is_help=True)

console = Console()
EXIT_CODES = {"completed": 0, "completed_with_errors": 0, "failed": 1, "suspended": 3}

P = ParamSpec("P")
R = TypeVar("R")


def _fail(message: str, code: int) -> typer.Exit:
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(code)


def command(fn: Callable[P, R]) -> Callable[P, R]:
    """Report errors as one line and an exit code (2 usage, 1 failure), not a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as exc:
            if os.environ.get("PLAYLINE_DEBUG"):
                raise
            if isinstance(exc, CliError):
                raise _fail(str(exc), exc.code) from None
            if isinstance(exc, PlayDefinitionError):
                raise _fail(str(exc), 2) from None
            if isinstance(exc, PlaylineError):
                raise _fail(str(exc), 1) from None
            raise _fail(f"{type(exc).__name__}: {exc}", 1) from None
        except KeyboardInterrupt:
            raise _fail("interrupted; resume the run with `playline resume RUN_ID`", 130) from None

    return wrapper


# shared options
StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="Store URL (default: $PLAYLINE_STORE, else sqlite:///.playline/playline.db).",
    ),
]
GatewayOpt = Annotated[
    str | None,
    typer.Option(
        "--gateway",
        help="Tool gateway URL (default: $PLAYLINE_GATEWAY_URL; token: $PLAYLINE_GATEWAY_TOKEN).",
    ),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Machine output: JSON (for runs, one object per event line).")
]
OutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out", help="Write the play's dataset to FILE.csv or FILE.jsonl.", dir_okay=False
    ),
]
CreditsOpt = Annotated[
    float | None,
    typer.Option("--max-credits", min=0, help="Stop before a call that could pass this budget."),
]


def _store(url: str | None) -> Store:
    return open_store(url)


def _check_out(out: Path | None) -> None:
    if out is not None and out.suffix.lower() not in (".csv", ".jsonl"):
        raise CliError(f"--out {out}: use a .csv or .jsonl file name.")


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
) -> pl.RunResult:
    _check_out(out)
    gw = gateway_from(gateway)
    tools: list[Any] = list(loaded.sources)
    if gw is not None:
        gw.specs()  # an unreachable gateway fails here, before a run is recorded
        tools.append(gw)
    db = _store(store)
    if input is None and (run_id is None or db.get_run(run_id) is None):
        input = {}
    jsonl = JsonLines() if json_mode else None
    progress = LiveProgress(console, db) if not json_mode and console.is_terminal else None
    source = {"file": str(loaded.file), "function": loaded.function, "max_credits": max_credits}
    listeners = [listener for listener in (jsonl, progress, _RecordSource(db, source)) if listener]
    result = asyncio.run(
        drive(
            lambda: pl.arun(
                loaded.play,
                input,
                store=db,
                run_id=run_id,
                tools=tools,
                max_credits=max_credits,
                listeners=listeners,
            ),
            progress,
        )
    )
    written = _write_output(db, result, out) if out is not None else None
    if jsonl is not None:
        jsonl.result(result)
    else:
        _print_result(result)
        if written is not None:
            console.print(f"Wrote {written[1]} rows of dataset {written[0]!r} to {out}")
    return result


def _write_output(db: Store, result: pl.RunResult, out: Path) -> tuple[str, int] | None:
    name = result.output.name if isinstance(result.output, Dataset) else None
    if name is None:
        names = db.datasets(result.run_id)
        if not names:
            typer.echo(f"warning: run {result.run_id} has no dataset to write to {out}", err=True)
            return None
        name = names[-1]
    return name, _export(db, result.run_id, name, out, with_status=False)


def _export(db: Store, run_id: str, dataset: str, out: Path, *, with_status: bool) -> int:
    fields = columns_of(export_rows(db, run_id, dataset, with_status=with_status))
    rows = export_rows(db, run_id, dataset, with_status=with_status)
    return write_rows(rows, out, fields)


def _stats_line(stats: pl.RunStats) -> str:
    return (
        f"{stats.rows} rows ({stats.rows_executed} executed, {stats.rows_reused} reused, "
        f"{stats.rows_failed} failed)\n  tool calls {stats.tool_calls_live} live, "
        f"{stats.tool_calls_cached} cached, {stats.tool_calls_in_flight} shared · "
        f"{stats.tool_requests} provider requests · {stats.credits:g} credits"
    )


_STYLE = {"completed": "green", "completed_with_errors": "yellow", "suspended": "cyan"}


def _print_result(result: pl.RunResult) -> None:
    style = _STYLE.get(result.status, "red")
    console.print(f"[bold {style}]{result.status}[/] run [bold]{result.run_id}[/]")
    console.print("  " + _stats_line(result.stats), highlight=False)
    if result.error:
        console.print(f"  [red]error:[/red] {result.error}", highlight=False)
    waiting = getattr(result, "waiting", None)
    if result.status == "suspended":
        console.print(f"  waiting for: {json.dumps(waiting, default=str)}", highlight=False)
    if result.status in ("failed", "suspended"):
        console.print(f"  resume: playline resume {result.run_id}", highlight=False)
    elif result.output is not None and not isinstance(result.output, Dataset):
        text = json.dumps(result.output, default=str, ensure_ascii=False)
        console.print(f"  output: {text[:300]}{'…' if len(text) > 300 else ''}", highlight=False)
    console.print(f"  details: playline show {result.run_id}", style="dim", highlight=False)


@app.command()
@command
def run(
    play: Annotated[
        str, typer.Argument(metavar="PLAY.py[:function]", help="The play file (and function).")
    ],
    inputs: Annotated[
        list[str] | None,
        typer.Option(
            "-i",
            "--input",
            metavar="KEY=VALUE",
            help="An input field: key=text, or key:=JSON (e.g. -i limit:=10). Repeatable.",
        ),
    ] = None,
    input_json: Annotated[
        str | None,
        typer.Option("--input-json", metavar="JSON|@FILE", help="The input as a JSON object."),
    ] = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Run id (an existing one resumes that run).")
    ] = None,
    out: OutOpt = None,
    store: StoreOpt = None,
    gateway: GatewayOpt = None,
    max_credits: CreditsOpt = None,
    json_mode: JsonOpt = False,
) -> None:
    """Run a play from a Python file, with live progress; exit 0/1/3 by its status."""
    input = parse_inputs(inputs or [], input_json)
    loaded = load_play(play)
    result = _execute(
        loaded,
        input,
        run_id=run_id,
        store=store,
        gateway=gateway,
        max_credits=max_credits,
        json_mode=json_mode,
        out=out,
    )
    raise typer.Exit(EXIT_CODES[result.status])


@app.command()
@command
def resume(
    run_id: Annotated[str, typer.Argument(help="The run to resume.")],
    out: OutOpt = None,
    store: StoreOpt = None,
    gateway: GatewayOpt = None,
    max_credits: CreditsOpt = None,
    json_mode: JsonOpt = False,
) -> None:
    """Resume a run started with `playline run`: finished rows and paid calls are reused."""
    db = _store(store)
    require_run(db, run_id)
    loaded, source = _source_play(db, run_id)
    if max_credits is None:
        max_credits = source.get("max_credits")
    result = _execute(
        loaded,
        None,
        run_id=run_id,
        store=store,
        gateway=gateway,
        max_credits=max_credits,
        json_mode=json_mode,
        out=out,
    )
    raise typer.Exit(EXIT_CODES[result.status])


def _source_play(db: Store, run_id: str) -> tuple[LoadedPlay, dict[str, Any]]:
    """The play a `playline run` recorded for ``run_id``, and the record (file, function,
    budget)."""
    sources = db.read_events(run_id, kinds=[SOURCE_KIND])
    if not sources or not (sources[0].data or {}).get("file"):
        raise CliError(
            f"Run {run_id} was not started by `playline run`, so its play file is unknown. "
            f"Resume it with `playline run PLAY.py --run-id {run_id}` or "
            f"pl.run(play, run_id={run_id!r}).",
            code=1,
        )
    source = sources[0].data or {}
    return load_play(f"{source['file']}:{source['function']}"), source


@app.command()
@command
def worker(
    plays: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[PLAY.py ...]",
            help="Play files to import first; runs started by `playline run` find their own.",
        ),
    ] = None,
    burst: Annotated[
        bool, typer.Option("--burst", help="Return once nothing is due (for cron and tests).")
    ] = False,
    interval: Annotated[
        float, typer.Option("--interval", min=0.05, help="Seconds between checks for due runs.")
    ] = 1.0,
    store: StoreOpt = None,
    gateway: GatewayOpt = None,
    json_mode: JsonOpt = False,
) -> None:
    """Resume suspended runs when they are due: sleeps that ended, events that arrived."""
    db = _store(store)
    gw = gateway_from(gateway)
    if gw is not None:
        gw.specs()  # an unreachable gateway fails here
    by_name = {}
    for ref in plays or []:
        loaded = load_module(ref)
        by_name.update({p.name: (p, loaded.sources) for p in loaded.plays.values()})

    def resolve(record: RunRecord) -> tuple[pl.Play, list[Any]]:
        if record.play in by_name:
            play, sources = by_name[record.play]
        else:
            found, _ = _source_play(db, record.run_id)
            play, sources = found.play, found.sources
        return play, [*sources, *([gw] if gw else [])]

    runner = pl.Worker(store=db, interval=interval, resolve=resolve)
    try:
        results = asyncio.run(runner.run(burst=burst))
    except KeyboardInterrupt:
        runner.stop()
        results = []
    for result in results:
        if json_mode:
            typer.echo(json.dumps({"run_id": result.run_id, "status": result.status}))
        else:
            _print_result(result)
    for run_id, why in runner.skipped.items():
        typer.echo(f"skipped {run_id}: {' '.join(why.split())}", err=True)
    if not results and not json_mode:
        console.print("Nothing is due.")


@app.command()
@command
def runs(
    limit: Annotated[int, typer.Option("--limit", min=1, help="How many runs, newest first.")] = 20,
    store: StoreOpt = None,
    json_mode: JsonOpt = False,
) -> None:
    """List the newest runs of the store."""
    records = _store(store).list_runs(limit=limit)
    if json_mode:
        for r in records:
            doc = {
                "run_id": r.run_id,
                "play": r.play,
                "status": str(r.status),
                "created_at": r.created_at,
                "updated_at": r.updated_at,
                "stats": r.stats,
                "error": r.error,
            }
            typer.echo(json.dumps(doc, default=str))
        return
    if not records:
        console.print("No runs yet. Start one with `playline run PLAY.py`.")
        return
    table = Table(title="Runs (newest first)")
    for column in ("run", "play", "status", "started", "rows", "failed", "credits"):
        table.add_column(
            column, justify="right" if column in ("rows", "failed", "credits") else "left"
        )
    for r in records:
        stats = r.stats or {}
        table.add_row(
            r.run_id,
            r.play,
            str(r.status),
            when(r.created_at),
            str(stats.get("rows", "")),
            str(stats.get("rows_failed", "")),
            f"{stats['credits']:g}" if "credits" in stats else "",
        )
    console.print(table)


@app.command()
@command
def show(
    run_id: Annotated[str, typer.Argument(help="The run to show.")],
    store: StoreOpt = None,
    json_mode: JsonOpt = False,
) -> None:
    """A run's status, step trace (datasets, batches per tool), stats and cost ledger."""
    db = _store(store)
    run = require_run(db, run_id)
    trace = trace_of(db, run_id)
    if json_mode:
        doc = {
            "run_id": run.run_id,
            "play": run.play,
            "status": str(run.status),
            "created_at": run.created_at,
            "updated_at": run.updated_at,
            "input": run.input,
            "output": run.output,
            "error": run.error,
            "waiting": run.waiting,
            "stats": run.stats,
            "trace": trace.to_dict(),
        }
        typer.echo(json.dumps(doc, default=str))
        return
    style = _STYLE.get(str(run.status), "red")
    console.print(
        f"Run [bold]{run.run_id}[/bold] · play [bold]{run.play}[/bold] · [{style}]{run.status}[/]"
    )
    console.print(
        f"  started {when(run.created_at)} · updated {when(run.updated_at)} · "
        f"{trace.attempts} attempt(s)",
        highlight=False,
    )
    if trace.source:
        console.print(
            f"  source {trace.source.get('file')}:{trace.source.get('function')}", highlight=False
        )
    if run.error:
        console.print(f"  [red]error:[/red] {run.error}", highlight=False)
    if run.waiting:
        console.print(f"  waiting for: {json.dumps(run.waiting, default=str)}", highlight=False)
    if run.stats:
        stats = pl.RunStats(
            **{k: v for k, v in run.stats.items() if k in pl.RunStats.__dataclass_fields__}
        )
        console.print("  " + _stats_line(stats), highlight=False)
    steps = Table(title="Datasets", title_justify="left")
    for column in ("dataset", "status", "rows", "executed", "reused", "failed", "columns"):
        steps.add_column(column)
    for ds in trace.datasets.values():
        s = ds.stats
        steps.add_row(
            ds.name + (f"\n[dim]{ds.description}[/dim]" if ds.description else ""),
            ds.status,
            *(str(s.get(k, "")) for k in ("rows", "rows_executed", "rows_reused", "rows_failed")),
            ", ".join(ds.columns),
        )
    if trace.datasets:
        console.print(steps)
    tools = Table(title="Tools: batches and cost ledger", title_justify="left")
    for column in ("tool", "requests", "inputs sent", "live calls", "found", "credits"):
        tools.add_column(column, justify="left" if column == "tool" else "right")
    for tool, t in sorted(trace.tools.items()):
        tools.add_row(
            tool,
            str(t.requests),
            str(t.inputs),
            str(t.calls),
            str(t.found),
            f"{t.credits:g}",
        )
    if trace.tools:
        tools.add_row(
            "[bold]total[/bold]",
            "",
            "",
            "",
            "",
            f"[bold]{sum(t.credits for t in trace.tools.values()):g}[/bold]",
        )
        console.print(tools)
    for kind, count in sorted(trace.other.items()):
        console.print(f"  {count} {kind} event(s)", highlight=False)
    if trace.logs:
        console.print(
            f"  {trace.logs} log line(s): playline logs {run_id}", style="dim", highlight=False
        )


@app.command()
@command
def logs(
    run_id: Annotated[str, typer.Argument(help="The run whose log to print.")],
    store: StoreOpt = None,
    json_mode: JsonOpt = False,
) -> None:
    """Print a run's log lines (ctx.log and the runtime's notes)."""
    db = _store(store)
    require_run(db, run_id)
    lines = db.read_events(run_id, kinds=["log"])
    for event in lines:
        if json_mode:
            typer.echo(
                json.dumps(
                    {"at": event.at, "message": event.preview, "data": event.data}, default=str
                )
            )
            continue
        row = (event.data or {}).get("row_key")
        where = f" [{row}]" if row else ""
        typer.echo(f"{when(event.at)}{where} {event.preview}")
    if not lines and not json_mode:
        typer.echo(f"Run {run_id} has no log lines.", err=True)


@app.command()
@command
def export(
    run_id: Annotated[str, typer.Argument(help="The run to export.")],
    out: Annotated[Path, typer.Option("--out", help="FILE.csv or FILE.jsonl", dir_okay=False)],
    dataset: Annotated[
        str | None, typer.Option("--dataset", help="Which dataset (needed when there are several).")
    ] = None,
    with_status: Annotated[
        bool,
        typer.Option(
            "--with-status", help="Add _key, _status, _error and <column>.status / .provider."
        ),
    ] = False,
    store: StoreOpt = None,
) -> None:
    """Write a run's dataset rows (cells as values) to CSV or JSON lines."""
    _check_out(out)
    db = _store(store)
    require_run(db, run_id)
    names = db.datasets(run_id)
    if dataset is None:
        if not names:
            raise CliError(f"Run {run_id} has no dataset rows to export.", code=1)
        if len(names) > 1:
            raise CliError(
                f"Run {run_id} has several datasets ({', '.join(names)}); choose one with "
                "--dataset NAME."
            )
        dataset = names[0]
    elif dataset not in names:
        raise CliError(
            f"Run {run_id} has no dataset {dataset!r} "
            f"(its datasets: {', '.join(names) or 'none'}).",
            code=1,
        )
    count = _export(db, run_id, dataset, out, with_status=with_status)
    console.print(f"Wrote {count} rows of dataset {dataset!r} to {out}", highlight=False)


# cache
@cache_app.command("stats")
@command
def cache_stats(store: StoreOpt = None, json_mode: JsonOpt = False) -> None:
    """Receipts per tool: completed, failed, running, and the size of stored results."""
    stats = _store(store).receipt_stats()
    if json_mode:
        typer.echo(json.dumps(stats))
        return
    if not stats:
        console.print("No receipts yet: nothing has been paid for in this store.")
        return
    table = Table(title="Receipts")
    for column in ("tool", "completed", "failed", "running", "bytes"):
        table.add_column(column, justify="left" if column == "tool" else "right")
    for tool, s in sorted(stats.items()):
        table.add_row(
            tool, *(str(s.get(k, 0)) for k in ("completed", "failed", "running", "bytes"))
        )
    console.print(table)


@cache_app.command("clear")
@command
def cache_clear(
    tool: Annotated[str | None, typer.Option("--tool", help="Only this tool's receipts.")] = None,
    store: StoreOpt = None,
) -> None:
    """Delete receipts (of one tool with --tool): those calls will be paid for again."""
    deleted = _store(store).clear_receipts(tool)
    what = f"of {tool} " if tool else ""
    console.print(
        f"Deleted {deleted} receipt(s) {what}; the next such calls run live (and are paid).",
        highlight=False,
    )


# tools
def _tool_specs(play: str | None, gateway: str | None) -> list[tuple[str, ToolSpec]]:
    found: list[tuple[str, ToolSpec]] = []
    if play is not None:
        found.extend(("local", spec) for spec in load_play(play).tools)
    gw = gateway_from(gateway)
    if gw is not None:
        found.extend((gw.url, spec) for spec in gw.specs())
    if play is None and gw is None:
        raise CliError(
            "No tools to list: give --play PLAY.py (its local tools) and/or --gateway URL "
            "(or set PLAYLINE_GATEWAY_URL)."
        )
    return found


def _spec_doc(source: str, spec: ToolSpec) -> dict[str, Any]:
    return {
        "id": spec.id,
        "source": source,
        "description": spec.description,
        "rate": {"per_second": spec.rate.per_second, "burst": spec.rate.burst},
        "concurrency": spec.rate.concurrency,
        "cost": {"credits": spec.cost.credits, "charge": spec.cost.charge},
        "batch": None
        if spec.batch is None
        else {"max_size": spec.batch.max_size, "via": spec.batch.via},
        "outputs": {k: list(v) for k, v in spec.outputs.items()},
        "lists": dict(spec.lists),
        "version": spec.version,
        "retry_safe": spec.retry_safe,
        "async_jobs": spec.jobs is not None,
    }


PlayOpt = Annotated[
    str | None,
    typer.Option("--play", metavar="PLAY.py", help="List the local tools of this play file."),
]


@tools_app.callback(invoke_without_command=True)
def tools_default(ctx: typer.Context) -> None:
    """The tools a play can call (`playline tools` lists the gateway's)."""
    if ctx.invoked_subcommand is None:
        tools_list(play=None, gateway=None, json_mode=False)


@tools_app.command("list")
@command
def tools_list(
    play: PlayOpt = None, gateway: GatewayOpt = None, json_mode: JsonOpt = False
) -> None:
    """List tools: id, source, rate, batch size and cost."""
    specs = _tool_specs(play, gateway)
    if json_mode:
        for source, spec in specs:
            typer.echo(json.dumps(_spec_doc(source, spec)))
        return
    table = Table(title="Tools")
    table.add_column("tool", no_wrap=True)
    for column in ("source", "rate/s", "batch", "cost", "description"):
        table.add_column(column)
    for source, spec in specs:
        table.add_row(
            spec.id,
            source,
            f"{spec.rate.per_second:g}" if spec.rate.per_second else "-",
            str(spec.batch.max_size) if spec.batch else "-",
            f"{spec.cost.credits:g} {spec.cost.charge}",
            spec.description,
        )
    console.print(table)


@tools_app.command("describe")
@command
def tools_describe(
    tool_id: Annotated[
        str, typer.Argument(metavar="ID", help="The tool id, e.g. sim.email.alpha.")
    ],
    play: PlayOpt = None,
    gateway: GatewayOpt = None,
) -> None:
    """Everything about one tool: rate, concurrency, cost rule, batching, outputs, version."""
    specs = _tool_specs(play, gateway)
    for source, spec in specs:
        if spec.id == tool_id:
            typer.echo(json.dumps(_spec_doc(source, spec), indent=2))
            return
    known = ", ".join(spec.id for _, spec in specs) or "none"
    raise CliError(f"No tool {tool_id!r} (known: {known}).", code=1)


# events
@event_app.command("send")
@command
def event_send(
    key: Annotated[str, typer.Argument(help="The key the run waits for in ctx.wait_for_event.")],
    data: Annotated[
        str | None, typer.Option("--data", metavar="JSON|@FILE", help="The payload, as JSON.")
    ] = None,
    store: StoreOpt = None,
) -> None:
    """Send an event to the run waiting for KEY (delivered once; the first payload stands)."""
    payload = None if data is None else parse_json(data, "--data")
    send = getattr(pl, "send_event", None)
    if send is None:
        raise CliError(
            "`playline event send` is not available yet in this build (no pl.send_event).", code=1
        )
    url = store or os.environ.get("PLAYLINE_STORE") or None
    fresh = send(key, payload, store=url)
    if fresh is False:
        console.print(f"Event {key!r} was sent before; the first payload stands.", highlight=False)
    else:
        console.print(
            f"Sent event {key!r}. Runs waiting for it resume with their worker.", highlight=False
        )


# the simulator and the demo
@app.command()
@command
def sim(
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8765,
    seed: Annotated[int, typer.Option("--seed", help="World seed (same seed, same world).")] = 7,
    host: Annotated[str, typer.Option("--host", help="Interface to bind.")] = "127.0.0.1",
    token: Annotated[str, typer.Option("--token", help="Bearer token it accepts.")] = "dev",
    latency_ms: Annotated[
        float | None, typer.Option("--latency-ms", help="Answer latency (default ~20 ms).")
    ] = None,
) -> None:
    """Run the provider simulator (paid data providers behind a gateway) until Ctrl-C."""
    from playline.sim import main as sim_main

    sim_main(port, seed, host, token=token, latency_ms=latency_ms)


@app.command()
@command
def demo(
    store: Annotated[
        str | None,
        typer.Option("--store", help="Store URL (default: a fresh SQLite file in a temp dir)."),
    ] = None,
) -> None:
    """Enrich a CSV of people through the simulator, then show a second run is free."""
    from ._demo import run_demo

    raise typer.Exit(run_demo(console, store=store))


@app.command()
def version() -> None:
    """Print the installed Playline version."""
    console.print(pl.__version__)


def main() -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    app()
