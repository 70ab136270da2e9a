"""Playline: a durable runtime for data-enrichment plays.

Batched, rate-limited tool calls; waterfalls; content-keyed receipts so nothing is paid
twice; runs that resume where they stopped. See README.md and docs/.
"""

from ._clock import Clock, ManualClock, SystemClock
from ._context import Context
from ._dataset import CellError, Dataset, DatasetBuilder, DatasetStats, RowFailed
from ._limits import Limits
from ._play import Play, play
from ._runner import RunResult, RunStats, arun, run
from .errors import (
    BudgetExceeded,
    GovernanceError,
    PlayDefinitionError,
    PlaylineError,
    ReceiptWaitTimeout,
    SecretLeakError,
    StoreError,
    ToolError,
)
from .store import Event
from .tools import Batch, Cost, Execution, Rate, ToolRegistry, ToolResult, ToolSpec, tool

__all__ = [
    "Batch",
    "BudgetExceeded",
    "CellError",
    "Clock",
    "Context",
    "Cost",
    "Dataset",
    "DatasetBuilder",
    "DatasetStats",
    "Event",
    "Execution",
    "GovernanceError",
    "Limits",
    "ManualClock",
    "Play",
    "PlayDefinitionError",
    "PlaylineError",
    "Rate",
    "ReceiptWaitTimeout",
    "RowFailed",
    "RunResult",
    "RunStats",
    "SecretLeakError",
    "StoreError",
    "SystemClock",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "arun",
    "play",
    "run",
    "tool",
]

__version__ = "0.1.0"
