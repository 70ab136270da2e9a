"""What every store says when a call cannot be honoured: one wording for all of them."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import StoreError
from ._records import ReceiptStatus, RunRecord

__all__ = ["NoStore", "empty_receipt_stats", "lost_run", "never_claimed"]


class NoStore(StoreError):
    """A store opened to be read is not there (nothing was created)."""


class ReadOnlyStore(StoreError):
    """A store opened to be written that this user cannot write (its file or its folder):
    it can still be opened read-only."""


def empty_receipt_stats() -> dict[str, int]:
    held = (s for s in ReceiptStatus if s is not ReceiptStatus.CLEARED)  # cleared hold nothing
    return {status.value: 0 for status in held} | {"bytes": 0}


def never_claimed(keys: Sequence[str]) -> str:
    shown = ", ".join(keys[:5]) + (" ..." if len(keys) > 5 else "")
    return (
        f"Cannot complete receipts that were never claimed (or were released): {shown}. "
        "Claim a receipt before completing it."
    )


def lost_run(run_id: str, run: RunRecord | None) -> str:
    if run is None:
        return f"Run {run_id} is not in the store: it cannot be ended. Create it first."
    return (
        f"Run {run_id} is no longer held by this attempt (held by {run.holder or 'nobody'}): "
        "its lease ran out and another attempt took it over. Nothing of this attempt's end was "
        "written; its receipts and rows are kept."
    )
