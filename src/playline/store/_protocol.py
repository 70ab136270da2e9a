"""What the engine needs from a store, by role; ``Store`` is all of them.

Roles: runs (records and their leases), receipts (claims, results, leases), rows, durable
boundaries with the event inbox, events (the progress log), the ledger, and the shared rate
gates (``_gates.py``), and schedules (``triggers/_schedules.py`` fires them). Every method that
writes takes a batch and is one transaction: the engine calls it once per batch of claims,
completions, rows or events, never per cell.

Stores are synchronous and thread-safe. The engine calls one through ``StoreIO``
(``_io.py``), which runs each batch on the store's own worker thread, so a network database
never stalls the loop, and one store object can serve several event loops (``pl.run`` starts
one per call). A store that is quick unless another thread or process holds it (a local
file: ``io_inline``) is called on the loop first, inside ``inline()``, and raises
``WouldWait`` instead of waiting; the call is then made on the worker thread. Inspection
(``playline show``, ``Dataset`` iteration) calls the store directly.

Every implementation raises ``StoreError`` for anything that goes wrong, with what to do
next; the conformance suite (tests/store) holds them to the same behaviour.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ..errors import StoreError
from ._changes import ChangeFeed
from ._gates import GateConfig, GateGrant, GateState
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
    RowPage,
    RowRecord,
    RunClaim,
    RunEnd,
    RunRecord,
    RunStatus,
    ScheduleRecord,
)
from ._windows import RowCounts

__all__ = [
    "BoundaryStore",
    "ConnectionLost",
    "EventStore",
    "GateStore",
    "LedgerStore",
    "ReceiptStore",
    "RowStore",
    "RunStore",
    "ScheduleStore",
    "Store",
    "WouldWait",
]


class RunStore(Protocol):
    def create_run(self, run: RunRecord) -> bool:
        """Insert ``run`` (normally ``running`` and held by its creator); False when a run
        with that id exists (nothing is written)."""
        ...

    def get_run(self, run_id: str) -> RunRecord | None: ...

    def list_runs(
        self,
        *,
        limit: int = 50,
        status: RunStatus | None = None,
        play: str | None = None,
        roots_only: bool = False,
    ) -> list[RunRecord]:
        """Newest first."""
        ...

    def child_runs(self, run_id: str) -> list[RunRecord]:
        """The runs whose parent is ``run_id``, oldest first."""
        ...

    def claim_run(
        self,
        run_id: str,
        *,
        holder: str,
        lease_until: float,
        now: float,
        options: Mapping[str, Any] | None = None,
    ) -> RunClaim:
        """Hold the run for an attempt: OWNED when it is free (finished, suspended, or
        running under a lease that expired or a holder that died) or already ``holder``'s;
        it becomes ``running``, its attempt count goes up, its stop request is cleared and
        ``options`` replace those of the same names. HELD (with the record) while another
        live attempt holds it; MISSING if unknown."""
        ...

    def renew_runs(self, holder: str, *, lease_until: float) -> list[RunRecord]:
        """Extend the lease of every run ``holder`` holds; returns them (a run whose lease
        was taken over is not among them; ``stop_requested`` tells the holder to stop)."""
        ...

    def end_attempt(self, run_id: str, *, holder: str, end: RunEnd, now: float) -> None:
        """Write how the attempt ended and release the run. Raises ``StoreError`` when
        ``holder`` no longer holds it (its lease was taken over)."""
        ...

    def request_stop(self, run_id: str) -> bool:
        """Ask the attempt holding a running run to stop before its next paid call; False
        when the run is not running."""
        ...

    def due_runs(self, *, now: float, limit: int = 100) -> list[RunRecord]:
        """Root runs that can go on: suspended ones whose wake time passed or an event they
        await was sent, and running ones whose holder's lease ran out (its process died or
        was killed: interrupted). Oldest first."""
        ...


class ReceiptStore(Protocol):
    def find_receipts(self, keys: Sequence[str]) -> dict[str, Receipt]:
        """The receipts of ``keys`` that exist (a read: nothing is claimed)."""
        ...

    def find_answers(self, keys: Sequence[str]) -> dict[str, Answer]:
        """The completed receipts of ``keys``, as calls are answered from them: the lookup
        every call makes first, so it reads no more than that."""
        ...

    def doubtful_receipts(self, run_id: str, *, now: float) -> dict[str, str]:
        """The calls of ``run_id`` and its child plays that may have been charged with no
        record of it, receipt key -> tool: in doubt, or running with no live holder (its
        process died with the request out)."""
        ...

    def pending_jobs(self, run_id: str) -> list[Receipt]:
        """The receipts of ``run_id`` and its child plays that wait on a job their async tool
        submitted: a job on them and no result yet (running, or in doubt: a resume polls the
        job, never submits it again), oldest claim first. What ``playline show`` and the
        UI list as jobs in progress."""
        ...

    def claim_receipts(
        self, claims: Sequence[Claim], *, owner: str, lease_until: float, now: float
    ) -> list[ClaimResult]:
        """Claim each key in one transaction, aligned with ``claims`` (``_claims.py`` says how
        each state answers). An OWNED receipt records the request it goes out in."""
        ...

    def complete_receipts(
        self, completions: Sequence[Completion], *, owner: str, now: float
    ) -> dict[str, bytes]:
        """Store results and the charges that paid for them in one transaction: a paid
        result is never kept without its charge, nor a charge without its result, and a
        receipt's generation is charged once. Returns the keys where another owner's result
        was already stored (and is kept), with that result."""
        ...

    def fail_receipts(self, failures: Sequence[Failure], *, owner: str, now: float) -> None:
        """Mark receipts failed, or ``unknown`` when the request may have charged."""
        ...

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
        """Group commit: ``complete_receipts``, ``fail_receipts`` and ``claim_receipts``
        (``lease_until`` is the claims'), in this order and in one transaction. Returns what
        ``complete_receipts`` and ``claim_receipts`` return."""
        ...

    def save_jobs(self, jobs: Sequence[tuple[str, bytes | None]], *, owner: str) -> None:
        """Record (or, with None, clear) the job an async tool call submitted, on receipts
        ``owner`` holds: a resumed run then polls it instead of paying again."""
        ...

    def release_receipts(self, keys: Sequence[str], *, owner: str) -> None:
        """Drop claims whose requests were never sent (a budget stop, a shutdown)."""
        ...

    def renew_receipts(self, owner: str, *, lease_until: float) -> int:
        """Extend the lease of every receipt ``owner`` holds; returns how many."""
        ...

    def receipt_stats(self) -> dict[str, dict[str, int]]:
        """Per tool: receipts by status and the ``bytes`` of their stored results."""
        ...

    def clear_receipts(self, tool: str | None = None) -> int:
        """Clear the finished receipts (of ``tool``, else of every tool): each keeps only
        its key, as ``cleared``, so its next call is bought again under a new idempotency key
        (a new generation). Running ones are left to their owner, and in-doubt ones
        (``unknown``: they may have been charged) to a resume, which re-sends them under their
        key or, asked to (``retry_in_doubt``), buys them again. Returns how many."""
        ...


class RowStore(Protocol):
    def save_rows(self, rows: Sequence[RowRecord | RowPage]) -> None:
        """Write rows, a page's as if each were its own record; a later row of a key
        replaces an earlier one."""
        ...

    def load_rows(self, run_id: str, dataset: str, keys: Sequence[str]) -> dict[str, RowRecord]: ...
    def iter_rows(self, run_id: str, dataset: str) -> Iterator[RowRecord]:
        """In input order, in pages: no read stays open between pages."""
        ...

    def datasets(self, run_id: str) -> list[str]: ...

    def iter_cells(
        self, run_id: str, holding: str
    ) -> Iterator[tuple[str, str, dict[str, CellMeta]]]:
        """``(dataset, row key, cells)`` of the run's stored rows one of whose cells has the
        metadata field ``holding`` (``"waterfall"``), in pages, in no set order: a pass over
        one kind of cell metadata reads neither the run's other rows nor any row's values."""
        ...

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
        """A window of a dataset's rows for a grid (``_windows.py``): in input order, or by
        the value of column ``sort`` (ties in input order); with ``state``, only the rows in
        that state (a cell status, or ``waiting``), and with ``column`` too, only the rows
        whose cell of that column is in that (cell) state."""
        ...

    def count_rows(
        self, run_id: str, dataset: str, *, state: str | None = None, column: str | None = None
    ) -> int:
        """How many rows ``row_window`` can page through with that ``state`` and ``column``."""
        ...

    def row_counts(self, run_id: str, dataset: str, *, cells: bool = True) -> RowCounts:
        """The dataset's rows by status, its cells by status, the rows each state keeps.
        ``cells=False`` (a grid's chips) tallies no cell: ``cells`` is empty and ``rows_with``
        has the states a window can filter on, which the SQL stores count without reading
        any row's cells."""
        ...


class BoundaryStore(Protocol):
    def get_boundary(self, key: str) -> Boundary | None: ...
    def put_boundary(self, boundary: Boundary) -> None: ...
    def send_event(self, key: str, payload: bytes, *, now: float) -> bool:
        """Keep an event until a wait takes it; False when ``key`` was sent before (the first
        payload stands: an event sent twice is delivered once)."""
        ...

    def deliver_event(self, key: str, boundary: Boundary) -> bytes | None:
        """In one transaction: hand the event ``key`` to ``boundary`` (written as completed with
        the payload as output) and return the payload; None if no such event is waiting."""
        ...

    def waiting_events(self, keys: Sequence[str]) -> set[str]:
        """Which of ``keys`` have an event sent and not yet delivered."""
        ...


class EventStore(Protocol):
    def reserve_seqs(self, count: int) -> int:
        """Reserve ``count`` store-wide sequence numbers; returns the first. Events get theirs
        when they are emitted, so listeners see the same ``seq`` the store keeps."""
        ...

    def append_events(self, events: Sequence[Event]) -> None:
        """Write events (their ``seq`` reserved before, or 0 for one given here)."""
        ...

    def read_events(
        self,
        run_id: str,
        *,
        after_seq: int = 0,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        """A run's events in ``seq`` order, after ``after_seq``; ``limit`` pages them."""
        ...

    def last_seq(self, run_id: str, *, kinds: Sequence[str] | None = None) -> int:
        """The highest ``seq`` of a run's stored events (of ``kinds``); 0 when none. A live
        view reads a window, then follows the events after this number."""
        ...


class LedgerStore(Protocol):
    def read_ledger(self, run_id: str) -> list[LedgerEntry]: ...

    def spent(self, run_id: str, unit: str = "credits") -> float:
        """What was charged to ``run_id`` and to its child plays (their ids extend it), in
        ``unit`` (``"credits"`` or ``"usd"``)."""
        ...

    def ledger_totals(self) -> dict[str, LedgerTotals]:
        """Per tool, over every run of the store: live calls, found, cost in its unit (the
        store's history, from which plans estimate hit rates)."""
        ...


class GateStore(Protocol):
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
        """In one transaction: take up to ``wanted`` tokens from the gate ``key`` (made from
        ``config`` when it is new or was declared otherwise), as many as its bucket holds and,
        under a shared cap, as many as the calls in flight of live holders leave free; those
        are counted as ``holder``'s until ``lease_until``. Granting 0 is an answer, not an
        error: ``grant.state.wait(now)`` says how long until a token. With no token now, those
        due within ``ahead`` seconds are reserved (``grant.due``; never under windows). Under a
        shared cap, tokens granted now take slots, and a reservation only when no other is
        ahead of it (``grant.slots``; ``GateState.lease``).
        ``slots=False``: tokens alone, under no lock but the row's (``take_slots`` then)."""
        ...

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
        """In one transaction: the slots of a shared cap for ``wanted`` calls whose tokens
        were leased alone (``GateState.slots_for``), counted as ``holder``'s; and the gate as
        it is (a pause begun since shows there), with its calls in flight. Asked for none, or
        without a cap, it only reads the gate, under no lock."""
        ...

    def release_gate(self, key: str, count: int, *, holder: str, lease_until: float) -> None:
        """``holder``'s ``count`` calls in flight under ``key``'s shared cap are done."""
        ...

    def renew_gates(self, holder: str, *, lease_until: float) -> int:
        """Extend the lease of ``holder``'s calls in flight; returns how many gates it holds."""
        ...

    def tune_gate(
        self, key: str, change: Callable[[GateState], GateState | None]
    ) -> GateState | None:
        """In one transaction: read the gate (None if it does not exist), write what ``change``
        makes of it (None: nothing), and return the gate as it is now. ``change`` is a pure
        function; a cut decided by one process is seen by the next one deciding."""
        ...

    def read_gates(self, *, now: float) -> list[GateState]:
        """Every gate (by key), with the calls in flight of its live holders at ``now``."""
        ...


class ScheduleStore(Protocol):
    """Schedules and their next fire times. Cron and timezones are the caller's business: the
    store keeps the times it is given, and moves ``next_fire`` only by compare-and-set."""

    def save_schedule(self, schedule: ScheduleRecord, *, replace: bool) -> bool:
        """Write ``schedule`` whole; False when one of that name exists and not ``replace``
        (nothing is written)."""
        ...

    def get_schedule(self, name: str) -> ScheduleRecord | None: ...

    def list_schedules(self) -> list[ScheduleRecord]:
        """By name."""
        ...

    def pause_schedule(
        self, name: str, paused: bool, *, now: float, next_fire: float | None = None
    ) -> bool:
        """Pause (or resume) the schedule ``name``, and set its ``next_fire`` when given (a
        resumed schedule does not catch up the time it was paused); False if unknown."""
        ...

    def delete_schedule(self, name: str) -> bool:
        """Forget the schedule ``name`` (the runs it queued stay); False if unknown."""
        ...

    def advance_schedule(
        self,
        name: str,
        *,
        expected_next: float,
        next_fire: float,
        last_fire: float | None,
        last_run_id: str | None,
    ) -> bool:
        """Move the schedule's ``next_fire`` from ``expected_next`` to ``next_fire`` (and its
        last fire and run, where given: None keeps them). False, changing nothing, when its
        ``next_fire`` is not ``expected_next`` any more (another worker advanced it) or it
        is gone."""
        ...

    def due_schedules(self, *, now: float, limit: int = 100) -> list[ScheduleRecord]:
        """Schedules not paused whose ``next_fire`` is at or before ``now``, soonest first."""
        ...


class Store(
    RunStore,
    ReceiptStore,
    RowStore,
    BoundaryStore,
    EventStore,
    LedgerStore,
    GateStore,
    ScheduleStore,
    Protocol,
):
    url: str
    io_threads: int  # worker threads the engine may call it from (0: it never blocks)
    io_inline: bool  # whether the engine calls it on its loop first, inside inline()
    # Other processes may use it too (a file, a server): rate gates are then kept in it.
    shared: bool

    def changes(self) -> ChangeFeed | None:
        """Announcements of what other processes changed (``_changes.py``), or None where
        waiters must look at the store again and again."""
        ...

    def inline(self) -> AbstractContextManager[None]:
        """Calls made on this thread inside it, by a store with ``io_inline``, run only if
        they need not wait: one that would wait for another thread or process raises
        ``WouldWait`` before it has changed anything, to be made again on a worker thread."""
        ...

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called: it can no longer be read or written."""
        ...

    def close(self) -> None: ...


class WouldWait(Exception):
    """A call made inside ``Store.inline()`` would have waited for another thread or process;
    nothing was changed."""


class ConnectionLost(StoreError):
    """The store's connection to its server went away (a killed backend, a restarted server)
    before anything of the call was written: the same call again is safe, on a new
    connection. ``StoreIO`` makes it again, for a while (``RECONNECT_WITHIN``)."""
