"""Rate limiters, concurrency caps and governance counters."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, fields

from ._clock import Clock
from .errors import GovernanceError, PlayDefinitionError
from .tools import ToolSpec

__all__ = ["Governor", "Limits", "RateLimiter", "ToolGate", "ToolGates"]

DEFAULT_CONCURRENCY = 8
_EPSILON = 1e-6
PACE = 0.95  # share of a declared rate actually used
LEARN_START = 50.0  # requests/s a tool without a declared rate is assumed to take at first
LEARN_FLOOR = 0.1
LEARN_STEP = 1.15  # the learned rate climbs by this factor after each clean stretch
SLOW_LEARNED = 0.7  # a learned rate drops by 30% on a 429
SLOW_DECLARED = 0.8  # a declared rate that still drew a 429 drops by a fifth
LEARN_STRETCH = 10  # calls without a 429 before the learned rate is raised


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

    async def acquire(self) -> None:
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
                        self._tokens = max(0.0, self._tokens - 1)
                        return
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

    @property
    def paused(self) -> bool:
        return self._paused_until > self._clock.monotonic()

    def pause(self, seconds: float) -> None:
        """Send nothing for ``seconds`` (the provider said so), then start from an empty
        bucket: the pause earns no tokens, so it never ends in a burst."""
        self._paused_until = max(self._paused_until, self._clock.monotonic() + seconds)
        self._tokens = 0.0
        self._stamp = self._paused_until


class ToolGate:
    """What a call to one tool must pass: its rate limiter and its concurrency cap.

    A declared rate is paced a little under (``PACE``): network jitter must not push requests
    over the provider's limit. On a 429 the tool's callers all pause for Retry-After and the
    rate drops (once per episode of 429s); after a clean stretch of calls it climbs back, up
    to the declared rate. A tool with no declared rate learns one the same way.
    """

    def __init__(self, spec: ToolSpec, clock: Clock) -> None:
        rate = spec.rate
        self._clock = clock
        self.ceiling = rate.per_second * PACE if rate.per_second else None
        self.limiter = (
            RateLimiter(clock, self.ceiling, rate.burst) if self.ceiling is not None else None
        )
        self._clean = 0
        self.concurrency = rate.concurrency or DEFAULT_CONCURRENCY
        self._slots = asyncio.Semaphore(self.concurrency)
        self.in_flight = 0

    @property
    def waiting(self) -> int:
        return self.limiter.waiting if self.limiter else 0

    def wait_time(self) -> float:
        """Seconds until this gate would let a call through its rate limit."""
        return self.limiter.wait_time() if self.limiter else 0.0

    def pause(self, seconds: float) -> None:
        """The provider answered 429: hold every caller of this tool for ``seconds``."""
        if self.limiter is None:
            self.limiter = RateLimiter(self._clock, LEARN_START, 1)
        if not self.limiter.paused:  # the first 429 of an episode slows the tool down
            factor = SLOW_LEARNED if self.ceiling is None else SLOW_DECLARED
            self.limiter.per_second = max(LEARN_FLOOR, self.limiter.per_second * factor)
        self._clean = 0
        self.limiter.pause(seconds)

    def _succeeded(self) -> None:
        limiter = self.limiter
        if limiter is None or (self.ceiling is not None and limiter.per_second >= self.ceiling):
            return
        self._clean += 1
        if self._clean >= LEARN_STRETCH:
            self._clean = 0
            raised = limiter.per_second * LEARN_STEP
            limiter.per_second = raised if self.ceiling is None else min(self.ceiling, raised)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        async with self._slots:
            if self.limiter:
                await self.limiter.acquire()
            self.in_flight += 1
            try:
                yield
            finally:
                self.in_flight -= 1
            self._succeeded()


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


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Governance limits of a play (SEMANTICS.md 26). ``None`` means unlimited."""

    depth: int | None = 6
    child_plays: int | None = 32
    tool_calls: int | None = None
    retries: int | None = 200
    descendants: int | None = 64
    children_per_parent: int | None = 16
    concurrent_child_plays: int | None = 16

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise PlayDefinitionError(
                    f"Limits({f.name}={value!r}) must be a whole number >= 0 or None."
                )


_LABELS = {
    "tool_calls": "Tool-call budget",
    "retries": "Retry budget",
    "child_plays": "Child play-call budget",
    "descendants": "Descendant play budget",
}


class Governor:
    """Counts what a run spends against its ``Limits``; a counter past its limit raises."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.counts: dict[str, int] = {}

    def spend(self, counter: str, n: int = 1) -> None:
        total = self.counts.get(counter, 0) + n
        self.counts[counter] = total
        limit: int | None = getattr(self.limits, counter)
        if limit is not None and total > limit:
            raise GovernanceError(
                f"{_LABELS.get(counter, counter)} exceeded ({total}/{limit}). Raise "
                f"limits={{'{counter}': ...}} on @pl.play if this is expected.",
                counter=counter,
                limit=limit,
            )
