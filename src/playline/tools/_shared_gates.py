"""A tool's gate shared by every process on one store (a SQLite file, a PostgreSQL database).

It keeps the local gate's rules (``_gates.py``, ``_learning.py``) with the state every process
must agree on in the store's rate gate (``store/_gates.py``), keyed by the tool and its
provider account:

- **Tokens in leases, reserved ahead.** A wave of requests asks the store for as many tokens
  as it has requests, in one statement. When there are none, the store reserves the next
  ones (``GateState.lease``): the answer says when they are due, and this process sleeps
  until then and sends them without asking again (its own waiters queue behind one lock,
  first come, first served). So a token costs one lease however many processes wait for it:
  when each waiting process asked again for each token, sixteen processes made 3.2-4.3
  leases a call, most finding nothing, and queued 20-66 ms a lease for the gate's lock
  (``python -m bench scale``; ``docs/guide/scale.md``). Under a shared cap, the next token
  reserved (no other reservation ahead of it) takes its slots at once; a process queued
  behind others' reservations leases tokens alone, under no lock but the row's, and takes
  the slots when they are due (``take_slots``): calls waiting for their tokens never fill
  the cap. A reservation that waited longer than one token's time is looked at when due: a
  pause that began since (a 429) voids it. A full cap is watched with looks under no lock
  until it has room.
- **One rate, learned once.** A 429 cuts the store's rate (at most once per Retry-After
  window, whichever process heard it) and pauses its bucket: every process holds. A clean
  stretch raises it for all. The process that heard the 429 holds at once, before the store
  has answered.
- **Calls in flight** of a tool that declares a concurrency cap are counted in the store per
  holder (this process's gates), under a lease renewed while calls are out: a process that
  dies stops counting when its lease runs out (at once on its own machine).
- A cap the tool does not declare, and the breaker, stay with each process: they are about
  this process's calls as much as about the provider.
- **Tokens a minute** (``Rate(tokens_per_minute=...)``) are shared too: each limit's token
  bucket is a gate row of its own, per model, leased and corrected by every process
  (``_shared_tokens.py``).

``throttled``, ``succeeded`` and ``release`` are synchronous (the engine calls them in the
middle of its bookkeeping): what they tell the store goes in small background writes. A gate
whose tool has no rate (declared or learned) and no shared cap reads the store at most once a
``REFRESH``, to learn of a rate another process learned.
"""

from __future__ import annotations

import asyncio
import math
import random
from asyncio import FIRST_COMPLETED
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from typing import Any

from .._clock import Clock
from ..errors import PlaylineError
from ..store import GateConfig, GateGrant, GateState, Store, StoreIO
from ..store._gates import EPSILON
from ._breaker import Breaker
from ._declared import (
    DEFAULT_CONCURRENCY,
    PACE,
    gate_burst,
    gate_key,
    gate_units,
    gate_windows,
)
from ._learning import MIN_RATE, Observations, Tuning, climb, cut_cap, cut_rate
from ._remaining import Remaining
from ._shared_tokens import shared_token_gate
from ._slots import Slots
from ._spec import ToolSpec

__all__ = ["SharedToolGate", "shared_burst"]

SLOT_LEASE = 60.0  # seconds a holder's calls in flight count without it renewing them
REFRESH = 1.0  # seconds an unlimited gate trusts what it last read
SLOT_POLL, SLOT_POLL_MAX = 0.02, 0.5  # seconds between looks at a cap that other calls fill
HANDOFF_WAIT = 1.0  # seconds a wave waits for its own calls' slots before it looks
MIN_WAIT = 1e-3  # seconds: a shorter wait would not move a wall clock at epoch scale
HORIZON = 2.0  # seconds ahead a process queued behind others' reservations may reserve one
SHARED_JITTER = 0.25  # seconds of tokens a shared gate keeps back too (``shared_burst``)


class SharedToolGate:
    """The gate of one tool and provider account for every process on a shared store."""

    def __init__(
        self,
        spec: ToolSpec,
        clock: Clock,
        store: Callable[[], Store],
        holder: str,
        *,
        min_rate: float = MIN_RATE,
        lease: float = SLOT_LEASE,
    ) -> None:
        rate = spec.rate
        self.key = gate_key(spec)
        self._clock = clock
        self._store = store  # the store to use now (its object may change, its URL not)
        self._holder = holder
        self._lease = lease
        self.min_rate = min_rate
        ceiling = rate.per_second * PACE if rate.per_second else 0.0
        self._config = GateConfig(
            ceiling=ceiling,
            burst=shared_burst(spec, ceiling) if ceiling else 1,
            # a provider's cap is its account's; a local function's is this process's
            cap=(rate.concurrency or 0) * gate_units(spec) if spec.auth_scope != "local" else 0,
            windows=gate_windows(spec),
        )
        self.declared_concurrency = (rate.concurrency or DEFAULT_CONCURRENCY) * gate_units(spec)
        self._slots = Slots(self.declared_concurrency)
        self._said = Remaining(clock)
        self._lock = asyncio.Lock()
        self._state: GateState | None = None  # as last read
        self._read_at = -math.inf
        self._paused_until = 0.0  # this process heard a 429: it holds before the store says
        self._behind = 0.0  # how far this process's clock was seen behind another's (seconds)
        self._seen = Observations(clock.now())
        self._breaker = Breaker(clock.monotonic)
        self._tasks: set[asyncio.Task[Any]] = set()  # background writes, leases given back
        self._to_release = 0
        self._flushing: asyncio.Task[None] | None = None
        self._to_refund = 0  # tokens of calls not sent, to put back in the store's bucket
        self._refunding: asyncio.Task[None] | None = None
        self._renewing: asyncio.Task[None] | None = None
        self._leasing = 0
        self._crowded = False  # other processes' reservations were ahead of this one's last
        self._kept = 0  # slots of calls done, kept in the store for the wave waiting (_room)
        self._wanting: asyncio.Future[None] | None = None  # that wave's wake-up
        self._stagger = random.Random(f"{holder} {self.key}")  # when too far behind to reserve
        self.in_flight = 0
        # tokens a minute: buckets in the store too (``_shared_tokens.py``)
        self.tokens = shared_token_gate(
            spec, clock, key=self.key, store=store, holder=holder, now=self._now, spawn=self._spawn
        )

    # statistics
    @property
    def waiting(self) -> int:
        return self._slots.waiting + self._leasing

    @property
    def rate(self) -> float | None:
        state = self._state
        return state.rate if state is not None and state.rate > 0 else None

    @property
    def concurrency(self) -> int:
        return self._slots.cap

    def _now(self) -> float:
        """The gate's time: this process's clock, moved up to the latest clock seen in the
        store (a clock running late would otherwise wait for the stamps of the others)."""
        return self._clock.now() + self._behind

    def wait_time(self) -> float:
        """Seconds until the gate would let a call through, as this process last saw it."""
        now = self._now()
        state = self._state
        return max(self._paused_until - now, state.wait(now) if state is not None else 0.0, 0.0)

    # passing
    async def acquire(self, wanted: int) -> int:
        """Let up to ``wanted`` calls through (at least one: it waits for that one); returns
        how many may go. ``release`` them when they are done."""
        granted = await self._slots.acquire(wanted)
        try:
            said = await self._said.acquire(granted)  # what the provider said is left
            leased = await self._take(said)
        except BaseException:
            self._slots.release(granted)
            raise
        self._said.refund(said - leased)
        if leased < granted:
            self._slots.release(granted - leased)
        self.in_flight += leased
        if self._config.cap and (self._renewing is None or self._renewing.done()):
            self._renewing = asyncio.get_running_loop().create_task(self._renew())
        return leased

    def release(self, count: int) -> None:
        self.in_flight -= count
        self._slots.release(count)
        wanting = self._wanting
        if wanting is not None and not wanting.done():
            # A wave of this process waits for a slot of the full cap: the slots stay taken
            # in the store and go to it, without a write to free them and a look to find them.
            self._kept += count
            wanting.set_result(None)
        else:
            self._slots_done(count)
        if not self.in_flight and self._renewing is not None:
            self._renewing.cancel()

    def remaining(self, left: int, reset: float) -> None:
        """The provider's headers say ``left`` requests remain for ``reset`` seconds: this
        process sends no more until then (``_remaining.py``); the others do as their own
        answers say."""
        self._said.said(left, reset)

    def refund(self, count: int) -> None:
        """``count`` calls let through were not sent (another process holds their receipts,
        or the budget deferred them): their tokens go back to the shared bucket, written in
        the background. Processes racing for the same calls spend the rate of one."""
        self._said.refund(count)
        if count > 0 and self.rate is not None:
            self._to_refund += count
            if self._refunding is None or self._refunding.done():
                self._refunding = self._spawn(self._refund())

    async def _refund(self) -> None:
        while self._to_refund:
            count, self._to_refund = self._to_refund, 0
            now = self._now()
            store = self._store()
            try:
                state = await StoreIO(store)(store.tune_gate, self.key, _refunded(count, now))
            except PlaylineError:
                return  # those tokens are lost: the gate is only slower for a moment
            if state is not None:
                self._saw(state, self._now())

    def _slots_done(self, count: int) -> None:
        """``count`` calls under the shared cap no longer count (written in the background)."""
        if self._config.cap and count:
            self._to_release += count
            if self._flushing is None or self._flushing.done():
                self._flushing = self._spawn(self._flush())

    async def _take(self, wanted: int) -> int:
        """Tokens (and shared slots) for ``wanted`` calls, at least one: waits for it."""
        self._leasing += 1
        try:
            async with self._lock:
                while True:
                    now = self._now()
                    if self._paused_until > now:
                        await self._clock.sleep(self._paused_until - now)
                        continue
                    if self._unlimited(now):
                        return wanted
                    await self._flush()  # calls this process finished no longer count
                    now = self._now()  # the lease's time: the tokens it grants go from then
                    ahead, slots = self._reach()
                    kept, self._kept = self._kept, 0
                    ask = self._bunch(wanted, ahead, slots and not kept)
                    grant = await self._lease_from_store(ask, now, ahead, slots and not kept)
                    self._saw(grant.state, now)
                    if kept:  # slots in hand: those of tokens due now or next go with them
                        soon = grant.due - now <= (1 + EPSILON) / max(grant.state.rate, 1e-9)
                        used = min(kept, grant.granted) if soon else 0
                        self._slots_done(kept - used)  # the others go back to the store
                        grant = replace(grant, slots=used)
                    if grant.granted:
                        taken = await self._when_due(grant, now)
                        if taken:
                            return taken
                        continue  # voided by a pause, or the cap is full
                    wait = max(grant.wait, grant.state.wait(self._now()))
                    if wait <= 0:  # tokens there, the cap full of other processes' calls
                        await self._room()
                        continue
                    if ahead and wait > ahead:  # too far behind to reserve: come back apart
                        wait += self._stagger.uniform(0.0, ahead / 2) - ahead
                    await self._clock.sleep(max(wait, MIN_WAIT))
        finally:
            self._leasing -= 1
            self._slots_done(self._kept)  # kept for a wave that was cancelled
            self._kept = 0

    async def _room(self) -> None:
        """Until the shared cap has room (or a pause began): takes the slots of this
        process's calls as they end (``release``), or, with none in flight, looks at the gate
        under no lock at growing intervals. Leases that found the cap full were most of the
        gate's transactions at sixteen processes, each under the gate's lock (the leases
        taking the slots freed meanwhile waited for it), then the looks that replaced them:
        a process whose calls hold slots waits for them instead."""
        poll = SLOT_POLL
        while True:
            self._wanting = asyncio.get_running_loop().create_future()
            wait = HANDOFF_WAIT if self.in_flight else poll
            sleeping = asyncio.ensure_future(self._clock.sleep(wait))
            try:
                await asyncio.wait((sleeping, self._wanting), return_when=FIRST_COMPLETED)
            finally:
                sleeping.cancel()
                self._wanting = None
            if self._kept:
                return
            poll = min(poll * 2, SLOT_POLL_MAX)
            await self._flush()
            seen = (await self._take_slots(0)).state
            self._saw(seen, self._now())
            if seen.in_flight < max(1, seen.cap) or seen.paused_until > self._now():
                return

    def _reach(self) -> tuple[float, bool]:
        """How far ahead the next lease may reserve tokens, and whether it takes slots of a
        shared cap with them (``GateState.lease``).

        A gate with windows takes what is there now (a window counts a request when it goes).
        Otherwise a lease reserves up to ``HORIZON`` ahead (or the next token's time, when it
        is longer). Queued behind other processes' reservations last time, it leases tokens
        alone, under no lock but the row's, and takes their slots when they are due; else
        with slots, under the gate's lock, which reserves the next token with its slots when
        no other reservation is ahead of it, and tokens alone behind them when one is."""
        state = self._state
        if self._config.windows or state is None or state.rate <= 0:
            return 0.0, True
        return max(HORIZON, 1 / state.rate), not (self._config.cap and self._crowded)

    def _bunch(self, wanted: int, ahead: float, slots: bool) -> int:
        """How many tokens a lease that may reserve them behind others' asks for: a
        reservation's calls go together when its last token is due, its first token's
        ``(n - 1) / rate`` late, so at most ``SHARED_JITTER`` seconds of them (the tokens
        ``shared_burst`` keeps back in the provider's bucket cover that). At half the bench's
        limits, 8 a reservation at 19/s drew 3 responses 429 in one of six runs; 4, none."""
        state = self._state
        if not ahead or (slots and self._config.cap) or state is None or state.rate <= 0:
            return wanted
        return min(wanted, max(1, math.floor(state.rate * SHARED_JITTER)))

    async def _when_due(self, grant: GateGrant, asked: float) -> int:
        """The calls ``grant`` lets through once they are due (0: none, lease again).

        A reservation that waited longer than one token's time is looked at when it is due:
        a pause that began since voids it (the pause emptied the bucket); and under a shared
        cap, the slots of tokens leased alone are taken then (``take_slots``). When the cap
        is full, the next lease takes tokens and slots together: the cap binds, not the rate.
        The grant's slots are given back if it is voided or cancelled."""
        count, held, rate = grant.granted, grant.slots, grant.state.rate
        lead = grant.due - asked
        # queued behind others: the reservation's last token came more than its count late
        self._crowded = rate > 0 and lead > (count + EPSILON) / rate
        needed = count - held if self._config.cap else 0  # slots to take when due
        try:
            if grant.due > self._now():
                await self._clock.sleep(grant.due - self._now())
            if self._paused_until > asked:  # this process heard a 429 since
                self._slots_done(held)
                return 0
            if not needed and not (rate > 0 and lead > (1 + EPSILON) / rate):
                return count  # at once, or the next token: as if granted now
            await self._flush()
            looked = self._now()
            got = await self._take_slots(needed)
        except BaseException:
            self._slots_done(held)
            raise
        self._saw(got.state, self._now())
        if got.state.paused_until > asked:  # a pause began since it was reserved
            self._slots_done(held + got.granted)
            return 0
        if got.state.available(looked) < -EPSILON:  # others' reservations behind this one
            self._crowded = True
        if not needed:
            return count
        # Tokens that find no slot are dropped, not given back: their time has come, and a
        # provider's bucket that was full then kept none of them for later (given back, they
        # let two reservations out at once: 7-11 responses 429 a run at half the limits).
        if not got.granted and not held:
            self._crowded = False  # the cap is full: tokens and slots together, as it frees
            return 0
        return held + got.granted

    async def _lease_from_store(
        self, wanted: int, now: float, ahead: float, slots: bool
    ) -> GateGrant:
        store = self._store()
        return await self._granting(
            StoreIO(store)(
                store.lease_gate,
                self.key,
                wanted,
                config=self._config,
                holder=self._holder,
                lease_until=now + self._lease,
                now=now,
                ahead=ahead,
                slots=slots,
            ),
            slots,
        )

    async def _take_slots(self, wanted: int) -> GateGrant:
        store = self._store()
        now = self._now()
        return await self._granting(
            StoreIO(store)(
                store.take_slots,
                self.key,
                wanted,
                config=self._config,
                holder=self._holder,
                lease_until=now + self._lease,
                now=now,
            ),
            True,
        )

    async def _granting(self, call: Awaitable[GateGrant], slots: bool) -> GateGrant:
        leasing = asyncio.ensure_future(call)
        try:
            return await asyncio.shield(leasing)
        except asyncio.CancelledError:
            # Cancelled while the store was granting: what it grants is given back (the
            # slots; tokens are spent), or this process's calls would count forever.
            if slots:
                leasing.add_done_callback(self._give_back)
            self._tasks.add(leasing)
            leasing.add_done_callback(self._tasks.discard)
            raise

    def _give_back(self, leasing: asyncio.Future[GateGrant]) -> None:
        if not leasing.cancelled() and leasing.exception() is None:
            self._slots_done(leasing.result().granted)

    def _unlimited(self, now: float) -> bool:
        state = self._state
        return (
            state is not None
            and not self._config.cap
            and not self._config.windows
            and state.rate <= 0
            and state.paused_until <= now
            and now - self._read_at < REFRESH
        )

    def _saw(self, state: GateState, now: float) -> None:
        # A stamp ahead of this clock read after the store answered, and not a pause's end, was
        # written by a clock ahead of this one: this gate's time catches up with it.
        if state.stamp > max(self._now(), state.paused_until):
            self._behind = state.stamp - self._clock.now()
        last = self._state
        if last is not None and (state.cut_until, state.cap_cut_until) != (
            last.cut_until,
            last.cap_cut_until,
        ):  # a step was taken (here or elsewhere): the answers from here on judge it
            self._seen.cut(self.in_flight)
        self._state, self._read_at = state, now
        if self._config.cap and state.cap != self._slots.cap:
            self._slots.cap = max(1, state.cap)
            self._slots.wake()

    async def _flush(self) -> None:
        while self._to_release:
            count, self._to_release = self._to_release, 0
            store = self._store()
            try:
                await StoreIO(store)(
                    store.release_gate,
                    self.key,
                    count,
                    holder=self._holder,
                    lease_until=self._now() + self._lease,
                )
            except PlaylineError:
                return  # the store is unreachable: the calls stop counting when the lease ends

    async def _renew(self) -> None:
        # Real time, like the attempt's own leases: renewing is I/O, not play.
        while self.in_flight:
            await asyncio.sleep(self._lease / 3)
            store = self._store()
            try:
                await StoreIO(store)(
                    store.renew_gates,
                    self._holder,
                    lease_until=self._now() + self._lease,
                )
            except PlaylineError:
                continue

    # learning from answers (the rules: _learning.py), decided in the store for everyone
    def throttled(self, retry_after: float | None) -> float:
        """The provider answered 429; returns how long the throttled call should wait."""
        now = self._now()
        self._seen.throttled()
        wait = 1.0 if retry_after is None else max(0.0, retry_after)
        seen, local_cap = self._seen.seen(now), self._slots.cap
        concurrency = retry_after is None and local_cap > 1  # first a concurrency signal
        state = self._state
        if not concurrency and (
            state is None
            or (not state.last_cap and now >= state.cut_until and now >= state.noise_until)
        ):
            self._paused_until = max(self._paused_until, now + wait)  # before the store says

        def step(gate: GateState) -> Tuning:
            before = _tuning(gate, local_cap)
            if concurrency:
                return cut_cap(before, seen, now)[0]
            return cut_rate(before, seen, now, window=wait, min_rate=self.min_rate)[0]

        def cut(gate: GateState) -> GateState:
            after = _learned(gate, step(gate))
            if concurrency or gate.last_cap or not after.last_cap:
                return after
            # A series starts: the provider's bucket is empty, every process holds for
            # Retry-After and starts again from an empty bucket (a learned rate with a burst
            # of one).
            return replace(
                after,
                burst=gate.burst if gate.rate > 0 else 1,
                tokens=0.0,
                paused_until=max(gate.paused_until, now + wait),
                stamp=max(gate.stamp, now + wait),
            )

        self._tune(cut, step)
        return wait

    def succeeded(self) -> None:
        self._breaker.succeeded()
        now = self._now()
        state = self._state
        if not self._seen.succeeded(now) or state is None:
            return
        seen, local_cap = self._seen.seen(now), self._slots.cap

        def step(gate: GateState) -> Tuning:
            return climb(_tuning(gate, local_cap), seen, **self._bounds(gate))

        def raised(gate: GateState) -> GateState:
            return _learned(gate, step(gate))

        if step(state) != _tuning(state, local_cap):  # else at the ceiling: nothing to write
            self._tune(raised, step)

    def _bounds(self, gate: GateState) -> dict[str, Any]:
        return {
            "ceiling": gate.ceiling,
            "declared_cap": gate.declared_cap or self.declared_concurrency,
        }

    def _tune(
        self, change: Callable[[GateState], GateState], step: Callable[[GateState], Tuning]
    ) -> None:
        """Write ``change`` to the gate in the store; a cap this process keeps (the tool
        declares none) follows the ``step`` decided there."""
        self._spawn(self._tuned(change, step))

    async def _tuned(
        self, change: Callable[[GateState], GateState], step: Callable[[GateState], Tuning]
    ) -> None:
        store = self._store()
        decided: list[Tuning] = []

        def changed(gate: GateState) -> GateState:
            decided[:] = [step(gate)]
            return change(gate)

        try:
            state = await StoreIO(store)(store.tune_gate, self.key, changed)
        except PlaylineError:
            return  # learning waits for the next answer; the store says what went wrong there
        if decided and not self._config.cap and decided[0].cap != self._slots.cap:
            self._slots.cap = max(1, decided[0].cap)
            self._slots.wake()
        if state is not None:
            self._saw(state, self._now())

    async def flush(self) -> None:
        """Wait until what this gate has told the store (a cut, a climb, calls that finished)
        is written."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # the breaker (_breaker.py): this process's
    def failed(self, cause: str) -> None:
        """A call failed for the provider's reasons (after its retries)."""
        self._breaker.failed(cause)

    def open_cause(self) -> str | None:
        """Why calls to this tool fail at once now (its breaker is open), else None."""
        return self._breaker.open_cause()


def shared_burst(spec: ToolSpec, ceiling: float) -> int:
    """The burst of a shared gate: a local gate's (``gate_burst``: the provider's, less
    ``JITTER`` seconds of tokens) less ``SHARED_JITTER`` seconds of tokens more.

    A request reaches the provider later than the gate let it out by the time its process
    takes to come back from the store and send it; calls let out apart then arrive closer
    together, and the tokens kept back in the provider's bucket absorb that. Processes
    sharing a gate share the machine's cores as well: sixteen on two cores came back from a
    lease up to 0.27-0.38 s later than its time (99th percentile and most; most of those as
    they started), and with 0.1 s kept back drew 1-10 responses 429 a run at 0.95 of the
    limits, each when the gate's bucket was full or new. Kept back, those tokens cost a
    shorter burst after a lull, not the rate."""
    return max(1, gate_burst(spec, ceiling) - math.ceil(ceiling * SHARED_JITTER))


def _refunded(count: int, now: float) -> Callable[[GateState], GateState | None]:
    """``count`` tokens back in a gate's bucket at ``now``: never past its burst, none during
    a pause (the pause earns nothing), and none while tokens are reserved ahead (the bucket in
    debt): they would let a reservation made now go before those made earlier, with tokens a
    provider's bucket may not have kept (it was full when they came)."""

    def refund(gate: GateState) -> GateState | None:
        if gate.rate <= 0 or gate.paused_until > now or gate.available(now) < 0:
            return None  # in debt: the tokens would go to a reservation made after them
        tokens = min(float(gate.burst), gate.available(now) + count)
        return replace(gate, tokens=tokens, stamp=max(gate.stamp, now))

    return refund


def _tuning(gate: GateState, local_cap: int = 0) -> Tuning:
    return Tuning(
        rate=gate.rate,
        cap=gate.cap if gate.declared_cap else local_cap,
        cut_until=gate.cut_until,
        cap_cut_until=gate.cap_cut_until,
        noise_until=gate.noise_until,
        last_rate=gate.last_rate,
        last_cap=gate.last_cap,
        last_share=gate.last_share,
    )


def _learned(gate: GateState, tuning: Tuning) -> GateState:
    return replace(
        gate,
        rate=tuning.rate,
        cap=tuning.cap if gate.declared_cap else gate.cap,
        cut_until=tuning.cut_until,
        cap_cut_until=tuning.cap_cut_until,
        noise_until=tuning.noise_until,
        last_rate=tuning.last_rate,
        last_cap=tuning.last_cap,
        last_share=tuning.last_share,
    )
