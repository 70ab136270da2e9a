"""The store protocol: what the engine needs from a store, whatever keeps the data.

Every method is synchronous and batched: the engine calls it once per batch of claims,
completions, rows or events, never per cell. Implementations: ``MemoryStore`` (nothing
persisted) and the SQL stores.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from ._records import (
    Boundary,
    Claim,
    ClaimResult,
    Event,
    LedgerEntry,
    Receipt,
    RowRecord,
    RunRecord,
)

__all__ = ["Store"]


class Store(Protocol):
    url: str

    def close(self) -> None: ...

    # runs
    def create_run(self, run: RunRecord) -> None: ...
    def get_run(self, run_id: str) -> RunRecord | None: ...
    def update_run(self, run_id: str, **changes: Any) -> None: ...
    def list_runs(self, *, limit: int = 50) -> list[RunRecord]: ...

    # receipts
    def claim_receipts(
        self, claims: Sequence[Claim], *, owner: str, lease_until: float, now: float
    ) -> list[ClaimResult]:
        """Claim each key in one transaction, aligned with ``claims``.

        A missing, failed or (with ``force``) completed receipt, or a running one whose owner
        is dead or whose lease expired, becomes ``running`` under ``owner``: OWNED. A
        completed one: COMPLETED. A running one under a live lease: HELD.
        """
        ...

    def complete_receipts(
        self,
        completions: Sequence[tuple[str, bytes]],
        *,
        owner: str,
        now: float,
        ledger: Sequence[LedgerEntry] = (),
    ) -> dict[str, bytes]:
        """Store results, and the ledger entries of the calls that paid for them, in one
        transaction: a paid result is never kept without its charge, nor a charge without
        its result. Returns the keys where another owner's completed result was already
        stored (and is kept), with that result."""
        ...

    def fail_receipts(
        self, failures: Sequence[tuple[str, str]], *, owner: str, now: float
    ) -> None: ...

    def save_jobs(self, jobs: Sequence[tuple[str, bytes]], *, owner: str) -> None:
        """Record the job an async tool call submitted, on receipts ``owner`` holds: a resumed
        run then polls that job instead of submitting (and paying) again."""
        ...

    def release_receipts(self, keys: Sequence[str], *, owner: str) -> None:
        """Drop claims whose calls were never sent (a budget stop, a shutdown); a receipt
        with a submitted job is kept, as failed, so its job can still be polled."""
        ...

    def get_receipts(self, keys: Sequence[str]) -> dict[str, Receipt]: ...

    # rows
    def save_rows(self, rows: Sequence[RowRecord]) -> None: ...
    def load_rows(self, run_id: str, dataset: str, keys: Sequence[str]) -> dict[str, RowRecord]: ...
    def iter_rows(self, run_id: str, dataset: str) -> Iterator[RowRecord]: ...
    def datasets(self, run_id: str) -> list[str]: ...

    # events, logs, trace
    def append_events(self, events: Sequence[Event]) -> None: ...
    def read_events(
        self, run_id: str, *, after_seq: int = 0, kinds: Sequence[str] | None = None
    ) -> list[Event]: ...

    # ledger
    def append_ledger(self, entries: Sequence[LedgerEntry]) -> None: ...
    def read_ledger(self, run_id: str) -> list[LedgerEntry]: ...

    # durable boundaries and events
    def get_boundary(self, key: str) -> Boundary | None: ...
    def put_boundary(self, boundary: Boundary) -> None: ...
    def send_event(self, key: str, payload: bytes, *, now: float) -> bool:
        """Keep an event until a wait takes it; False when ``key`` was sent before (the first
        payload stands: an event sent twice is delivered once)."""
        ...

    def deliver_event(self, key: str, boundary: Boundary) -> bytes | None:
        """In one transaction: hand the event ``key`` to ``boundary`` (written as completed with
        the payload as output) and return the payload; None if no such event is waiting. An
        event goes to one boundary only."""
        ...

    def waiting_events(self, keys: Sequence[str]) -> set[str]:
        """Which of ``keys`` have an event sent and not yet delivered."""
        ...

    # receipt maintenance (``playline cache stats|clear``)
    def receipt_stats(self) -> dict[str, dict[str, int]]:
        """Per tool: receipts ``completed``, ``failed`` and ``running``, and the ``bytes`` of
        their stored results."""
        ...

    def clear_receipts(self, tool: str | None = None) -> int:
        """Delete the completed and failed receipts (of ``tool``, else of every tool), so the
        next call executes live; running receipts are left to their owner. Returns how many
        were deleted."""
        ...
