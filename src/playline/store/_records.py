"""The records the store keeps: runs, receipts, rows, events, ledger entries, boundaries.

Slotted dataclasses, and what a store returns is a snapshot, never a handle that changes
under the caller. They are frozen, except those made for every call or row (receipts, claims,
completions, ledger entries, rows, events): a frozen class's ``__init__`` costs about three
times a plain one's. Those are never changed once made either (``dataclasses.replace`` makes a
new one). Statuses are enums; the JSON-shaped parts (inputs, outputs, cell values) stay plain
Python values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple, Required, TypedDict

__all__ = [
    "Answer",
    "Boundary",
    "CellMeta",
    "Claim",
    "ClaimOutcome",
    "ClaimResult",
    "Completion",
    "Event",
    "Failure",
    "LedgerEntry",
    "Receipt",
    "ReceiptStatus",
    "RowPage",
    "RowRecord",
    "RowStatus",
    "RunClaim",
    "RunClaimOutcome",
    "RunEnd",
    "RunRecord",
    "RunStatus",
    "ScheduleRecord",
]


class RunStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    COMPLETED_WITH_ERRORS = "completed_with_errors"
    FAILED = "failed"
    SUSPENDED = "suspended"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    """A run: what it was asked, where it stands, and who holds it.

    A run being worked on is ``running`` and held by one attempt (``holder``) whose lease it
    renews until ``lease_until``; a ``running`` run whose holder is gone was interrupted.
    ``waiting`` says what a suspended run waits for (``wake_at``, ``events``); ``wake_at`` is
    kept apart as well so that "which runs are due" is an indexed query.
    """

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
    holder: str | None = None
    lease_until: float | None = None
    attempts: int = 0
    stop_requested: bool = False
    # governance counters so far: {"run": {...}, "tree": {...}} (the tree's: a root run's)
    counters: dict[str, dict[str, int]] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)  # e.g. max_credits, where it came from

    @property
    def wake_at(self) -> float | None:
        wake = (self.waiting or {}).get("wake_at")
        return float(wake) if isinstance(wake, int | float) else None

    @property
    def awaited_events(self) -> list[str]:
        return [str(e) for e in (self.waiting or {}).get("events") or ()]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEnd:
    """How an attempt left its run: the typed update ``end_attempt`` writes."""

    status: RunStatus
    output: Any = None
    error: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    waiting: dict[str, Any] | None = None
    counters: dict[str, dict[str, int]] = field(default_factory=dict)


class RunClaimOutcome(StrEnum):
    OWNED = "owned"  # the caller holds the run now and runs its attempt
    HELD = "held"  # another live attempt holds it (``RunClaim.record.holder``)
    MISSING = "missing"


@dataclass(frozen=True, slots=True)
class RunClaim:
    outcome: RunClaimOutcome
    record: RunRecord | None


class ReceiptStatus(StrEnum):
    RUNNING = "running"  # claimed: its request is about to go out or is out
    COMPLETED = "completed"
    FAILED = "failed"  # the provider said no: safe to send again
    UNKNOWN = "unknown"  # in doubt: the request may have reached (and charged) the provider
    # cleared (``playline cache clear``): answers nothing, and its next call is bought again
    # as a new generation, so a provider that honours idempotency keys does not answer it
    # with the purchase that was cleared
    CLEARED = "cleared"
    # lost: the provider charged it and no longer holds its result (an async job's result
    # expired): bought again, as a new generation, only when asked (``retry_failed``)
    LOST = "lost"


class Answer(NamedTuple):
    """A completed receipt as a call is answered from it: its result, when it was bought and
    by which run. A tuple: a cached re-run reads one per call."""

    result: bytes
    updated_at: float
    run_id: str


@dataclass(slots=True, kw_only=True)
class Receipt:
    """A tool call's durable record, keyed by its content (``_receipts.receipt_key``).

    ``generation`` counts deliberate re-purchases (``force=True``, a retry of an in-doubt call
    the user asked for): the idempotency key sent to the provider is derived from the key and
    the generation, so a crash's repeat of the same generation is recognised by the provider,
    and the ledger counts a generation once. ``attempt`` counts claims.
    """

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
    generation: int = 1
    request: str | None = None  # the request it last went out in (intent before sending)


@dataclass(slots=True, kw_only=True)
class Claim:
    """A claim of ``key`` for a call about to be sent in ``request``.

    ``force`` buys again (a new generation); ``resend`` says an in-doubt receipt may be sent
    again with its idempotency key (the provider recognises it); ``retry_in_doubt`` buys an
    in-doubt call again when the provider would not recognise it (the user asked).
    """

    key: str
    tool: str
    run_id: str
    force: bool = False
    resend: bool = True
    retry_in_doubt: bool = False
    retry_failed: bool = False  # a lost receipt is bought again (the user asked)
    request: str | None = None


class ClaimOutcome(StrEnum):
    OWNED = "owned"  # the caller must execute the call and complete or fail the receipt
    COMPLETED = "completed"  # a stored result exists; use it
    HELD = "held"  # a live owner elsewhere is executing it; wait for it
    IN_DOUBT = "in_doubt"  # it may have been paid and cannot be sent again safely
    LOST = "lost"  # it was paid and its result is gone; buying it again was not asked for


@dataclass(slots=True)
class ClaimResult:
    outcome: ClaimOutcome
    receipt: Receipt
    resent: bool = False  # OWNED a receipt in doubt: its request may have reached the provider
    changed: bool = False  # ``receipt`` is a new state the store must write


@dataclass(slots=True, kw_only=True)
class LedgerEntry:
    """One paid (or free) live call: what it cost and whether it found something.

    When the provider said what it charged (``reported``), ``credits`` is the higher of that
    and the tool's ``declared`` cost (budgets count it); otherwise both are None and
    ``credits`` is the declared cost."""

    run_id: str
    tool: str
    receipt_key: str
    credits: float
    found: bool
    at: float
    dataset: str | None = None
    row_key: str | None = None
    generation: int = 1
    column: str | None = None  # the dataset column whose cell made the call
    declared: float | None = None
    reported: float | None = None
    unit: str = "credits"  # what ``credits`` counts: the providers' credits, or "usd"


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerTotals:
    """One tool's live calls over a whole store: how many, how many found something, what
    they cost. Plans and waterfall orders learn hit rates and costs from it."""

    calls: int = 0
    found: int = 0
    credits: float = 0.0
    unit: str = "credits"  # what ``credits`` counts (a tool's costs have one unit)

    @property
    def hit_rate(self) -> float | None:
        return self.found / self.calls if self.calls else None


@dataclass(slots=True)
class Completion:
    """A receipt's result, with the charge that paid for it (written in one transaction)."""

    key: str
    result: bytes
    charge: LedgerEntry | None = None


@dataclass(slots=True)
class Failure:
    """A receipt's failure; ``in_doubt`` when the request may have charged the provider.
    ``charge`` is a call the provider answered (and charged) with an unusable result;
    ``rebuy`` one it charged and will not give again for the same idempotency key (an async
    job it forgot, an unusable answer from a provider that does not recognise keys): the next
    claim buys anew, under a new key."""

    key: str
    error: str
    in_doubt: bool = False
    charge: LedgerEntry | None = None
    rebuy: bool = False
    lost: bool = False  # paid, its result gone for good (an expired job's): see LOST

    @property
    def status(self) -> ReceiptStatus:
        """The status its receipt is left in."""
        if self.in_doubt:
            return ReceiptStatus.UNKNOWN
        return ReceiptStatus.LOST if self.lost else ReceiptStatus.FAILED


class CellMeta(TypedDict, total=False):
    """What is kept of a cell besides its value (SEMANTICS.md 16, 18)."""

    status: Required[str]  # queued, running, completed, cached, not_found, skipped, failed
    updated_at: float
    provider: str  # the tool that answered (a waterfall's winning step's)
    cost: float  # credits this cell's calls were charged now
    reason: str  # why it is not found
    error: str  # why it failed
    tool: str  # the tool that failed, and what it said:
    http_status: int | None
    code: str | None
    request_id: str | None
    waterfall: dict[str, Any]  # which step won; each step's status, provider and cost
    waterfalls: list[dict[str, Any]]  # each waterfall's, when the column ran more than one
    result: bool  # the value is a tool result's data (a retried row gets the result back)
    kept_from: str  # the run that computed it: kept as stored until due (stale_after=, ...)


class RowStatus(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"
    WAITING = "waiting"


@dataclass(slots=True, kw_only=True)
class RowRecord:
    run_id: str
    dataset: str
    key: str
    index: int
    status: str  # a RowStatus value
    values: dict[str, Any]  # the visible output row
    cells: dict[str, CellMeta]  # column -> its status, provider, error, cost, ...
    error: str | None = None
    updated_at: float = 0.0
    # ``values`` as canonical JSON when the engine encoded them already (to check their
    # size): a store writes these bytes instead of encoding the values again
    values_json: bytes | None = field(default=None, compare=False, repr=False)
    # ``cells`` as canonical JSON text, when the engine encoded them once for rows holding the
    # same cell metadata (the plain cells of rows that ran together)
    cells_json: str | None = field(default=None, compare=False, repr=False)


@dataclass(slots=True, kw_only=True)
class RowPage:
    """Rows of one dataset that completed at one moment holding the same cells (one metadata
    dict a column), written by ``save_rows`` as one item: each row is what a completed
    ``RowRecord`` with these cells would be, its values given as their JSON. A page costs a
    list entry a row, where a record costs an object (the rows of a pure map, a cached re-run,
    the calls of a wave that settled together)."""

    run_id: str
    dataset: str
    cells_json: str  # the cells every row holds, as canonical JSON text
    updated_at: float
    keys: list[str] = field(default_factory=list)
    indexes: list[int] = field(default_factory=list)
    values_json: list[bytes] = field(default_factory=list)  # each row's values, as JSON

    def add(self, key: str, index: int, values_json: bytes) -> None:
        self.keys.append(key)
        self.indexes.append(index)
        self.values_json.append(values_json)


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
    seq: int = 0  # store-wide, monotonically increasing; given when the event is emitted


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


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleRecord:
    """A schedule: the play it runs, at the times of ``cron`` in ``timezone``, with ``input``.

    ``next_fire`` (seconds since the epoch) is the next time a worker queues a run for; a
    worker that fires it moves it on with a compare-and-set, so two workers fire each time
    once. ``source`` says where the play's code is (``{"file", "function"}``) for workers that
    load plays by file (None: found by its registered name); ``cwd`` is where relative paths
    of its runs are read from. ``catch_up`` says what a worker that was down through fire
    times queues: ``"all"`` of them, ``"one"`` (the latest) or ``"skip"`` (none)."""

    name: str
    play: str
    cron: str
    timezone: str = "UTC"
    source: dict[str, str] | None = None
    input: Any = None
    catch_up: str = "one"
    paused: bool = False
    next_fire: float = 0.0
    cwd: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    last_fire: float | None = None
    last_run_id: str | None = None
    notify: str | None = None  # the URL its runs POST their summary to when they end
