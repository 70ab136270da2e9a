"""The options of a run (``pl.arun``'s keywords), checked once where they come in.

``RunOptions`` travels whole from ``arun`` through ``Services`` to the attempt and its call
executor, so a new option is one field here, not a parameter in every layer. It is private:
the public API keeps its keyword options (``pl.run(play, input, max_credits=...)``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from .._limits import check_budgets, is_amount
from ..errors import PlayDefinitionError
from .supervise import DEFAULT_LEASE

__all__ = [
    "DEFAULT_CELL_LIMIT",
    "DEFAULT_FOREGROUND_SLEEP",
    "DEFAULT_LEASE",
    "DEFAULT_ROW_WINDOW",
    "DEFAULT_STALL_AFTER",
    "RunOptions",
    "refresh_columns",
]

DEFAULT_ROW_WINDOW = 1000
DEFAULT_FOREGROUND_SLEEP = 5.0  # sleeps up to this long are waited out in the process
DEFAULT_STALL_AFTER = 60.0
DEFAULT_CELL_LIMIT = 5_000_000  # bytes of one stored result or cell value


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """How a run goes: its budget, windows, leases and modes (see ``pl.arun``)."""

    max_credits: float | None = None
    max_usd: float | None = None
    row_window: int = DEFAULT_ROW_WINDOW
    foreground_sleep: float = DEFAULT_FOREGROUND_SLEEP
    retry_in_doubt: bool = False
    stall_after: float | None = DEFAULT_STALL_AFTER
    lease: float = DEFAULT_LEASE  # how long a claim outlives a holder that stopped renewing
    ledger: Literal["paid", "all"] = "paid"  # "all": a ledger row for free calls too
    cell_limit: int = DEFAULT_CELL_LIMIT  # bytes of one stored cell value or tool result
    retry_failed: bool = False  # a resume restarts failed rows at their failed cell
    refresh: tuple[str, ...] = ()  # columns bought again in a new run (sorted, unique)
    receipt_wait: float = 600.0  # seconds a call waits on a receipt another worker holds

    def __post_init__(self) -> None:
        _check_numbers(self)
        _check_modes(self)

    @property
    def ledger_all(self) -> bool:
        return self.ledger == "all"


def _check_numbers(options: RunOptions) -> None:
    if not isinstance(options.row_window, int) or options.row_window < 1:
        raise PlayDefinitionError("row_window must be a whole number >= 1.")
    if not is_amount(options.foreground_sleep):
        raise PlayDefinitionError("foreground_sleep must be a number of seconds >= 0.")
    if not is_amount(options.lease, positive=True):
        raise PlayDefinitionError("lease must be a number of seconds > 0.")
    stall_after = options.stall_after
    if stall_after is not None and not is_amount(stall_after, positive=True):
        raise PlayDefinitionError(
            f"stall_after={stall_after!r} must be a number of seconds > 0 (or None: no stall "
            "report)."
        )
    check_budgets(options.max_credits, options.max_usd)
    limit = options.cell_limit
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise PlayDefinitionError(
            f"cell_limit={limit!r} must be a whole number of bytes >= 1, e.g. "
            "cell_limit=20_000_000 for 20 MB."
        )
    if not is_amount(options.receipt_wait, positive=True):
        raise PlayDefinitionError("receipt_wait must be a number of seconds > 0.")


def _check_modes(options: RunOptions) -> None:
    if options.ledger not in ("paid", "all"):
        raise PlayDefinitionError(f'ledger={options.ledger!r}: use "paid" (the default) or "all".')
    for name in ("retry_in_doubt", "retry_failed"):
        flag = getattr(options, name)
        if not isinstance(flag, bool):  # "no" or "false" would read as true
            raise PlayDefinitionError(f"{name}={flag!r} must be True or False.")
    if list(options.refresh) != refresh_columns(options.refresh):
        raise PlayDefinitionError(
            f"refresh={options.refresh!r}: give sorted, unique column names "
            "(refresh_columns() makes them)."
        )


def refresh_columns(refresh: Iterable[str] | None) -> list[str]:
    """The columns ``refresh=`` names, sorted and unique; anything else is refused."""
    if refresh is None:
        return []
    names = [refresh] if isinstance(refresh, str) else refresh
    if isinstance(names, Iterable):
        names = list(names)
    if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names):
        raise PlayDefinitionError(
            f'refresh={refresh!r}: give column names, e.g. refresh=["email"] or ["people.email"].'
        )
    return sorted({n.strip() for n in names})
