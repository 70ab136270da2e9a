"""Which row and column the running code belongs to (a context variable, set per row task)."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field

from .tools import ToolResult

__all__ = ["RowScope", "current_row"]


@dataclass(slots=True, eq=False)
class RowScope:
    dataset: str
    row_key: str
    column: str | None = None
    pending: int = 0  # calls this row has queued and not yet got back
    results: list[ToolResult] = field(default_factory=list)  # tool results of the column


current_row: ContextVar[RowScope | None] = ContextVar("playline_row", default=None)
