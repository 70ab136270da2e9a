"""Executing tool calls: receipts first, then packed batches through each tool's gate.

``CallExecutor.execute(spec, calls)`` takes calls to one tool (from one dispatch pass or a
single direct call) and settles every call's future; it never raises for a failed call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._clock import Clock
from ._events import EventLog
from ._json import digest, dumps, loads
from ._ledger import Ledger
from ._limits import Governor, ToolGates
from ._scope import RowScope
from .errors import PlayDefinitionError, PlaylineError, ReceiptWaitTimeout, ToolError
from .store import Claim, ClaimOutcome, ReceiptStatus, Store, owner_alive
from .tools import Execution, Jobs, JobState, ToolResult, ToolSpec

__all__ = ["CallExecutor", "CallStats", "ToolCall"]

LEASE_SECONDS = 300.0
MAX_ATTEMPTS = 3  # for errors a tool declares safe to retry
BACKOFF = 0.25  # seconds before the first retry; doubles each time
MAX_POLL_FAILURES = 6  # transient errors in a row while polling an async job
_UNREACHABLE = frozenset({"timeout", "connection_error"})


@dataclass(slots=True, eq=False)
class ToolCall:
    spec: ToolSpec
    input: dict[str, Any]
    key: str
    future: asyncio.Future[ToolResult]
    label: str | None = None
    force: bool = False
    scope: RowScope | None = None
    followers: list[ToolCall] = field(default_factory=list)  # same key: share this result
    on_settle: Callable[[], None] | None = None  # told synchronously when the call settles
    job: bytes | None = None  # an async tool's submitted job, from the receipt
    idempotency_key: str = ""  # sent to the provider: a repeat after a crash is not paid


@dataclass(slots=True)
class CallStats:
    live: int = 0
    cached: int = 0
    in_flight: int = 0
    failed: int = 0
    requests: int = 0  # calls sent to transports (a batch call counts once)
    by_tool: dict[str, dict[str, int]] = field(default_factory=dict)

    def count(self, tool: str, what: str, n: int = 1) -> None:
        setattr(self, what, getattr(self, what) + n)
        per = self.by_tool.setdefault(tool, {})
        per[what] = per.get(what, 0) + n


class CallExecutor:
    """Runs calls through receipts, the budget, rate gates and transports."""

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
        receipt_wait: float = 600.0,
    ) -> None:
        self._store = store
        self._clock = clock
        self._gates = gates
        self._governor = governor
        self._ledger = ledger
        self._events = events
        self._tools = tools
        self._run_id = run_id
        self._owner = owner
        self._receipt_wait = receipt_wait
        self._in_flight: dict[str, ToolCall] = {}
        self.stats = CallStats()

    def gate_wait(self, spec: ToolSpec) -> float:
        """Seconds until the rate gate of ``spec``'s calls would let one through."""
        target = self._tools[spec.batch.via] if spec.batch and spec.batch.via else spec
        return self._gates[target].wait_time()

    async def execute(self, spec: ToolSpec, calls: Sequence[ToolCall]) -> None:
        owners: dict[str, ToolCall] = {}
        for call in calls:
            running = (
                None if call.force else (owners.get(call.key) or self._in_flight.get(call.key))
            )
            if running is not None:
                running.followers.append(call)
            else:
                owners[call.key] = call
        if not owners:
            return
        self._in_flight.update(owners)
        try:
            await self._claim_and_run(spec, list(owners.values()))
        finally:
            for key, call in owners.items():
                if self._in_flight.get(key) is call:
                    del self._in_flight[key]
                if not call.future.done():  # cancelled before it could settle
                    self._settle(call, None, asyncio.CancelledError())

    def _settle(
        self, call: ToolCall, result: ToolResult | None, error: BaseException | None = None
    ) -> None:
        """Settle a call and, synchronously, its followers (so batching counts stay exact)."""
        if call.future.done():
            return
        if error is None:
            assert result is not None
            call.future.set_result(result)
            if call.scope is not None:  # the cell that asked gets its cost and provider
                call.scope.results.append(result)
            source = result.execution.source
            self.stats.count(call.spec.id, "cached" if source == "cache" else source)
        elif isinstance(error, asyncio.CancelledError):
            call.future.cancel()
        else:
            call.future.set_exception(error)
            self.stats.count(call.spec.id, "failed")
        if call.on_settle is not None:
            call.on_settle()
        for follower in call.followers:
            shared = None if result is None else result.with_source("in_flight", cost=0.0)
            self._settle(follower, shared, error)

    async def _claim_and_run(self, spec: ToolSpec, owners: list[ToolCall]) -> None:
        now = self._clock.now()
        claims = self._store.claim_receipts(
            [Claim(key=c.key, tool=spec.id, run_id=self._run_id, force=c.force) for c in owners],
            owner=self._owner,
            lease_until=now + LEASE_SECONDS,
            now=now,
        )
        to_run: list[ToolCall] = []
        waits = []
        for call, claim in zip(owners, claims, strict=True):
            if claim.outcome is ClaimOutcome.COMPLETED:
                assert claim.receipt.result is not None
                self._settle_cached(call, claim.receipt.result)
            elif claim.outcome is ClaimOutcome.HELD:
                waits.append(self._wait_for_receipt(call))
            else:
                call.job = claim.receipt.job
                # The same key for every attempt at the same receipt (a crash's retry is a
                # repeat the provider can recognise); a forced refresh asks anew.
                attempt = str(claim.receipt.attempt) if call.force else ""
                call.idempotency_key = digest("idempotency", call.key, attempt)[:40]
                to_run.append(call)
        chunks = [to_run[i : i + spec.max_batch] for i in range(0, len(to_run), spec.max_batch)]
        async with asyncio.TaskGroup() as tg:
            for wait in waits:
                tg.create_task(wait)
            for chunk in chunks:
                tg.create_task(self._run_chunk(spec, chunk))

    def _settle_cached(self, call: ToolCall, stored: bytes) -> None:
        result = ToolResult.from_json(
            loads(stored),
            outputs=call.spec.outputs,
            lists=call.spec.lists,
            source="cache",
            cost=0.0,
        )
        self._settle(call, result)

    async def _wait_for_receipt(self, call: ToolCall) -> None:
        """Another live worker owns this call: wait for its result, or take over if it dies."""
        deadline = self._clock.monotonic() + self._receipt_wait
        delay = 0.05
        while self._clock.monotonic() < deadline:
            await self._clock.sleep(delay)
            delay = min(delay * 2, 1.0)
            receipt = self._store.get_receipts([call.key]).get(call.key)
            if receipt is None or receipt.status is not ReceiptStatus.RUNNING:
                if receipt is not None and receipt.status is ReceiptStatus.COMPLETED:
                    assert receipt.result is not None
                    self._settle_cached(call, receipt.result)
                    return
                break  # failed or released: claim it ourselves
            if (receipt.lease_until or 0) <= self._clock.now() or not owner_alive(receipt.owner):
                break  # its owner died, or its lease ran out: take it over
        else:
            self._settle(
                call,
                None,
                ReceiptWaitTimeout(
                    f"Tool {call.spec.id}: another worker has been executing the same call "
                    f"for over {self._receipt_wait:g}s. Nothing was written; run again "
                    "once it has finished, or stop the other worker."
                ),
            )
            return
        await self._claim_and_run(call.spec, [call])

    async def _run_chunk(self, spec: ToolSpec, chunk: list[ToolCall]) -> None:
        target = self._tools[spec.batch.via] if spec.batch and spec.batch.via else spec
        allowed = self._ledger.reserve(spec, len(chunk))
        if allowed < len(chunk):
            refused, chunk = chunk[allowed:], chunk[:allowed]
            self._store.release_receipts([c.key for c in refused], owner=self._owner)
            error = self._ledger.exceeded(spec, len(refused))
            for call in refused:
                self._settle(call, None, error)
            if not chunk:
                return
        try:
            raws = await self._send(spec, target, chunk)
        except ToolError as exc:
            self._ledger.settle(spec, allowed, [])
            self._fail(spec, chunk, exc)
            return
        except BaseException as exc:
            self._ledger.settle(spec, allowed, [])
            self._store.release_receipts([c.key for c in chunk], owner=self._owner)
            if isinstance(exc, PlaylineError):  # e.g. the retry budget: fails these calls
                for call in chunk:
                    self._settle(call, None, exc)
                return
            raise
        self._complete(spec, chunk, raws, allowed)

    async def _send(self, spec: ToolSpec, target: ToolSpec, chunk: list[ToolCall]) -> list[Any]:
        """One call through the tool's gate, retried as SEMANTICS.md 25 says.

        A 429 waits for Retry-After (the gate pauses for every caller of the tool) and retries;
        a retryable error (5xx of a retry-safe tool) is retried with backoff, 3 attempts in
        all. Every retry counts against the governance retry budget.
        """
        gate = self._gates[target]
        failures = 0
        while True:
            try:
                if target.jobs is not None:
                    raws = [await self._run_job(spec, target, target.jobs, chunk[0])]
                else:
                    async with gate.slot():
                        self._sent(spec, target, len(chunk))
                        raws = await target.transport.call(
                            target, [c.input for c in chunk], [c.idempotency_key for c in chunk]
                        )
            except ToolError as exc:
                if exc.status == 429:
                    self._governor.spend("retries")
                    gate.pause(exc.retry_after if exc.retry_after is not None else 1.0)
                    continue
                failures += 1
                if exc.retryable and failures < MAX_ATTEMPTS:
                    self._governor.spend("retries")
                    await self._clock.sleep(BACKOFF * 2 ** (failures - 1))
                    continue
                raise
            if len(raws) != len(chunk):
                raise ToolError(
                    spec.id,
                    f"returned {len(raws)} results for {len(chunk)} inputs",
                    code="misaligned_batch",
                )
            return raws

    def _sent(self, spec: ToolSpec, target: ToolSpec, size: int) -> None:
        self.stats.requests += 1
        self._events.emit("batch", provider=target.id, data={"tool": spec.id, "size": size})

    async def _run_job(self, spec: ToolSpec, target: ToolSpec, jobs: Jobs, call: ToolCall) -> Any:
        """An async tool call: submit it (once: the job is kept on the receipt), then poll."""
        if call.job is not None:  # submitted by an earlier attempt: poll it, do not pay again
            state = JobState(done=False, job=loads(call.job))
        else:
            async with self._gates[target].slot():
                self._sent(spec, target, 1)
                state = await jobs.submit(target, call.input, call.idempotency_key)
            if not state.done:
                call.job = dumps(state.job, what=f"The job of tool {spec.id}")
                self._store.save_jobs([(call.key, call.job)], owner=self._owner)
        failures = 0
        while not state.done:
            await self._clock.sleep(jobs.poll_interval)
            try:
                state = await jobs.poll(target, state.job)
            except ToolError as exc:
                # A poll is free and safe to repeat, whatever the tool says of its calls: an
                # error of the transport or the provider's side must not lose a paid job.
                status = exc.status or 0
                transient = status == 429 or status >= 500 or exc.code in _UNREACHABLE
                failures += 1
                if not transient or failures >= MAX_POLL_FAILURES:
                    raise
                self._governor.spend("retries")
                await self._clock.sleep(exc.retry_after or BACKOFF * 2 ** (failures - 1))
        return state.result

    def _complete(
        self, spec: ToolSpec, chunk: list[ToolCall], raws: list[Any], reserved: int
    ) -> None:
        completions: list[tuple[str, bytes]] = []
        settled: list[tuple[ToolCall, ToolResult | ToolError]] = []
        entries = []
        for call, raw in zip(chunk, raws, strict=True):
            result = ToolResult(
                tool=spec.id,
                data=raw,
                execution=Execution("live"),
                outputs=spec.outputs,
                lists=spec.lists,
            )
            result.cost = spec.cost.charged(result.found)
            scope = call.scope
            # the provider was called: the ledger records it even if the result is unusable
            entries.append(
                self._ledger.entry(
                    spec,
                    call.key,
                    result.cost,
                    result.found,
                    scope.dataset if scope else None,
                    scope.row_key if scope else None,
                )
            )
            try:
                stored = dumps(result.to_json(), what=f"The result of tool {spec.id}")
            except PlayDefinitionError as exc:
                settled.append((call, ToolError(spec.id, str(exc), code="invalid_result")))
                continue
            completions.append((call.key, stored))
            settled.append((call, result))
        now = self._clock.now()
        kept = self._store.complete_receipts(
            completions, owner=self._owner, now=now, ledger=entries
        )
        self._ledger.settle(spec, reserved, entries)
        failures = [(c.key, str(r)) for c, r in settled if isinstance(r, ToolError)]
        if failures:
            self._store.fail_receipts(failures, owner=self._owner, now=now)
        for call, outcome in settled:
            if isinstance(outcome, ToolError):
                self._settle(call, None, outcome)
            elif call.key in kept:
                self._settle_cached(call, kept[call.key])
            else:
                self._settle(call, outcome)

    def _fail(self, spec: ToolSpec, chunk: list[ToolCall], error: ToolError) -> None:
        self._store.fail_receipts(
            [(c.key, str(error)) for c in chunk], owner=self._owner, now=self._clock.now()
        )
        for call in chunk:
            self._settle(call, None, error)
