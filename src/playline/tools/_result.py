"""ToolResult: what a tool call returns to a play, live or from the store alike."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Charged", "Execution", "ToolResult", "dotted", "is_value"]

Source = Literal["live", "cache", "checkpoint", "in_flight", "planned"]


@dataclass(frozen=True, slots=True)
class Charged:
    """A transport's answer to one input with what it cost, when the answer says more than
    the tool's declared cost: ``credits``, what a matching outcome rule declares instead
    (Prospeo's catch-all emails are free); ``reported``, what the provider says it charged
    (a header such as ``x-call-credits-spent``, a body field, a per-item ``DEBITED``). The
    ledger keeps both figures and counts the higher. ``repeat``: the rule says the answer is
    free because the provider answered the input before (``pl.Outcome(repeat=True)``)."""

    data: Any
    credits: float | None = None
    reported: float | None = None
    repeat: bool = False


@dataclass(frozen=True, slots=True)
class Execution:
    source: Source = "live"

    @property
    def cached(self) -> bool:
        return self.source in ("cache", "checkpoint")


_EXECUTIONS: dict[str, Execution] = {
    s: Execution(s) for s in ("live", "cache", "checkpoint", "in_flight", "planned")
}


def dotted(data: Any, path: str) -> Any:
    """``data`` at the dotted ``path`` (``"company.domain"``, ``"items.0.email"``), or None."""
    current = data
    for part in path.split("."):
        if isinstance(current, Mapping):
            current = current.get(part)
        elif isinstance(current, list) and part.lstrip("-").isdigit():
            index = int(part)
            current = current[index] if -len(current) <= index < len(current) else None
        else:
            return None
        if current is None:
            return None
    return current


def is_value(value: Any) -> bool:
    """Whether ``value`` counts as found: not None, a blank string, or an empty list or dict."""
    if value is None:
        return False
    if isinstance(value, str):
        return bool(value.strip())
    if isinstance(value, _CONTAINERS):
        return bool(value)
    return True


_CONTAINERS = (dict, list, tuple)


class ToolResult:
    """The outcome of one tool call.

    ``status`` is ``"completed"`` or ``"no_result"``; ``data`` the normalised result (None
    when not found); ``cost`` the credits this call was charged (0 when it was not paid for
    now); ``execution.source`` says where it came from. A model's answer (``ctx.llm``) also
    has ``usage``, the tokens it took (``{"input_tokens": n, "output_tokens": n}``), and
    ``raw``, its text as the model wrote it; other results have None for both.
    """

    __slots__ = (
        "_lists",
        "_outputs",
        "cost",
        "data",
        "execution",
        "raw",
        "status",
        "tool",
        "usage",
    )

    def __init__(
        self,
        *,
        tool: str,
        data: Any,
        cost: float = 0.0,
        execution: Execution = Execution(),
        outputs: Mapping[str, tuple[str, ...]] | None = None,
        lists: Mapping[str, str] | None = None,
        usage: Mapping[str, int] | None = None,
        raw: str | None = None,
    ) -> None:
        self.tool = tool
        self.data = data
        self.status: Literal["completed", "no_result"] = (
            "completed" if is_value(data) else "no_result"
        )
        self.cost = cost
        self.execution = execution
        self._outputs = outputs or {}
        self._lists = lists or {}
        self.usage = usage
        self.raw = raw

    @property
    def found(self) -> bool:
        return self.status == "completed"

    def get(self, name: str, default: Any = None) -> Any:
        """A named output: the tool's declared getter paths in order, else the path ``name``."""
        for path in self._outputs.get(name, (name,)):
            value = dotted(self.data, path)
            if is_value(value):
                return value
        return default

    def list(self, name: str) -> list[Any]:
        """A named list output (``[]`` when absent)."""
        paths = (self._lists[name],) if name in self._lists else self._outputs.get(name, (name,))
        for path in paths:
            value = dotted(self.data, path)
            if isinstance(value, list):
                return value
        return []

    def with_source(self, source: Source, *, cost: float | None = None) -> ToolResult:
        return ToolResult(
            tool=self.tool,
            data=self.data,
            cost=self.cost if cost is None else cost,
            execution=Execution(source),
            outputs=self._outputs,
            lists=self._lists,
            usage=self.usage,
            raw=self.raw,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "status": self.status,
            "data": self.data,
            "cost": self.cost,
            "source": self.execution.source,
        }

    @classmethod
    def from_json(
        cls,
        payload: Mapping[str, Any],
        *,
        outputs: Mapping[str, tuple[str, ...]] | None = None,
        lists: Mapping[str, str] | None = None,
        source: Source | None = None,
        cost: float | None = None,
    ) -> ToolResult:
        """The result ``to_json`` wrote; ``source``/``cost`` replace the stored ones (a
        result read back from a receipt was paid for before: source "cache", cost 0)."""
        return cls(
            tool=payload["tool"],
            data=payload["data"],
            cost=payload.get("cost", 0.0) if cost is None else cost,
            execution=_EXECUTIONS[source or payload.get("source", "live")],
            outputs=outputs,
            lists=lists,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolResult):
            return NotImplemented
        return self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash((self.tool, self.status, self.execution.source))

    def __repr__(self) -> str:
        return (
            f"ToolResult(tool={self.tool!r}, status={self.status!r}, data={self.data!r}, "
            f"cost={self.cost}, source={self.execution.source!r})"
        )
