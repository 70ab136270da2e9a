"""Stores: where runs, receipts, rows, events and the ledger live. Chosen by URL."""

from __future__ import annotations

import os

from ..errors import StoreError
from ._memory import MemoryStore
from ._protocol import Store
from ._records import (
    Boundary,
    Claim,
    ClaimOutcome,
    ClaimResult,
    Event,
    LedgerEntry,
    Receipt,
    ReceiptStatus,
    RowRecord,
    RunRecord,
    RunStatus,
    owner_alive,
    owner_id,
)

__all__ = [
    "DEFAULT_STORE_URL",
    "Boundary",
    "Claim",
    "ClaimOutcome",
    "ClaimResult",
    "Event",
    "LedgerEntry",
    "MemoryStore",
    "Receipt",
    "ReceiptStatus",
    "RowRecord",
    "RunRecord",
    "RunStatus",
    "Store",
    "open_store",
    "owner_alive",
    "owner_id",
]

DEFAULT_STORE_URL = "sqlite:///.playline/playline.db"
_named_memory: dict[str, MemoryStore] = {}


def open_store(url: str | Store | None = None) -> Store:
    """Open the store at ``url`` (default: ``PLAYLINE_STORE``, else ``DEFAULT_STORE_URL``).

    ``memory://`` is a new empty store; ``memory://NAME`` is shared by everything in this
    process that opens the same name.
    """
    if url is not None and not isinstance(url, str):
        return url
    url = url or os.environ.get("PLAYLINE_STORE") or DEFAULT_STORE_URL
    if url == "memory://":
        return MemoryStore()
    if url.startswith("memory://"):
        return _named_memory.setdefault(url, MemoryStore(url))
    if url.startswith("sqlite://"):
        try:
            from ._sqlite import SQLiteStore  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            raise StoreError(
                f"The SQLite store is not available in this build; use store='memory://' "
                f"instead of {url!r}."
            ) from None
        store: Store = SQLiteStore(url)
        return store
    raise StoreError(
        f"Unknown store URL {url!r}. Use 'sqlite:///path/to/playline.db' or 'memory://'."
    )
