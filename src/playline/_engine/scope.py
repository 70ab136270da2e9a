"""Where running code stands: which row and column it belongs to, and where tool results go.

Context variables, so ``ctx.tool`` knows to queue its call with the other rows' calls (inside
a column) instead of executing it at once, and so a waterfall step learns the results of the
calls its code made without wrapping the play's context.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

from ..store import CellMeta
from ..tools import ToolResult

__all__ = ["RowScope", "current_row", "result_sink"]


class RowScope:
    """One row as it runs: its values so far, its cells' metadata, the calls it waits for.

    A plain slots class: one is made per row, and a dataclass's default factories cost more
    than the rest of a pure row's bookkeeping."""

    __slots__ = (
        "cells",
        "column",
        "dataset",
        "held",
        "index",
        "made",
        "notes",
        "pending",
        "results",
        "row_key",
        "then",
        "unreported",
        "values",
        "view",
    )

    def __init__(
        self, dataset: str, row_key: str, index: int = 0, values: dict[str, Any] | None = None
    ) -> None:
        self.dataset = dataset
        self.row_key = row_key
        self.index = index
        self.values: dict[str, Any] = {} if values is None else values  # input + columns so far
        self.view: Mapping[str, Any] = MappingProxyType(self.values)  # what resolvers see
        self.cells: dict[str, CellMeta] = {}  # column -> metadata
        self.column: str | None = None
        self.pending = 0  # calls this row has queued and not yet got back
        self.results: list[ToolResult] = []  # tool results of the column
        self.unreported: list[str] = []  # cells set since the last event
        self.notes: dict[str, Any] = {}  # cell metadata from engine parts
        self.held = False  # a value is a ToolResult, stored as its data (set by keep)
        # told synchronously when the calls it queued have all settled (set by datasets.py)
        self.then: Callable[[], None] | None = None
        # while a resolver runs for a row group, the calls it makes (not queued yet: the
        # group's calls are looked up together, datasets.py); None: queued as made
        self.made: list[Any] | None = None  # ToolCalls (calls.py imports this module)

    def keep(self, column: str, value: Any) -> None:
        """Set a column's value (a resolver's plain value may be set directly)."""
        self.values[column] = value
        if type(value) is ToolResult:
            self.held = True

    def __repr__(self) -> str:
        return f"RowScope({self.dataset!r}, {self.row_key!r}, column={self.column!r})"


current_row: ContextVar[RowScope | None] = ContextVar("playline_row", default=None)

# A list that collects the results of the tool calls made while it is set (a waterfall step).
result_sink: ContextVar[list[ToolResult] | None] = ContextVar("playline_sink", default=None)
