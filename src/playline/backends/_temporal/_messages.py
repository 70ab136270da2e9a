"""What crosses into Temporal's history: ids, counts, keys and times, never rows or payloads.

Plain dataclasses only (the workflow sandbox imports this module): rows, results and event
payloads stay in the store, where the attempt reads them. Temporal's history has size limits
(2 MB a payload, 50 MB a history) that a dataset would blow; ids never do.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

WORKFLOW = "playline.run"
ACTIVITY = "playline.attempt"
EVENT_SIGNAL = "playline.event"

# Error types the attempt activity raises (``ApplicationError.type``).
RUN_HELD = "RunHeld"  # another live attempt holds the run: retried once its lease may be gone
LEASE_LOST = "LeaseLost"  # this attempt lost the run to another one: retried (it will be held)
UNRUNNABLE = "Unrunnable"  # the run or its play cannot be found by this worker: not retried
# the store's connection was lost and not made again within the store's own retries: retried
STORE_LOST = "StoreLost"


@dataclass(frozen=True, kw_only=True)
class NewRun:
    """What records a run that Temporal started by itself (a Schedule's fire), whose run id
    is the workflow id Temporal gave it. The first attempt records it, once (``create_run``
    refuses a second record with the id); a fire started again with the same id finds the run
    and does not run it twice.

    Small by design: the play by name and by file, the input as JSON text (a Schedule's input
    is a few keys, not a dataset), and times the workflow fills in.
    """

    play: str
    input: str = "{}"  # canonical JSON of the play input
    source: dict[str, str] | None = None  # {"file", "function"}: where workers find the play
    cwd: str | None = None
    origin: dict[str, str] = field(default_factory=dict)  # {"kind": "schedule", "name": ...}
    temporal: dict[str, str] = field(default_factory=dict)  # the Endpoint, for events to ring
    late_after: float | None = None  # seconds: a fire a worker took later than this is skipped
    fire: float | None = None  # the time it fired for (set by the workflow)
    started: float | None = None  # when Temporal started the workflow (set by the workflow)

    def fired(self, *, fire: float, started: float) -> NewRun:
        return replace(self, fire=fire, started=started)


@dataclass(frozen=True, kw_only=True)
class RunInput:
    """The workflow's input; ``attempts`` and ``rang`` carry state across continue-as-new.

    ``run_id`` empty: the workflow id (a Schedule names its workflows itself), and ``new_run``
    says how to record the run."""

    run_id: str = ""
    heartbeat_timeout: float = 30.0  # seconds without a heartbeat before a worker is dead
    attempt_timeout: float = 86_400.0  # seconds one attempt may take before it is retried
    attempts: int = 0  # attempts made by earlier runs of this workflow (continue-as-new)
    rang: list[str] = field(default_factory=list)  # event keys signalled, not yet looked at
    max_credits: float | None = None  # a budget given on submit: it replaces the run's
    max_usd: float | None = None  # the same in dollars
    new_run: NewRun | None = None  # the run is not recorded yet: how to record it


@dataclass(frozen=True, kw_only=True)
class AttemptInput:
    run_id: str
    attempt: int  # 1, 2, ... within this workflow (continue-as-new included)
    now: float  # the workflow's time when it scheduled the attempt: the attempt's clock
    max_credits: float | None = None  # the run's budget from now on (None: as recorded)
    max_usd: float | None = None
    new_run: NewRun | None = None  # on a workflow's first attempt: record the run if missing


@dataclass(frozen=True, kw_only=True)
class AttemptResult:
    """How an attempt ended; a suspended one says for what (``ready``: already due again)."""

    status: str  # completed, completed_with_errors, failed, suspended; skipped (a late fire)
    error: str | None = None
    wake_at: float | None = None
    events: list[str] = field(default_factory=list)
    stop: str | None = None  # "yield" (a worker shutting down) or "stopped" (a person)
    ready: bool = False  # an awaited event is already in the store, or the wake time passed


@dataclass(frozen=True, kw_only=True)
class RunEnded:
    """The workflow's result: how the run's last attempt ended."""

    run_id: str
    status: str
    error: str | None = None
    stop: str | None = None
    attempts: int = 0
