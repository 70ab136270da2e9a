"""The tool layer: specs, local tools, results (and, later, the gateway transport)."""

from ._registry import LocalTransport, ToolRegistry, ToolSource, default_registry, tool
from ._result import Execution, ToolResult, dotted, is_value
from ._spec import Batch, Cost, Rate, ToolSpec, Transport

__all__ = [
    "Batch",
    "Cost",
    "Execution",
    "LocalTransport",
    "Rate",
    "ToolRegistry",
    "ToolResult",
    "ToolSource",
    "ToolSpec",
    "Transport",
    "default_registry",
    "dotted",
    "is_value",
    "tool",
]
