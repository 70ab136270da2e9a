"""The tool layer: specs, local tools, results and the gateway transport."""

from ._gateway import Gateway, parse_retry_after
from ._registry import LocalTransport, ToolRegistry, ToolSource, default_registry, tool
from ._result import Execution, ToolResult, dotted, is_value
from ._spec import Batch, Cost, Jobs, JobState, Rate, ToolSpec, Transport

__all__ = [
    "Batch",
    "Cost",
    "Execution",
    "Gateway",
    "JobState",
    "Jobs",
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
    "parse_retry_after",
    "tool",
]
