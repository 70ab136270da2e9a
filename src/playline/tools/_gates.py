"""What a call to a tool passes on its way out: a rate limit, a concurrency cap, a breaker.

One ``ToolGate`` per tool (per provider account), shared by every row, dataset and run that
uses it. The gate learns from what the provider answers:

- A **429** is first tested: the first of an episode holds every caller for its Retry-After,
  the next cuts the rate in half (or the cap on calls in flight, when it names no wait),
  and the answers after the cut judge it; a cut that does not lower the share of 429s as a
  pace would is undone and cuts rest a minute, so random 429s cannot collapse the rate
  (the rules: ``_learning.py``). The rate never falls below the rate the tool achieved over
  the last minute (nor ``min_rate``).
- After a clean stretch (``LEARN_STRETCH`` successes without a 429) the rate climbs back by
  15% and the cap by one, up to what the tool declares.
- A tool that keeps **failing** (5xx, timeouts, refused connections, after retries) trips a
  circuit breaker: its calls fail at once with the cause for a pause (10 s, doubling up to
  5 minutes), then one probe call decides whether it is back.

A tool that declares no rate is not limited until its first 429; it then learns one.

On a store that other processes use too (a SQLite file, PostgreSQL), the tools that
``shares_gate`` get a ``SharedToolGate`` instead (``_shared_gates.py``): the same rules, with
the bucket, the learned rate and a declared concurrency cap kept in the store, so that every
process together stays under the provider's limits. The learning rules are ``_learning.py``,
the breaker ``_breaker.py``.
"""

from __future__ import annotations

import asyncio
import secrets
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from .._clock import Clock
from ..store import owner_id
from ..store._gates import SendLog
from ..store._owners import keep_alive
from ._breaker import Breaker
from ._declared import (
    DEFAULT_CONCURRENCY,
    PACE,
    account_of,
    gate_burst,
    gate_key,
    gate_units,
    gate_windows,
    shares_gate,
)
from ._learning import MIN_RATE, Observations, Tuning, climb, cut_cap, cut_rate
from ._remaining import Remaining
from ._shared_gates import SharedToolGate
from ._slots import Slots
from ._spec import ToolSpec
from ._tokens import TokenGate, token_gate

if TYPE_CHECKING:
    from ..store import Store

__all__ = [
    "RateGate",
    "RateLimiter",
    "ToolGate",
    "ToolGates",
    "gate_key",
    "one_call",
    "shares_gate",
]

_EPSILON = 1e-6


class RateGate(Protocol):
    """A tool's gate: local (this process) or shared (every process on one store). ``tokens``:
    its token buckets (``_tokens.py``; a shared gate's are in the store, ``_shared_tokens.py``),
    None without them."""

    tokens: TokenGate | None

    @property
    def in_flight(self) -> int: ...
    @property
    def waiting(self) -> int: ...
    @property
    def concurrency(self) -> int: ...
    async def acquire(self, wanted: int) -> int: ...
    def release(self, count: int) -> None: ...
    def refund(self, count: int) -> None: ...
    def wait_time(self) -> float: ...
    def throttled(self, retry_after: float | None) -> float: ...
    def remaining(self, left: int, reset: float) -> None: ...
    def succeeded(self) -> None: ...
    def failed(self, cause: str) -> None: ...
    def open_cause(self) -> str | None: ...


@asynccontextmanager
async def one_call(gate: RateGate) -> AsyncIterator[None]:
    """One call through ``gate``: a concurrency slot and a rate token, given back after."""
    await gate.acquire(1)
    try:
        yield
    finally:
        gate.release(1)


class RateLimiter:
    """A token bucket: ``per_second`` tokens a second, at most ``burst`` saved up.

    Waiters are served first come, first served: each holds the lock while it waits for its
    token, so the n-th caller never goes out before the (n-1)-th.
    """

    def __init__(self, clock: Clock, per_second: float, burst: int | None = None) -> None:
        self._clock = clock
        self.per_second = per_second
        self.burst = burst or max(1, int(per_second))
        self._tokens = float(self.burst)
        self._stamp = clock.monotonic()
        self._paused_until = 0.0
        self._lock = asyncio.Lock()
        self.waiting = 0

    def _refill(self) -> None:
        now = self._clock.monotonic()
        elapsed = max(0.0, now - self._stamp)
        self._tokens = min(self.burst, self._tokens + elapsed * self.per_second)
        self._stamp = max(self._stamp, now)

    async def acquire(self, wanted: int = 1) -> int:
        """Wait for a token, then take as many as are saved up, up to ``wanted``."""
        self.waiting += 1
        try:
            async with self._lock:
                while True:
                    pause = self._paused_until - self._clock.monotonic()
                    if pause > 0:
                        await self._clock.sleep(pause)
                        continue
                    self._refill()
                    if self._tokens >= 1 - _EPSILON:  # float time at epoch scale is coarse
                        taken = max(1, min(wanted, int(self._tokens + _EPSILON)))
                        self._tokens = max(0.0, self._tokens - taken)
                        return taken
                    await self._clock.sleep(max((1 - self._tokens) / self.per_second, 1e-4))
        finally:
            self.waiting -= 1

    def refund(self, count: int) -> None:
        """Put back ``count`` tokens taken for requests that were not sent. A token is only
        ever spent by a request, so the bucket keeps its promise; none while paused (the
        pause earns nothing)."""
        if count > 0 and self._paused_until <= self._clock.monotonic():
            self._refill()
            self._tokens = min(float(self.burst), self._tokens + count)

    def wait_time(self) -> float:
        """Seconds until a token is free (0 when one is)."""
        now = self._clock.monotonic()
        if self._paused_until > now:
            return self._paused_until - now + max(0.0, 1 - self._tokens) / self.per_second
        tokens = min(self.burst, self._tokens + max(0.0, now - self._stamp) * self.per_second)
        return 0.0 if tokens >= 1 - _EPSILON else (1 - tokens) / self.per_second

    def pause(self, seconds: float) -> None:
        """Send nothing for ``seconds`` (the provider said so), then start from an empty
        bucket: the pause earns no tokens, so it never ends in a burst."""
        self._paused_until = max(self._paused_until, self._clock.monotonic() + seconds)
        self._tokens = 0.0
        self._stamp = self._paused_until


class ToolGate:
    """The local gate of one tool: this process's calls to it (see the module docstring)."""

    def __init__(self, spec: ToolSpec, clock: Clock, *, min_rate: float = MIN_RATE) -> None:
        rate = spec.rate
        self._clock = clock
        self.ceiling = rate.per_second * PACE if rate.per_second else None
        self.min_rate = min_rate
        self.limiter = (
            RateLimiter(clock, self.ceiling, gate_burst(spec, self.ceiling))
            if self.ceiling is not None
            else None
        )
        self.declared_concurrency = (rate.concurrency or DEFAULT_CONCURRENCY) * gate_units(spec)
        self._slots = Slots(self.declared_concurrency)
        self._sends = SendLog(gate_windows(spec)) if rate.windows else None
        self._said = Remaining(clock)
        self.in_flight = 0
        self._seen = Observations(clock.monotonic())
        self._tuning = Tuning(rate=self.ceiling or 0.0, cap=self.declared_concurrency)
        self._breaker = Breaker(clock.monotonic)
        self.tokens = token_gate(spec, clock)

    # statistics
    @property
    def waiting(self) -> int:
        return self._slots.waiting + (self.limiter.waiting if self.limiter else 0)

    @property
    def rate(self) -> float | None:
        return self.limiter.per_second if self.limiter else None

    @property
    def concurrency(self) -> int:
        return self._slots.cap

    def wait_time(self) -> float:
        """Seconds until this gate would let a call through its rate limit."""
        return self.limiter.wait_time() if self.limiter else 0.0

    # passing
    async def acquire(self, wanted: int) -> int:
        """Let up to ``wanted`` calls through at once (at least one: it waits for that one);
        returns how many may go. ``release`` them when they are done."""
        granted = await self._slots.acquire(wanted)
        try:
            allowed = 0
            while not allowed:  # what the provider said is left, the windows, the rate
                said = await self._said.acquire(granted)
                room = await self._room(said)
                tokens = await self.limiter.acquire(room) if self.limiter else room
                allowed = self._into_windows(tokens)
                self._said.refund(said - allowed)
        except BaseException:
            self._slots.release(granted)
            raise
        if allowed < granted:  # the rate or a window allows fewer now: give the rest back
            self._slots.release(granted - allowed)
        self.in_flight += allowed
        return allowed

    async def _room(self, wanted: int) -> int:
        """Up to ``wanted`` requests that every window has room for now (at least one: it
        waits for room)."""
        while self._sends is not None:
            room, wait = self._sends.room(self._clock.monotonic())
            if room:
                return min(wanted, room)
            await self._clock.sleep(wait)
        return wanted

    def _into_windows(self, tokens: int) -> int:
        """Count ``tokens`` requests, about to go out, in the windows: as many as they still
        have room for (other callers may have taken some while this one waited for the rate);
        the rate tokens of the rest go back."""
        if self._sends is None:
            return tokens
        now = self._clock.monotonic()
        taken = min(tokens, self._sends.room(now)[0])
        self._sends.take(taken, now)
        if self.limiter and taken < tokens:
            self.limiter.refund(tokens - taken)
        return taken

    def release(self, count: int) -> None:
        self.in_flight -= count
        self._slots.release(count)

    def remaining(self, left: int, reset: float) -> None:
        """The provider's headers say ``left`` requests remain for ``reset`` seconds: no
        more go out until then (``_remaining.py``)."""
        self._said.said(left, reset)

    def refund(self, count: int) -> None:
        """``count`` calls let through were not sent (another worker holds their receipts, or
        the budget deferred them): their rate tokens go back. ``release`` their slots too."""
        if self.limiter:
            self.limiter.refund(count)
        if self._sends is not None:
            self._sends.give_back(count)
        self._said.refund(count)

    # learning from answers (the rules: _learning.py)
    def _learned(self, tuning: Tuning) -> None:
        self._tuning = tuning
        if tuning.rate > 0:
            if self.limiter is None:
                self.limiter = RateLimiter(self._clock, tuning.rate, 1)
            self.limiter.per_second = tuning.rate
        elif self.ceiling is None:  # a series undone: the tool is not limited again
            self.limiter = None
        if tuning.cap != self._slots.cap:
            self._slots.cap = tuning.cap
            self._slots.wake()

    def throttled(self, retry_after: float | None) -> float:
        """The provider answered 429; returns how long the throttled call should wait."""
        now = self._clock.monotonic()
        self._seen.throttled()
        wait = 1.0 if retry_after is None else max(0.0, retry_after)
        before = replace(self._tuning, rate=self.rate or 0.0, cap=self._slots.cap)
        seen = self._seen.seen(now)
        if retry_after is None and before.cap > 1:  # first a concurrency signal
            tuning, step = cut_cap(before, seen, now)
        else:
            tuning, step = cut_rate(
                before,
                seen,
                now,
                window=wait,
                min_rate=self.min_rate,
            )
            if step and not before.last_cap and self.limiter is not None:
                # A series starts: the provider's bucket is empty, everyone holds for
                # Retry-After, not only the call that heard it (the others would draw 429s
                # of their own).
                self.limiter.pause(wait)
        self._learned(tuning)
        if step:
            self._seen.cut(self.in_flight)
        return wait

    def succeeded(self) -> None:
        self._breaker.succeeded()
        if self._seen.succeeded(self._clock.monotonic()):
            tuning = replace(self._tuning, rate=self.rate or 0.0, cap=self._slots.cap)
            seen = self._seen.seen(self._clock.monotonic())
            self._learned(
                climb(
                    tuning,
                    seen,
                    ceiling=self.ceiling or 0.0,
                    declared_cap=self.declared_concurrency,
                )
            )

    # the breaker (_breaker.py)
    def failed(self, cause: str) -> None:
        """A call failed for the provider's reasons (after its retries)."""
        self._breaker.failed(cause)

    def open_cause(self) -> str | None:
        """Why calls to this tool fail at once now (its breaker is open), else None; past the
        pause, the first caller is let through as the probe."""
        return self._breaker.open_cause()


class ToolGates:
    """One gate per tool and provider account, shared by every row, dataset and run that
    uses it: local ones (this process), or, with a ``store`` that other processes use too,
    shared ones for the tools that ``shares_gate`` (the rest from ``local``'s gates). The
    runs on one URL share one object, each with its own store object for the URL (``using``)."""

    def __init__(
        self, clock: Clock, *, store: Store | None = None, local: ToolGates | None = None
    ) -> None:
        self._clock = clock
        self.store = store
        self._in_use: list[Store] = []  # the stores of the runs using these gates now
        self._local = local
        self._gates: dict[str, RateGate] = {}
        self._blocked: dict[str, float] = {}  # provider account -> blocked until (monotonic)
        self._polling: dict[str, int] = {}  # tool id -> its jobs' polls on the wire
        self.holder = owner_id(f"gates-{secrets.token_hex(4)}")
        if store is not None:  # its calls in flight count while this object lives
            weakref.finalize(self, keep_alive(self.holder))

    def __getitem__(self, spec: ToolSpec) -> RateGate:
        key = gate_key(spec)
        gate = self._gates.get(key)
        if gate is None:
            if self.store is not None and shares_gate(spec):
                gate = SharedToolGate(spec, self._clock, self._current_store, self.holder)
            elif self._local is not None:
                return self._local[spec]
            else:
                gate = ToolGate(spec, self._clock)
            self._gates[key] = gate
        return gate

    def block(self, spec: ToolSpec, seconds: float) -> None:
        """The provider blocks ``spec``'s account for ``seconds`` (ZeroBounce blocks instead
        of answering 429): no request to any tool of the account goes out until then."""
        if self._local is not None:
            self._local.block(spec, seconds)
            return
        until = self._clock.monotonic() + max(0.0, seconds)
        account = account_of(spec)
        self._blocked[account] = max(self._blocked.get(account, 0.0), until)

    def blocked_for(self, spec: ToolSpec) -> float:
        """Seconds until requests to ``spec``'s account may go out again (0: now)."""
        if self._local is not None:
            return self._local.blocked_for(spec)
        if not self._blocked:
            return 0.0
        until = self._blocked.get(account_of(spec))
        return 0.0 if until is None else max(0.0, until - self._clock.monotonic())

    async def flush(self) -> None:
        """Wait until what the shared gates told the store is written (a run's end)."""
        for gate in list(self._gates.values()):
            if isinstance(gate, SharedToolGate):
                await gate.flush()

    @contextmanager
    def using(self, store: Store) -> Iterator[None]:
        """A run's ``store`` while it runs: the shared gates read and write through the
        store of the newest run still going, never one whose run has closed it."""
        self._in_use.append(store)
        try:
            yield
        finally:
            self._in_use.remove(store)

    def _current_store(self) -> Store:
        store = self._in_use[-1] if self._in_use else self.store
        assert store is not None
        return store

    @contextmanager
    def polling(self, spec: ToolSpec) -> Iterator[None]:
        """A poll of one of ``spec``'s jobs on the wire (polls take no slot or rate token:
        counted for ``statistics`` alone)."""
        self._polling[spec.id] = self._polling.get(spec.id, 0) + 1
        try:
            yield
        finally:
            self._polling[spec.id] -= 1

    def statistics(self) -> dict[str, dict[str, int]]:
        """Per tool, the calls in flight and waiting of this object's gates (not ``local``'s),
        and its jobs' polls on the wire."""
        stats: dict[str, dict[str, int]] = {}
        for key, gate in self._gates.items():
            into = stats.setdefault(key.rpartition("@")[0], {"in_flight": 0, "waiting": 0})
            # a call waiting for room in the token windows holds its slot, but is not sent
            tokens = gate.tokens.waiting if gate.tokens is not None else 0
            into["in_flight"] += gate.in_flight - tokens
            into["waiting"] += gate.waiting + tokens
        for tool, polls in self._polling.items():
            stats.setdefault(tool, {"in_flight": 0, "waiting": 0})["polling"] = polls
        return stats
