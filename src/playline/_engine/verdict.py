"""How an attempt ended, decided from what is known when it ends: ``verdict(facts)``.

The decision is a pure function of the facts (the play's output or error, the run's counts,
its failed calls and cells), so every ending is tested without running a play; the attempt
(``attempt.py``) gathers the facts and writes what the verdict says to the store.
"""

from __future__ import annotations

import inspect
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, Protocol, runtime_checkable

from .._json import dumps
from ..errors import (
    BudgetExceeded,
    PlayDefinitionError,
    PlaylineError,
    full_stop,
    refused_key,
)
from ..store import RunEnd, RunStatus, Store, StoreIO
from .calls import CallStats
from .datasets import DatasetStats
from .events import error_text
from .suspension import Suspension

__all__ = [
    "Facts",
    "RunStats",
    "Status",
    "StoredAs",
    "Verdict",
    "cell_causes",
    "failed",
    "json_or_error",
    "stored_output",
    "verdict",
    "write_end",
]

Status = Literal["completed", "completed_with_errors", "failed", "suspended"]


@runtime_checkable
class StoredAs(Protocol):
    """A play output stored by reference (a ``Dataset``: its rows are in the store)."""

    def to_ref(self) -> dict[str, Any]: ...


@dataclass(kw_only=True)
class RunStats(DatasetStats):
    """A run's counts: its datasets' rows, its tool calls, its credits, its failures."""

    tool_calls_live: int = 0
    tool_calls_cached: int = 0
    tool_calls_in_flight: int = 0
    # of the cached and in-flight ones, those of another spelling (case, spaces) than the
    # input a purchase of this run answered them with: normalised twins, not paid
    tool_calls_twins: int = 0
    tool_calls_failed: int = 0
    tool_calls_not_sent: int = 0  # refused by the budget before they were sent
    tool_requests: int = 0
    dispatch_passes: int = 0
    credits: float = 0.0
    # the worst case of the calls that may have been charged with no record of it (in doubt:
    # a timeout, a job not polled to its end, an answer the store could not keep)
    credits_in_doubt: float = 0.0
    usd: float = 0.0  # dollars charged (LLM calls), over all the run's attempts
    usd_in_doubt: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)  # failed calls by cause
    # cells the play's own code failed, by cause and first message:
    # {"KeyError in column 'domain': 'emial'": 3}
    cell_errors: dict[str, int] = field(default_factory=dict)
    # per tool id, its calls: live, cached, in_flight, failed, not_sent
    tools: dict[str, dict[str, int]] = field(default_factory=dict)
    # per waterfall, its rows and its steps' tallies over the run, each row counted once as it
    # is stored (tallies.py): the store's history of hit rates and costs that
    # Waterfall(order="cheapest") learns from
    waterfalls: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class Facts:
    """What is known when an attempt ends."""

    run_id: str
    output: Any  # the play's value (when it returned)
    error: BaseException | None  # why it did not return: an error, or a Suspension
    stats: RunStats
    calls: CallStats
    # cells a resolver's error failed: by cause, its count and first message
    cell_errors: Mapping[str, tuple[int, str]] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """How the attempt ended: its status, what to store and what to tell."""

    status: Status
    error: BaseException | None = None
    message: str | None = None  # the error as the run's record tells it
    stored: Any = None  # the output as stored
    returned: bool = False  # the play returned a value that is kept
    waiting: dict[str, Any] | None = None  # a suspended run's wake time and awaited events


def verdict(facts: Facts) -> Verdict:
    """The end of an attempt from its facts: suspended, failed, or completed (with errors)."""
    error = facts.error
    if isinstance(error, Suspension):
        return Verdict(status="suspended", waiting=error.waiting())
    if error is not None:
        return Verdict(status="failed", error=error, message=_message(error, facts.stats))
    try:
        stored = stored_output(facts.output)
    except PlaylineError as exc:
        return Verdict(status="failed", error=exc, message=_message(exc, facts.stats))
    whole = _all_failed(facts)
    if whole is not None:
        return Verdict(
            status="failed", error=whole, message=error_text(whole), stored=stored, returned=True
        )
    status: Status = "completed_with_errors" if facts.stats.rows_failed else "completed"
    return Verdict(status=status, stored=stored, returned=True)


def _message(error: BaseException, stats: RunStats) -> str | None:
    message = error_text(error)
    if not isinstance(error, Exception):  # sys.exit() in the play's code
        message = (
            f"{message} (raised by the play's code, which fails the run: a play ends by "
            "returning, and a column fails its cell by raising an Exception)"
        )
    if isinstance(error, BudgetExceeded) and stats.rows_pending:
        message = (
            f"{message} The cap left {stats.rows_pending} rows unenriched; the rows paid for "
            "are kept."
        )
    return message


def _all_failed(facts: Facts) -> PlaylineError | None:
    """The run failed as a whole although every row ended: all of them failed, or a tool
    was refused for every input (a wrong token, an unknown tool)."""
    calls, stats = facts.calls, facts.stats
    for tool, counts in calls.by_tool.items():
        refused = counts.get("refused", 0)
        if refused and refused == counts.get("failed", 0) and not counts.get("live"):
            cause = _top_cause(calls, {}, facts.run_id)
            key = refused_key(cause)  # a provider's own key (calls.py's _cause names it)
            fix = (
                "the tool id is unknown to its gateway: check the id and the gateway URL"
                if "unknown_tool" in cause
                else f"check {key}, the provider's key (`playline providers check` tries it)"
                if key
                else "check the token (PLAYLINE_GATEWAY_TOKEN or pl.Gateway(token=...))"
            )
            return PlaylineError(f"Tool {tool} refused every call ({refused}): {cause}; {fix}.")
    if stats.rows and stats.rows_failed == stats.rows:
        cause = full_stop(_top_cause(calls, facts.cell_errors, facts.run_id))
        if "(quota_exhausted)" in cause or "(insufficient_credits)" in cause:
            cause += (
                " The provider's account is used up: renew its quota or add credits, then "
                f"resume the run (playline resume {shlex.quote(facts.run_id)})."
            )
        return PlaylineError(f"All {stats.rows} rows failed: {cause}")
    return None


def _top_cause(calls: CallStats, cell_errors: Mapping[str, tuple[int, str]], run_id: str) -> str:
    """The most frequent cause of failed cells: a tool's failure, counted in calls (``40
    calls failed with 503 from ...``: a row may make several), or a resolver's error with its
    first message, counted in cells (``3 x KeyError in column 'email': 'emial'``)."""
    causes = [
        (count, f"{count} call{'s' if count != 1 else ''} failed with {cause}")
        for cause, count in calls.causes().items()
    ]
    causes += [(count, f"{count} x {cause}") for cause, count in cell_causes(cell_errors).items()]
    if not causes:
        return f"see the failed cells (playline show {shlex.quote(run_id)} --rows 20)"
    return max(causes, key=lambda item: item[0])[1]


def cell_causes(cell_errors: Mapping[str, tuple[int, str]]) -> dict[str, int]:
    """Cells a resolver's error failed, by cause with its first message."""
    return {f"{cause}: {first}": count for cause, (count, first) in cell_errors.items()}


def json_or_error(value: Any, what: str) -> Any:
    """``value`` when it can be stored as JSON; else a ``PlayDefinitionError`` saying why."""
    dumps(value, what=what)
    return value


def stored_output(output: Any) -> Any:
    """The play's output as stored: a dataset by its reference, anything else as JSON."""
    if isinstance(output, StoredAs):
        return output.to_ref()
    if inspect.isawaitable(output) or callable(getattr(output, "with_column", None)):
        if inspect.iscoroutine(output):
            output.close()
        raise PlayDefinitionError(
            f"The play returned a {type(output).__name__}, not its result: await it (a "
            "dataset: return `await ctx.dataset(...)...run()`, the finished dataset)."
        )
    return json_or_error(output, "The play's return value")


async def write_end(
    store: Store, run_id: str, ended: Verdict, *, holder: str, stats: RunStats,
    counters: dict[str, dict[str, int]], now: float,
) -> Verdict:  # fmt: skip
    """Write what ``ended`` says as the attempt's end; an end the store refuses to hold (a
    value it cannot keep) is written as failed, saying why, and returned so."""
    io = StoreIO(store)
    end = RunEnd(
        status=RunStatus(ended.status),
        output=ended.stored,
        error=ended.message,
        stats=stats.to_dict(),
        waiting=ended.waiting,
        counters=counters,
    )
    try:
        await io(store.end_attempt, run_id, holder=holder, end=end, now=now)
    except PlayDefinitionError as exc:  # something of the end cannot be stored
        ended = failed(ended, exc)
        end = RunEnd(status=RunStatus.FAILED, error=ended.message, counters=counters)
        await io(store.end_attempt, run_id, holder=holder, end=end, now=now)
    return ended


def failed(ended: Verdict, error: PlaylineError) -> Verdict:
    """``ended``, failed by ``error`` met while telling or writing it (its error stays)."""
    return replace(ended, status="failed", message=error_text(error))
