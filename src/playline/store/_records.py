"""The records the store keeps: runs, receipts, rows, events, ledger entries."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "Boundary",
    "Claim",
    "ClaimOutcome",
    "ClaimResult",
    "Event",
    "LedgerEntry",
    "Receipt",
    "ReceiptStatus",
    "RowRecord",
    "RunRecord",
    "RunStatus",
    "owner_alive",
    "owner_id",
]


class RunStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    COMPLETED_WITH_ERRORS = "completed_with_errors"
    FAILED = "failed"
    SUSPENDED = "suspended"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    run_id: str
    play: str
    status: RunStatus
    input: Any = None
    output: Any = None
    error: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0
    parent_run_id: str | None = None
    waiting: dict[str, Any] | None = None


class ReceiptStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class Receipt:
    key: str
    tool: str
    status: ReceiptStatus
    owner: str
    run_id: str
    attempt: int
    lease_until: float | None
    result: bytes | None = None  # canonical JSON of the ToolResult
    error: str | None = None
    updated_at: float = 0.0
    job: bytes | None = None  # an async tool's submitted job (JSON), so a resume polls it


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    key: str
    tool: str
    run_id: str
    force: bool = False


class ClaimOutcome(StrEnum):
    OWNED = "owned"  # the caller must execute the call and complete or fail the receipt
    COMPLETED = "completed"  # a stored result exists; use it
    HELD = "held"  # a live owner elsewhere is executing it; wait for it


@dataclass(frozen=True, slots=True)
class ClaimResult:
    outcome: ClaimOutcome
    receipt: Receipt


@dataclass(frozen=True, slots=True, kw_only=True)
class RowRecord:
    run_id: str
    dataset: str
    key: str
    index: int
    status: str  # "completed" | "failed" | "waiting"
    values: dict[str, Any]  # the visible output row
    cells: dict[str, dict[str, Any]]  # column -> {status, provider, error, cost, ...}
    error: str | None = None
    updated_at: float = 0.0


@dataclass(slots=True, kw_only=True)
class Event:
    """A change: of a cell, a row, a dataset, a tool batch, the run; or a log line."""

    kind: str
    run_id: str
    at: float
    dataset: str | None = None
    row_key: str | None = None
    column: str | None = None
    status: str | None = None
    provider: str | None = None
    error: str | None = None
    preview: str | None = None
    data: dict[str, Any] | None = None
    seq: int = 0  # set by the store when written: monotonically increasing, store-wide


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerEntry:
    run_id: str
    tool: str
    receipt_key: str
    credits: float
    found: bool
    at: float
    dataset: str | None = None
    row_key: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Boundary:
    """A durable boundary of a run: a step's output, a sleep, a fetch, an event wait, a child.

    ``status`` is ``"waiting"`` (a sleep or wait not yet over; ``wake_at`` is when it is due)
    or ``"completed"`` (``output`` is the JSON to replay).
    """

    key: str
    run_id: str
    kind: str
    status: str
    output: bytes | None = None
    wake_at: float | None = None
    updated_at: float = 0.0


_HOST = socket.gethostname()


def owner_id(token: str) -> str:
    """Who holds a receipt: host, process and attempt, so a dead process can be told apart."""
    return f"{_HOST}/{os.getpid()}/{token}"


def owner_alive(owner: str) -> bool:
    """False only when the owner was a process on this host that no longer exists."""
    host, _, rest = owner.partition("/")
    pid_text = rest.partition("/")[0]
    if host != _HOST or not pid_text.isdigit():
        return True
    pid = int(pid_text)
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
