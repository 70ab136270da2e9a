"""The credit ledger: what every live call cost, and the budget that stops spending."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from ._clock import Clock
from .errors import BudgetExceeded
from .store import LedgerEntry
from .tools import ToolSpec

__all__ = ["Ledger"]


class Ledger:
    """Credits spent by a run; with ``max_credits``, calls that could pass it are refused.

    Before a batch is sent its worst-case cost is reserved; after it returns the reservation
    is replaced by what was charged. So concurrent batches can never overspend together.
    """

    def __init__(
        self,
        run_id: str,
        clock: Clock,
        *,
        max_credits: float | None = None,
        spent: float = 0.0,
    ) -> None:
        self._run_id = run_id
        self._clock = clock
        self.max_credits = max_credits
        self.spent = spent
        self.reserved = 0.0
        self.by_tool: dict[str, float] = defaultdict(float)

    def reserve(self, spec: ToolSpec, calls: int) -> int:
        """Reserve the worst-case cost of as many of ``calls`` as the budget allows; returns
        how many may be sent (the rest must not be)."""
        each = spec.cost.credits
        allowed = calls
        if self.max_credits is not None and each > 0:
            room = self.max_credits - self.spent - self.reserved
            allowed = max(0, min(calls, int((room + 1e-9) // each)))
        self.reserved += each * allowed
        return allowed

    def exceeded(self, spec: ToolSpec, calls: int) -> BudgetExceeded:
        limit = self.max_credits or 0.0
        return BudgetExceeded(
            f"Budget of {limit:g} credits would be exceeded: {self.spent:g} spent, "
            f"{self.reserved:g} in flight, and {calls} more call(s) to {spec.id} may cost "
            f"{spec.cost.credits * calls:g}. Everything paid for so far is kept; raise "
            "max_credits and resume the run to go on.",
            spent=self.spent,
            limit=limit,
            tool=spec.id,
        )

    def settle(self, spec: ToolSpec, reserved: int, entries: Sequence[LedgerEntry]) -> None:
        """Replace the reservation of ``reserved`` calls by the entries charged (the caller
        writes them, with the results they paid for)."""
        self.reserved -= spec.cost.credits * reserved
        for entry in entries:
            self.spent += entry.credits
            self.by_tool[entry.tool] += entry.credits

    def entry(
        self,
        spec: ToolSpec,
        key: str,
        credits: float,
        found: bool,
        dataset: str | None,
        row_key: str | None,
    ) -> LedgerEntry:
        return LedgerEntry(
            run_id=self._run_id,
            tool=spec.id,
            receipt_key=key,
            credits=credits,
            found=found,
            at=self._clock.now(),
            dataset=dataset,
            row_key=row_key,
        )
