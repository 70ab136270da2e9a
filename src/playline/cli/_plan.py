"""`playline plan`: what a run would cost, before paying for it (``pl.plan``), and whether
the tools it would pay for can be called at all (``_access.py``): a gateway that refuses the
token, or a key that is not set, is said here, before anything is spent."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

import playline as pl

from .._access import Refusal, refusals
from ._app import (
    GatewayOpt,
    GatewayTokenOpt,
    InputJsonOpt,
    InputsOpt,
    JsonOpt,
    PlayArg,
    StoreOpt,
    app,
    command,
    console,
    counted,
)
from ._load import gateway_from, load_play, parse_inputs
from ._report import dollars_text
from ._tables import TsvOpt, print_table, table_output


@app.command()
@command
def plan(
    play: PlayArg,
    inputs: InputsOpt = None,
    input_json: InputJsonOpt = None,
    store: StoreOpt = None,
    gateway: GatewayOpt = None,
    gateway_token: GatewayTokenOpt = None,
    json_mode: JsonOpt = False,
    tsv: TsvOpt = False,
) -> None:
    """Estimate what running a play would cost, without paying: calls the store's receipts
    answer are free, the others are counted, per tool and per column.

    Credits are a range: expected (each tool's hit rate in this store's ledger, else its
    published coverage, else 50%; a waterfall step weighed by the chance a row reaches it)
    and at most (every counted call charged). Nothing is sent to a provider and nothing is
    written to the store.

    It also checks that the tools it counts can be called: that their gateway is reachable
    and takes the token, and that their keys are set. A plan they would refuse says which
    tools and why, and exits 1.
    """
    input = parse_inputs(inputs or [], input_json)
    loaded = load_play(play)
    gw = gateway_from(gateway, gateway_token)
    tools: list[Any] = list(loaded.sources)
    if gw is not None:
        gw.specs()  # an unreachable gateway fails here
        tools.append(gw)
    # the URL, not an opened store: a plan reads the store if it is there and creates nothing
    estimate = pl.plan(loaded.play, {} if input is None else input, store=store, tools=tools)
    refused = refusals(estimate, tools)
    with table_output(tsv, json_mode=json_mode):  # --tsv: the tables alone on stdout
        if json_mode:
            shown = {**estimate.to_dict(), "refused": [r.to_dict() for r in refused]}
            typer.echo(json.dumps(shown, default=str))
        else:
            _print_plan(estimate)
            _print_refused(refused)
    raise typer.Exit(0 if estimate.error is None and not refused else 1)


def _print_refused(refused: list[Refusal]) -> None:
    """Each cause that would fail calls, and the counted tools it would fail."""
    for refusal in refused:
        console.print(
            f"  [red]refused:[/red] {escape(refusal.why)}\n    the calls of "
            f"{', '.join(refusal.tools)} would fail: fix this before running",
            highlight=False,
        )


def _print_plan(estimate: pl.Plan) -> None:
    console.print(
        f"Plan of play [bold]{estimate.play}[/bold]: {counted(estimate.rows, 'row')} · "
        f"{estimate.calls} calls to pay for · {estimate.from_receipts} answered by receipts "
        "(free)",
        highlight=False,
    )
    if estimate.error:
        console.print(f"  [red]error:[/red] {estimate.error}", highlight=False)
    if estimate.tools:
        tools = Table(title="Per tool", title_justify="left")
        for column in ("tool", "calls", "requests", "from receipts", "hit rate",
                       "credits expected", "at most", "time at rate"):  # fmt: skip
            tools.add_column(column, justify="left" if column in ("tool", "hit rate") else "right")
        for t in estimate.tools:
            usd = t.unit == "usd"
            tools.add_row(
                t.tool + (f"\n[dim]~{t.tokens:,} prompt tokens[/dim]" if t.tokens else ""),
                str(t.calls),
                str(t.requests),
                str(t.from_receipts),
                f"{t.hit_rate:.0%} ({t.hit_rate_from})" if t.calls else "-",
                dollars_text(t.credits_expected) if usd else f"{t.credits_expected:.1f}",
                dollars_text(t.credits_max) if usd else f"{t.credits_max:g}",
                f"{t.seconds:.1f} s" if t.seconds else "-",
            )
        print_table(tools)
    if estimate.columns:
        columns = Table(title="Per column", title_justify="left")
        for column in ("column", "calls", "requests", "credits expected", "at most"):
            columns.add_column(column, justify="left" if column == "column" else "right")
        for c in estimate.columns:
            columns.add_row(
                c.column, str(c.calls), str(c.requests), f"{c.credits_expected:.1f}",
                f"{c.credits_max:g}",
            )  # fmt: skip
        print_table(columns)
    console.print(
        f"[bold]credits: about {estimate.credits_expected:.1f} expected, at most "
        f"{estimate.credits_max:g}[/bold] · about {estimate.requests} provider requests and "
        f"{estimate.seconds:.1f} s at the tools' rate limits (every call counted sent: fewer "
        "when a waterfall's earlier steps find)",
        highlight=False,
    )
    if estimate.usd_max:
        console.print(
            f"[bold]dollars (LLM calls): about {dollars_text(estimate.usd_expected)} expected, "
            f"at most {dollars_text(estimate.usd_max)}[/bold] · ~{estimate.tokens:,} prompt "
            "tokens (estimated)",
            highlight=False,
        )
    for note in estimate.notes:
        console.print(f"  note: {note}", style="dim", highlight=False)
    for t in estimate.tools:
        if t.calls:
            console.print(f"  {t.tool}: {t.cost}", style="dim", highlight=False)
