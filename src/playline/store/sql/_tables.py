"""The SQL both dialects share: column lists, statements, and the mapping between table rows
and records. Statements use ``?`` placeholders; a dialect that wants another style converts
them (``_postgres.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

from ..._json import dumps, loads
from ...errors import PlaylineError
from .._records import (
    Event,
    LedgerEntry,
    Receipt,
    ReceiptStatus,
    RowPage,
    RowRecord,
    RowStatus,
    RunRecord,
    RunStatus,
)
from .._windows import CELL_STATES, ROW_STATES

__all__ = [
    "CELL_BITS",
    "CHUNK",
    "COMPLETE_RECEIPT",
    "EVENT_COLUMNS",
    "INSERT_EVENT",
    "INSERT_LEDGER",
    "INSERT_NEW_RECEIPT",
    "INSERT_RECEIPT",
    "LEDGER_COLUMNS",
    "RECEIPT_COLUMNS",
    "ROW_BITS",
    "ROW_COLUMNS",
    "ROW_OWN",
    "ROW_PARAMS",
    "ROW_SHARED",
    "RUN_COLUMNS",
    "UPSERT_RECEIPT",
    "UPSERT_ROW",
    "UPSERT_RUN",
    "chunks",
    "event_from",
    "event_params",
    "ledger_from",
    "ledger_params",
    "marks",
    "page_fields",
    "receipt_from",
    "receipt_params",
    "row_fields",
    "row_from",
    "row_states",
    "run_from",
    "run_params",
    "upsert_rows",
    "upsert_shared_rows",
]

_T = TypeVar("_T")
_RUN_STATUS = {s.value: s for s in RunStatus}
_RECEIPT_STATUS = {s.value: s for s in ReceiptStatus}


CHUNK = 500  # keys per IN (...) list


def chunks(items: Sequence[_T]) -> Iterator[Sequence[_T]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


def marks(n: int) -> str:
    return ",".join("?" * n)


def _json(value: Any, what: str) -> str | None:
    return None if value is None else dumps(value, what=what).decode()


def _unjson(text: str | bytes | None) -> Any:
    return None if text is None else loads(text)


def _blob(value: Any) -> bytes | None:
    return None if value is None else bytes(value)  # memoryview (PostgreSQL bytea) -> bytes


def _upsert(table: str, columns: str, key: str, rows: int = 1, values: str = "") -> str:
    """Insert ``rows`` rows (one VALUES tuple each; ``values``: those tuples as given),
    updating those whose ``key`` is taken."""
    names = [c.strip() for c in columns.split(",")]
    keys = {k.strip() for k in key.split(",")}
    updates = ", ".join(f"{c} = excluded.{c}" for c in names if c not in keys)
    values = values or ", ".join([f"({marks(len(names))})"] * rows)
    return (
        f"INSERT INTO {table} ({columns}) VALUES {values} "
        f"ON CONFLICT ({key}) DO UPDATE SET {updates}"
    )


# runs
RUN_COLUMNS = (
    "run_id, play, status, input, output, error, stats, created_at, updated_at, "
    "parent_run_id, waiting, holder, lease_until, attempts, stop_requested, counters, wake_at, "
    "options"
)
UPSERT_RUN = _upsert("runs", RUN_COLUMNS, "run_id")


def run_params(run: RunRecord) -> tuple[Any, ...]:
    return (
        run.run_id,
        run.play,
        run.status.value,
        _json(run.input, "The run's input"),
        _json(run.output, "The run's output"),
        run.error,
        dumps(run.stats, what="The run's stats").decode(),
        run.created_at,
        run.updated_at,
        run.parent_run_id,
        _json(run.waiting, "What the run waits for"),
        run.holder,
        run.lease_until,
        run.attempts,
        int(run.stop_requested),
        dumps(run.counters, what="The run's counters").decode(),
        run.wake_at,
        dumps(run.options, what="The run's options").decode(),
    )


def run_from(row: Sequence[Any]) -> RunRecord:
    return RunRecord(
        run_id=row[0],
        play=row[1],
        status=_RUN_STATUS[row[2]],
        input=_unjson(row[3]),
        output=_unjson(row[4]),
        error=row[5],
        stats=loads(row[6]),
        created_at=row[7],
        updated_at=row[8],
        parent_run_id=row[9],
        waiting=_unjson(row[10]),
        holder=row[11],
        lease_until=row[12],
        attempts=row[13],
        stop_requested=bool(row[14]),
        counters=loads(row[15]) if row[15] else {},
        options=loads(row[17]) if row[17] else {},
    )


# receipts
RECEIPT_COLUMNS = (
    "key, tool, status, owner, run_id, attempt, lease_until, result, error, updated_at, job, "
    "generation, request"
)
UPSERT_RECEIPT = _upsert("receipts", RECEIPT_COLUMNS, "key")
# a key with no receipt yet (looked up in the same transaction): no conflict to look for
INSERT_RECEIPT = f"INSERT INTO receipts ({RECEIPT_COLUMNS}) VALUES ({marks(13)})"
# a key assumed to have no receipt (not looked up): its rowcount says whether it had one
INSERT_NEW_RECEIPT = f"{INSERT_RECEIPT} ON CONFLICT (key) DO NOTHING"
# a result (result, updated_at, key, owner); a receipt another owner completed is left as it is
COMPLETE_RECEIPT = (
    "UPDATE receipts SET status = 'completed', result = ?, error = NULL, lease_until = NULL, "
    "updated_at = ? WHERE key = ? AND (status != 'completed' OR owner = ? OR result IS NULL)"
)


def receipt_params(r: Receipt) -> tuple[Any, ...]:
    return (
        r.key,
        r.tool,
        r.status.value,
        r.owner,
        r.run_id,
        r.attempt,
        r.lease_until,
        r.result,
        r.error,
        r.updated_at,
        r.job,
        r.generation,
        r.request,
    )


def receipt_from(row: Sequence[Any]) -> Receipt:
    return Receipt(
        key=row[0],
        tool=row[1],
        status=_RECEIPT_STATUS[row[2]],
        owner=row[3],
        run_id=row[4],
        attempt=row[5],
        lease_until=row[6],
        result=_blob(row[7]),
        error=row[8],
        updated_at=row[9],
        job=_blob(row[10]),
        generation=row[11],
        request=row[12],
    )


# rows
ROW_COLUMNS = 'key, idx, status, "values", cells, error, updated_at'
_ROW_NAMES = 'set_id, id, key, idx, status, "values", cells, error, updated_at, states'
ROW_PARAMS = len(_ROW_NAMES.split(","))
# A row's ``states``: a bit for each cell state one of its cells is in, and one for a waiting
# row, so that a grid's state filter and its count read an index (``rows_page``), not the
# cells' JSON of every row. NULL in rows written before the column (their cells are read).
CELL_BITS = {state: 1 << n for n, state in enumerate(CELL_STATES)}
ROW_BITS = {state: 1 << (len(CELL_STATES) + n) for n, state in enumerate(ROW_STATES)}


def row_states(status: str, cells: Mapping[str, Any]) -> int:
    """The ``states`` of a row with this status and these cells."""
    bits = ROW_BITS.get(status, 0)
    for meta in cells.values():
        state = meta.get("status") if isinstance(meta, dict) else None
        if type(state) is str:
            bits |= CELL_BITS.get(state, 0)
    return bits


@functools.cache
def upsert_rows(count: int) -> str:
    """Write ``count`` rows in one statement, each named by its set and number."""
    return _upsert("rows", _ROW_NAMES, "set_id, id", rows=count)


UPSERT_ROW = upsert_rows(1)
# a row's parameters (in ``upsert_rows`` order) that the rows of a page hold alike, and those
# each holds its own (see ``upsert_shared_rows``)
ROW_SHARED = (0, 4, 6, 7, 8, 9)  # set_id, status, cells, error, updated_at, states
ROW_OWN = (1, 2, 3, 5)  # id, key, idx, values


@functools.cache
def upsert_shared_rows(count: int) -> str:
    """Write ``count`` rows in one statement that hold the same ``ROW_SHARED`` values, bound
    once (parameters 1 to 6), then each row's ``ROW_OWN`` values."""
    shared = dict(zip(ROW_SHARED, range(1, len(ROW_SHARED) + 1), strict=True))
    rows = []
    for row in range(count):
        first = len(ROW_SHARED) + 1 + len(ROW_OWN) * row  # the row's first parameter
        own = dict(zip(ROW_OWN, range(first, first + len(ROW_OWN)), strict=True))
        places = {**shared, **own}
        rows.append("(" + ", ".join(f"?{places[n]}" for n in range(ROW_PARAMS)) + ")")
    return _upsert("rows", _ROW_NAMES, "set_id, id", values=", ".join(rows))


def row_fields(row: RowRecord) -> tuple[Any, ...]:
    """What ``UPSERT_ROW`` writes of a row after its set's id and its number."""
    try:
        values = row.values_json or dumps(row.values, ordered=True)
        cells = row.cells_json or dumps(row.cells, ordered=True).decode()
    except PlaylineError:  # encoded again to say which row: a name made for every row costs
        what = f"Row {row.key!r} of dataset {row.dataset!r}"
        dumps(row.values, what=what, ordered=True)
        dumps(row.cells, what=what, ordered=True)
        raise
    return (
        row.key,
        row.index,
        row.status,
        values.decode(),
        cells,
        row.error,
        row.updated_at,
        row_states(row.status, row.cells),
    )


def page_fields(page: RowPage) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """Each row of the page: its key, and what ``row_fields`` gives of its record."""
    status, cells, updated_at = RowStatus.COMPLETED.value, page.cells_json, page.updated_at
    states = row_states(status, loads(cells))  # once a page: its rows hold the same cells
    for key, index, values in zip(page.keys, page.indexes, page.values_json, strict=True):
        yield key, (key, index, status, values.decode(), cells, None, updated_at, states)


def row_from(run_id: str, dataset: str, row: Sequence[Any]) -> RowRecord:
    return RowRecord(
        run_id=run_id,
        dataset=dataset,
        key=row[0],
        index=row[1],
        status=row[2],
        values=loads(row[3]),
        cells=loads(row[4]),
        error=row[5],
        updated_at=row[6],
    )


# events
EVENT_COLUMNS = (
    'seq, kind, run_id, at, dataset, row_key, "column", status, provider, error, preview, data'
)
INSERT_EVENT = f"INSERT INTO events ({EVENT_COLUMNS}) VALUES ({marks(12)})"


def event_params(e: Event) -> tuple[Any, ...]:
    return (
        e.seq,
        e.kind,
        e.run_id,
        e.at,
        e.dataset,
        e.row_key,
        e.column,
        e.status,
        e.provider,
        e.error,
        e.preview,
        _json(e.data, f"The data of a {e.kind} event"),
    )


def event_from(row: Sequence[Any]) -> Event:
    return Event(
        seq=row[0],
        kind=row[1],
        run_id=row[2],
        at=row[3],
        dataset=row[4],
        row_key=row[5],
        column=row[6],
        status=row[7],
        provider=row[8],
        error=row[9],
        preview=row[10],
        data=_unjson(row[11]),
    )


# ledger
LEDGER_COLUMNS = (
    'run_id, tool, receipt_key, credits, found, at, dataset, row_key, generation, "column", '
    "declared, reported, unit"
)
# A receipt's generation is charged once, whoever writes it and however often.
INSERT_LEDGER = (
    f"INSERT INTO ledger ({LEDGER_COLUMNS}) SELECT {marks(13)} WHERE NOT EXISTS "
    "(SELECT 1 FROM ledger WHERE receipt_key = ? AND generation = ?)"
)


def ledger_params(e: LedgerEntry) -> tuple[Any, ...]:
    return (
        e.run_id,
        e.tool,
        e.receipt_key,
        e.credits,
        int(e.found),
        e.at,
        e.dataset,
        e.row_key,
        e.generation,
        e.column,
        e.declared,
        e.reported,
        e.unit,
        e.receipt_key,
        e.generation,
    )


def ledger_from(row: Sequence[Any]) -> LedgerEntry:
    return LedgerEntry(
        run_id=row[0],
        tool=row[1],
        receipt_key=row[2],
        credits=row[3],
        found=bool(row[4]),
        at=row[5],
        dataset=row[6],
        row_key=row[7],
        generation=row[8],
        column=row[9],
        declared=row[10],
        reported=row[11],
        unit=row[12],
    )
