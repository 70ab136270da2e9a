"""What a call to a tool passes on its way out: a rate limit, a concurrency cap, a breaker.

One ``ToolGate`` per tool (per provider account), shared by every row, dataset and run that
uses it. The gate learns from what the provider answers:

- A **429 with Retry-After** is a rate signal: the call that got it waits that long, and the
  tool's rate drops (x0.7 learned, x0.8 declared; every caller pausing for the Retry-After)
  at most once per Retry-After window, never below the rate the tool actually achieved over
  the last minute (nor ``min_rate``). When a cut does not lower the share of 429s, they are
  not about our rate (shared quotas, random throttling): the cut is undone and cuts rest for
  a minute, so random 429s cannot collapse the rate.
- A **429 naming no cause** (no Retry-After) is first a concurrency signal: the cap on calls
  in flight halves (once a second, down to 1); only then is it taken as a rate signal.
- After a clean stretch (``LEARN_STRETCH`` successes without a 429) the rate climbs back by
  15% and the cap by one, up to what the tool declares.
- A tool that keeps **failing** (5xx, timeouts, refused connections, after retries) trips a
  circuit breaker: its calls fail at once with the cause for a pause (10 s, doubling up to
  5 minutes), then one probe call decides whether it is back.

A tool that declares no rate is not limited until its first 429; it then learns one.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

from .._clock import Clock
from ._spec import ToolSpec

__all__ = ["RateGate", "RateLimiter", "ToolGate", "ToolGates"]

DEFAULT_CONCURRENCY = 8
PACE = 0.95  # share of a declared rate used: network jitter must not push requests over it
LEARN_START = 50.0  # requests/s a tool without a declared rate is assumed to take at first
MIN_RATE = 0.2  # requests/s: the lowest a learned rate may fall
LEARN_STEP = 1.15
SLOW_LEARNED = 0.7
SLOW_DECLARED = 0.8
LEARN_STRETCH = 10  # successes without a 429 before the rate climbs again
ACHIEVED_WINDOW = 60.0  # seconds over which the achieved rate is measured
NOISE_REST = 60.0  # seconds cuts rest once 429s proved not to be about our rate
BREAK_AFTER = 5  # failures in a row that open the breaker
BREAK_FIRST, BREAK_MAX = 10.0, 300.0  # seconds the breaker stays open
_EPSILON = 1e-6
_HISTORY = 32  # outcomes kept to tell rate 429s from random ones


class RateGate(Protocol):
    """A tool's gate: local (this process) or shared (every process on one store)."""

    in_flight: int

    @property
    def waiting(self) -> int: ...
    def slot(self) -> AbstractAsyncContextManager[None]: ...
    async def acquire(self, wanted: int) -> int: ...
    def release(self, count: int) -> None: ...
    def wait_time(self) -> float: ...
    def throttled(self, retry_after: float | None) -> float: ...
    def succeeded(self) -> None: ...
    def failed(self, cause: str) -> None: ...
    def open_cause(self) -> str | None: ...


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


class _Slots:
    """A concurrency cap that can move while callers wait (first come, first served)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.in_use = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self, wanted: int = 1) -> int:
        """Wait for a free slot, then take as many as are free, up to ``wanted``."""
        if self.in_use >= self.cap or self._waiters:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter  # handed one slot
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self.release()  # handed a slot as it was cancelled: pass it on
                elif waiter in self._waiters:
                    self._waiters.remove(waiter)
                raise
            more = 0
        else:
            self.in_use += 1
            more = 0
        if not self._waiters:
            more = max(0, min(wanted - 1, self.cap - self.in_use))
            self.in_use += more
        return 1 + more

    def release(self, count: int = 1) -> None:
        self.in_use -= count
        self.wake()

    def wake(self) -> None:
        while self._waiters and self.in_use < self.cap:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_use += 1
                waiter.set_result(None)

    @property
    def waiting(self) -> int:
        return len(self._waiters)


class ToolGate:
    """The local gate of one tool: this process's calls to it (see the module docstring)."""

    def __init__(self, spec: ToolSpec, clock: Clock, *, min_rate: float = MIN_RATE) -> None:
        rate = spec.rate
        self._clock = clock
        self.ceiling = rate.per_second * PACE if rate.per_second else None
        self.min_rate = min_rate
        self.limiter = (
            RateLimiter(clock, self.ceiling, rate.burst) if self.ceiling is not None else None
        )
        self.declared_concurrency = rate.concurrency or DEFAULT_CONCURRENCY
        self._slots = _Slots(self.declared_concurrency)
        self.in_flight = 0
        # learning
        self._clean = 0  # successes since the last 429
        self._outcomes: deque[bool] = deque(maxlen=_HISTORY)  # True: a 429
        self._successes: deque[float] = deque()  # when calls succeeded (for the achieved rate)
        self._born = clock.monotonic()
        self._cut_until = 0.0  # no new rate cut before this
        self._cap_cut_until = 0.0
        self._last_cut: tuple[float, float] | None = None  # (rate before it, 429 share then)
        self._noise_until = 0.0
        self._since_cut = [0, 0]  # outcomes since the last cut: [429s, all]
        # the breaker
        self._failures = 0
        self._open_until = 0.0
        self._open_for = BREAK_FIRST
        self._cause: str | None = None
        self._probing = False

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
    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """One call through: a concurrency slot and a rate token."""
        await self.acquire(1)
        try:
            yield
        finally:
            self.release(1)

    async def acquire(self, wanted: int) -> int:
        """Let up to ``wanted`` calls through at once (at least one: it waits for that one);
        returns how many may go. ``release`` them when they are done."""
        granted = await self._slots.acquire(wanted)
        try:
            if self.limiter:
                tokens = await self.limiter.acquire(granted)
                if tokens < granted:  # the rate allows fewer now: give the rest back
                    self._slots.release(granted - tokens)
                    granted = tokens
        except BaseException:
            self._slots.release(granted)
            raise
        self.in_flight += granted
        return granted

    def release(self, count: int) -> None:
        self.in_flight -= count
        self._slots.release(count)

    # learning from answers
    def throttled(self, retry_after: float | None) -> float:
        """The provider answered 429; returns how long the throttled call should wait."""
        now = self._clock.monotonic()
        self._clean = 0
        self._outcomes.append(True)
        self._since_cut[0] += 1
        self._since_cut[1] += 1
        wait = 1.0 if retry_after is None else max(0.0, retry_after)
        if retry_after is None and self._slots.cap > 1:
            if now >= self._cap_cut_until:  # first a concurrency signal
                self._slots.cap = max(1, self._slots.cap // 2)
                self._cap_cut_until = now + 1.0
            return wait
        if self._cut_rate(now, window=wait) and self.limiter is not None:
            # The provider's bucket is empty: everyone holds for Retry-After, not only the
            # call that heard it (the others would draw 429s of their own).
            self.limiter.pause(wait)
        return wait

    def _cut_rate(self, now: float, *, window: float) -> bool:
        """Lower the rate (at most once per ``window``); True when it did."""
        if now < self._cut_until or now < self._noise_until:
            return False
        share = sum(self._outcomes) / len(self._outcomes)
        if self.limiter is None:
            self.limiter = RateLimiter(self._clock, max(self._achieved(now), LEARN_START), 1)
        limiter = self.limiter
        last = self._last_cut
        throttled, seen = self._since_cut
        # Judged on calls sent after the cut: those in flight at the time come back first.
        judged = last is not None and seen >= max(_HISTORY // 2, 2 * self._slots.cap + 8)
        if judged and last is not None and throttled / seen >= 0.8 * last[1]:
            # the last cut did not lower the share of 429s: they are not about our rate
            limiter.per_second = last[0]
            self._last_cut = None
            self._noise_until = now + NOISE_REST
            return False
        factor = SLOW_LEARNED if self.ceiling is None else SLOW_DECLARED
        floor = max(self.min_rate, min(self._achieved(now), limiter.per_second))
        self._last_cut = (limiter.per_second, share)
        limiter.per_second = max(floor, limiter.per_second * factor)
        self._cut_until = now + window
        self._since_cut = [0, 0]
        return True

    def _achieved(self, now: float) -> float:
        """Successful calls per second over the last minute (0 before any)."""
        while self._successes and self._successes[0] < now - ACHIEVED_WINDOW:
            self._successes.popleft()
        span = min(ACHIEVED_WINDOW, max(1.0, now - self._born))
        return len(self._successes) / span

    def succeeded(self) -> None:
        now = self._clock.monotonic()
        self._outcomes.append(False)
        self._successes.append(now)
        self._since_cut[1] += 1
        self._failures = 0
        self._probing = False
        self._open_until = 0.0
        self._open_for = BREAK_FIRST
        self._cause = None
        self._clean += 1
        if self._clean < LEARN_STRETCH:
            return
        self._clean = 0
        if self._slots.cap < self.declared_concurrency:
            self._slots.cap += 1
            self._slots.wake()
        limiter = self.limiter
        if limiter is not None and (self.ceiling is None or limiter.per_second < self.ceiling):
            raised = limiter.per_second * LEARN_STEP
            limiter.per_second = raised if self.ceiling is None else min(self.ceiling, raised)

    # the breaker
    def failed(self, cause: str) -> None:
        """A call failed for the provider's reasons (after its retries)."""
        self._failures += 1
        self._cause = cause
        if self._probing or self._failures >= BREAK_AFTER:
            self._open_until = self._clock.monotonic() + self._open_for
            self._open_for = min(BREAK_MAX, self._open_for * 2)
            self._probing = False

    def open_cause(self) -> str | None:
        """Why calls to this tool fail at once now (its breaker is open), else None; past the
        pause, the first caller is let through as the probe."""
        if self._open_until == 0.0:
            return None
        now = self._clock.monotonic()
        if now < self._open_until or self._probing:
            wait = max(0.0, self._open_until - now)
            return f"it keeps failing ({self._cause}); its calls are paused" + (
                f" for {wait:.0f} s more" if wait >= 1 else ""
            )
        self._probing = True
        return None


class ToolGates:
    """One gate per tool id, shared by every row, dataset and run of the process."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._gates: dict[str, ToolGate] = {}

    def __getitem__(self, spec: ToolSpec) -> ToolGate:
        gate = self._gates.get(spec.id)
        if gate is None:
            gate = self._gates[spec.id] = ToolGate(spec, self._clock)
        return gate

    def statistics(self) -> dict[str, dict[str, int]]:
        return {
            tool: {"in_flight": gate.in_flight, "waiting": gate.waiting}
            for tool, gate in self._gates.items()
        }
