"""The claim rules of receipts and runs, shared by every store implementation.

A receipt (keyed by a call's content) moves through::

    (none) --claim--> running --complete--> completed
                        |  \\--fail--------> failed    (the provider said no)
                        |   \\--in doubt---> unknown   (timeout, 5xx: it may have charged)
                        |    \\--lost------> lost      (charged, its result gone: an
                        |                               async job's expired)
                        \\--owner died or its lease ran out: in doubt as well

A claim of a receipt in doubt sends it again only under the same idempotency key (``resend``:
the provider recognises the repeat), or as a new purchase when the caller asks for one
(``force``, once per run; ``retry_in_doubt``: a new generation, a new key). Short of those, an
async job the provider accepted is polled again: a poll is free. Otherwise the claim answers
IN_DOUBT and the call fails with the cause: paying twice is the user's decision. So does a
lost receipt: it is bought again (its next generation) only under ``retry_failed``.

A run is held by one attempt at a time, under a lease its holder renews.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ._owners import owner_alive
from ._records import (
    Claim,
    ClaimOutcome,
    ClaimResult,
    Completion,
    Failure,
    Receipt,
    ReceiptStatus,
    RunClaim,
    RunClaimOutcome,
    RunRecord,
    RunStatus,
)

__all__ = [
    "IN_DOUBT_MESSAGE",
    "ReceiptWrites",
    "decide_claim",
    "decide_run_claim",
    "doubtful",
    "lease_live",
]

IN_DOUBT_MESSAGE = (
    "its request may have reached the provider (and been charged) when the process that sent "
    "it stopped"
)


def lease_live(holder: str | None, lease_until: float | None, now: float) -> bool:
    """Whether ``holder`` still holds what it leased: its lease runs and its process lives."""
    return holder is not None and (lease_until or 0.0) > now and owner_alive(holder)


def doubtful(receipt: Receipt, now: float) -> bool:
    """Whether ``receipt``'s call may have been charged with no record of it: in doubt, or
    running with no live holder."""
    return receipt.status is ReceiptStatus.UNKNOWN or (
        receipt.status is ReceiptStatus.RUNNING
        and not lease_live(receipt.owner, receipt.lease_until, now)
    )


def decide_claim(
    existing: Receipt | None, claim: Claim, *, owner: str, lease_until: float, now: float
) -> ClaimResult:
    """What a claim on ``existing`` yields; ``changed`` results carry the receipt to write."""
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
            request=claim.request,
        )
        return ClaimResult(ClaimOutcome.OWNED, fresh, changed=True)
    status = existing.status
    # force buys again once per run: a receipt an earlier attempt of this run claimed was that
    # purchase (completed: reused; cut off by a kill: in doubt like any other call)
    force = claim.force and not (existing.run_id == claim.run_id and existing.owner != owner)
    if status is ReceiptStatus.COMPLETED and not force:
        return ClaimResult(ClaimOutcome.COMPLETED, existing)
    if status is ReceiptStatus.LOST and not (force or claim.retry_failed):
        return ClaimResult(ClaimOutcome.LOST, existing)
    if status is ReceiptStatus.RUNNING and existing.owner != owner:
        if lease_live(existing.owner, existing.lease_until, now):
            return ClaimResult(ClaimOutcome.HELD, existing)
        status = ReceiptStatus.UNKNOWN  # its owner died or its lease ran out mid-call
    generation = existing.generation
    resent = False
    if force or status is ReceiptStatus.CLEARED:
        generation += 1  # bought again on purpose
    elif status is ReceiptStatus.UNKNOWN:
        if claim.resend:
            resent = True  # the same key: the provider answers the first request again
        elif claim.retry_in_doubt:
            generation += 1
        elif existing.job is not None:
            resent = True  # a job the provider accepted: polled, which never pays again
        else:
            doubt = replace(
                existing,
                status=ReceiptStatus.UNKNOWN,
                lease_until=None,
                error=existing.error or IN_DOUBT_MESSAGE,
                updated_at=now,
            )
            return ClaimResult(
                ClaimOutcome.IN_DOUBT, doubt, changed=existing.status != doubt.status
            )
    taken = replace(
        existing,
        status=ReceiptStatus.RUNNING,
        owner=owner,
        run_id=claim.run_id,
        attempt=existing.attempt + 1,
        generation=generation,
        lease_until=lease_until,
        error=None,
        updated_at=now,
        request=claim.request,
        # a new purchase submits a new job; a re-send or a retry polls the one it has
        job=None if generation != existing.generation else existing.job,
    )
    return ClaimResult(ClaimOutcome.OWNED, taken, resent=resent, changed=True)


def decide_run_claim(
    existing: RunRecord | None,
    *,
    holder: str,
    lease_until: float,
    now: float,
    options: Mapping[str, Any] | None = None,
) -> tuple[RunClaim, RunRecord | None]:
    """The answer to a claim of a run, and the record to write when the claim is granted."""
    if existing is None:
        return RunClaim(RunClaimOutcome.MISSING, None), None
    if (
        existing.status is RunStatus.RUNNING
        and existing.holder != holder
        and lease_live(existing.holder, existing.lease_until, now)
    ):
        return RunClaim(RunClaimOutcome.HELD, existing), None
    held = replace(
        existing,
        status=RunStatus.RUNNING,
        holder=holder,
        lease_until=lease_until,
        attempts=existing.attempts + (existing.holder != holder),
        stop_requested=False,
        error=None,
        waiting=None,
        updated_at=now,
        options={**existing.options, **(options or {})},
    )
    return RunClaim(RunClaimOutcome.OWNED, held), held


class ReceiptWrites(ABC):
    """A store's receipt writes of one part, each a ``write_receipts`` (the group commit)
    holding only that part: a store implements ``write_receipts`` once."""

    @abstractmethod
    def write_receipts(
        self,
        *,
        completions: Sequence[Completion] = (),
        failures: Sequence[Failure] = (),
        claims: Sequence[Claim] = (),
        owner: str,
        now: float,
        lease_until: float | None = None,
    ) -> tuple[dict[str, bytes], list[ClaimResult]]: ...

    def claim_receipts(
        self, claims: Sequence[Claim], *, owner: str, lease_until: float, now: float
    ) -> list[ClaimResult]:
        return self.write_receipts(claims=claims, owner=owner, lease_until=lease_until, now=now)[1]

    def complete_receipts(
        self, completions: Sequence[Completion], *, owner: str, now: float
    ) -> dict[str, bytes]:
        return self.write_receipts(completions=completions, owner=owner, now=now)[0]

    def fail_receipts(self, failures: Sequence[Failure], *, owner: str, now: float) -> None:
        self.write_receipts(failures=failures, owner=owner, now=now)
