"""`playline runs`, `show`, `logs` and `export`: a run, read after the fact."""

from __future__ import annotations

import difflib
import enum
import json
import shlex
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from .._flatten import dataset_fields, flat, spread
from .._trace import (
    INTERRUPTED,
    OrderAdvice,
    Trace,
    child_summaries,
    dataset_columns,
    in_doubt,
    jobs_in_progress,
    run_status,
    run_summary,
    trace_of,
    waterfall_advice,
    waterfall_summary,
    waterfall_table,
)
from ..errors import StoreError
from ..store import RowCounts, RunRecord, Store
from ..store.sql import SQLStore
from ._app import (
    MOST,
    STATUS_STYLE,
    ForceOpt,
    JsonOpt,
    RawOpt,
    StoreOpt,
    app,
    command,
    console,
    counted,
    export_dataset,
    ran,
    store_at,
)
from ._load import (
    CliError,
)
from ._outfile import STDOUT, check_out
from ._report import credits_text, dollars_text, require_run, waiting_for, when
from ._tables import TsvOpt, is_terminal, print_table, table_output, tsv_active
from ._temporal import recorded_endpoint


@app.command()
@command
def runs(
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=MOST, help="How many runs, newest first.")
    ] = 20,
    store: StoreOpt = None,
    json_mode: JsonOpt = False,
    tsv: TsvOpt = False,
) -> None:
    """List the newest runs of the store."""
    with table_output(tsv, json_mode=json_mode):
        _runs(limit, store, json_mode=json_mode)


def _runs(limit: int, store: str | None, *, json_mode: bool) -> None:
    db = store_at(store, read_only=True)
    records = db.list_runs(limit=limit)
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
    # as the web UI's runs page counts them: a run that has not recorded its stats (running,
    # or interrupted by a kill) has its rows counted in the store and its credits in the ledger
    summaries = [run_summary(db, r) for r in records]
    statuses = [s["status"] for s in summaries]
    # ids, statuses and numbers are never cut: a narrow terminal shortens the play's name and
    # the start time instead; a pipe gets every column whole (below)
    table.add_column("run", no_wrap=True, min_width=max(len(r.run_id) for r in records))
    table.add_column("play")
    table.add_column("status", no_wrap=True, min_width=max(len(s) for s in statuses))
    table.add_column("started")
    for column in ("rows", "failed", "credits"):
        table.add_column(column, justify="right", no_wrap=True)
    for summary, status in zip(summaries, statuses, strict=True):
        table.add_row(
            summary["run_id"],
            summary["play"],
            f"[{STATUS_STYLE.get(status, 'red')}]{status}[/]",
            when(summary["created_at"]),
            str(summary["rows"]),
            str(summary["rows_failed"]),
            credits_text(summary["credits"])
            + (f" + {dollars_text(summary['usd'])}" if summary["usd"] else ""),
        )
    print_table(table)  # piped: as wide as the table needs, for grep and friends


@app.command()
@command
def show(
    run_id: Annotated[str, typer.Argument(help="The run to show.")],
    rows: Annotated[
        int | None,
        typer.Option(
            "--rows",
            min=1,
            max=MOST,
            metavar="N",
            help="Print the first N rows of a dataset as a table.",
        ),
    ] = None,
    dataset: Annotated[
        str | None,
        typer.Option(
            "--dataset", help="With --rows: which dataset (needed when there are several)."
        ),
    ] = None,
    columns: Annotated[
        str | None,
        typer.Option("--columns", metavar="A,B", help="With --rows: only these columns."),
    ] = None,
    store: StoreOpt = None,
    json_mode: JsonOpt = False,
    tsv: TsvOpt = False,
) -> None:
    """A run's status, totals and attempts, datasets, cost per tool, child plays and waterfall
    steps (with the cheapest step order the store's history supports); with --rows, its first
    rows. Credits are rounded to two decimals (--json: exact)."""
    with table_output(tsv, json_mode=json_mode):
        _show(run_id, rows, dataset, columns, store, json_mode=json_mode)


def _show(
    run_id: str,
    rows: int | None,
    dataset: str | None,
    columns: str | None,
    store: str | None,
    *,
    json_mode: bool,
) -> None:
    db = store_at(store, read_only=True)
    run = require_run(db, run_id)
    if rows is not None:
        _show_rows(db, run_id, rows, dataset, columns, json_mode=json_mode)
        return
    if dataset is not None or columns is not None:
        raise CliError("--dataset and --columns choose what --rows prints; add --rows N.")
    try:
        status = run_status(run)
        trace = trace_of(
            db,
            run_id,
            attempts=run.attempts,
            interrupted=status == INTERRUPTED,
            running=status == "running",
        )
        children = child_summaries(db, run_id)
        doubt = in_doubt(db, run_id)
        jobs = jobs_in_progress(db, run_id)
        sent = db.waiting_events(run.awaited_events) if run.awaited_events else set()
    except StoreError:
        if not (isinstance(db, SQLStore) and db.damage is not None):
            raise
        typer.echo(
            "warning: the run's step trace (events, ledger) is in the damaged part of the "
            "store: showing the run's record only.",
            err=True,
        )
        trace, children, doubt, sent = Trace(), [], {"calls": 0, "tools": {}}, set()
        jobs = {"calls": 0, "jobs": [], "more": 0}
    advice = waterfall_advice(db, trace.waterfalls)
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
            "waterfalls": [
                {**waterfall_summary(w), "order": advice[w["id"]].to_dict()}
                for w in trace.waterfalls.values()
            ],
            "child_runs": children,
            "in_doubt": doubt,
            "jobs": jobs,
            "events_sent": sorted(sent),
        }
        typer.echo(json.dumps(doc, default=str))
        return
    counts = {name: db.row_counts(run_id, name) for name in db.datasets(run_id)}
    _show_header(run, trace, counts, doubt, sent)
    _show_jobs(run, trace, jobs)
    _show_attempts(trace)
    _show_datasets(trace, counts)
    _show_tools(trace)
    _show_children(children)
    for tally in trace.waterfalls.values():
        _show_waterfall(tally, advice[tally["id"]])
    for kind, count in sorted(trace.other.items()):
        if kind != "waterfall":
            console.print(f"  {count} {kind} event(s)", highlight=False)
    if trace.logs:
        console.print(
            f"  {trace.logs} log line(s): playline logs {shlex.quote(run_id)}",
            style="dim",
            highlight=False,
        )


def _show_header(
    run: RunRecord,
    trace: Trace,
    counts: dict[str, RowCounts],
    doubt: dict[str, Any],
    sent: Collection[str],
) -> None:
    """The run's lines: its status, error, what it waits for (``sent``: its events there)."""
    status = run_status(run)
    style = STATUS_STYLE.get(status, "red")
    console.print(
        f"Run [bold]{run.run_id}[/bold] · play [bold]{run.play}[/bold] · [{style}]{status}[/]"
    )
    if status == "interrupted":
        console.print(
            f"  its process stopped mid-run ({run.holder}); "
            f"`playline resume {shlex.quote(run.run_id)}` continues it",
            highlight=False,
        )
    elif status == "queued":
        where = recorded_endpoint(run) or {}
        console.print(
            f"  submitted to Temporal ({where.get('target')}, task queue "
            f"{where.get('task_queue')}); no worker has started it yet: start one with "
            "`playline worker --temporal ...` on that task queue",
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
        console.print(  # a path to copy: never broken over lines (a terminal wraps it)
            f"  source {trace.source.get('file')}:{trace.source.get('function')}",
            highlight=False,
            soft_wrap=True,
        )
    if run.error:
        console.print(f"  [red]error:[/red] {run.error}", highlight=False)
    if run.waiting:
        console.print(f"  waiting for: {waiting_for(run.waiting, sent)}", highlight=False)
        if trace.skipped:  # and no worker will go on with it as it is
            console.print(  # with the path it names: never broken over lines
                f"  {trace.skipped}", style="yellow", markup=False, highlight=False, soft_wrap=True
            )
    over = "the attempt" if trace.attempts == 1 else f"all {trace.attempts} attempts"
    # credits as the run's stats count them: its child plays' included (their calls are theirs)
    credits = f"{credits_text(trace.run_credits)} credits"
    if trace.child_credits:
        credits += (
            f" ({credits_text(trace.child_credits)} of them paid by its child plays, listed below)"
        )
    if trace.run_usd:
        credits += f" · {dollars_text(trace.run_usd)} (LLM calls)"
    console.print(
        f"  totals over {over}: {trace.calls} live calls (sent) · "
        f"{counted(trace.requests, 'provider request')} · {credits}",
        highlight=False,
    )
    if doubt["calls"]:
        _show_in_doubt(run, trace, status, doubt)
    if counts:
        statuses: dict[str, int] = {}
        for c in counts.values():
            for name, n in c.statuses.items():
                statuses[name] = statuses.get(name, 0) + n
        parts = ", ".join(f"{n} {name}" for name, n in sorted(statuses.items()))
        rows = sum(c.rows for c in counts.values())
        console.print(f"  rows stored: {rows} ({parts})", highlight=False)


def _show_in_doubt(run: RunRecord, trace: Trace, status: str, doubt: dict[str, Any]) -> None:
    """The calls that may have been charged with no record of it (``in_doubt``), and how to
    settle them, unless the run is live."""
    tools = ", ".join(f"{n} of {tool}" for tool, n in doubt["tools"].items())
    line = f"  [yellow]{doubt['calls']} call(s) in doubt (may have been charged)[/yellow]: {tools}"
    passed = sum(doubt.get("passed", {}).values())
    if passed:
        line += (
            f"; {passed} of them a later waterfall step made up for (their rows found the "
            "value elsewhere: buying them again would find nothing they need)"
        )
    if status not in ("running", "queued") and passed < doubt["calls"]:
        if trace.source is not None:  # started by `playline run`: resumable from here
            resume = f"`playline resume {shlex.quote(run.run_id)}`"
            retry = f"`playline resume {shlex.quote(run.run_id)} --retry-in-doubt`"
        else:
            resume = f"resuming it (pl.run(play, run_id={run.run_id!r}))"
            retry = "retry_in_doubt=True"
        line += (
            f". {resume} re-sends those whose provider recognises idempotency keys (no "
            f"second charge); {retry} buys the others again"
        )
    console.print(line, highlight=False)


def _show_jobs(run: RunRecord, trace: Trace, jobs: dict[str, Any]) -> None:
    """The jobs the run's calls wait on (``jobs_in_progress``): per tool and job, its calls,
    since when, and who polls it."""
    if not jobs["calls"]:
        return
    shown = len(jobs["jobs"]) + jobs["more"]
    console.print(
        f"Jobs in progress: {jobs['calls']} call(s) wait on {shown} job(s)",
        style="italic",
        highlight=False,
    )
    if trace.source is not None:  # started by `playline run`: resumable from here
        resume = f"`playline resume {shlex.quote(run.run_id)}`"
    else:
        resume = f"resuming it (pl.run(play, run_id={run.run_id!r}))"
    for job in jobs["jobs"]:
        polled = (
            "polled by the run"
            if job["state"] == "polling"
            else f"its attempt stopped: {resume} polls it (never submits it again)"
        )
        child = f" (child play {job['run_id']})" if job["run_id"] != run.run_id else ""
        console.print(
            f"  {job['tool']} {job['label']}{child}: {job['calls']} call(s), submitted, "
            f"waiting since {when(job['since'])} · {polled}",
            highlight=False,
            soft_wrap=True,
        )
    if jobs["more"]:
        console.print(f"  and {jobs['more']} more job(s)", highlight=False)


def _show_attempts(trace: Trace) -> None:
    """One line per attempt: its rows and calls as it recorded them at its end, and what it
    sent and paid (from the batches and the ledger, so also for an attempt that was killed)."""
    if not trace.attempt_list:
        return
    console.print("Attempts", style="italic", highlight=False)
    for a in trace.attempt_list:
        s = a.stats
        started = f" {when(a.started_at)}" if a.started_at else ""
        if s:
            counts = (
                f"{ran(*(s.get(n, 0) for n in ('rows', 'rows_reused', 'rows_pending')))} "
                "rows run, "
                f"{s.get('rows_reused', 0)} reused, "
                f"{s.get('rows_failed', 0)} failed · {a.calls} live calls, "
                f"{s.get('tool_calls_cached', 0)} from receipts"
            )
        elif a.status == "running":
            counts = f"going on · {a.calls} live calls so far"
        else:
            counts = f"its process stopped before it recorded its rows · {a.calls} live calls"
        console.print(
            f"  {a.number}.{started} [bold]{a.status}[/bold]: {counts} · {a.requests} "
            f"requests · {credits_text(a.credits)} credits"
            + (f" · {dollars_text(a.usd)}" if a.usd else ""),
            highlight=False,
        )
    console.print(
        "  (rows run: started in that attempt · reused: completed in an earlier attempt, not "
        "run again · live calls: sent to a provider · from receipts: answered by an earlier "
        "call's receipt, free)",
        style="dim",
        highlight=False,
    )


def _show_datasets(trace: Trace, counts: dict[str, RowCounts]) -> None:
    if not trace.datasets:
        return
    steps = Table(title="Datasets (rows as stored)", title_justify="left")
    for column in ("dataset", "status", "rows", "completed", "failed", "waiting", "columns"):
        steps.add_column(column, justify="right" if column in ("rows", "completed", "failed",
                                                                "waiting") else "left")  # fmt: skip
    for ds in trace.datasets.values():
        stored = counts.get(ds.name) or RowCounts()
        steps.add_row(
            ds.name + (f"\n[dim]{ds.description}[/dim]" if ds.description else ""),
            ds.status,
            str(stored.rows),
            *(str(stored.statuses.get(k, 0)) for k in ("completed", "failed", "waiting")),
            ", ".join(ds.columns),
        )
    print_table(steps)
    for ds in trace.datasets.values():  # rows with no key, left out (on_bad_key="skip")
        if aside := ds.stats.get("rows_set_aside"):
            rows = list(ds.stats.get("set_aside") or [])
            more = f"; and {aside - len(rows)} more" if aside > len(rows) else ""
            console.print(
                f"  {ds.name}: {aside} row(s) set aside (no key): {'; '.join(rows)}{more}",
                highlight=False,
            )


def _show_tools(trace: Trace) -> None:
    if not trace.tools:
        return
    tools = Table(title="Tools: requests and cost ledger (all attempts)", title_justify="left")
    for column in ("tool", "requests", "inputs sent", "live calls", "found", "cost"):
        tools.add_column(column, justify="left" if column == "tool" else "right")
    for tool, t in sorted(trace.tools.items()):
        cost = dollars_text(t.credits) if t.unit == "usd" else credits_text(t.credits)
        tools.add_row(tool, str(t.requests), str(t.inputs), str(t.calls), str(t.found), cost)
    tools.add_row(
        "[bold]total[/bold]",
        f"[bold]{trace.requests}[/bold]",
        f"[bold]{sum(t.inputs for t in trace.tools.values())}[/bold]",
        f"[bold]{trace.calls}[/bold]",
        f"[bold]{sum(t.found for t in trace.tools.values())}[/bold]",
        f"[bold]{credits_text(trace.credits)}"
        + (f" + {dollars_text(trace.usd)}" if trace.usd else "")
        + "[/bold]",
    )
    print_table(tools)
    if trace.twins:  # variants of one input (case, spaces) that one purchase answered
        each = ", ".join(f"{tool} {t.twins}" for tool, t in sorted(trace.tools.items()) if t.twins)
        console.print(
            f"  {trace.twins} call(s) answered by a normalised twin (the same input in another "
            f"case or spacing, bought once in this run), not paid: {each}",
            highlight=False,
        )
    for tool, t in sorted(trace.tools.items()):
        if t.mismatch:
            console.print(
                f"  [yellow]{tool}: for {t.reported_calls} call(s) the provider reported "
                f"{credits_text(t.reported)} credits where the tool declares "
                f"{credits_text(t.declared)}; the ledger "
                "and budgets count the higher of the two for each call.[/yellow]",
                highlight=False,
            )


def _show_children(children: list[dict[str, Any]]) -> None:
    """The run's child plays (ctx.run_play): their calls and credits are in their own
    ledgers, and count in the run's credits."""
    if not children:
        return
    table = Table(
        title="Child plays (their credits count in the run's)",
        title_justify="left",
        caption="each in full: playline show CHILD_RUN_ID",
        caption_justify="left",
    )
    for column in ("run", "play", "status", "rows", "credits"):
        table.add_column(column, justify="right" if column in ("rows", "credits") else "left")
    for child in children:
        table.add_row(
            child["run_id"],
            child["play"],
            child["status"],
            str(child["rows"]),
            credits_text(child["credits"]),
        )
    print_table(table)


def _ratio(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def _show_waterfall(tally: dict[str, Any], advice: OrderAdvice) -> None:
    rows, satisfied = tally["rows"], tally["satisfied"]
    coverage = f"{satisfied / rows:.0%}" if rows else "-"
    per_hit = _ratio(tally["credits"] / satisfied if satisfied else None)
    unread = tally.get("no_input") or 0
    table = Table(
        title=f"Waterfall {tally['id']}: {rows} rows, {satisfied} found ({coverage}), "
        f"{credits_text(tally['credits'])} credits, {per_hit} credits per hit"
        + (f"; {unread} with none of the fields it reads" if unread else ""),
        title_justify="left",
        caption_justify="left",
    )
    for column in ("step", "attempts", "hits", "hit rate", "credits", "credits/hit",
                   "coverage"):  # fmt: skip
        table.add_column(column, justify="left" if column == "step" else "right")
    for step in waterfall_table(tally):
        table.add_row(
            step["id"],
            str(step["attempts"]),
            str(step["hits"]),
            _ratio(step["hit_rate"], ".0%"),
            credits_text(step["credits"]),
            _ratio(step["credits_per_hit"]),
            _ratio(step["coverage"], ".0%"),
        )
    if advice.changes:
        table.caption = (
            f"suggested order: {' → '.join(advice.order or ())} (expected "
            f"{_ratio(advice.credits_per_hit)} credits per hit, declared order "
            f"{_ratio(advice.declared_credits_per_hit)}; from {advice.runs} run(s) of this "
            'store). Apply it with pl.Waterfall(..., order="cheapest").'
        )
    elif advice.order is not None:
        table.caption = f"order: {advice.note} (from {advice.runs} run(s) of this store)."
    else:
        table.caption = f"order: {advice.note}."
    print_table(table)


def _show_rows(
    db: Store,
    run_id: str,
    limit: int,
    dataset: str | None,
    columns: str | None,
    *,
    json_mode: bool,
) -> None:
    """The first ``limit`` rows of a dataset, as a table (``--json``: one object per row, its
    values as stored). A column with ``fields=`` shows as its fields' columns
    (``company.name``); other nested values as ``name=Acme · industry=SaaS``, one line."""
    dataset = _dataset_of(db, run_id, dataset, "show")
    known = dataset_columns(db, run_id, dataset)
    fields = {c: f for c, f in dataset_fields(db, run_id, dataset).items() if c in known}
    # (stored column, shown column): a column with fields= shows as its fields' columns
    shown = [(c, name) for c in known for name in [f"{c}.{f}" for f in fields.get(c, ())] or [c]]
    if columns is not None:
        chosen = [c.strip() for c in columns.split(",") if c.strip()]
        names = {name for _, name in shown} | set(known)
        unknown = [c for c in chosen if c not in names]
        if unknown or not chosen:
            close = difflib.get_close_matches(unknown[0], names, n=1) if unknown else []
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise CliError(
                f"--columns {columns!r}: no column {', '.join(map(repr, unknown))} in dataset "
                f"{dataset!r} (its columns: {', '.join(n for _, n in shown)}).{hint}"
            )
        # a column named whole stands for all its fields' columns
        shown = [(c, name) for c, name in shown if name in chosen or c in chosen]
    records = db.row_window(run_id, dataset, limit=limit)
    if json_mode:
        picked = list(dict.fromkeys(c for c, _ in shown))
        for record in records:
            doc: dict[str, Any] = {"_key": record.key, "_status": record.status}
            doc.update({c: record.values.get(c) for c in picked})
            typer.echo(json.dumps(doc, default=str, ensure_ascii=False))
        return
    total = db.count_rows(run_id, dataset)
    table = Table(
        title=f"Dataset {dataset!r}: the first {len(records)} of {total} rows",
        title_justify="left",
    )
    # In a terminal a column is at most 40 wide, and the widest give way first when the
    # table is wider than the terminal; cells stay on one line, cut with "…" (never wrapped).
    # In a pipe every value is whole.
    fitted = is_terminal()
    table.add_column("status", no_wrap=True)
    for _, name in shown:
        table.add_column(_one_line(name), max_width=40 if fitted else None)
    for record in records:
        style = {"failed": "red", "waiting": "cyan"}.get(record.status, "")
        values = spread(record.values, fields)
        seen: set[str] = set()
        cells = []
        for column, name in shown:
            meta: Mapping[str, Any] = record.cells.get(column) or {}
            cells.append(_cell(values.get(name), meta, first=column not in seen))
            seen.add(column)
        table.add_row(f"[{style}]{record.status}[/]" if style else record.status, *cells)
    print_table(table)


def _cell(value: Any, meta: Mapping[str, Any], *, first: bool) -> Text:
    """A cell of ``show --rows``: its value on one line (nested values compact; in TSV as
    JSON), or why it failed (in the first of a column's fields' columns)."""
    if meta.get("status") == "failed":
        return _one_line(f"failed: {meta.get('error', '')}" if first else "", style="red")
    if value is None:
        return Text("")
    return _one_line(str(flat(value)) if tsv_active() else _compact(value))


def _one_line(text: str, style: str = "") -> Text:
    """A cell's text that never wraps: cut with "…" at its column's width."""
    return Text(" ".join(text.splitlines()), style=style, no_wrap=True, overflow="ellipsis")


def _compact(value: Any) -> str:
    """A value on one line for a table cell: a dict as ``name=Acme · industry=SaaS``, nested
    dicts and lists inside braces and brackets, line breaks as spaces."""
    if isinstance(value, dict):
        text = " · ".join(f"{k}={_inner(v)}" for k, v in value.items())
    else:
        text = _inner(value)
    return " ".join(text.splitlines())


def _inner(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_inner(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_inner(v) for v in value) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


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


class ExportFormat(enum.StrEnum):
    csv = "csv"
    jsonl = "jsonl"
    parquet = "parquet"


@app.command()
@command
def export(
    run_id: Annotated[str, typer.Argument(help="The run to export.")],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="FILE.csv, FILE.jsonl or FILE.parquet; - prints CSV (or --format jsonl) to "
            "standard output",
            dir_okay=False,
        ),
    ],
    dataset: Annotated[
        str | None, typer.Option("--dataset", help="Which dataset (needed when there are several).")
    ] = None,
    format: Annotated[
        ExportFormat | None,
        typer.Option(
            "--format",
            help="csv, jsonl or parquet (parquet needs pyarrow: pip install "
            "'playline\\[parquet]'); default: by the --out suffix (a suffix of another "
            "format is refused).",
        ),
    ] = None,
    with_status: Annotated[
        bool,
        typer.Option(
            "--with-status", help="Add _key, _status, _error and <column>.status / .provider."
        ),
    ] = False,
    flatten: Annotated[
        bool,
        typer.Option(
            "--flatten",
            help="Spread every nested result (a dict) into dotted columns: company.name, "
            "company.industry (lists stay JSON text).",
        ),
    ] = False,
    force: ForceOpt = False,
    raw: RawOpt = False,
    store: StoreOpt = None,
) -> None:
    """Write a run's dataset rows (cells as values) to CSV, JSON lines or Parquet.

    An existing file is replaced only with --force, and a symbolic link never followed; CSV
    cells that a spreadsheet would run as formulas get a quote in front unless --raw. Parquet
    keeps nested values as structs and lists where a column's values share one shape (else
    JSON text). A column the play declared with fields=[...] is written as those fields'
    columns (CSV, Parquet; JSON lines keep the whole value unless --flatten).
    """
    kind = format.value if format is not None else "csv" if out == STDOUT else None
    check_out(out, force=force, format=kind, stdout=True)
    db = store_at(store, read_only=True)
    require_run(db, run_id)
    dataset = _dataset_of(db, run_id, dataset, "export")
    count = export_dataset(
        db,
        run_id,
        dataset,
        out,
        with_status=with_status,
        force=force,
        raw=raw,
        format=kind,
        flatten=flatten,
    )
    said = f"Wrote {counted(count, 'row')} of dataset {dataset!r} to {out}"
    if out == STDOUT:  # the rows are there: the count goes beside them, to stderr
        typer.echo(said.replace(" to -", " to standard output"), err=True)
    else:
        console.print(said, highlight=False)


def _dataset_of(db: Store, run_id: str, dataset: str | None, verb: str) -> str:
    """The dataset a command reads: the one named (a typo gets a suggestion), or the run's
    only one."""
    names = db.datasets(run_id)
    if dataset is None:
        if not names:
            raise CliError(f"Run {run_id} has no dataset rows to {verb}.", code=1)
        if len(names) > 1:
            raise CliError(
                f"Run {run_id} has several datasets ({', '.join(names)}); choose one with "
                "--dataset NAME."
            )
        return names[0]
    if dataset not in names:
        close = difflib.get_close_matches(dataset, names, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise CliError(
            f"Run {run_id} has no dataset {dataset!r} (its datasets: "
            f"{', '.join(names) or 'none'}).{hint}",
            code=1,
        )
    return dataset


# cache
