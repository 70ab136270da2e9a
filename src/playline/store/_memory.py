"""A store that keeps everything in this process, serialised exactly as a durable store does."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from .._json import dumps, loads
from ._claims import decide_claim
from ._records import (
    Boundary,
    Claim,
    ClaimResult,
    Event,
    LedgerEntry,
    Receipt,
    ReceiptStatus,
    RowRecord,
    RunRecord,
)

__all__ = ["MemoryStore"]

EVENT_HISTORY = 200_000  # the newest events kept; older ones are dropped


class MemoryStore:
    """``memory://``: for tests and experiments. Rows are kept as JSON bytes, so what comes
    back is what a durable store would give, and a million rows stay small. Only the newest
    ``EVENT_HISTORY`` events are kept."""

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._runs: dict[str, RunRecord] = {}
        self._receipts: dict[str, Receipt] = {}
        self._rows: dict[tuple[str, str], dict[str, tuple[int, bytes]]] = {}
        self._events: deque[Event] = deque(maxlen=EVENT_HISTORY)
        self._ledger: list[LedgerEntry] = []
        self._seq = itertools.count(1)
        self._boundaries: dict[str, Boundary] = {}
        self._inbox: dict[str, tuple[bytes, str | None]] = {}  # key -> (payload, delivered to)

    def close(self) -> None:
        pass

    # runs
    def create_run(self, run: RunRecord) -> None:
        self._runs[run.run_id] = run

    def get_run(self, run_id: str) -> RunRecord | None:
        return self._runs.get(run_id)

    def update_run(self, run_id: str, **changes: Any) -> None:
        self._runs[run_id] = replace(self._runs[run_id], **changes)

    def list_runs(self, *, limit: int = 50) -> list[RunRecord]:
        runs = sorted(self._runs.values(), key=lambda r: r.created_at, reverse=True)
        return runs[:limit]

    # receipts
    def claim_receipts(
        self, claims: Sequence[Claim], *, owner: str, lease_until: float, now: float
    ) -> list[ClaimResult]:
        results = []
        for claim in claims:
            result = decide_claim(
                self._receipts.get(claim.key), claim, owner=owner, lease_until=lease_until, now=now
            )
            if result.outcome == "owned":
                self._receipts[claim.key] = result.receipt
            results.append(result)
        return results

    def complete_receipts(
        self,
        completions: Sequence[tuple[str, bytes]],
        *,
        owner: str,
        now: float,
        ledger: Sequence[LedgerEntry] = (),
    ) -> dict[str, bytes]:
        kept: dict[str, bytes] = {}
        self._ledger.extend(ledger)
        for key, result in completions:
            current = self._receipts[key]
            if (
                current.status is ReceiptStatus.COMPLETED
                and current.owner != owner
                and current.result is not None
            ):
                kept[key] = current.result
                continue
            self._receipts[key] = replace(
                current,
                status=ReceiptStatus.COMPLETED,
                result=bytes(memoryview(result)),  # exact size (see save_rows)
                error=None,
                lease_until=None,
                updated_at=now,
            )
        return kept

    def fail_receipts(self, failures: Sequence[tuple[str, str]], *, owner: str, now: float) -> None:
        for key, error in failures:
            current = self._receipts[key]
            if current.owner == owner and current.status is ReceiptStatus.RUNNING:
                self._receipts[key] = replace(
                    current,
                    status=ReceiptStatus.FAILED,
                    error=error,
                    lease_until=None,
                    updated_at=now,
                )

    def save_jobs(self, jobs: Sequence[tuple[str, bytes]], *, owner: str) -> None:
        for key, job in jobs:
            current = self._receipts.get(key)
            if current and current.owner == owner and current.status is ReceiptStatus.RUNNING:
                self._receipts[key] = replace(current, job=bytes(memoryview(job)))

    def release_receipts(self, keys: Sequence[str], *, owner: str) -> None:
        for key in keys:
            current = self._receipts.get(key)
            if current and current.owner == owner and current.status is ReceiptStatus.RUNNING:
                if current.attempt == 1 and current.result is None and current.job is None:
                    del self._receipts[key]
                else:
                    self._receipts[key] = replace(
                        current, status=ReceiptStatus.FAILED, error="released", lease_until=None
                    )

    def get_receipts(self, keys: Sequence[str]) -> dict[str, Receipt]:
        return {k: self._receipts[k] for k in keys if k in self._receipts}

    # rows
    def save_rows(self, rows: Sequence[RowRecord]) -> None:
        for row in rows:
            # orjson's bytes carry a ~4 KB allocation each; keep an exact-size copy
            blob = bytes(
                memoryview(
                    dumps(
                        [row.status, row.values, row.cells, row.error, row.updated_at],
                        ordered=True,
                    )
                )
            )
            self._rows.setdefault((row.run_id, row.dataset), {})[row.key] = (row.index, blob)

    def _row(self, run_id: str, dataset: str, key: str, index: int, blob: bytes) -> RowRecord:
        status, values, cells, error, updated_at = loads(blob)
        return RowRecord(
            run_id=run_id,
            dataset=dataset,
            key=key,
            index=index,
            status=status,
            values=values,
            cells=cells,
            error=error,
            updated_at=updated_at,
        )

    def load_rows(self, run_id: str, dataset: str, keys: Sequence[str]) -> dict[str, RowRecord]:
        table = self._rows.get((run_id, dataset), {})
        return {k: self._row(run_id, dataset, k, *table[k]) for k in keys if k in table}

    def iter_rows(self, run_id: str, dataset: str) -> Iterator[RowRecord]:
        table = self._rows.get((run_id, dataset), {})
        for key, (index, blob) in sorted(table.items(), key=lambda item: item[1][0]):
            yield self._row(run_id, dataset, key, index, blob)

    def datasets(self, run_id: str) -> list[str]:
        return [name for (rid, name) in self._rows if rid == run_id]

    # events
    def append_events(self, events: Sequence[Event]) -> None:
        for event in events:
            event.seq = next(self._seq)
        self._events.extend(events)

    def read_events(
        self, run_id: str, *, after_seq: int = 0, kinds: Sequence[str] | None = None
    ) -> list[Event]:
        return [
            e
            for e in self._events
            if e.run_id == run_id and e.seq > after_seq and (kinds is None or e.kind in kinds)
        ]

    # ledger
    def append_ledger(self, entries: Sequence[LedgerEntry]) -> None:
        self._ledger.extend(entries)

    def read_ledger(self, run_id: str) -> list[LedgerEntry]:
        return [e for e in self._ledger if e.run_id == run_id]

    # boundaries and events
    def get_boundary(self, key: str) -> Boundary | None:
        return self._boundaries.get(key)

    def put_boundary(self, boundary: Boundary) -> None:
        self._boundaries[boundary.key] = boundary

    def send_event(self, key: str, payload: bytes, *, now: float) -> bool:
        if key in self._inbox:
            return False
        self._inbox[key] = (bytes(memoryview(payload)), None)
        return True

    def deliver_event(self, key: str, boundary: Boundary) -> bytes | None:
        sent = self._inbox.get(key)
        if sent is None or sent[1] not in (None, boundary.key):
            return None
        self._inbox[key] = (sent[0], boundary.key)
        self._boundaries[boundary.key] = replace(boundary, status="completed", output=sent[0])
        return sent[0]

    def waiting_events(self, keys: Sequence[str]) -> set[str]:
        return {k for k in keys if k in self._inbox and self._inbox[k][1] is None}

    # receipt maintenance
    def receipt_stats(self) -> dict[str, dict[str, int]]:
        stats: dict[str, dict[str, int]] = {}
        for receipt in self._receipts.values():
            per = stats.setdefault(
                receipt.tool, {"completed": 0, "failed": 0, "running": 0, "bytes": 0}
            )
            per[receipt.status.value] += 1
            per["bytes"] += len(receipt.result or b"")
        return stats

    def clear_receipts(self, tool: str | None = None) -> int:
        doomed = [
            key
            for key, r in self._receipts.items()
            if r.status != ReceiptStatus.RUNNING and (tool is None or r.tool == tool)
        ]
        for key in doomed:
            del self._receipts[key]
        return len(doomed)
