"""What the shared SQL code needs of a DB-API cursor."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["Cursor"]


class Cursor(Protocol):
    """What the shared code needs of a DB-API cursor (``?`` placeholders)."""

    @property
    def rowcount(self) -> int: ...

    def execute(self, sql: str, params: Sequence[Any] = ...) -> Any: ...
    def executemany(self, sql: str, params: Sequence[Sequence[Any]]) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
