"""``pl.plan``: what a run of a play would cost, found by running it without paying.

The play runs through the engine as a run would, in planning mode (``_engine/planning.py``):
calls a receipt of the store answers are answered (free, with their real results); the others
are counted, not sent, and answer "not found". Nothing is written to the store: the plan's own
run, rows and events live in memory, and only the store's receipts and history are read.

The estimate per tool and per column: calls and requests (as the dispatcher would batch them),
credits as a range (the worst case, every counted call charged; the expected case, weighed by
each tool's hit rate and, in waterfalls, by the chance a row reaches the step), and the time
the tools' rate limits imply. A tool's hit rate is its record in the store's ledger (from
``MIN_TOOL_CALLS`` live calls on), else the coverage its provider publishes, else 50%.

What a plan cannot see: a column that runs only on a found value (``when=``) or a step that
checks a found value is not reached by planned calls, which find nothing. Durable steps
(``ctx.step``, ``ctx.fetch``) run for real; a sleep or an event wait ends the plan there.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from ._clock import SystemClock
from ._context import Context
from ._engine.attempt import Services, open_run, run_attempt
from ._engine.options import DEFAULT_ROW_WINDOW, RunOptions
from ._engine.planning import PlanCount, Planner
from ._play import Play, PlayFn, get_play
from ._runner import check_options, options_checked, resolve_tools
from ._secrets import redact
from .errors import PlayDefinitionError
from .store import (
    Answer,
    LedgerTotals,
    MemoryStore,
    NoStore,
    Receipt,
    RowRecord,
    RunRecord,
    RunStatus,
    Store,
    use_store,
)
from .tools import ToolSpec
from .tools._gates import ToolGates

__all__ = ["MIN_TOOL_CALLS", "ColumnPlan", "Plan", "ToolPlan", "aplan", "plan"]

MIN_TOOL_CALLS = 20  # live calls in the ledger before a tool's recorded hit rate is trusted
DEFAULT_HIT_RATE = 0.5
_PACE = 0.95  # the gates pace a little under a tool's rate (see tools/_gates.py)


@dataclass(frozen=True, kw_only=True)
class ToolPlan:
    """What a run would send one tool, and what it would cost."""

    tool: str
    calls: int  # inputs it would be sent (worst case)
    requests: int  # requests they would go out in (a batch request counts once)
    expected_calls: float
    credits_max: float
    credits_expected: float
    from_receipts: int  # calls answered by receipts: free
    hit_rate: float  # the rate the expected credits assume
    hit_rate_from: str  # "history (N calls)", "published coverage" or "assumed"
    cost: str  # how it charges, in words
    seconds: float  # what its rate limit implies for the requests (0: no limit)
    unit: str = "credits"  # what credits_max and credits_expected count: "usd" for dollars
    tokens: int = 0  # the prompt tokens its calls are estimated to take (LLM tools)

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 9) if isinstance(v, float) else v for k, v in vars(self).items()}


@dataclass(frozen=True, kw_only=True)
class ColumnPlan:
    """What one column's tool calls would send and cost (``dataset.column``)."""

    column: str
    calls: int
    requests: int
    expected_calls: float
    credits_max: float
    credits_expected: float
    usd_max: float = 0.0
    usd_expected: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 9) if isinstance(v, float) else v for k, v in vars(self).items()}


@dataclass(frozen=True, kw_only=True)
class Plan:
    """``pl.plan``'s estimate: per tool and per column, and in all."""

    play: str
    status: str  # how the planned attempt ended: completed, completed_with_errors, ...
    error: str | None
    rows: int
    rows_failed: int
    tools: tuple[ToolPlan, ...] = ()
    columns: tuple[ColumnPlan, ...] = ()
    notes: tuple[str, ...] = field(default=())
    # the providers that refused their key when asked for their balance: (why, tools)
    refused: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())

    @property
    def calls(self) -> int:
        return sum(t.calls for t in self.tools)

    @property
    def requests(self) -> int:
        return sum(t.requests for t in self.tools)

    @property
    def from_receipts(self) -> int:
        return sum(t.from_receipts for t in self.tools)

    @property
    def credits_max(self) -> float:
        return round(sum(t.credits_max for t in self.tools if t.unit == "credits"), 6)

    @property
    def credits_expected(self) -> float:
        return round(sum(t.credits_expected for t in self.tools if t.unit == "credits"), 6)

    @property
    def usd_max(self) -> float:
        """Dollars at most: the tools priced in dollars (LLM calls), each call at its worst."""
        return round(sum(t.credits_max for t in self.tools if t.unit == "usd"), 9)

    @property
    def usd_expected(self) -> float:
        return round(sum(t.credits_expected for t in self.tools if t.unit == "usd"), 9)

    @property
    def tokens(self) -> int:
        return sum(t.tokens for t in self.tools)

    @property
    def seconds(self) -> float:
        """At least the slowest tool's time at its rate limit (tools run side by side)."""
        return max((t.seconds for t in self.tools), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "play": self.play,
            "status": self.status,
            "error": self.error,
            "rows": self.rows,
            "rows_failed": self.rows_failed,
            "calls": self.calls,
            "requests": self.requests,
            "from_receipts": self.from_receipts,
            "credits": {"expected": self.credits_expected, "max": self.credits_max},
            "usd": {"expected": self.usd_expected, "max": self.usd_max},
            "tokens": self.tokens,
            "seconds": round(self.seconds, 3),
            "tools": [t.to_dict() for t in self.tools],
            "columns": [c.to_dict() for c in self.columns],
            "notes": list(self.notes),
        }


class _PlanStore(MemoryStore):
    """The plan's own run, rows and events in memory; receipts and history read from the
    store the play's runs use (never written)."""

    def __init__(self, real: Store) -> None:
        super().__init__("memory://plan")
        self.real = real
        self.io_threads = max(1, real.io_threads)  # reads of the real store stay off the loop

    def find_receipts(self, keys: Sequence[str]) -> dict[str, Receipt]:
        found = self.real.find_receipts(keys)
        found.update(super().find_receipts(keys))
        return found

    def find_answers(self, keys: Sequence[str]) -> dict[str, Answer]:
        found = self.real.find_answers(keys)
        found.update(super().find_answers(keys))
        return found

    def list_runs(
        self,
        *,
        limit: int = 50,
        status: RunStatus | None = None,
        play: str | None = None,
        roots_only: bool = False,
    ) -> list[RunRecord]:  # the history Waterfall(order="cheapest") and net_new datasets read
        return self.real.list_runs(limit=limit, status=status, play=play, roots_only=roots_only)

    def load_rows(self, run_id: str, dataset: str, keys: Sequence[str]) -> dict[str, RowRecord]:
        """The plan's own rows, or an earlier run's (what net_new and fresh cells read)."""
        if super().get_run(run_id) is not None:
            return super().load_rows(run_id, dataset, keys)
        return self.real.load_rows(run_id, dataset, keys)


def _per_call(history: dict[str, LedgerTotals]) -> Callable[[ToolSpec], float | None]:
    """What a call of a tool priced in dollars cost on average in the store's history."""

    def usual(spec: ToolSpec) -> float | None:
        record = history.get(spec.id)
        if record is None or record.unit != "usd" or record.calls < MIN_TOOL_CALLS:
            return None
        return record.credits / record.calls

    return usual


def _hit_rates(
    history: dict[str, LedgerTotals],
) -> tuple[Callable[[ToolSpec], float], dict[str, str]]:
    sources: dict[str, str] = {}

    def rate(spec: ToolSpec) -> float:
        record = history.get(spec.id)
        if record is not None and record.calls >= MIN_TOOL_CALLS:
            sources[spec.id] = f"history ({record.calls} calls)"
            return record.found / record.calls
        if spec.coverage is not None:
            sources[spec.id] = "published coverage"
            return spec.coverage
        sources[spec.id] = "assumed"
        return DEFAULT_HIT_RATE

    return rate, sources


def _seconds(spec: ToolSpec, requests: int) -> float:
    """How long ``requests`` take at the tool's declared rate: its pace past the burst, or
    its windows' (500 a minute: the 501st waits for the next minute), whichever is longer."""
    rate = spec.rate
    if requests <= 0:
        return 0.0
    seconds = 0.0
    if rate.per_second:
        burst = rate.burst or max(1, int(rate.per_second))
        seconds = max(0, requests - burst) / (rate.per_second * _PACE)
    for span, limit in rate.windows:
        seconds = max(seconds, (requests - 1) // limit * span)
    return seconds


@options_checked("pl.aplan")
async def aplan(
    play: Play | PlayFn | str,
    input: Any = None,
    *,
    store: str | Store | None = None,
    tools: Iterable[Any] | None = None,
    row_window: int = DEFAULT_ROW_WINDOW,
) -> Plan:
    """``pl.plan`` in async code."""
    target = get_play(play)
    # a sleep ends the plan (it would only wait), and a plan reports no stall
    options = RunOptions(row_window=row_window, foreground_sleep=0.0, stall_after=None)
    with _readable(store) as real:
        table = resolve_tools(tools)
        history = await asyncio.to_thread(real.ledger_totals)
        rate, sources = _hit_rates(history)
        planner = Planner(rate, _per_call(history))
        memory = _PlanStore(real)
        clock = SystemClock()
        services = Services(
            store=memory,
            clock=clock,
            tools=table,
            gates=ToolGates(clock),  # a plan waits for no rate limit
            context=Context,
            options=options,
            planner=planner,
        )
        run_id = f"plan_{secrets.token_hex(8)}"
        await open_run(memory, clock, run_id=run_id, play=target, input=input)
        outcome = await run_attempt(services, run_id, target, holder=f"plan-{secrets.token_hex(4)}")
    estimate = _estimate(target.name, outcome.status, outcome.error, outcome.stats, planner,
                         table, sources)  # fmt: skip
    balances, refused = await _balances(estimate, table)
    return replace(estimate, notes=(*estimate.notes, *balances), refused=tuple(refused))


async def _balances(
    estimate: Plan, table: dict[str, ToolSpec]
) -> tuple[list[str], list[tuple[str, tuple[str, ...]]]]:
    """What each provider account the plan pays says it has left (``playline.providers``):
    a run stops before it runs out, so a plan that may need more says so; and the accounts
    that refused their key when asked (``PermissionError``: the run's calls would be too)."""
    needed: dict[Any, list[ToolPlan]] = {}
    for tool in estimate.tools:
        balance = getattr(table[tool.tool].transport, "balance", None)
        if balance is not None and tool.calls:
            needed.setdefault(balance, []).append(tool)
    notes: list[str] = []
    refused: list[tuple[str, tuple[str, ...]]] = []
    for balance, planned in needed.items():
        names = ", ".join(p.tool for p in planned)
        try:
            left = await balance()
        except PermissionError as exc:  # the key itself: every call would be refused too
            refused.append((redact(str(exc)), tuple(p.tool for p in planned)))
            continue
        except Exception as exc:
            notes.append(redact(f"{names}: the account's balance could not be read ({exc})."))
            continue
        if left is None:
            continue
        most = sum(p.credits_max for p in planned)
        expected = sum(p.credits_expected for p in planned)
        verdict = (
            "enough" if most <= left
            else "the run would stop when they are spent: add credits first" if expected > left
            else "enough as expected, not for every call"
        )  # fmt: skip
        notes.append(
            f"{names}: the account has {left:g} {balance.unit} left; this plan needs "
            f"{expected:g} expected, {most:g} at most ({verdict})."
        )
    return notes, refused


def _readable(store: str | Store | None) -> AbstractContextManager[Store]:
    """The store whose receipts and history a plan reads, opened read-only (and closed after,
    when opened from a URL): a plan writes nothing, so a store that is not there yet is an
    empty one (nothing answered, no history), not a file created."""
    try:
        return use_store(store, read_only=True)
    except NoStore:
        return nullcontext(MemoryStore())


def _estimate(
    play: str,
    status: str,
    error: str | None,
    stats: Any,
    planner: Planner,
    table: dict[str, ToolSpec],
    sources: dict[str, str],
) -> Plan:
    tools = []
    for tool, count in sorted(planner.tools.items()):
        spec = table[tool]
        target = table.get(spec.batch.via, spec) if spec.batch and spec.batch.via else spec
        if count.calls:
            rate = planner.rate(spec)
            source = sources.get(tool, "assumed")
        else:  # every call answered by a receipt: no rate was needed
            rate, source = 0.0, "-"
        usd = spec.cost.unit == "usd"
        tools.append(
            ToolPlan(
                tool=tool,
                calls=count.calls,
                requests=count.requests,
                expected_calls=round(count.expected_calls, 6),
                # dollars to the billionth: an LLM call costs millionths
                credits_max=round(count.usd_max, 9) if usd else round(count.credits_max, 6),
                credits_expected=(
                    round(count.usd_expected, 9) if usd else round(count.credits_expected, 6)
                ),
                from_receipts=count.from_receipts,
                hit_rate=round(rate, 4),
                hit_rate_from=source,
                cost=spec.cost_basis(),
                seconds=round(_seconds(target, count.requests), 3),
                unit=spec.cost.unit,
                tokens=count.tokens,
            )
        )
    columns = [_column(name, count) for name, count in sorted(planner.columns.items())]
    notes = []
    if status == "suspended":
        notes.append(
            "The play waits (a sleep or an event) before it ends: the plan counts what ran "
            "before the wait."
        )
    if stats.rows_seen:
        notes.append(
            f"{stats.rows_seen:,} rows left out as seen: an earlier run completed them "
            '(mode="net_new").'
        )
    if stats.rows_set_aside:
        notes.append(
            f"{stats.rows_set_aside:,} rows set aside for having no key "
            '(on_bad_key="skip"): the run logs each of them.'
        )
    if stats.cells_kept or stats.cells_recomputed:
        notes.append(
            f"Columns that say when to recompute: {stats.cells_recomputed:,} cells computed "
            f"again, {stats.cells_kept:,} kept as earlier runs stored them."
        )
    if any(t.calls for t in tools):
        notes.append(
            "Planned calls find nothing: columns that run only on a found value (when=...) "
            "are not counted."
        )
    return Plan(
        play=play,
        status=status,
        error=error,
        rows=int(stats.rows),
        rows_failed=int(stats.rows_failed),
        tools=tuple(tools),
        columns=tuple(columns),
        notes=tuple(notes),
    )


def _column(name: str, count: PlanCount) -> ColumnPlan:
    return ColumnPlan(
        column=name,
        calls=count.calls,
        requests=count.requests,
        expected_calls=round(count.expected_calls, 6),
        credits_max=round(count.credits_max, 6),
        credits_expected=round(count.credits_expected, 6),
        usd_max=round(count.usd_max, 9),
        usd_expected=round(count.usd_expected, 9),
    )


def plan(play: Play | PlayFn | str, input: Any = None, **options: Any) -> Plan:
    """Estimate what running ``play`` with ``input`` would cost, without paying: the calls
    receipts answer are free, the others are counted per tool and per column, with credits as
    a range (expected, worst case) and the time the rate limits imply. Options: ``store``,
    ``tools``, ``row_window`` (as ``pl.run``'s). Nothing is written to the store."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        check_options("pl.plan", aplan, options)
        return asyncio.run(aplan(play, input, **options))
    raise PlayDefinitionError(
        "pl.plan() was called inside a running event loop; use `await pl.aplan(...)` there."
    )
