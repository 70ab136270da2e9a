"""Where running code stands: which row and column it belongs to, and where tool results go.

Context variables, so ``ctx.tool`` knows to queue its call with the other rows' calls (inside
a column) instead of executing it at once, and so a waterfall step learns the results of the
calls its code made without wrapping the play's context.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from ..store import CellMeta
from ..tools import ToolResult

__all__ = ["RowScope", "current_row", "result_sink"]


@dataclass(slots=True, eq=False)
class RowScope:
    dataset: str
    row_key: str
    index: int = 0
    values: dict[str, Any] = field(default_factory=dict)  # input + columns computed so far
    cells: dict[str, CellMeta] = field(default_factory=dict)  # column -> metadata
    column: str | None = None
    pending: int = 0  # calls this row has queued and not yet got back
    results: list[ToolResult] = field(default_factory=list)  # tool results of the column
    unreported: list[str] = field(default_factory=list)  # cells set since the last event
    notes: dict[str, Any] = field(default_factory=dict)  # cell metadata from engine parts


current_row: ContextVar[RowScope | None] = ContextVar("playline_row", default=None)

# A list that collects the results of the tool calls made while it is set (a waterfall step).
result_sink: ContextVar[list[ToolResult] | None] = ContextVar("playline_sink", default=None)
