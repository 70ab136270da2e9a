"""Shared rate gates: a tool's budget per provider account, kept in the store, so that every
process on one store spends one rate limit and one concurrency cap.

A gate is one row per key (the tool id and the provider account it is called with):

- a **token bucket**: ``rate`` tokens a second, at most ``burst`` saved up, ``tokens`` left at
  ``stamp``, none earned before ``paused_until`` (a 429's Retry-After holds every process);
- **what the gates learned** (``tools/_gates.py`` says how): the rate now, when the next cut may
  come (``cut_until``), the rate before the last cut and the share of 429s then (to undo a cut
  that did not help), a rest from cuts (``noise_until``), the concurrency cap now;
- when the tool declares a concurrency cap (``cap > 0``), the **calls in flight** of each holder
  (a process's gate) under a lease: a holder that died stops counting when its lease runs out,
  or at once on its own host (its pid is gone).

Processes take tokens in **leases**: one statement grants up to N at once (a wave of requests),
never one per call. Times are wall-clock seconds (``Clock.now()``), which every process shares.

A lease that finds no token may **reserve** the next ones (``ahead``): the bucket goes into
debt (``tokens`` below 0), and the grant says when they are due (``GateGrant.due``), in the
order the reservations were made. A process queued behind others sleeps until its tokens are
due instead of asking again each time one comes, so a token costs one lease however many
processes wait (when each asked again, sixteen processes made 3.2-4.3 leases a call, most
finding nothing, and queued 20-66 ms a lease for the gate's lock). Under a shared cap only
the next token, none ahead of it, is reserved with its slots; tokens reserved behind others'
take theirs when they are due (``take_slots``, which also answers the gate as it is, so that
their holder sees a pause, a 429, that began since and voids them).

``GateState.lease`` is the reference for a lease (``GateState.take``, one pass of it); the SQL
stores compute each pass in one ``UPDATE ... RETURNING`` (``sql/_gate_tables.py``), and the
conformance suite holds them to it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from ._claims import lease_live

__all__ = [
    "GateConfig",
    "GateGrant",
    "GateState",
    "SendLog",
    "Window",
    "count_in_flight",
    "window_room",
]

# Wall-clock time at epoch scale is coarse (a float holds it to about 2e-7 s), and so is a
# refill computed from it: a token this much short counts as whole.
EPSILON = 1e-4


@dataclass(frozen=True, slots=True, kw_only=True)
class GateConfig:
    """What a process declares of a gate. A new gate starts from it; a gate that was declared
    otherwise (another ceiling, burst or cap: the provider changed its limits) starts again
    from it, forgetting what was learned.

    A new gate's bucket starts half full: the provider's may not be full (the account was
    used a moment ago, from elsewhere), and processes starting together send their first
    requests with uneven delays. Measured with three processes against a bucket of 20 at
    20/s: starting full drew one or two 429s per run; half full, none. A shared bucket of
    an LLM's tokens a minute starts full (``start=1``), as a process's own does: it holds a
    minute of tokens, and half of it would cost every run on a new store half a minute
    (``python -m bench llm``: 1.33x the bound instead of 1.02x)."""

    ceiling: float = 0.0  # requests/s the rate may climb to; 0: none declared (learned on a 429)
    burst: int = 1
    cap: int = 0  # calls in flight shared by every holder; 0: each process keeps its own cap
    windows: tuple[Window, ...] = ()  # (seconds, requests): at most that many in any such span
    start: float = 0.5  # the share of the burst a new gate's bucket holds

    def fresh(self, key: str, now: float) -> GateState:
        return GateState(
            key=key,
            rate=self.ceiling,
            burst=self.burst,
            tokens=self.burst * self.start,
            stamp=now,
            ceiling=self.ceiling,
            declared_cap=self.cap,
            cap=self.cap,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class GateState:
    """A gate as the store keeps it (a snapshot)."""

    key: str
    rate: float  # tokens a second now; 0: not limited (nothing declared or learned yet)
    burst: int
    tokens: float
    stamp: float  # when ``tokens`` was counted (never earlier than the end of a pause)
    paused_until: float = 0.0
    ceiling: float = 0.0  # declared
    declared_cap: int = 0  # declared
    cap: int = 0  # the shared concurrency cap now (learned: at most ``declared_cap``)
    cut_until: float = 0.0  # no rate cut before this
    cap_cut_until: float = 0.0  # no cap cut before this
    noise_until: float = 0.0  # 429s proved not to be about the rate: no cuts before this
    last_rate: float = 0.0  # the rate before the series of cuts under way
    last_cap: int = 0  # the cap before it; 0: no series under way (``tools/_learning.py``)
    last_share: float = 0.0  # the share of 429s after the series' previous step
    in_flight: int = 0  # (in a lease's answer) calls in flight of every live holder

    def declared_as(self, config: GateConfig) -> bool:
        return (self.ceiling, self.burst if self.ceiling else 1, self.declared_cap) == (
            config.ceiling,
            config.burst if config.ceiling else 1,
            config.cap,
        )

    def available(self, now: float) -> float:
        """Tokens in the bucket at ``now`` (none while paused)."""
        if self.rate <= 0:
            return float(self.burst)
        return min(self.burst, self.tokens + max(0.0, now - self.stamp) * self.rate)

    def wait(self, now: float) -> float:
        """Seconds until a lease would get a token (0 when it would; slots not counted)."""
        paused = max(0.0, self.paused_until - now)
        if self.rate <= 0:
            return paused
        tokens = self.available(now)
        if tokens >= 1 - EPSILON and not paused:
            return 0.0
        ahead = max(0.0, self.stamp - now)  # a pause (or another clock) put the stamp ahead
        return max(paused, ahead + max(0.0, 1 - tokens) / self.rate)

    def take(
        self, wanted: int, now: float, in_use: int = 0, *, reach: float = 0.0, capped: bool = True
    ) -> tuple[int, GateState]:
        """One pass of a lease at ``now``: up to ``wanted`` tokens, as many as the bucket holds
        and (``capped``) as a shared cap leaves free with ``in_use`` calls in flight; or, with
        no token now, those due within ``reach`` tokens' time, up to the burst, reserved. How
        many were granted, and the gate after it.

        A reservation puts the bucket into debt; its calls go together when the last of them
        is due (``due``). Sent then, they find the provider's bucket as the gate's would have
        been had they gone one by one (none spent those tokens: later reservations come after
        them), hence never more than the burst at once."""
        ask = min(wanted, max(0, self.cap - in_use)) if self.cap > 0 and capped else wanted
        if self.rate <= 0:
            granted, tokens = (0 if self.paused_until > now else ask), self.tokens
        else:
            refill = self.available(now)
            granted, reserved = 0, False
            if self.paused_until <= now and ask > 0:
                if refill >= 1 - EPSILON:
                    granted = min(ask, math.floor(refill + EPSILON))
                else:
                    granted = max(0, min(ask, self.burst, math.floor(refill + reach + EPSILON)))
                    reserved = granted > 0
            # a debt stays a debt; a whole token taken a hair short of whole leaves none
            tokens = refill - granted if reserved else max(min(refill, 0.0), refill - granted)
        return granted, replace(self, tokens=tokens, stamp=max(self.stamp, now))

    def lease(
        self, wanted: int, now: float, in_use: int = 0, *, ahead: float = 0.0, slots: bool = True
    ) -> GateGrant:
        """A lease as every store makes it (``GateStore.lease_gate``; ``in_flight`` left out).

        ``ahead``: with no token now, reserve those due within that many seconds. Under a
        shared cap (``slots``), the tokens granted now, or the next one reserved when no other
        reservation is ahead of it (a call waits at most one token's time with its slots),
        take slots (``grant.slots``); a reservation behind others' takes none (the cap would
        fill with calls not sent): its slots are taken when it is due (``take_slots``), as
        with ``slots=False``, tokens alone."""
        gate = self
        if slots and self.cap > 0:
            granted, gate = self.take(wanted, now, in_use, reach=1.0 if ahead > 0 else 0.0)
            if granted or ahead <= 0 or gate.rate <= 0 or gate.available(now) >= -EPSILON:
                return GateGrant.of(granted, gate, now, slots=granted)
            # others' reservations are ahead: tokens alone, behind them
        granted, gate = gate.take(wanted, now, reach=ahead * max(gate.rate, 0.0), capped=False)
        return GateGrant.of(granted, gate, now)

    def slots_for(self, wanted: int, now: float, in_use: int = 0) -> int:
        """Slots of a shared cap for ``wanted`` calls whose tokens were leased alone: as many
        as the calls in flight (``in_use``) leave free, all without a cap, none in a pause."""
        if self.paused_until > now:
            return 0
        return min(wanted, max(0, self.cap - in_use)) if self.cap > 0 else wanted

    def due(self) -> float:
        """When the bucket's last reserved token is due (its ``stamp`` when it has none)."""
        if self.rate <= 0 or self.tokens >= 0:
            return self.stamp
        return self.stamp - self.tokens / self.rate


@dataclass(frozen=True, slots=True)
class GateGrant:
    """A lease's answer: ``granted`` tokens, and the gate; ``wait``: when a window is full,
    seconds until it has room; ``due``: when the granted calls may go (a reservation's last
    token's time; 0: at once); ``slots``: how many of them took slots of a shared cap."""

    granted: int
    state: GateState
    wait: float = 0.0
    due: float = 0.0
    slots: int = 0

    @classmethod
    def of(
        cls, granted: int, state: GateState, now: float, wait: float = 0.0, *, slots: int = 0
    ) -> GateGrant:
        """The answer of a lease at ``now`` that left the gate ``state``: a grant that put
        the bucket in debt is a reservation, due with its last token."""
        reserved = granted > 0 and state.rate > 0 and state.tokens < 0
        return cls(granted, state, wait, state.due() if reserved else 0.0, slots)


Window = tuple[float, int]  # (seconds, requests)


def window_room(
    used: Sequence[int], windows: Sequence[Window], oldest: Callable[[Window, int], float]
) -> tuple[int, float]:
    """How many requests every window lets out now (``used[i]``: requests sent in the last
    ``windows[i][0]`` seconds), and, when one is full, the seconds until it has room:
    ``oldest(window, k)`` says how long until the ``k``-th oldest request in it leaves it.

    A window is a sliding one: at most its limit in *any* span of its length. It never lets
    more out than a provider's fixed window (minute, hour, day) or rolling one would."""
    room, wait = math.inf, 0.0
    for (seconds, limit), sent in zip(windows, used, strict=True):
        if sent >= limit:
            wait = max(wait, oldest((seconds, limit), sent - limit + 1))
        room = min(room, max(0, limit - sent))
    return int(room), wait if room <= 0 else 0.0


class SendLog:
    """The requests let out under sliding windows, in memory: a process's gate, and the
    memory store's shared one (the SQL stores keep them in ``gate_sends``)."""

    def __init__(self, windows: Sequence[Window]) -> None:
        self.windows = tuple(windows)
        self._span = max(seconds for seconds, _ in self.windows)
        self._sends: list[tuple[float, int]] = []  # (when, how many), oldest first

    def room(self, now: float) -> tuple[int, float]:
        """How many may go now, and (none) the seconds until one may."""
        self._sends = [(at, n) for at, n in self._sends if at > now - self._span]
        used = [sum(n for at, n in self._sends if at > now - s) for s, _ in self.windows]
        return window_room(used, self.windows, self._leaves(now))

    def take(self, count: int, now: float) -> None:
        if count > 0:
            self._sends.append((now, count))

    def give_back(self, count: int) -> None:
        """``count`` of the latest requests were not sent after all."""
        while count > 0 and self._sends:
            at, n = self._sends.pop()
            if n > count:
                self._sends.append((at, n - count))
            count -= n

    def _leaves(self, now: float) -> Callable[[Window, int], float]:
        def oldest(window: Window, k: int) -> float:
            seconds = window[0]
            for at, n in self._sends:
                if at > now - seconds:
                    k -= n
                    if k <= 0:
                        return at + seconds - now
            return 0.0

        return oldest


def count_in_flight(
    holders: Iterable[tuple[str, int, float]], holder: str, now: float
) -> tuple[int, list[str]]:
    """The calls in flight under a shared cap, from ``(holder, calls, lease_until)`` rows: those
    of live holders (``holder``, the one asking, counts whatever its lease says); and the
    holders that are gone, whose rows can be dropped."""
    in_use, gone = 0, []
    for other, calls, lease_until in holders:
        if other == holder or lease_live(other, lease_until, now):
            in_use += calls
        else:
            gone.append(other)
    return in_use, gone
