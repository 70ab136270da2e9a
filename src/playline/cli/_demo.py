"""``playline demo``: the sample play end to end, against an in-process simulator.

Starts the simulator on a free port, runs ``playline.demo.enrich_people`` over the shipped
CSV with live progress, prints the enriched table and what each tool cost, then runs the play
again on the same store: every call is answered from its receipt (0 live calls, 0 credits).
"""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any

from rich.console import Console
from rich.table import Table

import playline as pl

from .._trace import trace_of
from ..sim import serve
from ..store import Store, display_url, open_store
from ..tools import Gateway
from ._progress import LiveProgress, drive

__all__ = ["run_demo"]


def _run(console: Console, db: Store, gateway: Gateway) -> pl.RunResult:
    from playline.demo import enrich_people

    progress = LiveProgress(console, db) if console.is_terminal else None
    return asyncio.run(
        drive(
            lambda stop: pl.arun(
                enrich_people,
                {},
                store=db,
                tools=[gateway],
                listeners=[progress] if progress else [],
                stop=stop,
            ),
            progress,
        )
    )


def _text(value: Any, *fields: str) -> str:
    if isinstance(value, dict):
        for name in fields:
            if value.get(name) is not None:
                return str(value[name])
        return ""
    return "" if value is None else str(value)


def _table(result: pl.RunResult) -> Table:
    table = Table(title=f"Enriched people (run {result.run_id})")
    for column in ("name", "company", "industry", "email", "verified"):
        table.add_column(column)
    output = result.output
    rows = output.to_list() if isinstance(output, pl.Dataset) else []
    for row in rows:
        table.add_row(
            f"{row['first_name']} {row['last_name']}",
            _text(row.get("company"), "name") or f"[dim]{row['domain']}[/dim]",
            _text(row.get("industry")),
            _text(row.get("email")) or "[dim]not found[/dim]",
            _text(row.get("verification"), "status"),
        )
    return table


def _costs(db: Store, run_id: str) -> Table:
    table = Table(title="What it cost (from the run's ledger)")
    for column in ("tool", "requests", "inputs", "live calls", "found", "credits"):
        table.add_column(column, justify="left" if column == "tool" else "right")
    trace = trace_of(db, run_id)
    for tool, t in sorted(trace.tools.items()):
        table.add_row(
            tool, str(t.requests), str(t.inputs), str(t.calls), str(t.found), f"{t.credits:g}"
        )
    total = sum(t.credits for t in trace.tools.values())
    table.add_row("[bold]total[/bold]", "", "", "", "", f"[bold]{total:g}[/bold]")
    return table


def _line(result: pl.RunResult) -> str:
    s = result.stats
    return (
        f"[bold]{result.status}[/bold]: {s.rows} rows, {s.tool_calls_live} live calls, "
        f"{s.tool_calls_cached} from receipts, {s.tool_requests} provider requests, "
        f"[bold]{s.credits:g} credits[/bold]"
    )


def run_demo(console: Console, *, store: str | None = None) -> int:
    """Run the demo; returns the exit code (0 when both runs completed)."""
    with tempfile.TemporaryDirectory() as tmp, serve(seed=7) as sim:
        db = open_store(store or f"sqlite:///{tmp}/demo.db")
        gateway = Gateway(sim.url, token=sim.token)
        console.print(
            f"Simulator on {sim.url} (seed 7). Enriching 50 people from people.csv: company, "
            "work email (waterfall beta → alpha → gamma), verification.\n"
        )
        first = _run(console, db, gateway)
        console.print(_line(first))
        if first.error:
            console.print(f"[red]error:[/red] {first.error}")
            return 1
        console.print(_table(first))
        console.print(_costs(db, first.run_id))
        charged = sim.ledger().get("credits", 0)
        console.print("\nRunning the same play again on the same store (a new run):")
        second = _run(console, db, gateway)
        console.print(_line(second))
        extra = sim.ledger().get("credits", 0) - charged
        if second.stats.tool_calls_live == 0 and second.stats.credits == 0 and not extra:
            console.print(
                "[green]The second run was free:[/green] every call was answered from its "
                "receipt; the providers were not called."
            )
        else:
            console.print(
                f"[yellow]The second run paid {second.stats.credits:g} credits "
                f"({second.stats.tool_calls_live} live calls)[/yellow]."
            )
        if store:
            shown = display_url(store)
            console.print(
                f"\nInspect it: playline show {first.run_id} --store {shown}",
                highlight=False,
                soft_wrap=True,
            )
            console.print(
                f"See it in the browser: playline ui --store {shown} --run {first.run_id} --open",
                highlight=False,
                soft_wrap=True,
            )
            if shown != store:
                console.print(
                    "(the store URL without its password and libpq options: give --store as "
                    "you did here, or set PLAYLINE_STORE)",
                    highlight=False,
                    soft_wrap=True,
                )
        db.close()
        return 0 if first.ok and second.ok else 1
