"""``playline demo``: the sample play end to end, against an in-process simulator.

Starts the simulator on a free port (with its providers' doubles: OpenAI's answers the AI
column), runs ``playline.demo.enrich_people`` over the shipped CSV with its one-line company
summaries (``ctx.llm`` through ``openai.chat``, priced in dollars) and live progress, prints
the enriched table and what each tool cost, then runs the play again on the same store: every
call is answered from its receipt (0 live calls, 0 credits, $0).
"""

from __future__ import annotations

import asyncio
import shlex
import tempfile
from typing import Any

from rich.console import Console
from rich.table import Table

import playline as pl

from .._trace import trace_of
from ..sim import Simulator, serve
from ..store import Store, display_url, open_store
from ..tools import Gateway
from ._progress import LiveProgress, drive
from ._report import dollars_text
from ._tables import print_table

__all__ = ["run_demo"]


def _run(console: Console, db: Store, tools: list[Any]) -> pl.RunResult:
    from playline.demo import enrich_people

    progress = LiveProgress(console, db) if console.is_terminal else None
    return asyncio.run(
        drive(
            lambda stop: pl.arun(
                enrich_people,
                {"summary": True},
                store=db,
                tools=tools,
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


WIDE = 130  # columns a terminal needs for the six columns side by side


def _table(result: pl.RunResult, width: int | None) -> Table:
    """The enriched people, six columns side by side; in a terminal narrower than ``WIDE``
    (``width``; None: a pipe, which prints it whole), three, each row on two lines (the
    person's name above their email, the company and its industry above its AI summary),
    each line cut to fit rather than wrapped."""
    table = Table(title=f"Enriched people (run {result.run_id})")
    output = result.output
    rows = output.to_list() if isinstance(output, pl.Dataset) else []
    cells = [_cells(row) for row in rows]
    if width is None or width >= WIDE:
        for column in ("name", "company", "industry"):
            table.add_column(column)
        # the AI column: one line each, cut to the terminal's width rather than wrapped
        table.add_column("summary (AI)", no_wrap=True, overflow="ellipsis", max_width=48)
        for column in ("email", "verified"):
            table.add_column(column)
        for name, company, industry, summary, email, verified in cells:
            table.add_row(name, company, industry, summary, email, verified)
        return table
    cut: dict[str, Any] = {"no_wrap": True, "overflow": "ellipsis"}
    table.add_column("name · email", max_width=30, **cut)
    # what the other two columns and the borders (3 a column, and 1) leave it, at least 16
    table.add_column("company · summary (AI)", width=max(16, width - 50), **cut)
    table.add_column("verified", **cut)
    for name, company, industry, summary, email, verified in cells:
        about = f"{company} · {industry}" if industry else company
        table.add_row(f"{name}\n{email}", f"{about}\n[dim]{summary}[/dim]", verified)
    return table


def _cells(row: dict[str, Any]) -> tuple[str, str, str, str, str, str]:
    """A row's name, company, industry, summary, email and verification, as shown."""
    return (
        f"{row['first_name']} {row['last_name']}",
        _text(row.get("company"), "name") or f"[dim]{row['domain']}[/dim]",
        _text(row.get("industry")),
        _text(row.get("summary")),
        _text(row.get("email")) or "[dim]not found[/dim]",
        _text(row.get("verification"), "status"),
    )


def _costs(db: Store, run_id: str) -> Table:
    table = Table(title="What it cost (from the run's ledger)")
    for column in ("tool", "requests", "inputs", "live calls", "found", "cost"):
        table.add_column(column, justify="left" if column == "tool" else "right")
    trace = trace_of(db, run_id)
    for tool, t in sorted(trace.tools.items()):
        cost = dollars_text(t.credits) if t.unit == "usd" else f"{t.credits:g}"
        table.add_row(tool, str(t.requests), str(t.inputs), str(t.calls), str(t.found), cost)
    total = f"{sum(t.credits for t in trace.tools.values() if t.unit != 'usd'):g}"
    usd = sum(t.credits for t in trace.tools.values() if t.unit == "usd")
    if usd:
        total += f" + {dollars_text(usd)}"
    table.add_row("[bold]total[/bold]", "", "", "", "", f"[bold]{total}[/bold]")
    return table


def _line(result: pl.RunResult) -> str:
    s = result.stats
    return (
        f"[bold]{result.status}[/bold]: {s.rows} rows, {s.tool_calls_live} live calls, "
        f"{s.tool_calls_cached} from receipts, {s.tool_requests} provider requests, "
        f"[bold]{s.credits:g} credits · {dollars_text(s.usd)} for the AI column[/bold]"
    )


def _llm_requests(sim: Simulator) -> int:
    """The requests the simulator's OpenAI double answered (each one paid)."""
    return sum(sim.double("openai").calls.values())


def run_demo(console: Console, *, store: str | None = None) -> int:
    """Run the demo; returns the exit code (0 when both runs completed)."""
    with tempfile.TemporaryDirectory() as tmp, serve(seed=7, providers=True) as sim:
        db = open_store(store or f"sqlite:///{tmp}/demo.db")
        # the simulator's tools, and its OpenAI double (whose key is the simulator's token)
        tools = [
            Gateway(sim.url, token=sim.token),
            pl.providers.openai(api_key=sim.token, base_url=f"{sim.url}/openai/v1"),
        ]
        console.print(
            f"Simulator on {sim.url} (seed 7). Enriching 50 people from people.csv: company, "
            "a one-line summary of it (AI: gpt-4o-mini on the simulator's OpenAI double), work "
            "email (waterfall beta → alpha → gamma), verification.\n"
        )
        first = _run(console, db, tools)
        console.print(_line(first))
        if first.error:
            console.print(f"[red]error:[/red] {first.error}")
            return 1
        # as every table: whole in a pipe, fitted in a terminal
        print_table(_table(first, console.width if console.is_terminal else None))
        print_table(_costs(db, first.run_id))
        charged = sim.ledger().get("credits", 0)
        asked = _llm_requests(sim)
        console.print("\nRunning the same play again on the same store (a new run):")
        second = _run(console, db, tools)
        console.print(_line(second))
        extra = sim.ledger().get("credits", 0) - charged
        extra_llm = _llm_requests(sim) - asked
        if (
            second.stats.tool_calls_live == 0
            and second.stats.credits == 0
            and second.stats.usd == 0
            and not extra
            and not extra_llm
        ):
            console.print(
                "[green]The second run was free:[/green] every call was answered from its "
                "receipt; the providers were not called."
            )
        else:
            console.print(
                f"[yellow]The second run paid {second.stats.credits:g} credits and "
                f"{dollars_text(second.stats.usd)} ({second.stats.tool_calls_live} live "
                "calls)[/yellow]."
            )
        if store:
            shown = display_url(store)
            console.print(
                f"\nInspect it: playline show {shlex.quote(first.run_id)} --store {shown}",
                highlight=False,
                soft_wrap=True,
            )
            console.print(
                f"See it in the browser: playline ui --store {shown} "
                f"--run {shlex.quote(first.run_id)} --open",
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
