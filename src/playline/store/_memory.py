"""A store that keeps everything in this process, serialised exactly as a durable store does."""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import Any

import orjson

from .._json import dumps, loads
from ..errors import StoreError
from ._changes import ChangeFeed
from ._claims import ReceiptWrites, decide_claim, decide_run_claim, doubtful
from ._gates import GateConfig, GateGrant, GateState, SendLog, count_in_flight
from ._messages import empty_receipt_stats, lost_run, never_claimed
from ._records import (
    Answer,
    Boundary,
    CellMeta,
    Claim,
    ClaimResult,
    Completion,
    Event,
    Failure,
    LedgerEntry,
    LedgerTotals,
    Receipt,
    ReceiptStatus,
    RowPage,
    RowRecord,
    RowStatus,
    RunClaim,
    RunEnd,
    RunRecord,
    RunStatus,
    ScheduleRecord,
)
from ._windows import (
    CELL_STATES,
    ROW_STATES,
    RowCounts,
    check_window,
    count_states,
    has_state,
    sort_key,
)

__all__ = ["MemoryStore"]

EVENT_HISTORY = 200_000  # the newest events kept; older ones are dropped


def _exact(data: bytes) -> bytes:
    """orjson's bytes carry a ~4 KB allocation each; keep an exact-size copy."""
    return bytes(memoryview(data))


def _values(row: RowRecord) -> Any:
    """The row's values, as the engine encoded them when it did."""
    return row.values if row.values_json is None else orjson.Fragment(row.values_json)


def _cells(row: RowRecord) -> Any:
    """The row's cells, as the engine encoded them when it did."""
    return row.cells if row.cells_json is None else orjson.Fragment(row.cells_json)


def _encoded_rows(
    rows: Sequence[RowRecord | RowPage],
) -> Iterator[tuple[tuple[str, str], str, int, bytes]]:
    """Each row as kept: its run and dataset, key, index and the JSON of the rest."""
    fields: list[Any]
    for row in rows:
        names = (row.run_id, row.dataset)
        if isinstance(row, RowPage):
            status, cells = RowStatus.COMPLETED.value, orjson.Fragment(row.cells_json)
            for key, index, values in zip(row.keys, row.indexes, row.values_json, strict=True):
                fields = [status, orjson.Fragment(values), cells, None, row.updated_at]
                yield names, key, index, _exact(dumps(fields, ordered=True))
        else:
            fields = [row.status, _values(row), _cells(row), row.error, row.updated_at]
            what = f"Row {row.key!r} of dataset {row.dataset!r}"
            yield names, row.key, row.index, _exact(dumps(fields, ordered=True, what=what))


# what cache clear leaves as it is: a running call's owner completes it, and an in-doubt
# call cleared would be bought again under a new idempotency key with no --retry-in-doubt
_KEPT = (ReceiptStatus.RUNNING, ReceiptStatus.UNKNOWN, ReceiptStatus.CLEARED)


class MemoryStore(ReceiptWrites):
    """``memory://``: for tests and experiments. Rows are kept as JSON bytes, so what comes
    back is what a durable store would give, and a million rows stay small. Only the newest
    ``EVENT_HISTORY`` events are kept."""

    io_threads = 0  # it never blocks: the engine calls it on its loop
    io_inline = False  # (with no threads, every call is made on the loop)
    shared = False  # nothing outside this process sees it: rate gates stay local

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._lock = threading.RLock()
        self._runs: dict[str, RunRecord] = {}
        self._receipts: dict[str, Receipt] = {}
        self._rows: dict[tuple[str, str], dict[str, tuple[int, bytes]]] = {}
        self._events: deque[Event] = deque(maxlen=EVENT_HISTORY)
        self._ledger: list[LedgerEntry] = []
        self._charged: set[tuple[str, int]] = set()  # (receipt key, generation)
        self._seq = itertools.count(1)
        self._boundaries: dict[str, Boundary] = {}
        self._inbox: dict[str, tuple[bytes, str | None]] = {}  # key -> (payload, delivered to)
        self._gates: dict[str, GateState] = {}
        self._gate_slots: dict[str, dict[str, tuple[int, float]]] = {}  # key -> holder -> slots
        self._gate_sends: dict[str, SendLog] = {}  # key -> the requests under its windows
        self._schedules: dict[str, ScheduleRecord] = {}

    def __repr__(self) -> str:
        return f"MemoryStore({self.url!r})"

    def inline(self) -> AbstractContextManager[None]:
        return nullcontext()  # never called: it never waits

    @property
    def closed(self) -> bool:
        return False  # nothing to release: it stays readable for whoever holds it

    def close(self) -> None:
        pass

    def changes(self) -> ChangeFeed | None:
        """None: one process's waiters look at the store (it announces nothing)."""
        return None

    # runs
    def create_run(self, run: RunRecord) -> bool:
        with self._lock:
            if run.run_id in self._runs:
                return False
            self._runs[run.run_id] = run
            return True

    def get_run(self, run_id: str) -> RunRecord | None:
        return self._runs.get(run_id)

    def list_runs(
        self,
        *,
        limit: int = 50,
        status: RunStatus | None = None,
        play: str | None = None,
        roots_only: bool = False,
    ) -> list[RunRecord]:
        with self._lock:
            runs = [
                r
                for r in self._runs.values()
                if (status is None or r.status is status)
                and (play is None or r.play == play)
                and not (roots_only and r.parent_run_id is not None)
            ]
        runs.sort(key=lambda r: r.created_at, reverse=True)
        return runs[:limit]

    def child_runs(self, run_id: str) -> list[RunRecord]:
        with self._lock:
            children = [r for r in self._runs.values() if r.parent_run_id == run_id]
        return sorted(children, key=lambda r: r.created_at)

    def claim_run(
        self,
        run_id: str,
        *,
        holder: str,
        lease_until: float,
        now: float,
        options: Mapping[str, Any] | None = None,
    ) -> RunClaim:
        with self._lock:
            claim, held = decide_run_claim(
                self._runs.get(run_id),
                holder=holder,
                lease_until=lease_until,
                now=now,
                options=options,
            )
            if held is not None:
                self._runs[run_id] = held
            return claim

    def renew_runs(self, holder: str, *, lease_until: float) -> list[RunRecord]:
        with self._lock:
            renewed = []
            for run_id, run in self._runs.items():
                if run.holder == holder and run.status is RunStatus.RUNNING:
                    self._runs[run_id] = run = replace(run, lease_until=lease_until)
                    renewed.append(run)
            return renewed

    def end_attempt(self, run_id: str, *, holder: str, end: RunEnd, now: float) -> None:
        with self._lock:
            run = self._runs.get(run_id)
            if run is None or run.holder != holder:
                raise StoreError(lost_run(run_id, run))
            self._runs[run_id] = replace(
                run,
                status=end.status,
                output=end.output,
                error=end.error,
                stats=end.stats,
                waiting=end.waiting,
                counters=end.counters,
                holder=None,
                lease_until=None,
                stop_requested=False,
                updated_at=now,
            )

    def request_stop(self, run_id: str) -> bool:
        with self._lock:
            run = self._runs.get(run_id)
            if run is None or run.status is not RunStatus.RUNNING:
                return False
            self._runs[run_id] = replace(run, stop_requested=True)
            return True

    def due_runs(self, *, now: float, limit: int = 100) -> list[RunRecord]:
        with self._lock:
            due = [r for r in self._runs.values() if r.parent_run_id is None and self._due(r, now)]
        return sorted(due, key=lambda r: r.updated_at)[:limit]

    def _due(self, run: RunRecord, now: float) -> bool:
        if run.status is RunStatus.RUNNING:  # interrupted: its holder's lease ran out
            return run.lease_until is not None and run.lease_until <= now
        if run.status is not RunStatus.SUSPENDED:
            return False
        if run.wake_at is not None and run.wake_at <= now:
            return True
        return any(self._inbox.get(e, (b"", "x"))[1] is None for e in run.awaited_events)

    # receipts
    def find_receipts(self, keys: Sequence[str]) -> dict[str, Receipt]:
        receipts = self._receipts
        return {k: receipts[k] for k in keys if k in receipts}

    def find_answers(self, keys: Sequence[str]) -> dict[str, Answer]:
        receipts = self._receipts
        found = (receipts.get(k) for k in keys)
        return {
            r.key: Answer(r.result, r.updated_at, r.run_id)
            for r in found
            if r is not None and r.status is ReceiptStatus.COMPLETED and r.result is not None
        }

    def doubtful_receipts(self, run_id: str, *, now: float) -> dict[str, str]:
        prefix = run_id + "/"
        with self._lock:
            return {
                r.key: r.tool
                for r in self._receipts.values()
                if (r.run_id == run_id or r.run_id.startswith(prefix)) and doubtful(r, now)
            }

    def pending_jobs(self, run_id: str) -> list[Receipt]:
        prefix = run_id + "/"
        waiting = (ReceiptStatus.RUNNING, ReceiptStatus.UNKNOWN)
        with self._lock:
            found = [
                r
                for r in self._receipts.values()
                if (r.run_id == run_id or r.run_id.startswith(prefix))
                and r.status in waiting
                and r.job is not None
            ]
        return sorted(found, key=lambda r: (r.updated_at, r.key))

    def write_receipts(
        self,
        *,
        completions: Sequence[Completion] = (),
        failures: Sequence[Failure] = (),
        claims: Sequence[Claim] = (),
        owner: str,
        now: float,
        lease_until: float | None = None,
    ) -> tuple[dict[str, bytes], list[ClaimResult]]:
        if claims and lease_until is None:
            raise ValueError("write_receipts: claims need lease_until")
        with self._lock:
            missing = [c.key for c in completions if c.key not in self._receipts]
            if missing:
                raise StoreError(never_claimed(missing))
            kept = self._complete(completions, owner, now)
            self._fail(failures, owner, now)
            results = []
            for claim in claims:
                result = decide_claim(
                    self._receipts.get(claim.key),
                    claim,
                    owner=owner,
                    lease_until=lease_until or 0.0,  # set whenever there are claims
                    now=now,
                )
                if result.changed:
                    self._receipts[claim.key] = result.receipt
                results.append(result)
        return kept, results

    def _complete(
        self, completions: Sequence[Completion], owner: str, now: float
    ) -> dict[str, bytes]:
        kept: dict[str, bytes] = {}
        for completion in completions:
            self._charge(completion.charge)
            current = self._receipts[completion.key]
            if (
                current.status is ReceiptStatus.COMPLETED
                and current.owner != owner
                and current.result is not None
            ):
                kept[completion.key] = current.result
                continue
            self._receipts[completion.key] = replace(
                current,
                status=ReceiptStatus.COMPLETED,
                result=_exact(completion.result),
                error=None,
                lease_until=None,
                updated_at=now,
            )
        return kept

    def _charge(self, entry: LedgerEntry | None) -> None:
        if entry is not None and (entry.receipt_key, entry.generation) not in self._charged:
            self._charged.add((entry.receipt_key, entry.generation))
            self._ledger.append(entry)

    def _fail(self, failures: Sequence[Failure], owner: str, now: float) -> None:
        for failure in failures:
            self._charge(failure.charge)
            current = self._receipts.get(failure.key)
            if current and current.owner == owner and current.status is ReceiptStatus.RUNNING:
                self._receipts[failure.key] = replace(
                    current,
                    status=failure.status,
                    error=failure.error,
                    lease_until=None,
                    updated_at=now,
                    generation=current.generation + failure.rebuy,
                    job=None if failure.rebuy else current.job,
                )

    def save_jobs(self, jobs: Sequence[tuple[str, bytes | None]], *, owner: str) -> None:
        with self._lock:
            for key, job in jobs:
                current = self._receipts.get(key)
                if current and current.owner == owner and current.status is ReceiptStatus.RUNNING:
                    self._receipts[key] = replace(current, job=None if job is None else _exact(job))

    def release_receipts(self, keys: Sequence[str], *, owner: str) -> None:
        with self._lock:
            for key in keys:
                current = self._receipts.get(key)
                if current and current.owner == owner and current.status is ReceiptStatus.RUNNING:
                    if current.attempt == 1 and current.job is None:
                        del self._receipts[key]  # never sent anywhere: forget it
                    else:
                        self._receipts[key] = replace(
                            current,
                            status=ReceiptStatus.FAILED,
                            error=current.error or "released before it was sent",
                            lease_until=None,
                        )

    def renew_receipts(self, owner: str, *, lease_until: float) -> int:
        with self._lock:
            held = [
                key
                for key, r in self._receipts.items()
                if r.owner == owner and r.status is ReceiptStatus.RUNNING
            ]
            for key in held:
                self._receipts[key] = replace(self._receipts[key], lease_until=lease_until)
            return len(held)

    def receipt_stats(self) -> dict[str, dict[str, int]]:
        stats: dict[str, dict[str, int]] = {}
        with self._lock:
            for receipt in self._receipts.values():
                if receipt.status is ReceiptStatus.CLEARED:
                    continue
                per = stats.setdefault(receipt.tool, empty_receipt_stats())
                per[receipt.status.value] += 1
                per["bytes"] += len(receipt.result or b"")
        return stats

    def clear_receipts(self, tool: str | None = None) -> int:
        with self._lock:
            doomed = [
                key
                for key, r in self._receipts.items()
                if r.status not in _KEPT and (tool is None or r.tool == tool)
            ]
            for key in doomed:  # kept as tombstones, as the SQL stores keep them
                self._receipts[key] = replace(
                    self._receipts[key],
                    status=ReceiptStatus.CLEARED,
                    result=None,
                    job=None,
                    error=None,
                )
        return len(doomed)

    # rows
    def save_rows(self, rows: Sequence[RowRecord | RowPage]) -> None:
        encoded = [*_encoded_rows(rows)]
        with self._lock:
            for names, key, index, blob in encoded:
                self._rows.setdefault(names, {})[key] = (index, blob)

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
        with self._lock:
            table = sorted(self._rows.get((run_id, dataset), {}).items(), key=lambda i: i[1][0])
        for key, (index, blob) in table:
            yield self._row(run_id, dataset, key, index, blob)

    def iter_cells(
        self, run_id: str, holding: str
    ) -> Iterator[tuple[str, str, dict[str, CellMeta]]]:
        needle = dumps(holding) + b":"  # as the row's JSON names the field; see SQLStore's
        with self._lock:
            tables = [
                (name, list(t.items())) for (rid, name), t in self._rows.items() if rid == run_id
            ]
        for dataset, table in tables:
            for key, (_, blob) in table:
                if needle in blob:
                    cells: dict[str, CellMeta] = loads(blob)[2]
                    if any(isinstance(m, dict) and holding in m for m in cells.values()):
                        yield dataset, key, cells

    def datasets(self, run_id: str) -> list[str]:
        with self._lock:
            return [name for (rid, name) in self._rows if rid == run_id]

    def _matching(
        self, run_id: str, dataset: str, state: str | None, column: str | None = None
    ) -> list[RowRecord]:
        with self._lock:
            table = list(self._rows.get((run_id, dataset), {}).items())
        rows = [self._row(run_id, dataset, key, index, blob) for key, (index, blob) in table]
        rows.sort(key=lambda r: (r.index, r.key))
        if state is None:
            return rows
        return [r for r in rows if has_state(r.status, r.cells, state, column)]

    def row_window(
        self,
        run_id: str,
        dataset: str,
        *,
        offset: int = 0,
        limit: int = 100,
        state: str | None = None,
        sort: str | None = None,
        descending: bool = False,
        column: str | None = None,
    ) -> list[RowRecord]:
        check_window(offset, limit, state, sort, column)
        rows = self._matching(run_id, dataset, state, column)
        if sort is not None:  # stable, also reversed: ties stay in input order
            rows.sort(key=lambda r: sort_key(r.values.get(sort)), reverse=descending)
        elif descending:
            rows.reverse()
        return rows[offset : offset + limit]

    def count_rows(
        self, run_id: str, dataset: str, *, state: str | None = None, column: str | None = None
    ) -> int:
        check_window(0, 0, state, column=column)
        return len(self._matching(run_id, dataset, state, column))

    def row_counts(self, run_id: str, dataset: str, *, cells: bool = True) -> RowCounts:
        counts = count_states((r.status, r.cells) for r in self._matching(run_id, dataset, None))
        if cells:
            return counts
        states = {s: n for s, n in counts.rows_with.items() if s in CELL_STATES + ROW_STATES}
        return replace(counts, cells={}, rows_with=states)

    # events
    def reserve_seqs(self, count: int) -> int:
        with self._lock:
            first = next(self._seq)
            for _ in range(count - 1):
                next(self._seq)
            return first

    def append_events(self, events: Sequence[Event]) -> None:
        with self._lock:
            for event in events:
                if not event.seq:
                    event.seq = next(self._seq)
            self._events.extend(events)

    def read_events(
        self,
        run_id: str,
        *,
        after_seq: int = 0,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        with self._lock:
            found = sorted(
                (
                    e
                    for e in self._events
                    if e.run_id == run_id
                    and e.seq > after_seq
                    and (kinds is None or e.kind in kinds)
                ),
                key=lambda e: e.seq,
            )
        return found if limit is None else found[:limit]

    def last_seq(self, run_id: str, *, kinds: Sequence[str] | None = None) -> int:
        with self._lock:
            return max(
                (
                    e.seq
                    for e in self._events
                    if e.run_id == run_id and (kinds is None or e.kind in kinds)
                ),
                default=0,
            )

    # ledger
    def read_ledger(self, run_id: str) -> list[LedgerEntry]:
        with self._lock:
            return [e for e in self._ledger if e.run_id == run_id]

    def spent(self, run_id: str, unit: str = "credits") -> float:
        prefix = run_id + "/"
        with self._lock:
            return sum(
                e.credits
                for e in self._ledger
                if e.unit == unit and (e.run_id == run_id or e.run_id.startswith(prefix))
            )

    def ledger_totals(self) -> dict[str, LedgerTotals]:
        totals: dict[str, list[float]] = {}
        units: dict[str, str] = {}
        with self._lock:
            for e in self._ledger:
                per = totals.setdefault(e.tool, [0, 0, 0.0])
                per[0] += 1
                per[1] += int(e.found)
                per[2] += e.credits
                units[e.tool] = max(units.get(e.tool, e.unit), e.unit)
        return {
            tool: LedgerTotals(calls=int(c), found=int(f), credits=round(cr, 6), unit=units[tool])
            for tool, (c, f, cr) in sorted(totals.items())
        }

    # boundaries and events
    def get_boundary(self, key: str) -> Boundary | None:
        return self._boundaries.get(key)

    def put_boundary(self, boundary: Boundary) -> None:
        with self._lock:
            self._boundaries[boundary.key] = boundary

    def send_event(self, key: str, payload: bytes, *, now: float) -> bool:
        with self._lock:
            if key in self._inbox:
                return False
            self._inbox[key] = (_exact(payload), None)
            return True

    def deliver_event(self, key: str, boundary: Boundary) -> bytes | None:
        with self._lock:
            sent = self._inbox.get(key)
            if sent is None or sent[1] not in (None, boundary.key):
                return None
            self._inbox[key] = (sent[0], boundary.key)
            self._boundaries[boundary.key] = replace(boundary, status="completed", output=sent[0])
            return sent[0]

    def waiting_events(self, keys: Sequence[str]) -> set[str]:
        with self._lock:
            return {k for k in keys if k in self._inbox and self._inbox[k][1] is None}

    # shared rate gates (what a durable store shares between processes; kept for parity)
    def lease_gate(
        self,
        key: str,
        wanted: int,
        *,
        config: GateConfig,
        holder: str,
        lease_until: float,
        now: float,
        ahead: float = 0.0,
        slots: bool = True,
    ) -> GateGrant:
        if config.windows:  # a window's sends are counted when they go: no reservations
            ahead = 0.0
        with self._lock:
            state = self._gates.get(key)
            if state is None or not state.declared_as(config):
                state = config.fresh(key, now)
            wait = 0.0
            if config.windows:
                log = self._gate_sends.get(key)
                if log is None or log.windows != config.windows:
                    log = self._gate_sends[key] = SendLog(config.windows)
                room, wait = log.room(now)
                wanted = min(wanted, room)
            in_use = self._gate_in_use(key, holder, now) if state.cap > 0 and slots else 0
            grant = state.lease(wanted, now, in_use, ahead=ahead, slots=slots)
            self._gates[key] = grant.state
            if grant.slots:
                self._gate_hold(key, holder, grant.slots, lease_until)
            if grant.granted and config.windows:
                self._gate_sends[key].take(grant.granted, now)
            state = replace(grant.state, in_flight=in_use + grant.slots)
            return replace(grant, state=state, wait=wait)

    def take_slots(
        self,
        key: str,
        wanted: int,
        *,
        config: GateConfig,
        holder: str,
        lease_until: float,
        now: float,
    ) -> GateGrant:
        with self._lock:
            state = self._gates.get(key) or config.fresh(key, now)
            in_use = self._gate_in_use(key, holder, now) if state.cap > 0 else 0
            granted = state.slots_for(wanted, now, in_use)
            if granted and state.cap > 0:
                self._gate_hold(key, holder, granted, lease_until)
            return GateGrant(granted, replace(state, in_flight=in_use + granted))

    def _gate_in_use(self, key: str, holder: str, now: float) -> int:
        held = self._gate_slots.setdefault(key, {})
        rows = ((h, n, until) for h, (n, until) in held.items())
        in_use, gone = count_in_flight(rows, holder, now)
        for other in gone:
            del held[other]
        return in_use

    def _gate_hold(self, key: str, holder: str, calls: int, lease_until: float) -> None:
        held = self._gate_slots.setdefault(key, {})
        held[holder] = (held.get(holder, (0, 0.0))[0] + calls, lease_until)

    def release_gate(self, key: str, count: int, *, holder: str, lease_until: float) -> None:
        with self._lock:
            slots = self._gate_slots.get(key, {})
            held = slots.get(holder, (0, 0.0))[0] - count
            if held > 0:
                slots[holder] = (held, lease_until)
            else:
                slots.pop(holder, None)

    def renew_gates(self, holder: str, *, lease_until: float) -> int:
        with self._lock:
            held = [slots for slots in self._gate_slots.values() if holder in slots]
            for slots in held:
                slots[holder] = (slots[holder][0], lease_until)
            return len(held)

    def tune_gate(
        self, key: str, change: Callable[[GateState], GateState | None]
    ) -> GateState | None:
        with self._lock:
            state = self._gates.get(key)
            if state is None:
                return None
            changed = change(state)
            if changed is not None:
                self._gates[key] = state = replace(changed, key=key, in_flight=0)
            return state

    def read_gates(self, *, now: float) -> list[GateState]:
        with self._lock:
            return [
                replace(
                    state,
                    in_flight=count_in_flight(
                        ((h, n, until) for h, (n, until) in self._gate_slots.get(key, {}).items()),
                        "",
                        now,
                    )[0],
                )
                for key, state in sorted(self._gates.items())
            ]

    # schedules
    def save_schedule(self, schedule: ScheduleRecord, *, replace: bool) -> bool:
        # kept as a durable store would give it back: a copy, through JSON
        source, input = loads(dumps([schedule.source, schedule.input], what="A schedule"))
        schedule = dataclasses.replace(schedule, source=source, input=input)
        with self._lock:
            if schedule.name in self._schedules and not replace:
                return False
            self._schedules[schedule.name] = schedule
            return True

    def get_schedule(self, name: str) -> ScheduleRecord | None:
        with self._lock:
            return self._schedules.get(name)

    def list_schedules(self) -> list[ScheduleRecord]:
        with self._lock:
            return [self._schedules[name] for name in sorted(self._schedules)]

    def pause_schedule(
        self, name: str, paused: bool, *, now: float, next_fire: float | None = None
    ) -> bool:
        with self._lock:
            found = self._schedules.get(name)
            if found is None:
                return False
            fire = found.next_fire if next_fire is None else next_fire
            self._schedules[name] = replace(found, paused=paused, next_fire=fire, updated_at=now)
            return True

    def delete_schedule(self, name: str) -> bool:
        with self._lock:
            return self._schedules.pop(name, None) is not None

    def advance_schedule(
        self,
        name: str,
        *,
        expected_next: float,
        next_fire: float,
        last_fire: float | None,
        last_run_id: str | None,
    ) -> bool:
        with self._lock:
            found = self._schedules.get(name)
            if found is None or found.next_fire != expected_next:
                return False
            self._schedules[name] = replace(
                found,
                next_fire=next_fire,
                last_fire=found.last_fire if last_fire is None else last_fire,
                last_run_id=found.last_run_id if last_run_id is None else last_run_id,
            )
            return True

    def due_schedules(self, *, now: float, limit: int = 100) -> list[ScheduleRecord]:
        with self._lock:
            due = [s for s in self._schedules.values() if not s.paused and s.next_fire <= now]
        return sorted(due, key=lambda s: (s.next_fire, s.name))[:limit]
