"""The SQL stores: shared statements and mappers (``_tables``, ``_base``) and their dialects."""

from ._base import SQLStore
from ._sqlite import SQLiteStore

__all__ = ["SQLStore", "SQLiteStore"]
