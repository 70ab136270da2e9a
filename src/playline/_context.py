"""The ``ctx`` a play sees: a thin facade over the attempt's runtime."""

from __future__ import annotations

from collections.abc import Awaitable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ._dataset import DatasetBuilder
from ._rows import KeySpec
from ._scope import current_row
from ._secrets import Secrets
from .errors import PlayDefinitionError
from .tools import ToolResult

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["Context", "Tools"]


class Tools:
    """``ctx.tools``: ``execute(id=..., tool=..., input=...)`` is ``ctx.tool`` by keywords."""

    def __init__(self, runtime: Runtime) -> None:
        self._rt = runtime

    def execute(
        self,
        *,
        tool: str,
        input: Mapping[str, Any],
        id: str | None = None,
        force: bool = False,
        stale_after: int | None = None,
        description: str | None = None,
    ) -> Awaitable[ToolResult]:
        return self._rt.call_tool(
            tool, input, label=id or description, force=force, stale_after=stale_after
        )


class Context:
    """What a play and its resolvers use: datasets, tools, logs."""

    def __init__(self, runtime: Runtime) -> None:
        self._rt = runtime
        self.tools = Tools(runtime)
        self.secrets = Secrets()

    @property
    def run_id(self) -> str:
        return self._rt.run_id

    @property
    def play_name(self) -> str:
        return self._rt.play_name

    def dataset(self, name: str, rows: Iterable[Any], *, key: KeySpec = None) -> DatasetBuilder:
        """A dataset over ``rows`` (dicts, other items, or a DataFrame); add columns, then run."""
        if not isinstance(name, str) or not name.strip():
            raise PlayDefinitionError(
                "ctx.dataset needs a non-empty name, e.g. ctx.dataset('leads', rows)."
            )
        if current_row.get() is not None:
            raise PlayDefinitionError(
                f"Dataset {name!r} was started inside a column. Datasets cannot be nested: "
                "flatten the work into columns of one dataset, or run it before."
            )
        if name in self._rt.datasets:
            self._rt.claim_dataset_name(name)  # raises with the explanation
        if isinstance(rows, str | bytes) or not isinstance(rows, Iterable):
            raise PlayDefinitionError(
                f"Dataset {name!r}: rows must be a list or iterable of rows, not "
                f"{type(rows).__name__}. To read a file, use ctx.csv(path)."
            )
        return DatasetBuilder(self._rt, name, rows, key)

    def tool(
        self,
        tool: str,
        input: Mapping[str, Any],
        *,
        key: str | None = None,
        force: bool = False,
        stale_after: int | None = None,
        description: str | None = None,
    ) -> Awaitable[ToolResult]:
        """Call a tool; await the result. In a column the call is batched with other rows'."""
        return self._rt.call_tool(
            tool, input, label=key or description, force=force, stale_after=stale_after
        )

    def log(self, message: str) -> None:
        """Add a line to the run's log."""
        row = current_row.get()
        self._rt.events.log(str(message), **({"row_key": row.row_key} if row else {}))
