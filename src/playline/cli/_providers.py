"""`playline providers list` and `playline providers check [NAME]`."""

from __future__ import annotations

import json
from typing import Annotated, Any

import httpx
import typer
from rich.table import Table

from .._secrets import redact
from ..providers import PROVIDERS, Provider, ProviderTools, named
from ..providers._provider import has_key
from ..tools import ToolSpec
from ._app import JsonOpt, app, command, console
from ._load import CliError
from ._report import credits_text
from ._tables import TsvOpt, print_table, table_output

providers_app = typer.Typer(help="The real providers Playline has adapters for, and your keys.")
app.add_typer(providers_app, name="providers", no_args_is_help=True)


def _rate(spec: ToolSpec) -> str:
    rate = spec.rate
    parts = [f"{rate.per_second:g}/s"] if rate.per_second else []
    names = {60.0: "min", 3600.0: "h", 86400.0: "day"}
    parts += [f"{count}/{names[seconds]}" for seconds, count in rate.windows]
    if rate.concurrency:
        parts.append(f"{rate.concurrency} at once")
    if rate.per_record:
        parts.append("per record")
    if rate.tokens_per_minute:
        parts.append(f"{rate.tokens_per_minute:,} tokens/min")
    if rate.output_tokens_per_minute:
        parts.append(f"{rate.output_tokens_per_minute:,} output tokens/min")
    return ", ".join(parts) or "-"


def _cost(spec: ToolSpec) -> str:
    cost = spec.cost
    if cost.unit == "usd":
        return "$ by tokens" if cost.worst is not None else f"${cost.credits:g} per call"
    when = "on a hit" if cost.charge == "on_hit" else "per call"
    return f"{cost.credits:g} {when}"


def _doc(provider: Provider) -> dict[str, Any]:
    tools = provider.tools()
    return {
        "provider": provider.name,
        "key": provider.key,
        "key_set": has_key(provider),
        "base_url": tools.base_url,
        "tools": [
            {
                "id": spec.id,
                "rate": _rate(spec),
                "cost": _cost(spec),
                "batch": spec.batch.max_size if spec.batch else None,
                "async": spec.jobs is not None,
                "description": spec.description,
            }
            for spec in tools.specs()
        ],
    }


@providers_app.command("list")
@command
def providers_list(json_mode: JsonOpt = False, tsv: TsvOpt = False) -> None:
    """Every provider: whether its key is set, its tools' rates and cost rules."""
    with table_output(tsv, json_mode=json_mode):
        _providers_list(json_mode)


def _providers_list(json_mode: bool) -> None:
    docs = [_doc(provider) for provider in PROVIDERS.values()]
    if json_mode:
        for doc in docs:
            typer.echo(json.dumps(doc))
        return
    # a line per provider, its tools under it: fits 80 columns (descriptions: --json)
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True)
    table.add_column()
    for doc in docs:
        key = f"{doc['key']} {'set' if doc['key_set'] else 'not set'} · {doc['base_url']}"
        table.add_row(f"[bold]{doc['provider']}[/bold]", key)
        for tool in doc["tools"]:
            form = "async" if tool["async"] else "single"
            if tool["batch"]:
                form = f"bulk {tool['batch']}" + (" async" if tool["async"] else "")
            table.add_row(f"  {tool['id']}", f"{tool['rate']} · {form} · {tool['cost']}")
    print_table(table, highlight=False)
    console.print(
        "Set a provider's key (e.g. export HUNTER_API_KEY=...) and a run has its tools; "
        "PLAYLINE_<PROVIDER>_URL points one at another address.",
        highlight=False,
    )


def _check(tools: ProviderTools) -> dict[str, Any]:
    provider = tools.provider
    doc: dict[str, Any] = {"provider": provider.name, "base_url": tools.base_url}
    if provider.balance is None:
        doc.update(ok=None, said=f"{provider.title} has no account endpoint to ask")
        return doc
    try:
        left = tools.remaining()
    except PermissionError as exc:
        doc.update(ok=False, said=str(exc))
    except httpx.TransportError as exc:  # no answer: where it asked, and what to check
        doc.update(
            ok=False,
            said=redact(
                f"no answer from {tools.base_url} ({type(exc).__name__}: {exc}); check the "
                f"network, or {provider.url_variable} if it points elsewhere"
            ),
        )
    except (httpx.HTTPError, ValueError) as exc:
        doc.update(ok=False, said=redact(f"{type(exc).__name__}: {exc}"))
    else:
        doc.update(ok=True, remaining=left, unit=provider.balance.unit)
    return doc


@providers_app.command("check")
@command
def providers_check(
    name: Annotated[
        str | None,
        typer.Argument(
            metavar="[NAME]", help="One provider (default: every one whose key is set)."
        ),
    ] = None,
    json_mode: JsonOpt = False,
) -> None:
    """Ask each provider whether the key works, and what the account has left."""
    if name is not None:
        provider = named(name)
        if not has_key(provider):
            raise CliError(
                f"{provider.key} is not set: export it (or PLAYLINE_SECRET_{provider.key}) to "
                f"check {provider.title}."
            )
        chosen = [provider]
    else:
        chosen = [p for p in PROVIDERS.values() if has_key(p)]
        if not chosen:
            keys = ", ".join(p.key for p in PROVIDERS.values())
            raise CliError(f"No provider key is set; export one of {keys}.")
    results = [_check(provider.tools()) for provider in chosen]
    for doc in results:
        if json_mode:
            typer.echo(json.dumps(doc))
        elif doc["ok"] is None:
            console.print(f"{doc['provider']}: ? {doc['said']}", highlight=False)
        elif doc["ok"]:
            left = doc["remaining"]
            said = "the key works"
            if left is not None:
                said += f"; {credits_text(left)} {doc['unit']} left"
            console.print(f"{doc['provider']}: ok, {said}", highlight=False)
        else:
            console.print(f"{doc['provider']}: [red]failed[/red], {doc['said']}", highlight=False)
    raise typer.Exit(1 if any(doc["ok"] is False for doc in results) else 0)
