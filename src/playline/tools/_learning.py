"""How a gate learns a tool's limits from what the provider answers (see ``_gates.py``).

The rules are pure functions from what was learned (``Tuning``) and what was seen
(``Seen``) to what is learned next, so the local gate applies them to its own fields and the
shared gate applies them to the store's row in one transaction (``GateStore.tune_gate``).
What a process sees (``Observations``) stays with it: each judges the answers it got.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

__all__ = [
    "ACHIEVED_WINDOW",
    "LEARN_START",
    "LEARN_STRETCH",
    "MIN_RATE",
    "NOISE_REST",
    "Observations",
    "Seen",
    "Tuning",
    "climb",
    "cut_cap",
    "cut_rate",
]

LEARN_START = 50.0  # requests/s a tool without a declared rate is assumed to take at first
MIN_RATE = 0.2  # requests/s: the lowest a learned rate may fall
LEARN_STEP = 1.15
SLOW_LEARNED = 0.7
SLOW_DECLARED = 0.8
LEARN_STRETCH = 10  # successes without a 429 before the rate climbs again
ACHIEVED_WINDOW = 60.0  # seconds over which the achieved rate is measured
NOISE_REST = 60.0  # seconds cuts rest once 429s proved not to be about our rate
CAP_REST = 1.0  # seconds between two cuts of the concurrency cap
HISTORY = 32  # outcomes kept to tell rate 429s from random ones


@dataclass(frozen=True, slots=True, kw_only=True)
class Tuning:
    """What a gate has learned: its rate (0: none yet) and cap, and when it may cut again."""

    rate: float
    cap: int
    cut_until: float = 0.0
    cap_cut_until: float = 0.0
    noise_until: float = 0.0
    last_rate: float = 0.0  # the rate before the last cut, while it is judged (0: none)
    last_share: float = 0.0  # the share of 429s when that cut was made


@dataclass(frozen=True, slots=True)
class Seen:
    """What one process saw, when a rule runs."""

    share: float  # of 429s among the last ``HISTORY`` answers
    since_cut: tuple[int, int]  # (429s, answers) since the last cut this process knows of
    achieved: float  # successful calls per second over the last minute


class Observations:
    """The answers this process got from one tool."""

    def __init__(self, now: float) -> None:
        self._outcomes: deque[bool] = deque(maxlen=HISTORY)  # True: a 429
        self._successes: deque[float] = deque()  # when calls succeeded
        self._born = now
        self._clean = 0  # successes since the last 429
        self._since_cut = [0, 0]

    def throttled(self) -> None:
        self._clean = 0
        self._outcomes.append(True)
        self._since_cut[0] += 1
        self._since_cut[1] += 1

    def succeeded(self, now: float) -> bool:
        """Count a success; True when it ends a clean stretch (time to climb)."""
        self._outcomes.append(False)
        self._successes.append(now)
        self._since_cut[1] += 1
        self._clean += 1
        if self._clean < LEARN_STRETCH:
            return False
        self._clean = 0
        return True

    def cut(self) -> None:
        """A cut was made: judge it on the answers from now on."""
        self._since_cut = [0, 0]

    def seen(self, now: float) -> Seen:
        share = sum(self._outcomes) / len(self._outcomes) if self._outcomes else 0.0
        return Seen(share, (self._since_cut[0], self._since_cut[1]), self._achieved(now))

    def _achieved(self, now: float) -> float:
        while self._successes and self._successes[0] < now - ACHIEVED_WINDOW:
            self._successes.popleft()
        span = min(ACHIEVED_WINDOW, max(1.0, now - self._born))
        return len(self._successes) / span


def cut_cap(tuning: Tuning, now: float) -> Tuning:
    """A 429 naming no wait is first a concurrency signal: halve the cap (once a second)."""
    if now < tuning.cap_cut_until:
        return tuning
    return replace(tuning, cap=max(1, tuning.cap // 2), cap_cut_until=now + CAP_REST)


def cut_rate(
    tuning: Tuning, seen: Seen, now: float, *, window: float, declared: bool, min_rate: float
) -> tuple[Tuning, bool]:
    """A 429 with a wait: lower the rate, at most once per ``window``, never below the rate
    achieved (nor ``min_rate``); True when it did. A tool without a rate gets one. When the
    last cut did not lower the share of 429s, they are not about the rate: it is undone and
    cuts rest for ``NOISE_REST``."""
    if now < tuning.cut_until or now < tuning.noise_until:
        return tuning, False
    rate = tuning.rate if tuning.rate > 0 else max(seen.achieved, LEARN_START)
    throttled, answers = seen.since_cut
    # Judged on calls sent after the cut: those in flight at the time come back first.
    judged = tuning.last_rate > 0 and answers >= max(HISTORY // 2, 2 * tuning.cap + 8)
    if judged and throttled / answers >= 0.8 * tuning.last_share:
        undone = replace(
            tuning,
            rate=tuning.last_rate,
            last_rate=0.0,
            last_share=0.0,
            noise_until=now + NOISE_REST,
        )
        return undone, False
    floor = max(min_rate, min(seen.achieved, rate))
    cut = replace(
        tuning,
        rate=max(floor, rate * (SLOW_DECLARED if declared else SLOW_LEARNED)),
        last_rate=rate,
        last_share=seen.share,
        cut_until=now + window,
    )
    return cut, True


def climb(tuning: Tuning, *, ceiling: float, declared_cap: int) -> Tuning:
    """After a clean stretch: the cap up by one and the rate up 15%, up to what is declared
    (an undeclared rate has no ceiling: ``ceiling`` 0)."""
    cap = min(declared_cap, tuning.cap + 1) if tuning.cap < declared_cap else tuning.cap
    rate = tuning.rate
    if rate > 0 and (ceiling <= 0 or rate < ceiling):
        rate = rate * LEARN_STEP if ceiling <= 0 else min(ceiling, rate * LEARN_STEP)
    return replace(tuning, cap=cap, rate=rate)
