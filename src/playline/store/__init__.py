"""Stores: where runs, receipts, rows, events and the ledger live. Chosen by URL."""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, closing, nullcontext

from ..errors import StoreError
from ._gates import GateConfig, GateGrant, GateState
from ._io import StoreIO
from ._memory import MemoryStore
from ._messages import NoStore, ReadOnlyStore
from ._owners import owner_alive, owner_id
from ._protocol import (
    BoundaryStore,
    EventStore,
    GateStore,
    LedgerStore,
    ReceiptStore,
    RowStore,
    RunStore,
    ScheduleStore,
    Store,
)
from ._records import (
    Answer,
    Boundary,
    CellMeta,
    Claim,
    ClaimOutcome,
    ClaimResult,
    Completion,
    Event,
    Failure,
    LedgerEntry,
    LedgerTotals,
    Receipt,
    ReceiptStatus,
    RowPage,
    RowRecord,
    RowStatus,
    RunClaim,
    RunClaimOutcome,
    RunEnd,
    RunRecord,
    RunStatus,
    ScheduleRecord,
)
from ._urls import display_url
from ._windows import CELL_STATES, ROW_STATES, RowCounts

__all__ = [
    "CELL_STATES",
    "DEFAULT_STORE_URL",
    "ROW_STATES",
    "Answer",
    "Boundary",
    "BoundaryStore",
    "CellMeta",
    "Claim",
    "ClaimOutcome",
    "ClaimResult",
    "Completion",
    "Event",
    "EventStore",
    "Failure",
    "GateConfig",
    "GateGrant",
    "GateState",
    "GateStore",
    "LedgerEntry",
    "LedgerStore",
    "LedgerTotals",
    "MemoryStore",
    "NoStore",
    "ReadOnlyStore",
    "Receipt",
    "ReceiptStatus",
    "ReceiptStore",
    "RowCounts",
    "RowPage",
    "RowRecord",
    "RowStatus",
    "RowStore",
    "RunClaim",
    "RunClaimOutcome",
    "RunEnd",
    "RunRecord",
    "RunStatus",
    "RunStore",
    "ScheduleRecord",
    "ScheduleStore",
    "Store",
    "StoreIO",
    "display_url",
    "open_store",
    "owner_alive",
    "owner_id",
    "use_store",
]

DEFAULT_STORE_URL = "sqlite:///.playline/playline.db"
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_named_memory: dict[str, MemoryStore] = {}


def open_store(url: str | Store | None = None, *, read_only: bool = False) -> Store:
    """Open the store at ``url`` (default: ``PLAYLINE_STORE``, else ``DEFAULT_STORE_URL``).

    ``memory://`` is a new empty store; ``memory://NAME`` is shared by everything in this
    process that opens the same name. ``sqlite:///path.db`` opens the file (one connection;
    ``~`` and ``$VARIABLES`` in the path are expanded); ``postgresql://user@host:port/db``
    opens a pool of connections to that database. Close a store when done with it; one that is
    dropped unclosed releases its connections when it is garbage-collected.

    ``read_only`` opens an existing store to be read and refuses every write: nothing is
    created (a missing one raises ``StoreError`` "No store at ..."), a SQLite file is opened
    with SQLite's read-only mode, so files and folders that are not writable can be read.
    A damaged SQLite store is always opened so (see ``SQLiteStore``).
    """
    if url is not None and not isinstance(url, str):
        if isinstance(url, bytes | int | float | bool) or not hasattr(url, "find_receipts"):
            raise StoreError(
                f"store={url!r} is not a store: give a URL ('sqlite:///playline.db', "
                "'postgresql://...', 'memory://'), an open store, or None for the default."
            )
        return url
    if url is not None and (not url.strip() or "\x00" in url):
        raise StoreError(
            f"Store URL {url!r} names no store. Leave it out for the default "
            "(PLAYLINE_STORE, else sqlite:///.playline/playline.db), or give "
            "'sqlite:///path/to/file.db'."
        )
    url = url or os.environ.get("PLAYLINE_STORE") or DEFAULT_STORE_URL
    if url == "memory://":
        return MemoryStore()
    if url.startswith("memory://"):
        return _named_memory.setdefault(url, MemoryStore(url))
    if url.startswith("sqlite:"):
        from .sql import SQLiteStore

        return SQLiteStore(url, read_only=read_only)
    if url.startswith(_POSTGRES_SCHEMES):
        return _open_postgres(url, read_only=read_only)
    raise StoreError(
        f"Unknown store URL {display_url(url)!r}. Use 'sqlite:///path/to/playline.db', "
        "'postgresql://user@host:port/database' or 'memory://'."
    )


def use_store(
    store: str | Store | None, *, read_only: bool = False
) -> AbstractContextManager[Store]:
    """``open_store(store)`` for a ``with`` block: a store opened here from a URL is closed
    at its end, so none of its connections or threads waits for the garbage collector; a
    store given open is left open, its opener's to close. Opened at once: an error (``NoStore``
    too) is raised by this call, before the block."""
    opened = open_store(store, read_only=read_only)
    return nullcontext(opened) if opened is store else closing(opened)


def _open_postgres(url: str, *, read_only: bool) -> Store:
    try:
        from .sql._postgres import PostgresStore
    except ImportError as exc:
        raise StoreError(
            f"The PostgreSQL store needs psycopg and psycopg_pool ({exc}). Install them with "
            "pip install 'playline[postgres]'."
        ) from None
    return PostgresStore(url, read_only=read_only)
