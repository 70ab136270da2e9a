"""`playline runs`, `show`, `logs` and `export`: a run, read after the fact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

import playline as pl

from .._trace import Trace, run_status, trace_of
from ..errors import StoreError
from ..store.sql import SQLStore
from ._app import (
    STATUS_STYLE,
    ForceOpt,
    JsonOpt,
    RawOpt,
    StoreOpt,
    app,
    command,
    console,
    export_dataset,
    stats_line,
    store_at,
)
from ._load import (
    CliError,
)
from ._outfile import check_out
from ._report import require_run, when


@app.command()
@command
def runs(
    limit: Annotated[int, typer.Option("--limit", min=1, help="How many runs, newest first.")] = 20,
    store: StoreOpt = None,
    json_mode: JsonOpt = False,
) -> None:
    """List the newest runs of the store."""
    records = store_at(store, read_only=True).list_runs(limit=limit)
    if json_mode:
        for r in records:
            doc = {
                "run_id": r.run_id,
                "play": r.play,
                "status": run_status(r),
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
    widest = max(len(r.run_id) for r in records)
    table.add_column("run", no_wrap=True, min_width=widest)  # an id is never cut
    for column in ("play", "status", "started", "rows", "failed", "credits"):
        table.add_column(
            column, justify="right" if column in ("rows", "failed", "credits") else "left"
        )
    for r in records:
        stats = r.stats or {}
        status = run_status(r)
        table.add_row(
            r.run_id,
            r.play,
            f"[{STATUS_STYLE.get(status, 'red')}]{status}[/]",
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
    db = store_at(store, read_only=True)
    run = require_run(db, run_id)
    try:
        trace = trace_of(db, run_id)
    except StoreError:
        if not (isinstance(db, SQLStore) and db.damage is not None):
            raise
        typer.echo(
            "warning: the run's step trace (events, ledger) is in the damaged part of the "
            "store: showing the run's record only.",
            err=True,
        )
        trace = Trace()
    if json_mode:
        doc = {
            "run_id": run.run_id,
            "play": run.play,
            "status": run_status(run),
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
    status = run_status(run)
    style = STATUS_STYLE.get(status, "red")
    console.print(
        f"Run [bold]{run.run_id}[/bold] · play [bold]{run.play}[/bold] · [{style}]{status}[/]"
    )
    if status == "interrupted":
        console.print(
            f"  its process stopped mid-run ({run.holder}); `playline resume {run.run_id}` "
            "continues it",
            highlight=False,
        )
    elif status == "running":
        console.print(f"  running in {run.holder}", highlight=False)
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
        console.print("  " + stats_line(stats), highlight=False)
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
    db = store_at(store, read_only=True)
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
    force: ForceOpt = False,
    raw: RawOpt = False,
    store: StoreOpt = None,
) -> None:
    """Write a run's dataset rows (cells as values) to CSV or JSON lines.

    An existing file is replaced only with --force, and a symbolic link never followed; CSV
    cells that a spreadsheet would run as formulas get a quote in front unless --raw.
    """
    check_out(out, force=force)
    db = store_at(store, read_only=True)
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
    count = export_dataset(db, run_id, dataset, out, with_status=with_status, force=force, raw=raw)
    console.print(f"Wrote {count} rows of dataset {dataset!r} to {out}", highlight=False)


# cache
