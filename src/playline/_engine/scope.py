"""Where running code stands: which row and column it belongs to, and where tool results go.

Context variables, so ``ctx.tool`` knows to queue its call with the other rows' calls (inside
a column) instead of executing it at once, and so a waterfall step learns the results of the
calls its code made without wrapping the play's context.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from ..errors import PlayDefinitionError
from ..store import CellMeta, RowRecord
from ..tools import ToolResult

__all__ = ["RowScope", "RowView", "current_row", "result_sink"]


class RowScope:
    """One row as it runs: its values so far, its cells' metadata, the calls it waits for.

    A plain slots class: one is made per row, and a dataclass's default factories cost more
    than the rest of a pure row's bookkeeping."""

    __slots__ = (
        "cells",
        "column",
        "dataset",
        "fresh_since",
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
        self.view = RowView(self.values, dataset)  # what resolvers see
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
        # receipts completed before this are bought again by the column's calls (a column
        # with stale_after=, a cell recompute= asked for); None: any receipt answers
        self.fresh_since: float | None = None

    def keep(self, column: str, value: Any) -> None:
        """Set a column's value (a resolver's plain value may be set directly)."""
        self.values[column] = value
        if type(value) is ToolResult:
            self.held = True

    def __repr__(self) -> str:
        return f"RowScope({self.dataset!r}, {self.row_key!r}, column={self.column!r})"


class RowView(Mapping[str, Any]):
    """The row a resolver sees: its input and the columns computed so far, read-only, and
    ``previous(column)``, the value an earlier run of the play stored for this row's cell."""

    __slots__ = ("_dataset", "_values", "previous_row")

    def __init__(self, values: dict[str, Any], dataset: str) -> None:
        self._values = values
        self._dataset = dataset
        # the row an earlier run of the play stored for this key (``previous.py``): False
        # when the dataset did not look (no column says when to recompute), None when none.
        # Kept here, not on the row's scope: a view that held its scope would make every row a
        # reference cycle, freed only by the cyclic collector.
        self.previous_row: RowRecord | bool | None = False

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Row({self._values!r})"

    def previous(self, column: str) -> Any:
        """The value the newest earlier run of this play stored in this row's cell of
        ``column`` (same dataset, same row key); None when no earlier run stored one."""
        previous = self.previous_row
        if previous is False:
            raise PlayDefinitionError(
                f"row.previous({column!r}) in dataset {self._dataset!r}: the dataset "
                "reads what earlier runs stored only when a column says when to recompute. "
                "Declare the column with stale_after=, recompute= or recompute_on_error=True "
                "(with_column(..., recompute=lambda previous: ...) is given the previous cell)."
            )
        if not isinstance(previous, RowRecord):
            return None
        return previous.values.get(column)


current_row: ContextVar[RowScope | None] = ContextVar("playline_row", default=None)

# A list that collects the results of the tool calls made while it is set (a waterfall step).
result_sink: ContextVar[list[ToolResult] | None] = ContextVar("playline_sink", default=None)
