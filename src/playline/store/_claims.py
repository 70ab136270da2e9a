"""The receipt state machine, shared by every store implementation."""

from __future__ import annotations

from dataclasses import replace

from ._records import Claim, ClaimOutcome, ClaimResult, Receipt, ReceiptStatus, owner_alive

__all__ = ["decide_claim"]


def decide_claim(
    existing: Receipt | None, claim: Claim, *, owner: str, lease_until: float, now: float
) -> ClaimResult:
    """What a claim on ``existing`` yields; an OWNED result carries the receipt to write."""
    if existing is None:
        fresh = Receipt(
            key=claim.key,
            tool=claim.tool,
            status=ReceiptStatus.RUNNING,
            owner=owner,
            run_id=claim.run_id,
            attempt=1,
            lease_until=lease_until,
            updated_at=now,
        )
        return ClaimResult(ClaimOutcome.OWNED, fresh)
    if existing.status is ReceiptStatus.COMPLETED and not claim.force:
        return ClaimResult(ClaimOutcome.COMPLETED, existing)
    if (
        existing.status is ReceiptStatus.RUNNING
        and existing.owner != owner
        and (existing.lease_until or 0) > now
        and owner_alive(existing.owner)
    ):
        return ClaimResult(ClaimOutcome.HELD, existing)
    taken = replace(
        existing,
        status=ReceiptStatus.RUNNING,
        owner=owner,
        run_id=claim.run_id,
        attempt=existing.attempt + 1,
        lease_until=lease_until,
        error=None,
        updated_at=now,
    )
    return ClaimResult(ClaimOutcome.OWNED, taken)
