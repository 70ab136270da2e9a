"""Commands of the ``playline`` CLI. Exit codes: 0 completed, 1 failed, 2 usage, 3 suspended."""

from __future__ import annotations

import os
import tempfile
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

import playline as pl

app = typer.Typer(
    help="Playline: durable data-enrichment plays: batched, rate-limited, never paying twice.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()

EXIT_CODES = {"completed": 0, "completed_with_errors": 0, "failed": 1, "suspended": 3}


def _cell(value: Any) -> str:
    data = value.get("email") or value.get("industry") if isinstance(value, dict) else value
    return "" if data is None else str(data)


def print_dataset(ds: pl.Dataset, title: str) -> None:
    rows = ds.to_list()
    table = Table(title=title)
    columns = list(rows[0]) if rows else []
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(_cell(row.get(c)) for c in columns))
    console.print(table)


def print_stats(result: pl.RunResult) -> None:
    s = result.stats
    console.print(
        f"[bold]{result.status}[/bold] run {result.run_id}: {s.rows} rows "
        f"({s.rows_executed} executed, {s.rows_reused} reused, {s.rows_failed} failed); "
        f"tool calls {s.tool_calls_live} live, {s.tool_calls_cached} cached, "
        f"{s.tool_calls_in_flight} shared; {s.tool_requests} provider requests; "
        f"{s.credits:g} credits"
    )
    if result.error:
        console.print(f"[red]error:[/red] {result.error}")


@app.command()
def demo(
    store: Annotated[
        str | None, typer.Option(help="Store URL (default: a fresh SQLite file in a temp dir).")
    ] = None,
) -> None:
    """Run the sample play twice: enrich leads, then show the second run is free."""
    from playline.demo import demo_tools, enrich_leads

    with tempfile.TemporaryDirectory() as tmp:
        url = store or f"sqlite:///{tmp}/demo.db"
        first = pl.run(enrich_leads, store=url, tools=[demo_tools])
        if isinstance(first.output, pl.Dataset):
            print_dataset(first.output, "Enriched leads")
        print_stats(first)
        second = pl.run(enrich_leads, store=url, tools=[demo_tools])
        console.print("Second run (same store, new run id): receipts make it free.")
        print_stats(second)
    raise typer.Exit(EXIT_CODES[second.status])


@app.command()
def version() -> None:
    """Print the installed Playline version."""
    console.print(pl.__version__)


def main() -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    app()
