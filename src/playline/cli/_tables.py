"""Tables the command line prints: fitted to a terminal, whole in a pipe, or tab-separated.

Every command that prints a table prints it with ``print_table``:

- in a terminal, the table fits the terminal's width (rich shortens or wraps the columns
  that allow it);
- in a pipe or a file (``playline plan ... | cat``, ``> plan.txt``), where there is no width
  to fit, the table is printed as wide as its content needs: nothing is cut to an assumed 80
  columns (``sim.co…``), and each row stays one line for ``grep`` and friends;
- with ``--tsv`` (``table_output(tsv=True)``), each table is tab-separated values on stdout:
  a header line, then a line per row, markup and colour left out, tabs and line breaks in a
  cell turned into spaces; tables are separated by a blank line. Titles, captions and the
  command's other lines go to stderr, so stdout holds the rows alone (``| cut -f1``).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Annotated, Any

import typer
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from ._app import console
from ._load import CliError

__all__ = ["TsvOpt", "is_terminal", "print_table", "table_output", "tsv_active"]

TsvOpt = Annotated[
    bool,
    typer.Option(
        "--tsv",
        help="Machine output: each table as tab-separated values (a header line, then a line "
        "per row) on stdout; the other lines go to stderr.",
    ),
]

# within ``table_output(tsv=True)``: how many tables were printed so far (None: not TSV)
_tsv_tables: ContextVar[int | None] = ContextVar("tsv_tables", default=None)

# wider than any table: the width a table is measured at before it prints in a pipe
_UNBOUNDED = 100_000


@contextlib.contextmanager
def table_output(tsv: bool, *, json_mode: bool = False) -> Iterator[None]:
    """What a command prints within the block: with ``tsv``, its tables as TSV on stdout and
    its other lines (printed with ``console``) on stderr."""
    if tsv and json_mode:
        raise CliError("--json and --tsv are two machine outputs: choose one.")
    if not tsv:
        yield
        return
    token = _tsv_tables.set(0)
    to_stderr = console.stderr
    console.stderr = True
    try:
        yield
    finally:
        console.stderr = to_stderr
        _tsv_tables.reset(token)


def is_terminal() -> bool:
    """Whether tables print to a terminal, so are fitted to its width (not TSV, not a pipe)."""
    return not tsv_active() and console.is_terminal


def tsv_active() -> bool:
    """Whether tables print as TSV (within ``table_output(tsv=True)``)."""
    return _tsv_tables.get() is not None


def print_table(table: Table, **options: Any) -> None:
    """Print ``table`` as the module docstring says: fitted to a terminal, whole in a pipe,
    or as TSV. ``options`` are ``console.print``'s (``highlight=False`` ...)."""
    printed = _tsv_tables.get()
    if printed is not None:
        _print_tsv(table, printed)
        return
    if console.is_terminal:
        console.print(table, **options)
        return
    whole = console.measure(table, options=console.options.update_width(_UNBOUNDED)).maximum
    Console(width=max(whole, 1), no_color=True).print(table, **options)


def _print_tsv(table: Table, printed: int) -> None:
    _tsv_tables.set(printed + 1)
    if printed:
        typer.echo("")
    if table.title:
        console.print(table.title, style="italic", highlight=False)  # stderr
    if table.show_header:
        typer.echo("\t".join(_plain(column.header) for column in table.columns))
    cells = [list(column.cells) for column in table.columns]
    for row in zip(*cells, strict=True):
        typer.echo("\t".join(_plain(cell) for cell in row))
    if table.caption:
        console.print(table.caption, style="dim", highlight=False)  # stderr


def _plain(cell: RenderableType) -> str:
    """A cell's text without markup or style, on one line, without tabs."""
    if isinstance(cell, str):
        text = Text.from_markup(cell).plain
    elif isinstance(cell, Text):
        text = cell.plain
    else:
        text = str(cell)
    return re.sub(r"[\t\r\n]+", " ", text).strip()
