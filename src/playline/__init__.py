"""Playline: a durable runtime for data-enrichment plays.

Batched, rate-limited tool calls; waterfalls; content-keyed receipts so nothing is paid
twice; runs that resume where they stopped. See README.md and docs/.
"""

from . import providers, sinks
from ._clock import Clock, ManualClock, SystemClock
from ._context import Context
from ._dataset import CellError, Dataset, DatasetBuilder, DatasetStats, PreviousCell
from ._engine.boundaries import FetchResponse
from ._limits import Limits
from ._plan import ColumnPlan, Plan, ToolPlan, aplan, plan
from ._play import Play, play
from ._runner import RunResult, RunStats, arun, run
from ._waterfall import CodeStep, ToolStep, Waterfall, WaterfallStats, register_waterfall
from ._worker import Worker, send_event
from .errors import (
    BudgetExceeded,
    EventTimeout,
    GatewayError,
    GovernanceError,
    LlmAnswerError,
    PlayDefinitionError,
    PlaylineError,
    ReceiptWaitTimeout,
    RowFailed,
    RunHeld,
    SecretLeakError,
    StoreError,
    ToolError,
)
from .store import Event
from .tools import (
    Answer,
    Auth,
    Batch,
    Cost,
    Execution,
    Gateway,
    HttpBulk,
    HttpPoll,
    HttpTool,
    Outcome,
    Rate,
    Reported,
    ToolRegistry,
    ToolResult,
    ToolSpec,
    secret,
    tool,
)
from .triggers._hooks import hook
from .triggers._schedules import schedule

__all__ = [
    "Answer",
    "Auth",
    "Batch",
    "BudgetExceeded",
    "CellError",
    "Clock",
    "CodeStep",
    "ColumnPlan",
    "Context",
    "Cost",
    "Dataset",
    "DatasetBuilder",
    "DatasetStats",
    "Event",
    "EventTimeout",
    "Execution",
    "FetchResponse",
    "Gateway",
    "GatewayError",
    "GovernanceError",
    "HttpBulk",
    "HttpPoll",
    "HttpTool",
    "Limits",
    "LlmAnswerError",
    "ManualClock",
    "Outcome",
    "Plan",
    "Play",
    "PlayDefinitionError",
    "PlaylineError",
    "PreviousCell",
    "Rate",
    "ReceiptWaitTimeout",
    "Reported",
    "RowFailed",
    "RunHeld",
    "RunResult",
    "RunStats",
    "SecretLeakError",
    "StoreError",
    "SystemClock",
    "ToolError",
    "ToolPlan",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "ToolStep",
    "Waterfall",
    "WaterfallStats",
    "Worker",
    "aplan",
    "arun",
    "hook",
    "plan",
    "play",
    "providers",
    "register_waterfall",
    "run",
    "schedule",
    "secret",
    "send_event",
    "sinks",
    "tool",
    "waterfalls",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """``pl.waterfalls`` (the shipped waterfalls) is imported when first used: it is built
    on the public API above."""
    if name == "waterfalls":
        import importlib

        return importlib.import_module(f"{__name__}.waterfalls")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
