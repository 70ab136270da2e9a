"""`playline cache`, `tools`, `event`, `sim`, `demo` and `version`."""

from __future__ import annotations

import contextlib
import difflib
import inspect
import json
import shlex
from typing import Annotated, Any

import click
import typer
from rich.table import Table

import playline as pl

from .._access import keys_read
from ..store import Store, display_url
from ..store.sql import SQLStore
from ..tools import HttpTool, ToolSpec
from ._app import (
    GatewayOpt,
    GatewayTokenOpt,
    JsonOpt,
    StoreOpt,
    app,
    cache_app,
    command,
    console,
    event_app,
    store_app,
    store_at,
    tools_app,
)
from ._load import (
    CliError,
    cannot_listen,
    gateway_from,
    load_play,
    parse_json,
)
from ._tables import TsvOpt, print_table, table_output


@cache_app.command("stats")
@command
def cache_stats(store: StoreOpt = None, json_mode: JsonOpt = False, tsv: TsvOpt = False) -> None:
    """Receipts per tool: completed, failed, in doubt (calls that may have been charged: a
    resume settles them), lost (charged, their result gone), running, and the size of stored
    results."""
    with table_output(tsv, json_mode=json_mode):
        _cache_stats(store, json_mode)


def _cache_stats(store: str | None, json_mode: bool) -> None:
    stats = store_at(store, read_only=True).receipt_stats()
    if json_mode:
        typer.echo(json.dumps(stats))
        return
    if not stats:
        console.print("No receipts yet: nothing has been paid for in this store.")
        return
    table = Table(title="Receipts")
    shown = {"completed": "completed", "failed": "failed", "unknown": "in doubt", "lost": "lost"}
    shown |= {"running": "running", "bytes": "bytes"}
    table.add_column("tool")
    for column in shown.values():
        table.add_column(column, justify="right")
    for tool, s in sorted(stats.items()):
        table.add_row(tool, *(str(s.get(k, 0)) for k in shown))
    print_table(table)


@store_app.command("check")
@command
def store_check(store: StoreOpt = None) -> None:
    """Check the whole store for damage (SQLite's integrity_check: every page and index);
    exit 0 when it is sound, 1 when it is damaged. It reads only."""
    db = store_at(store, read_only=True)
    problems = db.integrity_check() if isinstance(db, SQLStore) else []
    where = display_url(db.url)
    if not problems:
        console.print(f"The store {where} is sound: no damage found.", highlight=False)
        return
    typer.echo(f"The store {where} is damaged:")
    for problem in problems:
        typer.echo(f"  {problem}")
    raise CliError(
        f"the store {where} is damaged ({len(problems)} problem(s) above). Playline reads it "
        "but never writes to it: restore it from a backup, or move it away and start a new "
        "store (`playline export` saves the rows that can still be read).",
        code=1,
    )


@cache_app.command("clear")
@command
def cache_clear(
    tool: Annotated[str | None, typer.Option("--tool", help="Only this tool's receipts.")] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Do not ask: delete them (for scripts).")
    ] = False,
    store: StoreOpt = None,
) -> None:
    """Delete receipts (of one tool with --tool): the next such calls go out again.

    It says what buying them again could cost (each tool's paid receipts, completed or lost,
    times its average credits per call in the store's ledger) and asks first; --yes skips the
    question. Those calls are bought again under new idempotency keys, so a provider that
    recognises keys answers them afresh (and charges for them), not from its records of the
    first purchase. To buy one column's calls again, run with --refresh COLUMN instead.
    Receipts in doubt (calls that may have been charged) and running ones are kept: a resume
    settles them."""
    db = store_at(store, read_only=True)  # a store that is not there is not created
    stats = db.receipt_stats()
    finished = {t: sum(s.get(k, 0) for k in _CLEARED) for t, s in stats.items()}
    held = {t: sum(n for k, n in s.items() if k != "bytes") for t, s in stats.items()}
    if tool is not None and not held.get(tool):
        known = sorted(t for t, n in held.items() if n)
        close = difflib.get_close_matches(tool, known, n=1)
        hint = f" Did you mean {close[0]}?" if close else ""
        raise CliError(
            f"--tool {tool}: no receipts of that tool in {display_url(db.url)}.{hint} Tools "
            f"with receipts: {', '.join(known) or 'none'} (`playline cache stats`)."
        )
    chosen = {t: s for t, s in stats.items() if tool is None or t == tool}
    kept = _kept(chosen)
    doomed = {t: n for t, n in finished.items() if n and t in chosen}
    if not doomed:
        console.print(f"No receipts to delete.{kept}", highlight=False)
        return
    cost, unpriced = _cost_to_buy_back(db, {t: chosen[t] for t in doomed})
    what = f"{sum(doomed.values())} receipt(s) of {len(doomed)} tool(s)"
    if tool is not None:
        what = f"{doomed[tool]} receipt(s) of {tool}"
    question = (
        f"Delete {what}? The next such calls run live: up to about {cost:.4g} credits to buy "
        f"them back (receipts x each tool's average credits per call){unpriced}.{kept}"
    )
    if not yes:
        try:
            agreed = typer.confirm(question, default=False)
        except (typer.Abort, click.Abort):  # no answer: stdin is not a terminal, or it ended
            console.print(highlight=False)
            raise CliError(
                "cache clear asks before it deletes receipts, and got no answer (no "
                "terminal to ask on): pass --yes to delete them without asking."
            ) from None
        if not agreed:
            console.print("Nothing deleted.")
            raise typer.Exit(1)
    db.close()
    deleted = store_at(store).clear_receipts(tool)
    console.print(
        f"Deleted {deleted} receipt(s){f' of {tool}' if tool else ''}; the next such calls run "
        f"live, under new idempotency keys (up to about {cost:.4g} credits to buy them "
        f"back{unpriced}).{kept}",
        highlight=False,
    )


# what cache clear deletes: in-doubt receipts (``unknown``) are kept, for a resume to re-send
# under their idempotency keys or, with --retry-in-doubt, to buy again; running ones are
# their owner's
_CLEARED = ("completed", "failed", "lost")


def _kept(stats: dict[str, dict[str, int]]) -> str:
    """What cache clear leaves, and why: '' when it leaves nothing."""
    doubt = sum(s.get("unknown", 0) for s in stats.values())
    running = sum(s.get("running", 0) for s in stats.values())
    said = []
    if doubt:
        said.append(
            f" {doubt} receipt(s) in doubt kept (their calls may have been charged): "
            "`playline resume RUN_ID` re-sends those whose provider recognises idempotency "
            "keys, `playline resume RUN_ID --retry-in-doubt` buys the others again "
            "(`playline show RUN_ID` counts a run's)."
        )
    if running:
        said.append(
            f" {running} running receipt(s) kept: the run that sent them completes them (or, "
            "when its process stopped, a resume finds them in doubt)."
        )
    return "".join(said)


def _cost_to_buy_back(db: Store, stats: dict[str, dict[str, int]]) -> tuple[float, str]:
    """What buying the receipts in ``stats`` again could cost, in credits: each tool's paid
    receipts (completed, and lost: charged, its result gone) times its average credits per
    call in the ledger (failed ones were not paid for), and a note naming the tools whose
    price the ledger does not know (no call of theirs in it), '' when it knows every one."""
    ledger = db.ledger_totals()
    cost = 0.0
    unpriced = []
    for name, s in stats.items():
        paid = s.get("completed", 0) + s.get("lost", 0)
        totals = ledger.get(name)
        if totals is not None and totals.calls:
            cost += paid * totals.credits / totals.calls
        elif paid:
            unpriced.append(name)
    if not unpriced:
        return cost, ""
    return cost, f", and an unknown cost for {', '.join(sorted(unpriced))} (none in the ledger)"


# tools
def _tool_specs(
    play: str | None, gateway: str | None, token: str | None = None
) -> list[tuple[str, ToolSpec]]:
    found: list[tuple[str, ToolSpec]] = []
    if play is not None:
        found.extend(("local", spec) for spec in load_play(play).tools)
    gw = gateway_from(gateway, token)
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
        "input": _inputs(spec),
        "cost_basis": spec.cost_basis(),
        "coverage": spec.coverage,
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
        **({"http": spec.transport.describe()} if isinstance(spec.transport, HttpTool) else {}),
        **_secrets_doc(spec),
    }


def _secrets_doc(spec: ToolSpec) -> dict[str, Any]:
    """The keys a tool reads: each variable's name and whether this environment sets it."""
    keys = keys_read(spec)
    return {"secrets": [{"name": n, "set": is_set} for n, is_set in keys]} if keys else {}


def _inputs(spec: ToolSpec) -> dict[str, Any]:
    """What a call's input holds: the fields a gateway declares; for a local tool, its
    function's signature (a dict in, or a list of dicts for a batch tool)."""
    doc: dict[str, Any] = {"required": list(spec.required), "optional": list(spec.optional)}
    if spec.normalize is not None:
        doc["normalize"] = spec.normalize.described
    fn = getattr(spec.transport, "fn", None)
    if fn is not None:
        with contextlib.suppress(TypeError, ValueError):
            doc["signature"] = f"{fn.__name__}{inspect.signature(fn)}"
        doc["takes"] = (
            f"a list of up to {spec.batch.max_size} input dicts, returns an aligned list"
            if spec.batch and not spec.batch.via
            else "one input dict"
        )
    return doc


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
    play: PlayOpt = None,
    gateway: GatewayOpt = None,
    json_mode: JsonOpt = False,
    gateway_token: GatewayTokenOpt = None,
    tsv: TsvOpt = False,
) -> None:
    """List tools: id, source, rate, batch size and cost."""
    with table_output(tsv, json_mode=json_mode):
        _tools_list(_tool_specs(play, gateway, gateway_token), json_mode)


def _tools_list(specs: list[tuple[str, ToolSpec]], json_mode: bool) -> None:
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
    print_table(table)


@tools_app.command("describe")
@command
def tools_describe(
    tool_id: Annotated[
        str, typer.Argument(metavar="ID", help="The tool id, e.g. sim.email.alpha.")
    ],
    play: PlayOpt = None,
    gateway: GatewayOpt = None,
    gateway_token: GatewayTokenOpt = None,
) -> None:
    """Everything about one tool, as JSON: its input fields (or a local tool's signature),
    how it charges (cost_basis: per input or per request, on a hit or per call), its
    published coverage, rate, batching, outputs, version, and the keys it reads (each
    variable's name and whether it is set here; never a value)."""
    specs = _tool_specs(play, gateway, gateway_token)
    for source, spec in specs:
        if spec.id == tool_id:
            typer.echo(json.dumps(_spec_doc(source, spec), indent=2))
            return
    ids = [spec.id for _, spec in specs]
    close = difflib.get_close_matches(tool_id, ids, n=1)
    hint = f" Did you mean {close[0]}?" if close else ""
    raise CliError(f"No tool {tool_id!r}.{hint} Known: {', '.join(ids) or 'none'}.", code=1)


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
    """Send an event to the run waiting for KEY (delivered to one run, once; the first payload
    stands)."""
    payload = None if data is None else parse_json(data, "--data")
    db = store_at(store, create=False)  # a mistyped --store parks the event where no run is
    fresh = pl.send_event(key, payload, store=db)
    if not fresh:
        console.print(f"Event {key!r} was sent before; the first payload stands.", highlight=False)
        return
    waiting = [r.run_id for r in db.due_runs(now=0.0, limit=1000) if key in r.awaited_events]
    if not waiting:
        said = (
            "No run waits for it yet: the first run to wait for it takes it (an event goes to "
            "one run, once)."
        )
    elif len(waiting) == 1:
        said = (
            f"Run {waiting[0]} waits for it: a worker (`playline worker`) or "
            f"`playline resume {shlex.quote(waiting[0])}` goes on with it."
        )
    else:
        said = (
            f"{len(waiting)} runs wait for it ({', '.join(waiting[:3])}"
            f"{', ...' if len(waiting) > 3 else ''}): the first to go on takes it, the others "
            "go on waiting (an event goes to one run, once: give each run a key of its own)."
        )
    console.print(f"Sent event {key!r}. {said}", highlight=False, soft_wrap=True)


# the simulator and the demo
@app.command()
@command
def sim(
    port: Annotated[
        int,
        typer.Option(
            "--port", min=0, max=65535, help="Port to listen on (0: a free one, named on stdout)."
        ),
    ] = 8765,
    seed: Annotated[int, typer.Option("--seed", help="World seed (same seed, same world).")] = 7,
    host: Annotated[str, typer.Option("--host", help="Interface to bind.")] = "127.0.0.1",
    token: Annotated[str, typer.Option("--token", help="Bearer token it accepts.")] = "dev",
    latency_ms: Annotated[
        float | None, typer.Option("--latency-ms", help="Answer latency (default ~20 ms).")
    ] = None,
    providers: Annotated[
        bool,
        typer.Option(
            "--providers",
            help="Also serve doubles of the real providers (Hunter, Apollo...) under "
            "/<provider>; their key is the token.",
        ),
    ] = False,
) -> None:
    """Run the provider simulator (paid data providers behind a gateway) until Ctrl-C.

    The first line on stdout names the URL it listens on. With --providers, the next lines
    name each provider's double: point an adapter at one with PLAYLINE_HUNTER_URL=<its URL>
    and HUNTER_API_KEY=<the token>.
    """
    from playline.sim import main as sim_main

    try:
        sim_main(port, seed, host, token=token, latency_ms=latency_ms, providers=providers)
    except OSError as exc:
        raise cannot_listen(host, port, exc) from None


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
