"""The ``playline`` command line (API.md section 7): the app, shared options, error reporting.

Exit codes: 0 completed (also with row errors), 1 failed, 2 usage, 3 suspended. An error is
one line on stderr (``error: ...``), never a traceback; ``PLAYLINE_DEBUG=1`` re-raises it.
The commands live by concern: ``_runcmds`` (run, resume, worker), ``_inspect`` (runs, show,
logs, export), ``_admin`` (cache, tools, event, sim, demo, version).
"""

from __future__ import annotations

import functools
import logging
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, ParamSpec, TypeVar

import click
import typer
from rich.console import Console

import playline as pl

from ..errors import PlayDefinitionError, PlaylineError, refused_key
from ..store import Store, display_url, open_store
from ..store.sql import SQLStore
from ._load import (
    CliError,
)
from ._report import dollars_text
from ._report import (
    export_dataset as export_dataset,  # the commands' export (run --out, export)
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
store_app = typer.Typer(help="The store itself: check it for damage.")
app.add_typer(cache_app, name="cache", no_args_is_help=True)
app.add_typer(tools_app, name="tools")
app.add_typer(event_app, name="event", no_args_is_help=True)
app.add_typer(store_app, name="store", no_args_is_help=True)

console = Console()
EXIT_CODES = {"completed": 0, "completed_with_errors": 0, "failed": 1, "suspended": 3}
# The most a count option (--limit, --rows, --concurrency) takes: more than a store holds or a
# worker runs, and within what a store's INTEGER (and Temporal's) holds, so a larger value is
# a usage error (exit 2), not an OverflowError from the store
MOST = 1_000_000_000

P = ParamSpec("P")
R = TypeVar("R")


def _fail(message: str, code: int) -> typer.Exit:
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(code)


class _Resumable:
    """The run a command leaves to resume should a Ctrl-C land outside the run's own signal
    handling (while the play loads, or while its result prints): what that Ctrl-C names."""

    run_id: str | None = None


_resumable = _Resumable()


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: Python flushes it at exit, into the closed pipe again
    (https://docs.python.org/3/library/signal.html#note-on-sigpipe)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a test's runner): nothing to flush
        pass
    finally:
        os.close(devnull)


def resumable(run_id: str | None) -> None:
    """Name the run an interrupted command tells to resume (None: no run to resume)."""
    _resumable.run_id = run_id


def command(fn: Callable[P, R]) -> Callable[P, R]:
    """Report errors as one line and an exit code (2 usage, 1 failure), not a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        resumable(None)  # each command names its own run, if any
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except BrokenPipeError:  # `playline export ... --out - | head`: the reader has enough
            _quiet_stdout()
            raise typer.Exit(0) from None
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
            run_id = _resumable.run_id
            hint = (
                f"; resume the run with `playline resume {shlex.quote(run_id)}`" if run_id else ""
            )
            raise _fail(f"interrupted{hint}", 130) from None

    return wrapper


# shared options
PlayArg = Annotated[
    str, typer.Argument(metavar="PLAY.py[:function]", help="The play file (and function).")
]
InputsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "-i",
        "--input",
        metavar="KEY=VALUE",
        help="An input field: key=text, or key:=JSON (e.g. -i limit:=10). Repeatable.",
    ),
]
InputJsonOpt = Annotated[
    str | None,
    typer.Option("--input-json", metavar="JSON|@FILE", help="The input as a JSON object."),
]
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
        help="Tool gateway URL (default: $PLAYLINE_GATEWAY_URL).",
    ),
]
GatewayTokenOpt = Annotated[
    str | None,
    typer.Option(
        "--gateway-token",
        metavar="TOKEN",
        help="The gateway's token (default: $PLAYLINE_GATEWAY_TOKEN, which other users of "
        "the machine cannot read on a command line). Never stored, printed or part of a "
        "receipt.",
        show_default=False,
    ),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Machine output: JSON (for runs, one object per event line).")
]
OutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help="Write the play's dataset to FILE.csv, FILE.jsonl or FILE.parquet (checked "
        "before the run starts; an existing file only with --force).",
        dir_okay=False,
    ),
]
ForceOpt = Annotated[
    bool,
    typer.Option("--force", help="Replace the --out file if it exists (a link, not its target)."),
]
RawOpt = Annotated[
    bool,
    typer.Option(
        "--raw",
        help="Write CSV cells as they are: no quote in front of cells a spreadsheet would run "
        "as formulas (=, +, -, @, tab, carriage return).",
    ),
]
InDoubtOpt = Annotated[
    bool,
    typer.Option(
        "--retry-in-doubt",
        help="Buy again the calls that may have been charged before a crash, where the "
        "provider would not recognise a repeat (by default they fail).",
    ),
]
CreditsOpt = Annotated[
    float | None,
    typer.Option("--max-credits", min=0, help="Stop before a call that could pass this budget."),
]
UsdOpt = Annotated[
    float | None,
    typer.Option(
        "--max-usd",
        min=0,
        help="Stop before a call that could pass this budget in dollars (LLM calls).",
    ),
]


def store_at(url: str | None, *, read_only: bool = False, create: bool = True) -> Store:
    """The store of a command. Commands that only read open it read-only (they create nothing
    and read files they cannot write); a damaged store is read with a warning, and refused to
    the commands that write. A command that writes only to what a store holds (``create``
    False: a resume, an event, a schedule's pause) refuses one that is not there, as those
    that read do ("No store at ..."), instead of making a new one that no run reads."""
    if not create and not read_only:
        open_store(url, read_only=True).close()
    db = open_store(url, read_only=read_only)
    damage = db.damage if isinstance(db, SQLStore) else None
    if damage is not None:
        where = display_url(db.url)
        if not read_only:
            db.close()
            raise CliError(
                f"The store {where} is damaged ({damage}): Playline never writes to a damaged "
                "store. `playline store check` lists the damage; `playline runs`, `show` and "
                "`export` read what is left. Restore it from a backup, or move it away and "
                "start a new store.",
                code=1,
            )
        typer.echo(
            f"warning: the store {where} is damaged ({' '.join(damage.split())}); showing what "
            "can be read. `playline store check` lists the damage.",
            err=True,
        )
    return db


def counted(count: int, noun: str) -> str:
    """``1 provider request``, ``2 provider requests``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def ran(rows: int, reused: int, pending: int) -> int:
    """The rows an attempt ran to their end (failed, or stored waiting, included): those it
    saw less those an earlier attempt had done and those a stop left pending, started or
    not (``rows_executed`` counts a row as it starts)."""
    return max(0, rows - reused - pending)


def stats_line(stats: pl.RunStats, attempt_credits: float | None = None) -> str:
    """An attempt's counts in the words every display uses: rows *run* (to their end in this
    attempt, the failed ones too), *reused* (completed in an earlier attempt, not run again),
    *failed*, *pending* (left by a stop for a resume); calls *live* (sent to a provider),
    *from receipts* (answered by an earlier call's receipt, free), *shared* (an identical
    call in flight answered them).
    Credits are the run's, over all its attempts."""
    credits = f"{stats.credits:g} credits"
    if attempt_credits is not None and round(attempt_credits, 6) != round(stats.credits, 6):
        credits += f" ({attempt_credits:g} in this attempt)"
    if stats.credits_in_doubt:
        credits += f", {stats.credits_in_doubt:g} more in doubt (may have been charged)"
    if stats.usd or stats.usd_in_doubt:
        credits += f" · {dollars_text(stats.usd)}"
        if stats.usd_in_doubt:
            credits += f", {dollars_text(stats.usd_in_doubt)} more in doubt"
    pending = f", {stats.rows_pending} pending (a resume runs them)" if stats.rows_pending else ""
    if stats.rows_seen:
        pending += f"; {stats.rows_seen} left out as seen by earlier runs (net_new)"
    if stats.rows_set_aside:
        pending += f"; {stats.rows_set_aside} set aside for having no key (`playline show`)"
    if stats.rows_duplicate:
        pending += (
            f"; {stats.rows_duplicate} skipped for a key an earlier row has (the first of a "
            "key counts)"
        )
    if stats.cells_kept:
        pending += f"; {stats.cells_kept} cells kept fresh from earlier runs"
    for tally in stats.waterfalls.values():
        if tally.get("no_input"):
            pending += (
                f"; {counted(tally['no_input'], 'row')} had none of the fields waterfall "
                f"{tally['id']!r} reads (check the column names)"
            )
    return (
        f"{stats.rows} rows: {ran(stats.rows, stats.rows_reused, stats.rows_pending)} run, "
        f"{stats.rows_reused} reused, "
        f"{stats.rows_failed} failed{pending}\n  tool calls: {stats.tool_calls_live} live (sent), "
        f"{stats.tool_calls_cached} from receipts (free), {stats.tool_calls_in_flight} shared · "
        f"{counted(stats.tool_requests, 'provider request')} · {credits}"
    )


# What to do about the causes of failed calls, by their HTTP status or error code.
_HINTS = (
    (
        ("401", "403"),
        "check the token (--gateway-token or PLAYLINE_GATEWAY_TOKEN; the simulator's is 'dev')",
    ),
    (("unknown_tool",), "check the tool id and the gateway URL (--gateway)"),
    (
        ("in_doubt",),
        "they may have been charged; `playline resume --retry-in-doubt` buys them again",
    ),
    (("circuit_open", "503", "500", "502", "504"), "the provider is failing; resume later"),
    (("timeout", "connection_error"), "the provider did not answer; check it, then resume"),
    (("retry_budget", "429"), "the provider kept rate-limiting; resume later or raise limits"),
    (
        ("BudgetExceeded",),
        "raise the budget the run's error names (--max-credits, or --max-usd for the dollars "
        "of LLM calls) and resume",
    ),
)


def failure_lines(stats: pl.RunStats, limit: int = 5) -> list[tuple[str, str]]:
    """The causes of what failed, most frequent first, each named with what it counts, as
    (what, line): a tool's ``calls failed`` (``15 x 401 from sim.email.beta (unauthorized):
    check the token ...``, with what to do), the ``calls not sent`` the budget refused, and
    the ``cells failed`` by the play's own errors (``3 x KeyError in column 'domain':
    'emial'``). Calls are not rows: a row may make several calls (a waterfall's steps, calls
    made together), and a call the budget refused leaves its row pending, not failed."""
    causes = [(count, cause, "calls failed") for cause, count in stats.errors.items()]
    if stats.tool_calls_not_sent:
        causes.append((stats.tool_calls_not_sent, pl.BudgetExceeded.__name__, "calls not sent"))
    causes += [(count, cause, "cells failed") for cause, count in stats.cell_errors.items()]
    lines = []
    for count, cause, what in sorted(causes, key=lambda item: -item[0])[:limit]:
        named = cause.split(": ", 1)[0]  # not the first message a cause may carry
        hint = next((text for marks, text in _HINTS if any(m in named for m in marks)), None)
        if key := refused_key(named):  # a provider's own key, not the gateway's token
            hint = f"check {key} (the provider's key; `playline providers check` tries it)"
        of_a_tool = what != "cells failed"
        lines.append((what, f"{count} x {cause}" + (f": {hint}" if hint and of_a_tool else "")))
    return lines


STATUS_STYLE = {
    "completed": "green",
    "completed_with_errors": "yellow",
    "suspended": "cyan",
    "interrupted": "magenta",
    "queued": "blue",
}


# Libraries whose warnings restate what Playline handles and says itself: the pool's
# "discarding broken connection" and "error connecting" while a server restarts (the store
# reconnects, and says so if it cannot). Their errors still show.
_QUIETED = ("psycopg.pool",)


def main() -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    for name in _QUIETED:
        logging.getLogger(name).setLevel(logging.ERROR)
    app()
