"""What a SQL store says when it will not open a database: one wording for every dialect."""

from __future__ import annotations

from collections.abc import Iterable

from ...errors import StoreError

__all__ = ["foreign_database", "newer_schema"]


def newer_schema(where: str, found: int, known: int) -> StoreError:
    return StoreError(
        f"The store {where} has schema version {found}, newer than this Playline knows "
        f"({known}): it was written by a newer Playline. Upgrade playline "
        "(pip install -U playline) to open it."
    )


def foreign_database(where: str, kind: str, tables: Iterable[str], instead: str) -> StoreError:
    """``kind`` names the database ("a SQLite database"); ``instead`` says where to go."""
    return StoreError(
        f"{where} is {kind} that is not a Playline store (it has tables "
        f"{', '.join(sorted(tables))}). {instead}"
    )
