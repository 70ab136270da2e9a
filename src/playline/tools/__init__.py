"""The tool layer: specs, local tools, declared HTTP tools, results and the gateway transport."""

from ._credentials import secret
from ._gateway import Gateway
from ._http import Auth, HttpBulk, HttpPoll, HttpTool
from ._outcomes import Answer, Outcome, Reported, parse_retry_after
from ._registry import LocalTransport, ToolRegistry, ToolSource, default_registry, tool
from ._result import Charged, Execution, ToolResult, dotted, is_value
from ._spec import Batch, Cost, Jobs, JobState, Rate, ToolSpec, Transport

__all__ = [
    "Answer",
    "Auth",
    "Batch",
    "Charged",
    "Cost",
    "Execution",
    "Gateway",
    "HttpBulk",
    "HttpPoll",
    "HttpTool",
    "JobState",
    "Jobs",
    "LocalTransport",
    "Outcome",
    "Rate",
    "Reported",
    "ToolRegistry",
    "ToolResult",
    "ToolSource",
    "ToolSpec",
    "Transport",
    "default_registry",
    "dotted",
    "is_value",
    "parse_retry_after",
    "secret",
    "tool",
]
