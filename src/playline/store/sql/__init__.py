"""The SQL stores: shared statements and mappers (``_tables``, ``_base``) and their dialects.

``PostgresStore`` is imported when first asked for: it needs psycopg (``playline[postgres]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._base import SQLStore
from ._sqlite import SQLiteStore

if TYPE_CHECKING:
    from ._postgres import PostgresStore

__all__ = ["PostgresStore", "SQLStore", "SQLiteStore"]


def __getattr__(name: str) -> Any:
    if name == "PostgresStore":
        from ._postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
