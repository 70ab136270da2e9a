"""Planning: an attempt that counts the calls it would send instead of sending them.

A plan runs the play through the real engine (datasets, the dispatcher's batching, receipts,
waterfalls) with one part swapped: the executor hands the calls no receipt answers to a
``Planner`` instead of sending them (``CallExecutor(planner=...)``), and each such call
answers "not found" at no cost. So every waterfall step a row could reach is counted (the worst
case), the calls a receipt answers cost nothing (their real results flow on), and nothing is
claimed, paid or written to the store the play's receipts live in.

What it counts, per tool and per column (``dataset.column``): the calls (inputs) and requests
(batches, as the dispatcher packs them) that would go out, and their credits as a range. The
worst case charges every call its full price. The expected case weighs each call by the chance
it is made and charged: a tool's hit rate (``hit_rate(spec)``, from the store's history or the
tool's published coverage) prices an on-hit call, and a waterfall step is reached only when
every earlier planned step of that row missed.

A tool priced in dollars (an LLM's: ``Cost(unit="usd", worst=...)``) is counted apart, in
``usd_max`` (each call at its worst case: its prompt and ``max_tokens`` at the model's prices)
and ``usd_expected`` (what its calls cost on average in the store's history, else the worst
case), with the tokens its prompts are estimated to take (``tokens``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from math import ceil
from typing import Any, Protocol

from ..tools import ToolResult, ToolSpec
from .scope import RowScope

__all__ = ["PlanCount", "PlannedCall", "Planner"]

HitRate = Callable[[ToolSpec], float]
PerCall = Callable[[ToolSpec], float | None]  # what a call of a tool cost on average, if known


class PlannedCall(Protocol):
    """What the planner reads of a call (``calls.ToolCall``)."""

    key: str
    input: dict[str, Any]
    force: bool
    scope: RowScope | None
    sink: list[ToolResult] | None  # set while a waterfall step runs


@dataclass(kw_only=True)
class PlanCount:
    """What would be sent, for one tool or one column."""

    calls: int = 0  # inputs that would be sent (worst case)
    requests: int = 0  # requests they would go out in (batches count once)
    expected_calls: float = 0.0  # calls weighed by the chance each is made
    credits_max: float = 0.0  # every call charged its full price
    credits_expected: float = 0.0  # weighed by reach and, for on-hit prices, the hit rate
    usd_max: float = 0.0  # tools priced in dollars: every call at its worst case
    usd_expected: float = 0.0  # weighed by reach, at the tool's average cost when known
    tokens: int = 0  # the prompt tokens its calls are estimated to take (LLM tools)
    from_receipts: int = 0  # calls receipts answered (free)

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 9) if isinstance(v, float) else v for k, v in asdict(self).items()}


class Planner:
    """Records the calls a planned attempt would send (the executor's send, replaced)."""

    def __init__(self, hit_rate: HitRate, per_call: PerCall = lambda spec: None) -> None:
        self._hit_rate = hit_rate
        self._per_call = per_call
        self._rates: dict[str, float] = {}
        self.tools: dict[str, PlanCount] = {}
        self.columns: dict[str, PlanCount] = {}
        self._seen: set[str] = set()  # receipt keys already counted: a real run buys them once
        self._reach: dict[tuple[str, str, str], float] = {}  # a row's waterfall: P(reached)

    def rate(self, spec: ToolSpec) -> float:
        rate = self._rates.get(spec.id)
        if rate is None:
            rate = self._rates[spec.id] = min(1.0, max(0.0, self._hit_rate(spec)))
        return rate

    def record(self, spec: ToolSpec, calls: Sequence[PlannedCall], *, answered: int = 0) -> None:
        """Count ``calls`` to ``spec`` (one pass of the executor) as if they were sent;
        ``answered`` calls of the pass were answered by receipts."""
        counted = [c for c in calls if c.force or c.key not in self._seen]
        self._seen.update(c.key for c in counted)
        tool = self.tools.setdefault(spec.id, PlanCount())
        tool.from_receipts += answered
        if not counted:
            return
        tool.requests += ceil(len(counted) / spec.max_batch)
        hit = self.rate(spec)
        cost = spec.cost
        charged = hit if cost.charge == "on_hit" else 1.0
        usd = cost.unit == "usd"
        usual = self._per_call(spec) if usd else None
        weigh = getattr(spec.transport, "tokens", None)
        by_column: dict[str, int] = {}
        for call in counted:
            price = cost.most(call.input)
            tokens = _prompt_tokens(weigh(call.input)) if callable(weigh) else 0
            scope = call.scope
            where = "(play)" if scope is None else f"{scope.dataset}.{scope.column}"
            reach = 1.0
            if scope is not None and call.sink is not None:  # a waterfall step of a row
                row = (scope.dataset, scope.row_key, scope.column or "")
                reach = self._reach.get(row, 1.0)
                self._reach[row] = reach * (1.0 - hit)  # the next step runs only on a miss
            column = self.columns.setdefault(where, PlanCount())
            by_column[where] = by_column.get(where, 0) + 1
            for count in (tool, column):
                count.calls += 1
                count.expected_calls += reach
                count.tokens += tokens
                if usd:
                    count.usd_max += price
                    count.usd_expected += reach * (price if usual is None else min(usual, price))
                else:
                    count.credits_max += price
                    count.credits_expected += reach * price * charged
        for where, n in by_column.items():  # a column's share of the requests
            self.columns[where].requests += ceil(n / spec.max_batch)


def _prompt_tokens(estimate: Any) -> int:
    """The input tokens of a tool's estimate (an int, or ``(input, output)``)."""
    return int(estimate[0] if isinstance(estimate, tuple) else estimate)
