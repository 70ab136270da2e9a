"""Executing tool calls so that nothing is paid twice (SEMANTICS.md 7-14, 24-27).

``CallExecutor.execute(spec, calls)`` takes calls to one tool (one dispatch pass, or a single
direct call) and settles every call's future; it never raises for a failed call. A call goes:

1. **Receipts first.** Calls with the same receipt key share one execution (one owner, the
   rest followers, also across passes while the owner is in flight); a completed receipt
   answers at once (one lookup for the whole pass).
2. **Requests.** The rest are packed into requests of up to the tool's batch size. Each
   request passes the tool's gate (breaker, concurrency cap, rate limit), then, just before
   it is sent, reserves its worst-case cost against the budget and **claims** its receipts
   (one transaction): the claim records the intent, the request it goes out in and its
   idempotency keys, so a crash from here on leaves the receipts *in doubt*, and a resume
   re-sends them with the same keys (the provider recognises the repeat) or fails them.
3. **Retries** follow ``tools/_retry.py``: a 429 waits (and teaches the gate), a transient
   failure repeats the same request with the same keys, a failure that may have charged is
   never repeated blindly.
4. **Group commit.** Results and their charges are written together (``commits.py``), then
   the calls settle: a row never goes on with a result the store does not hold.

Stopping (``drain.py``): a request that has not been sent when the attempt must stop is
dropped (its receipts were never claimed); one already sent finishes and is recorded.

Two modes hook in after the receipts: a call with ``fresh_since`` (a refreshed column) takes
a receipt completed before that time as stale and buys it again (``force``), once per run; and
with a ``Planner`` (``planning.py``: ``playline plan``) the calls no receipt answers are
counted instead of sent, each answering "not found" at no cost.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, overload

from .._clock import Clock
from .._json import digest, dumps, loads
from .._secrets import redact
from ..errors import (
    BudgetExceeded,
    PlayDefinitionError,
    PlaylineError,
    ReceiptWaitTimeout,
    ToolError,
)
from ..store import (
    Claim,
    ClaimOutcome,
    Completion,
    Failure,
    LedgerEntry,
    Receipt,
    ReceiptStatus,
    Store,
    StoreIO,
)
from ..store._changes import RECEIPTS, watch
from ..store._claims import lease_live
from ..tools import Execution, Jobs, JobState, ToolResult, ToolSpec
from ..tools._gates import RateGate, ToolGates, one_call
from ..tools._retry import Verdict, decide, maybe_charged, provider_failure
from .commits import GroupCommit
from .drain import BUDGET, Drain, escaped
from .events import EventLog
from .governance import Governor, RetryBudgetExceeded
from .ledger import Ledger
from .planning import Planner
from .scope import RowScope
from .taskgroups import TaskSet

__all__ = ["DEFAULT_CELL_LIMIT", "CallExecutor", "CallStats", "ToolCall", "too_large"]

MAX_POLL_FAILURES = 6  # transient errors in a row while polling an async job
DEFAULT_CELL_LIMIT = 5_000_000  # bytes of one stored result or cell value
_RECEIPT_POLL_MAX = 1.0  # seconds between looks at a receipt another worker holds


@dataclass(slots=True, eq=False)
class ToolCall:
    spec: ToolSpec
    input: dict[str, Any]
    key: str
    future: asyncio.Future[ToolResult]
    label: str | None = None
    force: bool = False
    scope: RowScope | None = None
    column: str | None = None  # the column of the row that made it (the ledger names it)
    sink: list[ToolResult] | None = None  # a waterfall step collecting its results
    followers: list[ToolCall] = field(default_factory=list)  # same key: share this result
    on_settle: Callable[[], None] | None = None  # told synchronously when the call settles
    job: bytes | None = None  # an async tool's submitted job, from the receipt
    generation: int = 1
    resent: bool = False  # its request may have reached the provider before (in doubt)
    fresh_since: float | None = None  # a receipt completed before this is bought again

    @property
    def idempotency_key(self) -> str:
        """Sent to the provider: a repeat after a crash is not paid. Made when a transport
        asks for it (a local tool never does)."""
        return _idempotency_key(self.key, self.generation)


@dataclass(slots=True)
class CallStats:
    live: int = 0
    cached: int = 0
    in_flight: int = 0
    failed: int = 0
    not_sent: int = 0  # calls the budget refused before they were sent (their rows pending)
    planned: int = 0  # calls a plan counted instead of sending
    requests: int = 0  # requests sent to transports (a batch call counts once)
    by_tool: dict[str, dict[str, int]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)  # failed calls by cause

    def count(self, tool: str, what: str, n: int = 1) -> None:
        setattr(self, what, getattr(self, what) + n)
        per = self.by_tool.setdefault(tool, {})
        per[what] = per.get(what, 0) + n


def _idempotency_key(key: str, generation: int) -> str:
    """The key a provider sees for a receipt's generation: the same for every send of that
    generation (a crash's repeat is recognised), new for a deliberate re-purchase."""
    return digest("idempotency", key, "" if generation == 1 else str(generation))[:40]


class _Keys(Sequence[str]):
    """The calls' idempotency keys, as a transport reads them: each made when it is read."""

    __slots__ = ("_calls",)

    def __init__(self, calls: Sequence[ToolCall]) -> None:
        self._calls = calls

    def __len__(self) -> int:
        return len(self._calls)

    def __iter__(self) -> Iterator[str]:
        return (call.idempotency_key for call in self._calls)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return [call.idempotency_key for call in self._calls[index]]
        return self._calls[index].idempotency_key


class CallExecutor:
    """Runs calls through receipts, the budget, gates, retries and transports."""

    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        gates: ToolGates,
        governor: Governor,
        ledger: Ledger,
        events: EventLog,
        tools: Mapping[str, ToolSpec],
        run_id: str,
        owner: str,
        drain: Drain,
        lease: float,
        receipt_wait: float = 600.0,
        retry_in_doubt: bool = False,
        ledger_all: bool = False,
        cell_limit: int = DEFAULT_CELL_LIMIT,
        planner: Planner | None = None,
    ) -> None:
        self._store = store
        self._io = StoreIO(store)
        self._clock = clock
        self._gates = gates
        self._governor = governor
        self._ledger = ledger
        self._events = events
        self._tools = tools
        self._run_id = run_id
        self._owner = owner
        self._drain = drain
        self._lease = lease  # renewed by the attempt's supervisor while the call runs
        self._receipt_wait = receipt_wait
        self._retry_in_doubt = retry_in_doubt
        self._ledger_all = ledger_all
        self._cell_limit = cell_limit
        self._planner = planner
        self._committer = GroupCommit(store, owner, clock.now, lease)
        self._in_flight: dict[str, ToolCall] = {}  # receipt key -> its unsettled owner
        self._sending = _Sending()  # requests between their claim and their record
        self._retrying = TaskSet()  # requests that failed once and go on alone
        self._lanes: dict[str, _Lane] = {}  # tool id -> its requests waiting for the gate
        self._lane_tasks = TaskSet()  # the lanes' pumps and the waves they send
        self._waits = TaskSet()  # calls waiting for a receipt another worker holds
        self.stats = CallStats()
        self._request_prefix = f"{secrets.token_hex(4)}-"  # requests: prefix-1, prefix-2, ...
        self._requests = 0
        self.progress = 0  # calls settled: the watchdog's sign of life
        # Whether receipts answered calls lately: a row group's calls are looked up before
        # they are queued while they do (datasets.py), claimed at once while they do not.
        self.answers_likely = True

    def gate_of(self, spec: ToolSpec) -> RateGate:
        return self._gates[self._target(spec)]

    def _target(self, spec: ToolSpec) -> ToolSpec:
        return self._tools[spec.batch.via] if spec.batch and spec.batch.via else spec

    def gate_wait(self, spec: ToolSpec) -> float:
        """Seconds until the rate gate of ``spec``'s calls would let one through."""
        return self.gate_of(spec).wait_time()

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    # entry
    async def execute(self, spec: ToolSpec, calls: Sequence[ToolCall]) -> None:
        """Settle ``calls``: answered from receipts, or sent in waves of requests."""
        owners = self._owners(calls)
        if not owners:
            return
        fresh = [c.key for c in owners if not c.force]
        if fresh:
            try:
                found = await self._io(self._store.find_answers, fresh)
            except PlaylineError as exc:
                for call in owners:
                    self._settle(call, None, exc)
                return
            for call in owners:
                answer = None if call.force else found.get(call.key)
                if answer is not None:
                    if call.fresh_since is not None and answer.updated_at < call.fresh_since:
                        call.force = True  # refreshed: bought again (its followers share it)
                        continue
                    self._settle_cached(call, answer.result)
        pending = [c for c in owners if not c.future.done()]
        if self._planner is not None:  # a plan: count what would be sent, send nothing
            self._planner.record(spec, pending, answered=len(owners) - len(pending))
            for call in pending:
                self._settle(call, _planned(spec))
            return
        if not pending:
            return
        size = spec.max_batch
        requests = [pending[i : i + size] for i in range(0, len(pending), size)]
        target = self._target(spec)
        if target.jobs is None:  # the tool's lane sends them with the others queued
            self._enqueue(spec, target, requests)
            return
        try:  # each job is submitted, then polled, on its own
            await asyncio.gather(*(self._send(spec, chunk) for chunk in requests))
        except BaseException as exc:  # settle whatever is left; never leave a row hanging
            self._settle_requests(requests, exc)
            if not isinstance(exc, Exception):
                raise

    # the lanes: one per tool, its requests sent in waves
    def _enqueue(
        self,
        spec: ToolSpec,
        target: ToolSpec,
        requests: Sequence[list[ToolCall]],
        *,
        first: bool = False,
    ) -> None:
        """Queue requests in the tool's lane (``first``: ahead of the others), starting its
        pump if it is not running."""
        lane = self._lanes.get(spec.id)
        if lane is None:
            lane = self._lanes[spec.id] = _Lane()
        if first:
            lane.requests.extendleft(reversed(requests))
        else:
            lane.requests.extend(requests)
        if lane.pump is None or lane.pump.done():
            lane.pump = self._lane_tasks.spawn(self._pump(spec, target, lane))

    async def _pump(self, spec: ToolSpec, target: ToolSpec, lane: _Lane) -> None:
        """Send the lane's requests in waves, as the gate lets them through.

        One pump per tool takes every slot the gate frees, so the requests of all passes go
        out in waves as large as the tool's concurrency allows, not one wave per pass (passes
        competing for slots cut each other's waves down to single requests). A wave takes at
        most half the concurrency, so the next wave is claimed while one is sent and recorded.
        """
        gate = self._gates[target]
        requests = lane.requests
        try:
            while requests:
                cause = gate.open_cause()
                if cause is not None:
                    error = ToolError(spec.id, f"{target.id} {cause}", code="circuit_open")
                    self._settle_requests(_take(requests, len(requests)), error)
                    return
                if self._drain.stopping:
                    for chunk in _take(requests, len(requests)):
                        self._stop(chunk)
                    return
                wanted = min(len(requests), max(1, gate.concurrency // 2))
                granted = await gate.acquire(wanted)
                wave = _take(requests, min(granted, len(requests)))
                if len(wave) < granted:
                    gate.release(granted - len(wave))
                if self._stopping():  # while it waited for the gate
                    gate.release(len(wave))
                    requests.extendleft(reversed(wave))
                    continue
                self._lane_tasks.spawn(self._send_wave(spec, target, gate, wave))
        except BaseException as exc:  # settle whatever is left; never leave a row hanging
            self._settle_requests(_take(requests, len(requests)), exc)
            if not isinstance(exc, Exception):
                raise

    async def _send_wave(
        self, spec: ToolSpec, target: ToolSpec, gate: RateGate, wave: list[list[ToolCall]]
    ) -> None:
        """One wave to its end. A request that fails goes on alone (retries, waits) so it
        holds up no other; requests the budget defers go back to the lane once the requests
        sent settle."""
        held = _Held(gate, len(wave))
        settles = self._ledger.settles  # the budget may defer some: they wait past these
        try:
            sent, deferred, failed = await self._wave(spec, target, held, wave)
        except BaseException as exc:
            self._settle_requests(wave, exc)
            if not isinstance(exc, Exception):
                raise
            return
        finally:
            held.free(held.count)
        for chunk, reserved, error in failed:
            self._retrying.spawn(
                self._send(spec, chunk, claimed=True, reserved=reserved, error=error)
            )
        if deferred:
            if not sent:  # over budget for now: the requests sent may leave room
                await self._ledger.settled(settles)
            self._enqueue(spec, target, deferred, first=True)

    async def _wave(
        self, spec: ToolSpec, target: ToolSpec, held: _Held, wave: list[list[ToolCall]]
    ) -> tuple[bool, list[list[ToolCall]], list[tuple[list[ToolCall], int, ToolError]]]:
        """Claim, send and record one wave; returns whether anything was sent, the requests
        deferred (the budget waits for the requests sent), and those that failed.

        The wave's claims are one transaction. A request gives its gate slot back when it is
        answered (the provider is done with it) and is recorded by the group commit with
        whatever else is being claimed or recorded then: a slow request holds back neither
        the others' slots nor their results, and the claims of the next wave share a
        transaction with the results of this one."""
        failed: list[tuple[list[ToolCall], int, ToolError]] = []
        if self._stopping():  # since the pump let it out: it is not sent
            for chunk in wave:
                self._stop(chunk)
            return False, [], failed
        with self._sending():
            claimed, deferred = await self._claim(spec, wave)
            held.free(len(wave) - len(claimed))  # not sent: deferred, or answered at the claim
            if not claimed:
                return False, deferred, failed
            self._sent(spec, target, sum(len(c) for c, _ in claimed), len(claimed))
            gate = held.gate

            def answered(
                chunk: list[ToolCall], reserved: int, answer: list[Any] | ToolError
            ) -> tuple[list[ToolCall], list[Any], int] | None:
                held.free(1)
                if isinstance(answer, ToolError):
                    failed.append((chunk, reserved, answer))
                    return None
                gate.succeeded()
                return chunk, answer, reserved

            if target.transport.inline:  # a plain function: one after the other, then one record
                done = []
                for chunk, reserved in claimed:
                    request = answered(chunk, reserved, await self._attempt(spec, target, chunk))
                    if request is not None:
                        done.append(request)
                await self._complete(spec, done)
            else:

                async def one(chunk: list[ToolCall], reserved: int) -> None:
                    request = answered(chunk, reserved, await self._attempt(spec, target, chunk))
                    if request is not None:
                        await self._complete(spec, [request])

                await asyncio.gather(*(one(chunk, reserved) for chunk, reserved in claimed))
        return True, deferred, failed

    async def _attempt(
        self, spec: ToolSpec, target: ToolSpec, chunk: list[ToolCall]
    ) -> list[Any] | ToolError:
        try:
            return await self._transport(spec, target, chunk)
        except ToolError as exc:
            return exc

    def _owners(self, calls: Sequence[ToolCall]) -> list[ToolCall]:
        """Attach calls whose key is already being executed to that call; the rest own."""
        owners: list[ToolCall] = []
        in_flight = self._in_flight
        for call in calls:
            running = None if call.force else in_flight.get(call.key)
            if running is not None and not running.future.done():
                running.followers.append(call)
                continue
            owners.append(call)
            if not call.force:
                in_flight[call.key] = call
        return owners

    def refused_input(self, spec: ToolSpec, error: PlayDefinitionError) -> ToolError:
        """A call whose input cannot be sent (not JSON: a set, an object, nesting past 254
        levels): it fails, counted with the calls that failed, and is never sent."""
        refused = ToolError(spec.id, f"its input cannot be sent: {error}", code="invalid_input")
        self._count_failed(spec, refused)
        return refused

    def _count_failed(self, spec: ToolSpec, error: BaseException) -> None:
        """A failed call in the stats: by tool (refused ones too), and by cause."""
        self.stats.count(spec.id, "failed")
        if _refused(error):
            per = self.stats.by_tool[spec.id]
            per["refused"] = per.get("refused", 0) + 1
        cause = _cause(error)
        self.stats.errors[cause] = self.stats.errors.get(cause, 0) + 1

    # settling
    def _settle(
        self, call: ToolCall, result: ToolResult | None, error: BaseException | None = None
    ) -> None:
        """Settle a call and, synchronously, its followers (so batching counts stay exact).
        A call whose waiter gave up (its future cancelled) still settles its followers."""
        if self._in_flight.get(call.key) is call:
            del self._in_flight[call.key]  # no later call may follow a settled owner
        if call.future.done():
            self._settle_followers(call, result, error)
            return
        self.progress += 1
        if error is None:
            assert result is not None
            call.future.set_result(result)
            if call.scope is not None:  # the cell that asked gets its cost and provider
                call.scope.results.append(result)
            if call.sink is not None:
                call.sink.append(result)
            source = result.execution.source
            self.stats.count(call.spec.id, "cached" if source == "cache" else source)
        elif isinstance(error, asyncio.CancelledError):
            call.future.cancel()
        else:
            call.future.set_exception(error)
            if isinstance(error, BudgetExceeded):  # refused before it was sent: not a failure
                self.stats.count(call.spec.id, "not_sent")
            else:
                self._count_failed(call.spec, error)
        if call.on_settle is not None:
            call.on_settle()
        self._settle_followers(call, result, error)

    def _settle_followers(
        self, call: ToolCall, result: ToolResult | None, error: BaseException | None
    ) -> None:
        followers, call.followers = call.followers, []
        shared = None if result is None else result.with_source("in_flight", cost=0.0)
        for follower in followers:
            self._settle(follower, shared, error)

    def _settle_requests(self, requests: Sequence[list[ToolCall]], exc: BaseException) -> None:
        """Settle every call of ``requests`` with ``exc`` (cancelled when it is no error)."""
        error = exc if isinstance(exc, Exception) else asyncio.CancelledError()
        for chunk in requests:
            for call in chunk:
                self._settle(call, None, error)

    def _settle_cached(self, call: ToolCall, stored: bytes) -> None:
        self._settle(call, _cached(call.spec, stored))

    def _stopping(self) -> bool:
        return self._drain.stopping

    def _stop(self, calls: Sequence[ToolCall]) -> None:
        """The attempt is stopping: these calls were never sent. Over budget, they fail with
        the budget's error; otherwise they are cancelled and their rows stay pending."""
        error = self._drain.error if self._drain.reason == BUDGET else None
        for call in calls:
            self._settle(call, None, error or asyncio.CancelledError())

    # one request
    async def _send(
        self,
        spec: ToolSpec,
        chunk: list[ToolCall],
        *,
        claimed: bool = False,
        reserved: int = 0,
        error: ToolError | None = None,
    ) -> None:
        """One request to its end: sent (again) through the gate, retried as
        ``tools/_retry.py`` says, recorded. ``error`` is how its first send failed."""
        target = self._target(spec)
        gate = self._gates[target]
        sends = 1 if error is not None else 0
        while True:
            if error is None:
                cause = gate.open_cause()
                if cause is not None:
                    error = ToolError(spec.id, f"{target.id} {cause}", code="circuit_open")
                    await self._fail(spec, chunk, error, claimed=claimed)
                    self._ledger.release(spec, reserved)
                    return
                if self._drain.stopping:  # not sent (again): its rows stay pending
                    await self._drop(spec, chunk, claimed=claimed, reserved=reserved)
                    return
                over_budget = False
                async with one_call(gate):
                    if self._stopping():  # while it waited for the gate: not sent either
                        await self._drop(spec, chunk, claimed=claimed, reserved=reserved)
                        return
                    if not claimed:
                        settles = self._ledger.settles
                        fits, deferred = await self._claim(spec, [chunk])
                        over_budget = not fits and bool(deferred)
                        if fits and deferred:  # what does not fit yet goes on alone
                            self._retrying.spawn(self._send(spec, deferred[0]))
                        if not over_budget:
                            [(chunk, reserved)] = fits or [([], 0)]
                            claimed = True
                            if not chunk:
                                return
                    if not over_budget:
                        sends += 1
                        with self._sending():
                            try:
                                if target.jobs is None:
                                    self._sent(spec, target, len(chunk))
                                    raws = await self._transport(spec, target, chunk)
                                    gate.succeeded()
                                    await self._complete(spec, [(chunk, raws, reserved)])
                                    return
                                state = await self._submit(spec, target, target.jobs, chunk[0])
                            except ToolError as exc:
                                error = exc
                            else:
                                gate.succeeded()
                if over_budget:  # the requests sent may leave room once settled: not in a slot
                    await self._ledger.settled(settles)
                    continue
                if error is None:
                    # submitted, its job kept on the receipt: polling needs no slot
                    assert target.jobs is not None
                    await self._finish_job(spec, target, target.jobs, chunk, state, reserved)
                    return
            decision = decide(error, spec, sends)
            wait = decision.delay
            if decision.verdict in (Verdict.WAIT, Verdict.REPEAT):
                if (error.status or 0) == 429:
                    wait = gate.throttled(error.retry_after)
                try:
                    self._governor.retry(spec.id)
                except RetryBudgetExceeded as exc:
                    exhausted = ToolError(spec.id, str(exc), code="retry_budget")
                    in_doubt = maybe_charged(error, spec)
                    await self._fail(spec, chunk, exhausted, claimed=True, in_doubt=in_doubt)
                    self._release(spec, chunk, reserved, in_doubt=in_doubt)
                    return
                await self._clock.sleep(wait)
                error = None
                continue
            if provider_failure(error):
                gate.failed(_cause(error))
            in_doubt = decision.verdict is Verdict.FAIL_IN_DOUBT
            if in_doubt:
                error = _in_doubt_error(spec, error)
            await self._fail(spec, chunk, error, claimed=True, in_doubt=in_doubt)
            self._release(spec, chunk, reserved, in_doubt=in_doubt)
            return

    def _release(
        self, spec: ToolSpec, chunk: list[ToolCall], reserved: int, *, in_doubt: bool
    ) -> None:
        """A request failed: its reservation is given back, but the worst case of calls in
        doubt stays counted (the provider may have charged them)."""
        self._ledger.release(spec, reserved)
        if in_doubt and spec.cost.credits:
            self._ledger.doubt({c.key: spec.cost.credits for c in chunk})

    async def _drop(
        self, spec: ToolSpec, chunk: list[ToolCall], *, claimed: bool, reserved: int
    ) -> None:
        """Stopping: a request that is not sent (again) lets go of its receipts and of the
        budget it reserved; its rows stay pending. The release is shielded: the attempt's end
        cancels its retries, and a store call cancelled before its thread took it is never
        made, which left the receipt claimed, in doubt once its lease ran out."""
        self._ledger.release(spec, reserved)
        self._stop(chunk)
        if claimed:
            keys = [c.key for c in chunk]
            await asyncio.shield(self._io(self._store.release_receipts, keys, owner=self._owner))

    def _reserve(self, spec: ToolSpec, size: int) -> int | None:
        """Reserve the worst-case cost of up to ``size`` inputs; returns how many fit (fewer
        when the budget is nearly spent: the rest wait), 0 when none fits and nothing is in
        flight (the budget is spent), or None: none fits now, but requests already sent hold
        their worst case and what they really cost may leave room (an on-hit tool's misses
        are free)."""
        allowed = self._ledger.reserve(spec, size)
        if allowed or not self._ledger.reserved:
            return allowed
        return None

    async def _claim(
        self, spec: ToolSpec, requests: list[list[ToolCall]]
    ) -> tuple[list[tuple[list[ToolCall], int]], list[list[ToolCall]]]:
        """Reserve the budget and claim the receipts of requests about to be sent (one
        transaction, shared with whatever else is claiming now); returns each request's
        calls to send with the inputs it reserved (requests left with none are dropped), and
        the requests deferred until the requests sent settle (the budget is nearly spent)."""
        claims: list[Claim] = []
        kept: list[list[ToolCall]] = []
        deferred: list[list[ToolCall]] = []
        for number, chunk in enumerate(requests):
            if self._ledger.in_doubt and spec.in_doubt == "resend" and not self._retry_in_doubt:
                for call in chunk:  # sent again with its key: not paid twice, reserved below
                    if not call.force:
                        self._ledger.resolve(call.key)
            reserved = self._reserve(spec, len(chunk))
            if reserved is None:  # later, once the requests sent have settled
                deferred.extend(requests[number:])
                break
            if reserved == 0:  # the budget is spent: these and every later call fail
                error = self._ledger.exceeded(spec, len(chunk))
                self._drain.stop(BUDGET, error)
                for call in chunk:
                    self._settle(call, None, error)
                continue
            if reserved < len(chunk):  # the budget fits the first ones now; the rest wait
                deferred.append(chunk[reserved:])
                chunk = chunk[:reserved]
            self._requests += 1
            request = f"{self._request_prefix}{self._requests}"
            claims.extend(
                Claim(
                    key=c.key,
                    tool=spec.id,
                    run_id=self._run_id,
                    force=c.force,
                    resend=spec.in_doubt == "resend",
                    retry_in_doubt=self._retry_in_doubt,
                    request=request,
                )
                for c in chunk
            )
            kept.append(chunk)
        if not claims:
            return [], deferred
        try:
            results = iter(await self._committer.claim(claims))
        except BaseException:
            for chunk in kept:
                self._ledger.release(spec, len(chunk))
            raise
        claimed: list[tuple[list[ToolCall], int]] = []
        for chunk in kept:
            send: list[ToolCall] = []
            for call in chunk:
                claim = next(results)
                receipt = claim.receipt
                if claim.outcome in (ClaimOutcome.OWNED, ClaimOutcome.COMPLETED):
                    self._ledger.resolve(call.key)  # was it in doubt: settled from here on
                if claim.outcome is ClaimOutcome.OWNED:
                    call.job = receipt.job
                    call.generation = receipt.generation
                    call.resent = claim.resent
                    send.append(call)
                elif claim.outcome is ClaimOutcome.COMPLETED:
                    assert receipt.result is not None
                    self.answers_likely = True  # a receipt the lookups did not find
                    self._settle_cached(call, receipt.result)
                elif claim.outcome is ClaimOutcome.HELD:
                    self._waits.spawn(self._wait_for(spec, call))
                else:
                    self._settle(call, None, _in_doubt_error(spec, receipt.error))
            if len(send) < len(chunk):
                self._ledger.release(spec, len(chunk) - len(send))
            if send:
                claimed.append((send, len(send)))
        return claimed, deferred

    async def _wait_for(self, spec: ToolSpec, call: ToolCall) -> None:
        """Another live worker owns this call: wait for its result, or take over if it dies.
        A store that announces changes (PostgreSQL) wakes the wait once the receipt is
        finished; it is looked at anyway, with backoff, to notice a holder that died."""
        try:
            deadline = self._clock.monotonic() + self._receipt_wait
            delay = 0.05
            with watch(self._store.changes(), RECEIPTS, call.key) as finished:
                while self._clock.monotonic() < deadline:
                    await finished.wait(self._clock, delay)
                    delay = min(delay * 2, _RECEIPT_POLL_MAX)
                    receipt = (await self._io(self._store.find_receipts, [call.key])).get(call.key)
                    if receipt is not None and receipt.status is ReceiptStatus.COMPLETED:
                        assert receipt.result is not None
                        self._settle_cached(call, receipt.result)
                        return
                    if not _held(receipt, self._clock.now()):
                        break  # failed, released, or its holder is gone: claim it ourselves
                else:
                    self._settle(
                        call,
                        None,
                        ReceiptWaitTimeout(
                            f"Tool {spec.id}: another worker has been executing the same call "
                            f"for over {self._receipt_wait:g}s. Nothing was written; run again "
                            "once it has finished, or stop the other worker."
                        ),
                    )
                    return
            await self._send(spec, [call])
        except BaseException as exc:
            if not call.future.done():
                self._settle(call, None, exc if isinstance(exc, Exception) else None)
            if not isinstance(exc, Exception):
                raise

    async def _transport(
        self, spec: ToolSpec, target: ToolSpec, chunk: list[ToolCall]
    ) -> list[Any]:
        try:
            raws = await target.transport.call(target, [c.input for c in chunk], _Keys(chunk))
        except BaseException as exc:  # sys.exit() in a tool function ends the run
            raise escaped(self._drain, exc)  # noqa: B904 - the original is the drain's error
        if len(raws) != len(chunk):
            raise ToolError(
                spec.id,
                f"returned {len(raws)} results for {len(chunk)} inputs",
                code="misaligned_batch",
            )
        return raws

    def _sent(self, spec: ToolSpec, target: ToolSpec, inputs: int, requests: int = 1) -> None:
        """Report requests going out: one event for a wave, however many requests it holds."""
        self.stats.requests += requests
        data = {"tool": spec.id, "size": inputs}
        if requests != 1:
            data["requests"] = requests
        self._events.emit("batch", provider=target.id, data=data)

    async def _submit(
        self, spec: ToolSpec, target: ToolSpec, jobs: Jobs, call: ToolCall
    ) -> JobState:
        """An async tool call: submit it once and keep its job on the receipt, so a resumed
        run polls it instead of paying again; a job kept from an earlier attempt is polled."""
        if call.job is not None:
            return JobState(done=False, job=loads(call.job))
        self._sent(spec, target, 1)
        state = await jobs.submit(target, call.input, call.idempotency_key)
        if not state.done:
            call.job = dumps(state.job, what=f"The job of tool {spec.id}")
            await self._io(self._store.save_jobs, [(call.key, call.job)], owner=self._owner)
        return state

    async def _finish_job(
        self,
        spec: ToolSpec,
        target: ToolSpec,
        jobs: Jobs,
        chunk: list[ToolCall],
        state: JobState,
        reserved: int,
    ) -> None:
        """Poll a submitted job until it is done, then record it. Polls are free and safe to
        repeat; a job the provider no longer knows (``unknown_job``) fails the call, and the
        next attempt buys it anew. A job that fails to answer its polls was submitted, and so
        may have been charged: its worst case stays counted against the budget."""
        failures = 0
        while not state.done:
            await self._clock.sleep(jobs.poll_interval)
            try:
                state = await jobs.poll(target, state.job)
            except ToolError as exc:
                failures += 1
                status = exc.status or 0
                transient = status == 429 or status >= 500 or exc.code in _UNREACHABLE
                error: ToolError | None = None
                if exc.code == "unknown_job":
                    error = _LostJob(spec.id, exc)
                elif not transient or failures >= MAX_POLL_FAILURES:
                    error = exc  # the job stays on the receipt: a resume polls it again
                else:
                    try:
                        self._governor.retry(spec.id)
                    except RetryBudgetExceeded as budget:
                        error = ToolError(spec.id, str(budget), code="retry_budget")
                if error is not None:
                    await self._fail(spec, chunk, error, claimed=True)
                    self._release(spec, chunk, reserved, in_doubt=True)
                    return
                await self._clock.sleep(exc.retry_after or 0.25 * 2 ** (failures - 1))
        await self._complete(spec, [(chunk, [state.result], reserved)])

    # recording
    async def _complete(
        self, spec: ToolSpec, requests: list[tuple[list[ToolCall], list[Any], int]]
    ) -> None:
        """Record the answers of sent requests in one transaction, then settle their calls."""
        if not requests:
            return
        completions: list[Completion] = []
        failures: list[Failure] = []
        outcomes: list[tuple[ToolCall, ToolResult | ToolError]] = []
        charged: list[LedgerEntry] = []  # settled with the inputs reserved, all at once
        # A tool that costs nothing leaves no ledger row (unless every call is asked for):
        # its calls are counted by the batch events; an on-hit tool's misses do, for hit rates.
        ledgered = bool(spec.cost.credits) or self._ledger_all
        # An answer that cannot be kept was paid for. A provider that recognises the call's
        # idempotency key answers it again for free (so a retry with a larger cell limit gets
        # it); one that does not charges again, so a retry is a new purchase, with a new key
        # and its own ledger row.
        rebuy = self._target(spec).in_doubt != "resend"
        what = f"The result of tool {spec.id}"
        for chunk, raws, _ in requests:
            for call, raw in zip(chunk, raws, strict=True):
                result = ToolResult(
                    tool=spec.id,
                    data=raw,
                    execution=_LIVE,
                    outputs=spec.outputs,
                    lists=spec.lists,
                )
                result.cost = spec.cost.charged(result.found)
                scope = call.scope
                # the provider was called: the ledger records it even if the result is unusable
                entry = None
                if ledgered:
                    entry = self._ledger.entry(
                        spec,
                        call.key,
                        result.cost,
                        result.found,
                        scope.dataset if scope else None,
                        scope.row_key if scope else None,
                        call.generation,
                        call.column,
                    )
                    charged.append(entry)
                try:
                    stored = dumps(result.to_json(), what=what)
                except PlayDefinitionError as exc:
                    error = ToolError(spec.id, str(exc), code="invalid_result")
                    failures.append(
                        Failure(call.key, redact(str(error)), charge=entry, rebuy=rebuy)
                    )
                    outcomes.append((call, error))
                    continue
                if len(stored) > self._cell_limit:  # paid, but not kept: the cell fails
                    error = ToolError(spec.id, too_large(len(stored), self._cell_limit),
                                      code="too_large")  # fmt: skip
                    failures.append(
                        Failure(call.key, redact(str(error)), charge=entry, rebuy=rebuy)
                    )
                    outcomes.append((call, error))
                    continue
                completions.append(Completion(call.key, stored, entry))
                outcomes.append((call, result))
        kept = await self._committer.commit(completions, failures)
        self._ledger.settle(spec, sum(reserved for _, _, reserved in requests), charged)
        for call, outcome in outcomes:
            if isinstance(outcome, ToolError):  # answered, unusable: a live call that failed
                self.stats.count(spec.id, "live")
                self._settle(call, None, outcome)
            elif call.key in kept:
                self._settle_cached(call, kept[call.key])
            else:
                self._settle(call, outcome)

    async def _fail(
        self,
        spec: ToolSpec,
        chunk: list[ToolCall],
        error: ToolError,
        *,
        claimed: bool,
        in_doubt: bool = False,
    ) -> None:
        if claimed:
            rebuy = isinstance(error, _LostJob)
            await self._committer.commit(
                failures=[
                    Failure(c.key, redact(str(error)), in_doubt=in_doubt, rebuy=rebuy)
                    for c in chunk
                ]
            )
        for call in chunk:
            self._settle(call, None, error)

    async def settle_in_flight(self) -> None:
        """Wait for every request already sent to finish and be recorded (a stop)."""
        await self._sending.idle()

    async def close(self) -> None:
        """The attempt ends: stop retrying, and waiting for receipts other workers hold
        (their calls' rows stay pending)."""
        await self._lane_tasks.close()
        await self._retrying.close()
        await self._waits.close()


class _Held:
    """The gate slots a wave holds, one per request, each given back once it is answered."""

    __slots__ = ("count", "gate")

    def __init__(self, gate: RateGate, count: int) -> None:
        self.gate = gate
        self.count = count

    def free(self, count: int = 1) -> None:
        count = min(count, self.count)
        if count > 0:
            self.count -= count
            self.gate.release(count)


@dataclass(slots=True, eq=False)
class _Lane:
    """A tool's requests waiting for its gate, and the pump that sends them."""

    requests: deque[list[ToolCall]] = field(default_factory=deque)
    pump: asyncio.Task[None] | None = None


def _take(requests: deque[list[ToolCall]], count: int) -> list[list[ToolCall]]:
    return [requests.popleft() for _ in range(count)]


class _Sending:
    """How many requests are between their claim and their record; a stop waits for none."""

    def __init__(self) -> None:
        self.count = 0
        self._idle: asyncio.Event | None = None

    @contextmanager
    def __call__(self) -> Iterator[None]:
        self.count += 1
        try:
            yield
        finally:
            self.count -= 1
            if not self.count and self._idle is not None:
                self._idle.set()

    async def idle(self) -> None:
        while self.count:
            self._idle = asyncio.Event()
            await self._idle.wait()


_LIVE = Execution("live")
_PLANNED = Execution("planned")


def _planned(spec: ToolSpec) -> ToolResult:
    """What a planned call answers: not found, at no cost (so a waterfall goes on)."""
    return ToolResult(
        tool=spec.id, data=None, execution=_PLANNED, outputs=spec.outputs, lists=spec.lists
    )


def too_large(size: int, limit: int) -> str:
    """Why a value over the cell limit is not stored, and what to do instead."""
    return (
        f"the value is {size / 1e6:.1f} MB, over the cell limit of {limit / 1e6:g} MB. Keep a "
        "smaller part of it (or a link to it), or raise the limit with "
        "pl.run(..., cell_limit=BYTES)"
    )


_UNREACHABLE = frozenset({"timeout", "connection_error", "protocol_error"})


class _LostJob(ToolError):
    """The provider lost an async job it accepted (and charged)."""

    def __init__(self, tool: str, error: ToolError) -> None:
        super().__init__(
            tool,
            f"the provider no longer knows the job it accepted ({error.provider_message}). "
            "It is bought again when the run is resumed.",
            status=error.status,
            code="unknown_job",
            request_id=error.request_id,
        )


def _cached(spec: ToolSpec, stored: bytes) -> ToolResult:
    return ToolResult.from_json(
        loads(stored), outputs=spec.outputs, lists=spec.lists, source="cache", cost=0.0
    )


def _refused(error: BaseException) -> bool:
    """The provider refused the caller, not the input: a wrong token, an unknown tool."""
    return isinstance(error, ToolError) and (
        error.status in (401, 403) or error.code == "unknown_tool"
    )


def _held(receipt: Receipt | None, now: float) -> bool:
    return (
        receipt is not None
        and receipt.status is ReceiptStatus.RUNNING
        and lease_live(receipt.owner, receipt.lease_until, now)
    )


def _in_doubt_error(spec: ToolSpec, cause: ToolError | str | None) -> ToolError:
    what = cause.provider_message if isinstance(cause, ToolError) else cause or "unknown cause"
    return ToolError(
        spec.id,
        f"in doubt: {what}. The request may have reached the provider and been charged, and "
        f"{spec.id} would not recognise a repeat, so it was not sent again. To buy it again, "
        "resume with --retry-in-doubt (pl.run(..., retry_in_doubt=True)).",
        status=cause.status if isinstance(cause, ToolError) else None,
        code="in_doubt",
        request_id=cause.request_id if isinstance(cause, ToolError) else None,
    )


def _cause(error: BaseException) -> str:
    """A failed call's cause, short enough to count failures by (``15 x 401 from ...``)."""
    if isinstance(error, ToolError):
        what = str(error.status) if error.status else error.code or "error"
        return redact(  # counted in the run's stats, which are stored
            f"{what} from {error.tool}"
            + (f" ({error.code})" if error.status and error.code else "")
        )
    return type(error).__name__
