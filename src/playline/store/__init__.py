"""Stores: where runs, receipts, rows, events and the ledger live. Chosen by URL."""

from __future__ import annotations

import os
import threading

from ..errors import StoreError
from ._io import StoreIO
from ._memory import MemoryStore
from ._owners import owner_alive, owner_id
from ._protocol import (
    BoundaryStore,
    EventStore,
    LedgerStore,
    ReceiptStore,
    RowStore,
    RunStore,
    Store,
)
from ._records import (
    Boundary,
    Claim,
    ClaimOutcome,
    ClaimResult,
    Completion,
    Event,
    Failure,
    LedgerEntry,
    Receipt,
    ReceiptStatus,
    RowRecord,
    RowStatus,
    RunClaim,
    RunClaimOutcome,
    RunEnd,
    RunRecord,
    RunStatus,
)

__all__ = [
    "DEFAULT_STORE_URL",
    "Boundary",
    "BoundaryStore",
    "Claim",
    "ClaimOutcome",
    "ClaimResult",
    "Completion",
    "Event",
    "EventStore",
    "Failure",
    "LedgerEntry",
    "LedgerStore",
    "MemoryStore",
    "Receipt",
    "ReceiptStatus",
    "ReceiptStore",
    "RowRecord",
    "RowStatus",
    "RowStore",
    "RunClaim",
    "RunClaimOutcome",
    "RunEnd",
    "RunRecord",
    "RunStatus",
    "RunStore",
    "Store",
    "StoreIO",
    "open_store",
    "owner_alive",
    "owner_id",
]

DEFAULT_STORE_URL = "sqlite:///.playline/playline.db"
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_named_memory: dict[str, MemoryStore] = {}
# PostgreSQL stores by (process, URL): one connection pool each; a forked child, which must
# not share its parent's connections (nor has its pool's threads), opens its own.
_shared: dict[tuple[int, str], Store] = {}
_shared_lock = threading.Lock()


def open_store(url: str | Store | None = None) -> Store:
    """Open the store at ``url`` (default: ``PLAYLINE_STORE``, else ``DEFAULT_STORE_URL``).

    ``memory://`` is a new empty store; ``memory://NAME`` is shared by everything in this
    process that opens the same name. ``sqlite:///path.db`` opens the file (one connection per
    call). ``postgresql://user@host:port/db`` is shared by everything in this process that
    opens the same URL, so repeated runs reuse one connection pool; ``close()`` closes it for
    all of them (the next ``open_store`` opens a new one).
    """
    if url is not None and not isinstance(url, str):
        return url
    url = url or os.environ.get("PLAYLINE_STORE") or DEFAULT_STORE_URL
    if url == "memory://":
        return MemoryStore()
    if url.startswith("memory://"):
        return _named_memory.setdefault(url, MemoryStore(url))
    if url.startswith("sqlite:"):
        from .sql import SQLiteStore

        return SQLiteStore(url)
    if url.startswith(_POSTGRES_SCHEMES):
        return _open_postgres(url)
    raise StoreError(
        f"Unknown store URL {url!r}. Use 'sqlite:///path/to/playline.db', "
        "'postgresql://user@host:port/database' or 'memory://'."
    )


def _open_postgres(url: str) -> Store:
    try:
        from .sql._postgres import PostgresStore
    except ImportError as exc:
        raise StoreError(
            f"The PostgreSQL store needs psycopg and psycopg_pool ({exc}). Install them with "
            "pip install 'playline[postgres]'."
        ) from None
    with _shared_lock:
        key = (os.getpid(), url)
        store = _shared.get(key)
        if not isinstance(store, PostgresStore) or store.closed:
            store = _shared[key] = PostgresStore(url)
        return store
