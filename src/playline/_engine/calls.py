"""Executing tool calls so that nothing is paid twice (SEMANTICS.md 7-14, 24-27).

``CallExecutor.execute(spec, calls)`` takes calls to one tool and queues them; each call's
future settles as it ends, never raising for a failed call. A call moves through the states
of ``lifecycle.py`` (drawn in docs/architecture.md):

1. **Looked up.** Calls with the same receipt key share one execution (one owner, the rest
   followers, also across passes while the owner is in flight); a completed receipt answers
   at once (one lookup for the whole pass).
2. **Claimed.** The rest wait in their tool's lane, packed into requests of up to the tool's
   batch size. One pump a lane sends them in waves as the gate (breaker, concurrency cap,
   rate limit) lets them through. Just before a wave is sent it reserves its worst-case cost
   against the budget and **claims** its receipts (one transaction): the claim records the
   intent and the idempotency keys, so a crash from here on leaves the receipts *in doubt*,
   and a resume re-sends them with the same keys or fails them.
3. **Sent.** A failed send follows ``tools/_retry.py``: a 429 or a transient failure goes back
   to its lane, still claimed, after its pause; a failure that may have charged is never
   repeated blindly. An async job is polled to its end, with no slot held.
4. **Recorded, then settled.** Results and their charges are written together
   (``commits.py``), then the calls settle (``settle``, the only place a call resolves): a row
   never goes on with a result the store does not hold.

Stopping (``drain.py``): requests not yet sent are dropped at once (their receipts released);
those sent finish and are recorded; async jobs get ``JOB_GRACE`` seconds, then stay on their
receipts for a resume, counted in doubt.

A call with ``fresh_since`` (a refreshed column) takes a receipt completed before that time
as stale and buys it again (``force``), once per run; with a ``Planner`` (``planning.py``:
``playline plan``) the calls no receipt answers are counted instead of sent.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import secrets
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, overload

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
    Answer,
    Claim,
    ClaimOutcome,
    ClaimResult,
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
from ..tools import Charged, Execution, Jobs, JobState, ToolResult, ToolSpec
from ..tools._gates import RateGate, ToolGates
from ..tools._retry import Verdict, decide, maybe_charged, provider_failure
from .commits import GroupCommit
from .drain import BUDGET, Drain, Stopped, escaped
from .events import EventLog, preview
from .governance import Governor, RetryBudgetExceeded
from .ledger import Ledger
from .lifecycle import ENDS, CallState, move, settled
from .options import DEFAULT_CELL_LIMIT, RunOptions
from .planning import Planner
from .scope import RowScope
from .taskgroups import TaskSet

__all__ = [
    "DEFAULT_CELL_LIMIT",
    "JOB_GRACE",
    "CallExecutor",
    "CallState",
    "CallStats",
    "ToolCall",
    "too_large",
]

MAX_POLL_FAILURES = 6  # transient errors in a row while polling an async job
_RECEIPT_POLL_MAX = 1.0  # seconds between looks at a receipt another worker holds
JOB_GRACE = 30.0  # seconds a stop lets submitted async jobs finish

QUEUED, LOOKED_UP, CLAIMED, SENT = (
    CallState.QUEUED, CallState.LOOKED_UP, CallState.CLAIMED, CallState.SENT
)  # fmt: skip
PENDING_JOB, RECORDED, ANSWERED, SHARED = (
    CallState.PENDING_JOB, CallState.RECORDED, CallState.ANSWERED, CallState.SHARED
)  # fmt: skip
HELD, PLANNED, IN_DOUBT, FAILED, STOPPED, SETTLED = (
    CallState.HELD, CallState.PLANNED, CallState.IN_DOUBT, CallState.FAILED,
    CallState.STOPPED, CallState.SETTLED,
)  # fmt: skip
_OVER = ENDS | {SETTLED}
_UNPAID = ("cache", "in_flight")  # a call answered by another's purchase
T = TypeVar("T")


@dataclass(slots=True, eq=False)
class ToolCall:
    """One call of a tool with one input, from a row (or a play) to its settled result."""

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
    on_settle: Callable[[ToolCall], None] | None = None  # told synchronously as it settles
    job: bytes | None = None  # an async tool's submitted job, from the receipt
    generation: int = 1
    resent: bool = False  # its request may have reached the provider before (in doubt)
    fresh_since: float | None = None  # a receipt completed before this is bought again
    state: CallState = QUEUED  # where it is in its life (lifecycle.py)
    # its input as written is another spelling of the input it is keyed on (case, spaces: the
    # tool's normalize=): answered by this run's purchase, a normalised twin answered it
    respelled: bool = False

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
    # calls of another spelling than their key's that a purchase of this run answered (an
    # identical call in flight, or its receipt): not paid (``ToolCall.respelled``)
    twins: int = 0
    by_tool: dict[str, dict[str, int]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)  # failed calls by cause
    # a cause that names no status (a tool's own exception, a timeout): its first message,
    # which says what the cause does not ("No price for the model ...")
    first: dict[str, str] = field(default_factory=dict)

    def count(self, tool: str, what: str, n: int = 1) -> None:
        setattr(self, what, getattr(self, what) + n)
        per = self.by_tool.setdefault(tool, {})
        per[what] = per.get(what, 0) + n

    def failed_with(self, error: BaseException) -> None:
        """A failed call counted by its cause (``_cause``)."""
        cause = _cause(error)
        self.errors[cause] = self.errors.get(cause, 0) + 1
        if cause not in self.first and not getattr(error, "status", None):
            said = error.provider_message if isinstance(error, ToolError) else str(error)
            if first := preview(redact(" ".join(said.split())), 160):
                self.first[cause] = first

    def causes(self) -> dict[str, int]:
        """The failed calls by cause, a cause with its first message where it has one
        (``exception from ollama.chat: PlayDefinitionError: No price for ...``)."""
        return {
            f"{cause}: {self.first[cause]}" if cause in self.first else cause: count
            for cause, count in self.errors.items()
        }


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
        owner: str,
        drain: Drain,
        options: RunOptions,
        planner: Planner | None = None,
    ) -> None:
        self._io = StoreIO(store)
        self._clock = clock
        self._gates = gates
        self._governor = governor
        self._ledger = ledger
        self._events = events
        self._tools = tools
        self._owner = owner
        self._drain = drain
        self._options = options  # its lease is renewed by the attempt's supervisor
        self._planner = planner
        self._committer = GroupCommit(store, owner, clock.now, options.lease)
        self._in_flight: dict[str, ToolCall] = {}  # receipt key -> its unsettled owner
        self._unsettled = _Unsettled()  # what a stop waits for: requests sent, jobs polled
        self._lanes: dict[str, _Lane] = {}  # tool id -> its requests waiting for the gate
        self._tasks = TaskSet()  # the lanes' pumps, their waves, retries, waits and polls
        self.stats = CallStats()
        # requests are named prefix-1, prefix-2, ...
        self._request_names = map(f"{secrets.token_hex(4)}-{{}}".format, itertools.count(1))
        self.progress = 0  # calls settled: the watchdog's sign of life
        self._answers = _Answers(since=clock.now())

    def gate_of(self, spec: ToolSpec) -> RateGate:
        return self._gates[self._target(spec)]

    def _target(self, spec: ToolSpec) -> ToolSpec:
        return self._tools[spec.batch.via] if spec.batch and spec.batch.via else spec

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    # queued -> looked up
    async def execute(self, spec: ToolSpec, calls: Sequence[ToolCall]) -> None:
        """Look up the receipts of ``calls``, then queue the rest in the tool's lane.

        It returns once they are queued; each call's future settles as it ends."""
        owners = self._owners(calls)
        if not owners:
            return
        try:
            await self._look_up(owners)
        except BaseException as exc:  # the store failed (failed), or a cancel (stopped)
            self._abandon(spec, [_Request(owners)], exc)
            if not isinstance(exc, PlaylineError):
                raise
            return
        pending = [c for c in owners if c.state is LOOKED_UP]
        if self._planner is not None:  # a plan: count what would be sent, send nothing
            self._planner.record(spec, pending, answered=len(owners) - len(pending))
            for call in pending:
                self.settle(call, PLANNED, _planned(spec))
            return
        if pending:
            size = spec.max_batch
            chunks = (pending[i : i + size] for i in range(0, len(pending), size))
            self._enqueue(spec, [_Request(chunk) for chunk in chunks])

    @property
    def answers_groups(self) -> bool:
        """Whether a row group's calls are worth looking up before they queue (``answer``):
        receipts answered calls lately, and no plan is counting them."""
        return self._answers.likely and self._planner is None

    # queued -> looked up, before the dispatcher
    async def answer(self, calls: Sequence[ToolCall]) -> None:
        """Answer the calls that completed receipts answer (one lookup for the lot): the
        one call each row of a group returned as its cell (``datasets.py``), so the rows a
        re-run finds done go on together with no call queued. The others are looked up and
        queued by their rows; on a store failure they queue as made (their execution meets
        it), and on a cancel they stop."""
        try:
            await self._look_up(calls)
        except PlaylineError:
            return
        except BaseException:
            for call in calls:
                if call.state not in _OVER:
                    self.settle(call, STOPPED, error=asyncio.CancelledError())
            raise

    def _owners(self, calls: Sequence[ToolCall]) -> list[ToolCall]:
        """Attach calls whose key is already being executed to that call; the rest own."""
        owners: list[ToolCall] = []
        in_flight = self._in_flight
        for call in calls:
            running = None if call.force else in_flight.get(call.key)
            if running is not None and running.state is not SETTLED:
                move(call, SHARED)
                running.followers.append(call)
                continue
            owners.append(call)
            if not call.force:
                in_flight[call.key] = call
        return owners

    async def _look_up(self, calls: Sequence[ToolCall]) -> None:
        """Answer the calls that completed receipts answer (one lookup). A refreshed call
        whose receipt is older than its refresh is bought again (``force``). Calls looked
        up already (``answer``) are left as they are."""
        calls = [c for c in calls if c.state is QUEUED]
        asked = [c for c in calls if not c.force and (self._answers.likely or c.fresh_since)]
        found: dict[str, Answer] = {}
        if asked:
            found = await self._io(self._io.store.find_answers, [c.key for c in asked])
            self._answers.likely = bool(found)
        for call in calls:
            answer = None if call.force else found.get(call.key)
            if answer is None:
                move(call, LOOKED_UP)
            elif call.fresh_since is not None and answer.updated_at < call.fresh_since:
                call.force = True  # refreshed: bought again (its followers share it)
                move(call, LOOKED_UP)
            else:
                self._bought_by(call, answer.run_id, answer.updated_at)
                self.settle(call, ANSWERED, _cached(call.spec, answer.result))

    def _bought_by(self, call: ToolCall, run_id: str, at: float) -> None:
        """A receipt ``run_id`` completed ``at`` answers ``call``: one another run or an
        earlier attempt bought is no twin of this attempt's (it may be the call's own earlier
        purchase), so it is not counted."""
        if call.respelled and (run_id != self._events.run_id or at < self._answers.since):
            call.respelled = False

    # the lanes: one per tool, its requests sent in waves
    def _enqueue(
        self, spec: ToolSpec, requests: Sequence[_Request], *, first: bool = False
    ) -> None:
        """Queue requests in the tool's lane (``first``: ahead of the others), starting its
        pump if it is not running. Claimed requests (retries) lead the lane: they hold the
        budget that requests waiting for it need."""
        lane = self._lanes.get(spec.id)
        if lane is None:
            target = self._target(spec)
            lane = self._lanes[spec.id] = _Lane(spec, target, self._gates[target])
        queue = lane.requests
        if not first:
            queue.extend(requests)
        elif all(r.claimed for r in requests):
            queue.extendleft(reversed(requests))
            if lane.retried is not None:
                lane.retried.set()
        else:  # after the claimed ones
            claimed = next((i for i, r in enumerate(queue) if not r.claimed), len(queue))
            for offset, request in enumerate(requests):
                queue.insert(claimed + offset, request)
        if lane.pump is None or lane.pump.done():
            lane.pump = self._tasks.spawn(self._pump(lane))
            if lane.pump is None:  # the attempt has ended: nothing is sent any more
                self._abandon(
                    spec, _take(lane.requests, len(lane.requests)), asyncio.CancelledError()
                )

    async def _pump(self, lane: _Lane) -> None:
        """Send the lane's requests in waves, as the gate lets them through.

        One pump per tool takes every slot the gate frees, so the requests of all passes go
        out in waves as large as the tool's concurrency allows. A wave takes at most half
        the concurrency, so the next wave is claimed while one is sent and recorded."""
        gate, requests = lane.gate, lane.requests
        try:
            await self._ask_balance(lane.spec)
            while requests:
                error = self._ledger.exhausted(lane.spec) or _broken(lane)
                if error is not None:
                    while requests:  # (retries may come back meanwhile)
                        await self._fail(lane.spec, requests.popleft(), error)
                    return
                if self._drain.stopping:
                    while requests:
                        await self._drop(lane.spec, requests.popleft())
                    return
                first = requests[0]
                if not first.claimed and self._ledger.waits(lane.spec, _worst(first.calls[:1])):
                    # the budget would defer it: wait here, spending no rate token on it
                    await self._drain.until_stop(self._room(lane))
                    continue
                blocked = self._gates.blocked_for(lane.target)
                if blocked:  # the provider blocks the account: nothing goes out until then
                    await self._drain.until_stop(self._clock.sleep(blocked))
                    continue
                wanted = min(lane.units(requests), max(1, gate.concurrency // 2))
                granted = await self._drain.until_stop(gate.acquire(wanted))
                if isinstance(granted, Stopped):
                    continue
                _repack(requests, lane.spec.max_batch)  # what queued while it waited
                wave = lane.take(granted)
                held = lane.units(wave)
                if held < granted:
                    gate.release(granted - held)
                self._tasks.spawn(self._send_wave(lane, _Held(gate, held), wave))
        except BaseException as exc:  # settle whatever is left; never leave a row hanging
            self._abandon(lane.spec, _take(requests, len(requests)), exc)
            if not isinstance(exc, Exception):
                raise

    async def _ask_balance(self, spec: ToolSpec) -> None:
        """Once per run and provider account: what it has left, from its provider's account
        endpoint (``playline.providers``), as a budget of the tools it counts. A provider that
        cannot say (down, a refused key) sets none: the calls themselves will tell."""
        balance = getattr(spec.transport, "balance", None)
        if balance is None or not self._ledger.ask_balance(spec):
            return
        try:
            left = await self._drain.until_stop(balance())
        except Exception as exc:
            self._events.log(redact(f"{spec.id}: the account's balance could not be read ({exc})"))
            return
        if isinstance(left, int | float):
            self._ledger.limit_account(spec, float(left))

    async def _room(self, lane: _Lane) -> None:
        """Wait until a request in flight settles (it may leave room in the budget) or a
        retry comes back to the lane: it holds budget of its own, and goes first."""
        settled = asyncio.ensure_future(self._ledger.settled(self._ledger.settles))
        lane.retried = asyncio.Event()
        retried = asyncio.ensure_future(lane.retried.wait())
        try:
            await asyncio.wait((settled, retried), return_when=asyncio.FIRST_COMPLETED)
        finally:
            lane.retried = None
            settled.cancel()
            retried.cancel()

    async def _send_wave(self, lane: _Lane, held: _Held, wave: list[_Request]) -> None:
        """One wave to its end: claimed, sent and recorded.

        The wave's claims are one transaction. Requests the budget defers go back to the
        lane at once (its pump waits until the requests sent settle). A request gives its
        gate slot back when it is answered and is recorded by the group commit with whatever
        else is being claimed or recorded then: a slow request holds back neither the
        others' slots nor their results."""
        mine = wave  # what this wave settles: after the claim, only the requests it sends
        try:
            with self._unsettled.sending():
                ready = mine = await self._claim_wave(lane, held, wave)
                if self._drain.stopping:  # since the pump let it out: nothing is sent
                    for request in ready:
                        await self._drop(lane.spec, request)
                    return
                if not ready:
                    return
                exhausted = self._ledger.exhausted(lane.spec)
                if exhausted is not None:  # since the pump let it out
                    lane.gate.refund(lane.units(ready))
                    for request in ready:
                        await self._fail(lane.spec, request, exhausted)
                    return
                blocked = self._gates.blocked_for(lane.target)
                if blocked:  # since the pump let it out: back to the lane once it ends
                    lane.gate.refund(lane.units(ready))
                    due = self._clock.monotonic() + blocked
                    for request in ready:
                        self._tasks.spawn(self._retry(lane, request, due))
                    return
                self._sent(lane, ready)
                if lane.target.transport.inline:  # a plain function: one after the other
                    sent = [(r, await self._send(lane, held, r)) for r in ready]
                    failed = [(r, s) for r, s in sent if isinstance(s, ToolError)]
                    if failed:  # they end together, in one commit (no task per request)
                        await asyncio.gather(*(self._failed(lane, r, e) for r, e in failed))
                    await self._complete(lane.spec, [r for r, s in sent if s is True])
                else:
                    await asyncio.gather(*(self._send_one(lane, held, r) for r in ready))
        except BaseException as exc:
            self._abandon(lane.spec, mine, exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            held.free(held.count)

    async def _claim_wave(self, lane: _Lane, held: _Held, wave: list[_Request]) -> list[_Request]:
        """The wave's requests to send: fresh ones claimed, retries claimed before. The
        gate gets back the slots and rate tokens of the others."""
        fresh = [r for r in wave if not r.claimed]
        ready, deferred = await self._claim(lane.spec, fresh) if fresh else ([], [])
        ready.extend(r for r in wave if r.claimed)
        unsent = lane.units(wave) - lane.units(ready)  # deferred, answered or held at the claim
        held.free(unsent)
        lane.gate.refund(unsent)  # a token is spent only by a request sent
        if deferred:
            self._enqueue(lane.spec, deferred, first=True)
        return ready

    async def _send_one(self, lane: _Lane, held: _Held, request: _Request) -> None:
        if await self._went(lane, request, await self._send(lane, held, request)):
            await self._complete(lane.spec, [request])

    # claimed -> sent -> recorded, pending job, or back to claimed for a retry
    async def _send(self, lane: _Lane, held: _Held, request: _Request) -> bool | ToolError:
        """Send one request: True when it was answered (its answers are on it), False when
        it is an async job now polled, or the error it failed with."""
        for call in request.calls:
            move(call, SENT)
        request.sends += 1
        spec, target = lane.spec, lane.target
        bulk = lane.bulk
        spend = None
        try:
            if lane.gate.tokens is not None:  # its estimate into the token windows (waits)
                spend = await lane.gate.tokens.take([c.input for c in request.calls])
            if target.jobs is None:
                request.answers = await self._transport(spec, target, request.calls)
            elif bulk is not None:
                waiting = await self._submit_bulk(target, bulk, request)
            else:
                state = await self._submit(spec, target, target.jobs, request.calls[0])
        except ToolError as exc:  # before its slot lets the next request out:
            if exc.exhausted:
                self._ledger.exhaust(spec, exc)
            elif exc.outcome == "blocked":
                self._gates.block(target, exc.retry_after or 0.0)
            return exc
        finally:
            if spend is not None:  # corrected by what its answers said they used
                spend.settle()
            if lane.remaining is not None:  # what the provider says is left of its window
                _heard(lane.gate, lane.remaining)
            held.free(len(request.calls) if lane.per_record else 1)
        lane.gate.succeeded()
        if target.jobs is None or (bulk is not None and not waiting):
            return True
        if bulk is None and state.done:
            request.answers = [state.result]
            return True
        for call in request.calls:
            move(call, PENDING_JOB)
        if bulk is not None:
            self._tasks.spawn(self._poll_bulk(lane, bulk, request, waiting))
        else:
            self._tasks.spawn(self._poll(lane, request, state))
        return False

    async def _went(self, lane: _Lane, request: _Request, sent: bool | ToolError) -> bool:
        """Whether the request was answered (to be recorded); a failure is retried or fails
        its calls. A wave's failures end together, in one commit."""
        if isinstance(sent, ToolError):
            await self._failed(lane, request, sent)
            return False
        return sent

    async def _failed(self, lane: _Lane, request: _Request, error: ToolError) -> None:
        """A send failed: wait and send it again (back to its lane, still claimed) or fail
        it, in doubt when the provider may have charged it (``tools/_retry.py``)."""
        spec = lane.spec
        request.maybe_charged |= maybe_charged(error, spec)
        decision = decide(error, spec, request.sends)
        if decision.verdict in (Verdict.WAIT, Verdict.REPEAT):
            wait = decision.delay
            if error.throttled:
                wait = lane.gate.throttled(error.retry_after)
            try:
                self._governor.retry(spec.id)
            except RetryBudgetExceeded as exc:
                exhausted = ToolError(spec.id, str(exc), code="retry_budget")
                await self._fail(spec, request, exhausted, in_doubt=request.maybe_charged)
                return
            for call in request.calls:
                move(call, CLAIMED)
            self._tasks.spawn(self._retry(lane, request, self._clock.monotonic() + wait))
            return
        if provider_failure(error):
            lane.gate.failed(_cause(error))
        in_doubt = decision.verdict is Verdict.FAIL_IN_DOUBT or request.maybe_charged
        await self._fail(
            spec, request, _in_doubt_error(spec, error) if in_doubt else error, in_doubt=in_doubt
        )

    async def _retry(self, lane: _Lane, request: _Request, due: float) -> None:
        """At ``due`` (monotonic), the request goes back to its lane, first, with the
        others due then; a stop cuts the wait short (its lane drops it)."""
        try:
            wait = max(0.0, due - self._clock.monotonic())
            await self._drain.until_stop(self._clock.sleep(wait))
        except BaseException:
            self._abandon(lane.spec, [request], asyncio.CancelledError())
            raise
        self._enqueue(lane.spec, [request], first=True)

    # budget and receipts: looked up -> claimed (or answered, held, in doubt)
    def _reserve(self, spec: ToolSpec, worst: list[int]) -> int | None:
        """Reserve the worst-case cost of the calls (``worst``: each one's); returns how many
        fit, the first ones (fewer when the budget is nearly spent: the rest wait), 0 when
        none fits and nothing is in flight (the budget is spent), or None: none fits now, but
        requests already sent hold their worst case and what they really cost may leave
        room."""
        allowed = self._ledger.reserve(spec, worst)
        if allowed or not self._ledger.in_flight(spec):
            return allowed
        return None

    async def _claim(
        self, spec: ToolSpec, requests: list[_Request]
    ) -> tuple[list[_Request], list[_Request]]:
        """Reserve the budget and claim the receipts of requests about to be sent (one
        transaction, shared with whatever else is claiming now); returns the requests to
        send, each with the calls it still holds, and those deferred until the requests
        sent settle (the budget is nearly spent)."""
        kept, deferred = self._budget(spec, requests)
        if not kept:
            return [], deferred
        claims = [self._claim_of(spec, request) for request in kept]
        try:
            outcomes = iter(await self._committer.claim([c for cs in claims for c in cs]))
        except BaseException:
            for request in kept:
                self._ledger.release(spec, request.reserved)
            raise
        ready: list[_Request] = []
        for request in kept:
            send = [c for c in request.calls if self._claimed(spec, c, next(outcomes))]
            reserved = request.reserved
            if len(send) < len(request.calls):
                reserved = _worst(send)
                self._ledger.release(spec, request.reserved - reserved)
            if send:
                ready.append(_Request(send, reserved=reserved, claimed=True))
        return ready, deferred

    def _budget(
        self, spec: ToolSpec, requests: list[_Request]
    ) -> tuple[list[_Request], list[_Request]]:
        """The requests (or their first calls) the budget lets out now, and those deferred.
        Over budget with nothing in flight, the rest fail and the attempt stops."""
        kept: list[_Request] = []
        deferred: list[_Request] = []
        resolve = (
            self._ledger.in_doubt_anywhere()
            and spec.in_doubt == "resend"
            and not self._options.retry_in_doubt
        )
        for number, request in enumerate(requests):
            calls = request.calls
            if resolve:  # sent again with its key: not paid twice, reserved below
                for call in calls:
                    if not call.force:
                        self._ledger.resolve(call.key)
            worst = Ledger.worst(spec, [call.input for call in calls])
            reserved = self._reserve(spec, worst)
            if reserved is None or (reserved == 0 and self._ledger.exhausted(spec)):
                # later, once the requests sent have settled; or the provider account is
                # used up, which the lane's pump tells its calls
                deferred.extend(requests[number:])
                break
            if reserved == 0:  # the budget is spent: these and every later call fail
                error = self._ledger.exceeded(spec, worst)
                self._drain.stop(BUDGET, error)
                for call in calls:
                    self.settle(call, STOPPED, error=error)
                continue
            if reserved < len(calls):  # the budget fits the first ones now; the rest wait
                deferred.append(_Request(calls[reserved:]))
            kept.append(_Request(calls[:reserved], reserved=sum(worst[:reserved])))
        return kept, deferred

    def _claim_of(self, spec: ToolSpec, request: _Request) -> list[Claim]:
        name = next(self._request_names)
        resend = spec.in_doubt == "resend"
        return [
            Claim(
                key=c.key,
                tool=spec.id,
                run_id=self._events.run_id,
                force=c.force,
                resend=resend,
                retry_in_doubt=self._options.retry_in_doubt,
                retry_failed=self._options.retry_failed,
                request=name,
            )
            for c in request.calls
        ]

    def _claimed(self, spec: ToolSpec, call: ToolCall, claim: ClaimResult) -> bool:
        """Move ``call`` as its claim says; True when it is this worker's to send."""
        receipt = claim.receipt
        outcome = claim.outcome
        if outcome in (ClaimOutcome.OWNED, ClaimOutcome.COMPLETED):
            self._ledger.resolve(call.key)  # was it in doubt: settled from here on
        if outcome is ClaimOutcome.OWNED:
            call.job = receipt.job
            call.generation = receipt.generation
            call.resent = claim.resent
            move(call, CLAIMED)
            return True
        if outcome is ClaimOutcome.COMPLETED:
            assert receipt.result is not None
            self._answers.likely = True  # a receipt the lookups did not find
            self._bought_by(call, receipt.run_id, receipt.updated_at)
            self.settle(call, ANSWERED, _cached(spec, receipt.result))
        elif outcome is ClaimOutcome.HELD:
            move(call, HELD)
            self._tasks.spawn(self._wait_for(spec, call))
        elif outcome is ClaimOutcome.LOST:  # paid and gone: bought again when asked
            lost = ToolError(spec.id, receipt.error or "its result was lost", code="result_lost")
            self.settle(call, FAILED, error=lost)
        else:
            if spec.cost.priced:  # its worst case, known now that its input is (LLM calls')
                self._ledger.doubt_calls(spec, {call.key: call.input})
            self.settle(call, IN_DOUBT, error=_in_doubt_error(spec, receipt.error))
        return False

    async def _wait_for(self, spec: ToolSpec, call: ToolCall) -> None:
        """Another live worker owns this call: wait for its result, or take over if it dies
        (back to the lane). A store that announces changes (PostgreSQL) wakes the wait once
        the receipt is finished; it is looked at anyway, with backoff, for a holder that died."""
        try:
            deadline = self._clock.monotonic() + self._options.receipt_wait
            delay = 0.05
            with watch(self._io.store.changes(), RECEIPTS, call.key) as finished:
                while self._clock.monotonic() < deadline:
                    await finished.wait(self._clock, delay)
                    delay = min(delay * 2, _RECEIPT_POLL_MAX)
                    receipt = (await self._io(self._io.store.find_receipts, [call.key])).get(
                        call.key
                    )
                    if receipt is not None and receipt.status is ReceiptStatus.COMPLETED:
                        assert receipt.result is not None
                        self._bought_by(call, receipt.run_id, receipt.updated_at)
                        self.settle(call, ANSWERED, _cached(spec, receipt.result))
                        return
                    if not _held(receipt, self._clock.now()):
                        move(call, LOOKED_UP)  # failed, released, or its holder is gone
                        self._enqueue(spec, [_Request([call])], first=True)
                        return
            self.settle(call, FAILED, error=_wait_timeout(spec, self._options.receipt_wait))
        except BaseException as exc:
            self._abandon(spec, [_Request([call])], exc)
            if not isinstance(exc, Exception):
                raise

    # async jobs: sent -> pending job -> recorded
    async def _submit(
        self, spec: ToolSpec, target: ToolSpec, jobs: Jobs, call: ToolCall
    ) -> JobState:
        """Submit an async call once and keep its job on the receipt, so a resumed run polls
        it instead of paying again; a job kept from an earlier attempt is polled."""
        if call.job is not None:
            return JobState(done=False, job=loads(call.job))
        state = await jobs.submit(target, call.input, call.idempotency_key)
        if not state.done:
            call.job = dumps(state.job, what=f"The job of tool {spec.id}")
            await self._io(self._io.store.save_jobs, [(call.key, call.job)], owner=self._owner)
        return state

    async def _submit_bulk(
        self, target: ToolSpec, jobs: BulkJobs, request: _Request
    ) -> dict[bytes, dict[int, int]]:
        """Submit the request's calls that have no job as one job, and keep it on their
        receipts with each call's place in it, so a resume polls it; returns the jobs to
        poll: each one's items, by the index of their call in the request (calls kept from
        an earlier attempt may come from several jobs)."""
        calls = request.calls
        request.answers = [None] * len(calls)
        waiting: dict[bytes, dict[int, int]] = {}
        fresh = []
        for index, call in enumerate(calls):
            if call.job is None:
                fresh.append(index)
                continue
            kept = loads(call.job)
            waiting.setdefault(dumps(kept["job"]), {})[kept["item"]] = index
        if not fresh:
            return waiting
        inputs = [calls[i].input for i in fresh]
        state = await jobs.submit_bulk(target, inputs, _Keys([calls[i] for i in fresh]))
        if state.done:  # answered at once
            for item, index in enumerate(fresh):
                request.answers[index] = state.result[item]
            return waiting
        job = dumps(state.job, what=f"The job of tool {target.id}")
        mine = waiting.setdefault(job, {})
        for item, index in enumerate(fresh):
            calls[index].job = dumps({"job": state.job, "item": item})
            mine[item] = index
        kept_jobs = [(calls[i].key, calls[i].job) for i in fresh]
        await self._io(self._io.store.save_jobs, kept_jobs, owner=self._owner)
        return waiting

    async def _poll_bulk(
        self, lane: _Lane, jobs: BulkJobs, request: _Request, waiting: dict[bytes, dict[int, int]]
    ) -> None:
        """Poll the request's jobs to their ends, then record the calls they answered. A
        job whose polls fail fails its calls as one job does (``_poll``), the others go on."""
        spec, calls = lane.spec, request.calls
        failures: dict[bytes, int] = {}
        interval = _Backoff(jobs, self._clock, bulk=True)
        try:
            with self._unsettled.polling():
                while waiting:
                    await self._poll_wait(next(interval))
                    for job, items in list(waiting.items()):
                        asked = {item: calls[i].input for item, i in items.items()}
                        try:
                            with self._gates.polling(lane.target):
                                state = await jobs.poll_bulk(lane.target, loads(job), asked)
                        except ToolError as exc:
                            failures[job] = failures.get(job, 0) + 1
                            error = self._poll_failed(spec, exc, failures[job])
                            if error is not None:
                                del waiting[job]
                                mine = _Request([calls[i] for i in items.values()], claimed=True)
                                await self._job_failed(spec, mine, error)
                            continue
                        failures.pop(job, None)  # answered: polls failing in a row count
                        if state.done:
                            del waiting[job]
                            for item, index in items.items():
                                request.answers[index] = state.result[item]
                        elif interval.expired():
                            del waiting[job]
                            mine = _Request([calls[i] for i in items.values()], claimed=True)
                            await self._job_failed(spec, mine, _still_pending(spec, job, interval))
                await self._complete(spec, [_answered(request)])
        except BaseException as exc:
            self._left_to_resume(spec, request, exc)
            if not isinstance(exc, Exception):
                raise

    async def _job_failed(self, spec: ToolSpec, request: _Request, error: ToolError) -> None:
        """A job's polls failed: its calls fail in doubt (it was submitted, so may have been
        charged), or, when its result expired, as lost. A poll that says the account is used
        up stops its other calls too, as a submit's answer does."""
        if error.exhausted:
            self._ledger.exhaust(spec, error)
        lost = error.code == "job_expired"
        await self._fail(spec, request, error, in_doubt=not lost, lost=lost)

    async def _poll(self, lane: _Lane, request: _Request, state: JobState) -> None:
        """Poll a submitted job to its end, then record it. Polls are free and safe to
        repeat. A job that fails to answer them was submitted, so may have been charged: its
        calls fail in doubt and the job stays on the receipt for a resume to poll."""
        spec, jobs = lane.spec, lane.target.jobs
        assert jobs is not None
        failures = 0
        interval = _Backoff(jobs, self._clock)
        try:
            with self._unsettled.polling():
                while not state.done:
                    await self._poll_wait(next(interval) if state.wait is None else state.wait)
                    try:
                        with self._gates.polling(lane.target):
                            state = await jobs.poll(lane.target, state.job, request.calls[0].input)
                    except ToolError as exc:
                        failures += 1
                        error = self._poll_failed(spec, exc, failures)
                        if error is not None:
                            await self._job_failed(spec, request, error)
                            return
                        await self._poll_wait(exc.retry_after or 0.25 * 2 ** (failures - 1))
                        continue
                    failures = 0  # polls failing in a row fail the job, not over its life
                    if not state.done and interval.expired():
                        await self._job_failed(
                            spec, request, _still_pending(spec, state.job, interval)
                        )
                        return
                request.answers = [state.result]
                await self._complete(spec, [request])
        except BaseException as exc:
            self._left_to_resume(spec, request, exc)
            if not isinstance(exc, Exception):
                raise

    def _left_to_resume(self, spec: ToolSpec, request: _Request, exc: BaseException) -> None:
        """Polling ended early (past a stop's grace, a cancel, an error): the jobs were
        submitted, so may have been charged. Their calls end in doubt (stopped, past the
        grace) and the jobs stay on their receipts for a resume to poll."""
        stopped = isinstance(exc, _PastGrace)
        self._abandon(spec, [request], asyncio.CancelledError() if stopped else exc, in_doubt=True)

    async def _poll_wait(self, seconds: float) -> None:
        """Wait before the next poll; past a stop's grace, the job is left to the resume."""
        grace_ends = self._unsettled.grace_ends
        if grace_ends is not None:
            left = grace_ends - self._clock.monotonic()
            if left <= 0:
                raise _PastGrace
            seconds = min(seconds, left)
        await self._clock.sleep(seconds)

    def _poll_failed(self, spec: ToolSpec, exc: ToolError, failures: int) -> ToolError | None:
        """The error a failed poll ends its job with, or None to poll again."""
        status = exc.status or 0
        if exc.code == "unknown_job":
            return _LostJob(spec.id, exc)
        again = exc.throttled or exc.outcome == "retryable"  # the provider said: ask later
        if not (again or status >= 500 or exc.code in _UNREACHABLE):
            return exc
        if failures >= MAX_POLL_FAILURES:
            return exc
        try:
            self._governor.retry(spec.id)
        except RetryBudgetExceeded as budget:
            return ToolError(spec.id, str(budget), code="retry_budget")
        return None

    # sending and recording
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

    def _sent(self, lane: _Lane, requests: list[_Request]) -> None:
        """Report requests going out: one event for a wave, however many requests it holds
        (a job kept from an earlier attempt is polled, not sent)."""
        if lane.target.jobs is not None:
            requests = [r for r in requests if r.calls[0].job is None]
        if not requests:
            return
        self.stats.requests += len(requests)
        data = {"tool": lane.spec.id, "size": sum(len(r.calls) for r in requests)}
        if len(requests) != 1:
            data["requests"] = len(requests)
        self._events.emit("batch", provider=lane.target.id, data=data)

    async def _complete(self, spec: ToolSpec, requests: list[_Request]) -> None:
        """Record the answers of sent requests in one transaction, then settle their calls:
        a row never goes on with a result the store does not hold."""
        if not requests:
            return
        record = _Record(spec, self._target(spec).in_doubt != "resend", self._options.cell_limit)
        ledgered = bool(spec.cost.credits) or self._options.ledger_all
        for request in requests:
            for call, raw in zip(request.calls, request.answers, strict=True):
                if isinstance(raw, ToolError):  # the provider refused this item alone
                    if raw.exhausted:
                        self._ledger.exhaust(spec, raw)
                    record.refused(call, raw)
                    continue
                again = call.resent or request.maybe_charged
                result, charged = record.result(call, raw, again=again)
                entry = (
                    self._entry(spec, call, result, charged)
                    if ledgered or charged is not None
                    else None
                )
                record.add(call, result, entry)
        try:
            kept = await self._committer.commit(record.completions, record.failures)
        except BaseException as exc:  # answered, maybe charged, and not recorded
            self._abandon(spec, requests, exc, in_doubt=True)
            if not isinstance(exc, Exception):
                raise
            return
        self._ledger.settle(spec, sum(r.reserved for r in requests), record.charged)
        for call, outcome in record.outcomes:
            if isinstance(outcome, ToolError):  # answered, unusable: a live call that failed
                self.stats.count(spec.id, "live")
                self.settle(call, FAILED, error=outcome)
            elif call.key in kept:
                self.settle(call, ANSWERED, _cached(spec, kept[call.key]))
            else:
                self.settle(call, RECORDED, outcome)

    def _entry(
        self, spec: ToolSpec, call: ToolCall, result: ToolResult, charged: Charged | None
    ) -> LedgerEntry:
        """The ledger row of a live call: the provider was called, usable result or not;
        with what the provider reported it charged, when it did (``charged``)."""
        scope = call.scope
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
        if charged is not None:
            entry.declared, entry.reported = charged.credits, charged.reported
        return entry

    async def _fail(
        self,
        spec: ToolSpec,
        request: _Request,
        error: ToolError,
        *,
        in_doubt: bool = False,
        lost: bool = False,
    ) -> None:
        """Fail a request's calls: recorded on their receipts when claimed, the budget it
        reserved given back (a call in doubt keeps its worst case counted; a ``lost`` one,
        paid with its result gone, is bought again only when asked). They fail even when
        the store cannot record it (their receipts' leases then run out)."""
        try:
            if request.claimed:  # a job lost or expired: buying it again is a new purchase
                rebuy = lost or isinstance(error, _LostJob)
                message = redact(str(error))
                await self._committer.commit(
                    failures=[
                        Failure(c.key, message, in_doubt=in_doubt, rebuy=rebuy, lost=lost)
                        for c in request.calls
                    ]
                )
        finally:
            self._release(spec, request, in_doubt=in_doubt)
            end = IN_DOUBT if in_doubt else FAILED
            for call in request.calls:
                if call.state not in _OVER:
                    self.settle(call, end, error=error)

    def _release(self, spec: ToolSpec, request: _Request, *, in_doubt: bool) -> None:
        """Give back a request's reservation (once); the worst case of its calls in doubt
        stays counted."""
        self._ledger.release(spec, request.reserved)
        request.reserved = 0
        if in_doubt and spec.cost.priced:
            self._ledger.doubt_calls(spec, {c.key: c.input for c in request.calls})

    async def _drop(self, spec: ToolSpec, request: _Request) -> None:
        """Stopping: a request not sent (again) lets go of its receipts and its budget, and
        its rows stay pending. The release is shielded from the attempt's end, which cancels
        what is left: a store call cancelled before its thread took it is never made."""
        self._release(spec, request, in_doubt=False)
        error = self._drain.error if self._drain.reason == BUDGET else None
        for call in request.calls:
            self.settle(call, STOPPED, error=error or asyncio.CancelledError())
        if request.claimed:
            keys = [c.key for c in request.calls]
            await asyncio.shield(self._io(self._io.store.release_receipts, keys, owner=self._owner))

    # ... -> settled
    def settle(
        self,
        call: ToolCall,
        end: CallState,
        result: ToolResult | None = None,
        *,
        error: BaseException | None = None,
    ) -> None:
        """The one place a call resolves: it ends as ``end`` (``lifecycle.ENDS``) with
        ``result`` or ``error``, and so, synchronously, do its followers (batching counts
        stay exact). A call whose waiter gave up (its future cancelled) still settles them."""
        settled(call, end)
        if self._in_flight.get(call.key) is call:
            del self._in_flight[call.key]  # no later call may follow a settled owner
        if not call.future.done():
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
                if call.respelled and source in _UNPAID:
                    self.stats.count(call.spec.id, "twins")
            else:
                self._resolve_error(call, error)
            if call.on_settle is not None:
                call.on_settle(call)
        if call.followers:
            followers, call.followers = call.followers, []
            shared = None if result is None else result.with_source("in_flight", cost=0.0)
            for follower in followers:
                self.settle(follower, SHARED, shared, error=error)

    def _resolve_error(self, call: ToolCall, error: BaseException) -> None:
        if isinstance(error, asyncio.CancelledError):
            call.future.cancel()
        else:
            call.future.set_exception(error)
            if isinstance(error, BudgetExceeded):  # refused before it was sent: not a failure
                self.stats.count(call.spec.id, "not_sent")
            else:
                self._count_failed(call.spec, error)

    def _abandon(
        self,
        spec: ToolSpec,
        requests: Sequence[_Request],
        exc: BaseException,
        *,
        in_doubt: bool = False,
    ) -> None:
        """Settle the calls of ``requests`` not settled yet with ``exc`` and give back their
        budget: stopped when it is no error (a cancellation), else failed, or in doubt when
        the provider may have charged them (their worst case stays counted)."""
        stopped = not isinstance(exc, Exception)
        error = asyncio.CancelledError() if stopped else exc
        end = STOPPED if stopped else IN_DOUBT if in_doubt else FAILED
        for request in requests:
            self._release(spec, request, in_doubt=in_doubt)
            for call in request.calls:
                if call.state not in _OVER:
                    self.settle(call, end, error=error)

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
        self.stats.failed_with(error)

    # the attempt's end
    async def settle_in_flight(self) -> None:
        """A stop: wait for every request already sent to be recorded, and for the async
        jobs submitted to end (for at most ``JOB_GRACE`` seconds: the rest are polled on
        resume, counted in doubt meanwhile)."""
        unsettled = self._unsettled
        await unsettled.sending.idle()
        if unsettled.grace_ends is None:
            unsettled.grace_ends = self._clock.monotonic() + JOB_GRACE
        await unsettled.polling.idle()

    async def close(self) -> None:
        """The attempt ends: stop retrying, polling and waiting for receipts other workers
        hold (their calls' rows stay pending)."""
        await self._tasks.close()


@dataclass(slots=True, kw_only=True)
class _Answers:
    """What the receipt lookups know. ``likely``: whether receipts answered calls lately;
    while none do (a first run), calls skip the lookup: their claims find the receipts there
    are. ``since``: when this attempt began; a receipt completed before was bought by another
    attempt, so the call it answers is no twin of this attempt's purchase."""

    since: float
    likely: bool = True


@dataclass(slots=True, eq=False)
class _Request:
    """Calls sent together in one request (one async job: a single call)."""

    calls: list[ToolCall]
    reserved: int = 0  # the worst case of its calls the budget holds for it (exact)
    claimed: bool = False  # its receipts are this worker's
    sends: int = 0
    maybe_charged: bool = False  # a send failed after it may have been charged
    answers: list[Any] = field(default_factory=list)  # the provider's, one per call


class _Record:
    """The results of answered requests as one commit: completions, failures (an answer
    that cannot be kept was still paid for), ledger entries, and each call's outcome."""

    def __init__(self, spec: ToolSpec, rebuy: bool, cell_limit: int) -> None:
        self._spec = spec
        # A provider that recognises the call's idempotency key answers it again for free;
        # one that does not charges again, so a retry is a new purchase with a new key.
        self._rebuy = rebuy
        self._cell_limit = cell_limit
        self._what = f"The result of tool {spec.id}"
        self.completions: list[Completion] = []
        self.failures: list[Failure] = []
        self.charged: list[LedgerEntry] = []
        self.outcomes: list[tuple[ToolCall, ToolResult | ToolError]] = []

    def result(
        self, call: ToolCall, raw: Any, *, again: bool = False
    ) -> tuple[ToolResult, Charged | None]:
        """The call's result from its answer, and, when the provider reported what it
        charged, the declared and reported figures: the result costs the higher. Asked
        ``again`` (an earlier request may have reached the provider), an answer free as a
        repeat costs the declared price: the earlier request was the one charged."""
        spec = self._spec
        said = None
        if type(raw) is Charged:  # the answer says what it cost
            raw, said = raw.data, raw
        result = ToolResult(
            tool=spec.id, data=raw, execution=_LIVE, outputs=spec.outputs, lists=spec.lists
        )
        declared = spec.cost.charged(result.found)
        if said is not None and said.credits is not None and not (said.repeat and again):
            declared = said.credits  # the rule's price, not the tool's
        result.cost = declared
        if said is None or said.reported is None:
            return result, None
        result.cost = max(declared, said.reported)
        return result, Charged(None, declared, said.reported)

    def add(self, call: ToolCall, result: ToolResult, entry: LedgerEntry | None) -> None:
        if entry is not None:
            self.charged.append(entry)
        spec = self._spec
        try:
            stored = dumps(result.to_json(), what=self._what)
        except PlayDefinitionError as exc:
            self._unusable(call, ToolError(spec.id, str(exc), code="invalid_result"), entry)
            return
        if len(stored) > self._cell_limit:  # paid, but not kept: the cell fails
            message = too_large(len(stored), self._cell_limit)
            self._unusable(call, ToolError(spec.id, message, code="too_large"), entry)
            return
        self.completions.append(Completion(call.key, stored, entry))
        self.outcomes.append((call, result))

    def refused(self, call: ToolCall, error: ToolError) -> None:
        """An item of a bulk answer the provider refused on its own (its other items
        answered): the call fails with the provider's words, nothing charged."""
        self._unusable(call, error, None)

    def _unusable(self, call: ToolCall, error: ToolError, entry: LedgerEntry | None) -> None:
        """The call fails with ``error``. One the provider charged for an answer that cannot
        be kept (not JSON, too large) is lost: later runs fail it as it is, not buy it
        again on every run, unless asked (``--retry-failed`` once the tool is fixed)."""
        lost = entry is not None and entry.credits > 0
        if lost:
            error = ToolError(
                error.tool,
                f"{error.provider_message} It was charged: it is not bought again unless "
                "asked (fix the tool, then resume with --retry-failed).",
                status=error.status,
                code=error.code,
                request_id=error.request_id,
            )
        self.failures.append(
            Failure(call.key, redact(str(error)), charge=entry, rebuy=self._rebuy, lost=lost)
        )
        self.outcomes.append((call, error))


class _Held:
    """The gate slots a wave holds, one per request (per input of a tool counted per
    record), each request's given back once it is answered."""

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

    spec: ToolSpec
    target: ToolSpec  # the tool whose requests carry them (a batch tool's ``via``)
    gate: RateGate
    requests: deque[_Request] = field(default_factory=deque)
    pump: asyncio.Task[None] | None = None
    retried: asyncio.Event | None = None  # set when a retry comes back while the pump waits
    bulk: BulkJobs | None = field(init=False)  # its jobs, when it submits many inputs as one
    # what the provider said is left of the account's window, when its transport can say
    remaining: Callable[[], tuple[int, float] | None] | None = field(init=False)
    per_record: bool = field(init=False)  # its provider counts every input of a request

    def __post_init__(self) -> None:
        self.bulk = _bulk_jobs(self.target)
        self.remaining = getattr(self.target.transport, "remaining", None)
        self.per_record = self.target.rate.per_record

    def units(self, requests: Sequence[_Request]) -> int:
        """What ``requests`` spend of the tool's gate: one each, or one per input when the
        provider counts every record of a bulk request (``Rate(per_record=True)``)."""
        if not self.per_record:
            return len(requests)
        return sum(len(request.calls) for request in requests)

    def take(self, granted: int) -> list[_Request]:
        """The requests ``granted`` units of the gate let out, from the front of the lane;
        counted per record, the last one is split to fit (its rest stays first in line)."""
        if not self.per_record:
            return _take(self.requests, min(granted, len(self.requests)))
        wave: list[_Request] = []
        while self.requests and granted > 0:
            first = self.requests[0]
            if len(first.calls) > granted:
                wave.append(_split(first, granted))
                break
            wave.append(self.requests.popleft())
            granted -= len(first.calls)
        return wave


def _worst(calls: Sequence[ToolCall]) -> int:
    """The worst case of ``calls`` (of one tool) together, exactly (``Ledger.worst``)."""
    if not calls:
        return 0
    return sum(Ledger.worst(calls[0].spec, [call.input for call in calls]))


def _take(requests: deque[_Request], count: int) -> list[_Request]:
    return [requests.popleft() for _ in range(count)]


def _split(request: _Request, count: int) -> _Request:
    """The first ``count`` calls of ``request`` as a request of their own (with their share
    of its budget reservation); ``request`` keeps the rest."""
    head = _Request(
        request.calls[:count],
        reserved=_worst(request.calls[:count]) if request.reserved else 0,
        claimed=request.claimed,
        sends=request.sends,
        maybe_charged=request.maybe_charged,
    )
    request.calls = request.calls[count:]
    request.reserved -= head.reserved
    return head


def _repack(requests: deque[_Request], size: int) -> None:
    """Pack the lane's requests not yet claimed into as few as hold them, ``size`` calls
    each: a bulk request is formed when its gate lets it out, so under a binding rate it
    carries every call queued by then, not only those of the pass that queued it first."""
    if size <= 1 or len(requests) < 2:
        return
    first = next((i for i, r in enumerate(requests) if not r.claimed), len(requests))
    fresh = [requests[i] for i in range(first, len(requests))]  # (claimed ones lead)
    if any(r.claimed for r in fresh) or sum(len(r.calls) < size for r in fresh) < 2:
        return  # at most one partial request: nothing to pack
    calls = [call for request in fresh for call in request.calls]
    for _ in fresh:
        requests.pop()
    requests.extend(_Request(calls[i : i + size]) for i in range(0, len(calls), size))


class _PastGrace(Exception):
    """A stop's grace for async jobs is over: the job is polled on resume."""


class _Count:
    """How many are in a stage (requests sent, jobs polled); ``idle`` waits for none."""

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


@dataclass(slots=True)
class _Unsettled:
    """What a stop waits for before the attempt ends."""

    sending: _Count = field(default_factory=_Count)  # claimed, not yet recorded
    polling: _Count = field(default_factory=_Count)  # async jobs not yet recorded
    grace_ends: float | None = None  # set at a stop: the jobs' last poll


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


class BulkJobs(Jobs, Protocol):
    """Async tools that take many inputs as one job (``HttpTool`` with ``bulk=`` and
    ``poll=``): ``submit_bulk`` is pending with the job, or done with results aligned with
    the inputs; ``poll_bulk`` answers, once done, the results of the items asked for (by
    their place in the job)."""

    async def submit_bulk(
        self, spec: ToolSpec, inputs: Sequence[Mapping[str, Any]], keys: Sequence[str] = ()
    ) -> JobState: ...

    async def poll_bulk(
        self, spec: ToolSpec, job: Any, inputs: Mapping[int, Mapping[str, Any]]
    ) -> JobState: ...


def _bulk_jobs(target: ToolSpec) -> BulkJobs | None:
    """The tool's jobs when it submits many inputs as one job (a batch tool whose jobs can)."""
    jobs = target.jobs
    if jobs is None or target.batch is None or not hasattr(jobs, "submit_bulk"):
        return None
    return jobs  # type: ignore[return-value]


def _answered(request: _Request) -> _Request:
    """The request's calls its jobs answered (the others failed with their job), with its
    whole reservation: recording them gives it back."""
    kept = [i for i, call in enumerate(request.calls) if call.state is PENDING_JOB]
    answered = _Request([request.calls[i] for i in kept], reserved=request.reserved)
    answered.answers = [request.answers[i] for i in kept]
    return answered


class _Backoff(Iterator[float]):
    """The waits between a job's polls: its ``poll_interval``, each ``poll_backoff`` times
    the one before (1: the same), up to ``poll_max_interval``; ``expired`` once the job has
    been pending ``poll_max_wait`` seconds."""

    def __init__(self, jobs: Jobs, clock: Clock, *, bulk: bool = False) -> None:
        timing = getattr(jobs, "bulk_timing", None) if bulk else None  # a bulk job's own
        if timing is None:
            timing = (
                jobs.poll_interval,
                getattr(jobs, "poll_backoff", 1.0),
                getattr(jobs, "poll_max_interval", None),
                getattr(jobs, "poll_max_wait", None),
            )
        self._next = float(timing[0])
        self._factor = float(timing[1])
        self._most = float(timing[2] or math.inf)
        self._clock = clock
        self.max_wait = None if timing[3] is None else float(timing[3])
        self._until = None if self.max_wait is None else clock.monotonic() + self.max_wait

    def expired(self) -> bool:
        return self._until is not None and self._clock.monotonic() >= self._until

    def __next__(self) -> float:
        wait = min(self._next, self._most)
        self._next = wait * self._factor
        return wait


def _still_pending(spec: ToolSpec, job: Any, interval: _Backoff) -> ToolError:
    return ToolError(
        spec.id,
        f"job {job!r} is still pending after {interval.max_wait:g} s (its provider may have "
        "lost it); it stays on the receipt: resume the run to poll it again",
        code="job_timeout",
    )


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


def _heard(gate: RateGate, remaining: Callable[[], tuple[int, float] | None]) -> None:
    """Pass what the tool's last answer said is left of the account's window (an HTTP
    tool's remaining-budget headers) to its gate."""
    said = remaining()
    if said is not None:
        gate.remaining(*said)


def _broken(lane: _Lane) -> ToolError | None:
    """Why the lane's calls fail at once (its breaker is open), else None."""
    cause = lane.gate.open_cause()
    if cause is None:
        return None
    return ToolError(lane.spec.id, f"{lane.target.id} {cause}", code="circuit_open")


def _cached(spec: ToolSpec, stored: bytes) -> ToolResult:
    return ToolResult.from_json(
        loads(stored), outputs=spec.outputs, lists=spec.lists, source="cache", cost=0.0
    )


def _refused(error: BaseException) -> bool:
    """The provider refused the caller, not the input: a wrong token, an unknown tool (a
    403 an outcome rule reads as something else, Dropcontact's "too few credits", is not)."""
    return isinstance(error, ToolError) and (
        (error.status in (401, 403) and error.outcome in (None, "fatal"))
        or error.code == "unknown_tool"
    )


def _held(receipt: Receipt | None, now: float) -> bool:
    return (
        receipt is not None
        and receipt.status is ReceiptStatus.RUNNING
        and lease_live(receipt.owner, receipt.lease_until, now)
    )


def _wait_timeout(spec: ToolSpec, wait: float) -> ReceiptWaitTimeout:
    return ReceiptWaitTimeout(
        f"Tool {spec.id}: another worker has been executing the same call for over {wait:g}s. "
        "Nothing was written; run again once it has finished, or stop the other worker."
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
        detail = error.outcome if error.exhausted else error.code  # the account's state first
        if error.key and error.status in (401, 403) and not error.throttled:  # what to check
            detail = f"{detail}, key {error.key}" if detail else f"key {error.key}"
        return redact(  # counted in the run's stats, which are stored
            f"{what} from {error.tool}" + (f" ({detail})" if error.status and detail else "")
        )
    return type(error).__name__
