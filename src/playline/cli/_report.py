"""Reading a run back from the store: its summary, step trace, ledger, log and rows.

Everything here works after the process that ran the play is gone (SEMANTICS.md 34).
"""

from __future__ import annotations

import csv
import datetime as dt
import json
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path
from typing import Any

from .._flatten import defused, flat
from .._money import dollars_text
from .._trace import export_table
from ..errors import PlaylineError
from ..store import RunRecord, Store, display_url
from ..store.sql import SQLStore
from ._load import CliError
from ._outfile import replacing

__all__ = [
    "credits_text",
    "dollars_text",
    "export_dataset",
    "require_run",
    "waiting_for",
    "when",
    "write_rows",
]


def when(at: float) -> str:
    return dt.datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M:%S") if at else "-"


def credits_text(credits: float) -> str:
    """Credits for people to read: at most two decimals (``6.3529`` -> ``6.35``), whole
    numbers without any, small amounts to two significant digits (``0.0042``). Machine output
    (``--json``) keeps the exact value."""
    if credits == 0:
        return "0"
    if abs(credits) < 1:
        return f"{credits:.2g}"
    return f"{credits:.2f}".rstrip("0").rstrip(".")


# why a run was stopped (the drain's reason), in words
_STOPS = {
    "stopped": "it was stopped (Ctrl-C, a signal, the UI's stop)",
    "budget": "its budget stopped it",
    "lease lost": "another process took it over",
    "yield": "its worker was shutting down and handed it over",
    "exited": "its process was ending",
}


def waiting_for(waiting: dict[str, Any], sent: Collection[str] = ()) -> str:
    """What a suspended run waits for, in words: a stop, its events (those ``sent`` marked:
    they wait for a worker or a resume to take them), its timer."""
    if waiting.get("stop"):
        why = _STOPS.get(waiting["stop"], f"it was stopped ({waiting['stop']})")
        return f"a resume: {why}; the calls already sent were recorded"
    parts = []
    events = [f"{key} (sent: a worker or a resume goes on)" if key in sent else key
              for key in waiting.get("events") or []]  # fmt: skip
    if events:
        parts.append(("the event " if len(events) == 1 else "the events ") + ", ".join(events))
    if waiting.get("wake_at") is not None:
        parts.append(f"its timer, due {when(float(waiting['wake_at']))}")
    return " or ".join(parts) or "a resume"


def require_run(store: Store, run_id: str) -> RunRecord:
    run = store.get_run(run_id)
    if run is None and isinstance(store, SQLStore) and store.damage is not None:
        raise CliError(
            f"No run {run_id!r} in what can be read of the damaged store "
            f"{display_url(store.url)}: it may be in the damaged part. `playline store check` "
            "lists the damage; `playline runs` lists the runs that can be read.",
            code=1,
        )
    if run is None:
        raise CliError(
            f"No run {run_id!r} in the store {display_url(store.url)}. List runs with "
            "`playline runs` (and check --store / PLAYLINE_STORE).",
            code=1,
        )
    return run


def export_dataset(
    db: Store,
    run_id: str,
    dataset: str,
    out: Path,
    *,
    with_status: bool,
    force: bool = False,
    raw: bool = False,
    format: str | None = None,
    flatten: bool = False,
) -> int:
    """Write a dataset's rows to ``out`` (see ``write_rows``). In CSV and Parquet, columns
    with ``fields=`` are written as their fields' columns (``company.name``); ``flatten``
    spreads every dict value into dotted columns, in JSON lines too (which otherwise keep
    each stored value whole)."""
    format = format or out.suffix.lower().lstrip(".")
    columns, read = export_table(
        db,
        run_id,
        dataset,
        with_status=with_status,
        fields=format != "jsonl",
        flatten=flatten,
    )
    return write_rows(_Rows(read), out, columns, force=force, raw=raw, format=format)


class _Rows:
    """Rows read from the store again each time they are iterated (Parquet reads twice)."""

    def __init__(self, read: Callable[[], Iterator[dict[str, Any]]]) -> None:
        self._read = read

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self._read()


def write_rows(
    rows: Iterable[dict[str, Any]],
    out: Path,
    fields: list[str],
    *,
    force: bool = False,
    raw: bool = False,
    format: str | None = None,
) -> int:
    """Write ``rows`` as CSV, JSON lines or Parquet (``format``, else by the file's suffix);
    returns the row count.

    The file is written whole or not at all (see ``_outfile``); CSV cells that a spreadsheet
    would run as formulas are escaped unless ``raw``. Parquet reads ``rows`` twice (a pass
    learns the columns' types): give an iterable that starts again.
    """
    format = format or out.suffix.lower().lstrip(".")
    if format == "parquet":
        from .._writeback import write_parquet

        with replacing(out, force=force, binary=True) as handle:
            try:
                return write_parquet(rows, handle, "Writing Parquet")
            except PlaylineError as exc:
                raise CliError(str(exc)) from None
    count = 0
    with replacing(out, force=force) as handle:
        if format == "jsonl":
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
                count += 1
            return count
        cell = flat if raw else (lambda value: defused(flat(value)))
        writer = csv.writer(handle)
        writer.writerow([cell(name) for name in fields])
        for row in rows:
            writer.writerow([cell(row.get(name)) for name in fields])
            count += 1
    return count
