"""How a gate learns a tool's limits from what the provider answers (see ``_gates.py``).

429s come for our pace (the provider's bucket is empty) or for reasons of the provider's own
(random throttling, a shared quota). Only the first kind goes away when we slow down, so
cuts come in series that test which kind it is:

1. The first 429 starts a series: the rate and cap as they are are kept, and the share of
   429s among the next ``JUDGE`` answers is measured as things are.
2. The next 429 then cuts: the cap halves (a 429 naming no wait is first a concurrency
   signal) or the rate halves (never below the rate achieved, nor ``min_rate``).
3. The answers to calls sent after the cut judge it. Were the 429s about our pace, the
   provider would go on answering as many calls a second as before: the share of 429s would
   fall to ``1 - (1 - share before) / cut``. When it stays nearer the share before than that,
   the 429s are not about our pace: the series is undone and cuts rest for ``NOISE_REST``.
   Else the next 429 cuts again, judged the same way against the share before the series.
4. A long clean stretch (``SERIES_END``) ends a series; every ``LEARN_STRETCH`` clean
   answers outside one, the rate climbs 15% and the cap by one, up to what is declared.

The rules are pure functions from what was learned (``Tuning``) and what was seen
(``Seen``) to what is learned next, so the local gate applies them to its own fields and the
shared gate applies them to the store's row in one transaction (``GateStore.tune_gate``).
What a process sees (``Observations``) stays with it: each judges the answers it got.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
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
CUT = 0.5  # of the rate or the cap: a cut large enough to tell the two kinds of 429 apart
LEARN_STRETCH = 10  # successes without a 429 before the rate climbs again
ACHIEVED_WINDOW = 60.0  # seconds over which the achieved rate is measured
NOISE_REST = 60.0  # seconds cuts rest once 429s proved not to be about our rate
CAP_REST = 1.0  # seconds between two cuts of the concurrency cap
HISTORY = 32  # outcomes kept for the share of 429s
JUDGE = 12  # answers to calls sent after a cut before it is judged
SERIES_END = 2 * LEARN_STRETCH  # successes in a row that end a series of cuts


@dataclass(frozen=True, slots=True, kw_only=True)
class Tuning:
    """What a gate has learned: its rate (0: none yet) and cap, when it may cut again, and
    the series of cuts under way (``last_cap`` 0: none)."""

    rate: float
    cap: int
    cut_until: float = 0.0
    cap_cut_until: float = 0.0
    noise_until: float = 0.0
    last_rate: float = 0.0  # the rate before the series
    last_cap: int = 0  # the cap before the series; 0: no series under way
    last_share: float = 0.0  # the share of 429s before the series' first cut (0: not yet)


@dataclass(frozen=True, slots=True)
class Seen:
    """What one process saw, when a rule runs."""

    share: float  # of 429s among the last ``HISTORY`` answers
    since_cut: tuple[int, int]  # (429s, answers) to calls sent after the last cut
    achieved: float  # successful calls per second over the last minute
    clean: int = 0  # successes since the last 429


class Observations:
    """The answers this process got from one tool."""

    def __init__(self, now: float) -> None:
        self._outcomes: deque[bool] = deque(maxlen=HISTORY)  # True: a 429
        self._successes: deque[float] = deque()  # when calls succeeded
        self._born = now
        self._clean = 0  # successes since the last 429
        self._since_cut = [0, 0]
        self._skip = 0  # answers still due to calls sent before the last cut

    def _answered(self, throttled: bool) -> None:
        self._outcomes.append(throttled)
        if self._skip:
            self._skip -= 1
            return
        self._since_cut[0] += throttled
        self._since_cut[1] += 1

    def throttled(self) -> None:
        self._clean = 0
        self._answered(True)

    def succeeded(self, now: float) -> bool:
        """Count a success; True when it ends a clean stretch (time to climb)."""
        self._answered(False)
        self._successes.append(now)
        self._clean += 1
        return self._clean % LEARN_STRETCH == 0

    def cut(self, in_flight: int) -> None:
        """A cut was made with ``in_flight`` calls out: judge it on the answers after theirs."""
        self._since_cut = [0, 0]
        self._skip = in_flight

    def seen(self, now: float) -> Seen:
        share = sum(self._outcomes) / len(self._outcomes) if self._outcomes else 0.0
        since_cut = (self._since_cut[0], self._since_cut[1])
        return Seen(share, since_cut, self._achieved(now), self._clean)

    def _achieved(self, now: float) -> float:
        while self._successes and self._successes[0] < now - ACHIEVED_WINDOW:
            self._successes.popleft()
        span = min(ACHIEVED_WINDOW, max(1.0, now - self._born))
        return len(self._successes) / span


def _judged(tuning: Tuning, seen: Seen, now: float) -> Tuning | None:
    """Where the series stands when a 429 asks for a cut: None while its last step is not
    judged yet; ``tuning`` ready for the next cut (``last_share`` measured); or the series
    undone, cuts resting, when its cuts did not lower the share of 429s as a pace would."""
    throttled, answers = seen.since_cut
    if answers < JUDGE:
        return None
    share = throttled / answers
    if not tuning.last_share:  # the share as things were, before any cut
        return replace(tuning, last_share=max(share, 1 / answers))
    kept = min(
        tuning.rate / tuning.last_rate if tuning.last_rate > 0 else 1.0,
        tuning.cap / tuning.last_cap,
    )
    if kept < 1:
        paced = max(0.0, 1 - (1 - tuning.last_share) / kept)  # were the 429s about our pace
        if share < (tuning.last_share + paced) / 2:
            return tuning  # they were: go on cutting
    return replace(
        tuning,
        rate=tuning.last_rate,
        cap=tuning.last_cap,
        last_rate=0.0,
        last_cap=0,
        last_share=0.0,
        noise_until=now + NOISE_REST,
    )


def _next_step(
    tuning: Tuning, seen: Seen, now: float, cut: Callable[[Tuning], Tuning], rate: float
) -> tuple[Tuning, bool]:
    """A series' next step on a 429 (see the module docstring), starting it at ``rate``;
    True when one was taken (the answers from here on judge it)."""
    if not tuning.last_cap:
        started = replace(tuning, rate=rate, last_rate=rate, last_cap=tuning.cap, last_share=0.0)
        return started, True
    judged = _judged(tuning, seen, now)
    if judged is None or judged.noise_until > now:
        return judged or tuning, False
    return cut(judged), True


def cut_cap(tuning: Tuning, seen: Seen, now: float) -> tuple[Tuning, bool]:
    """A 429 naming no wait: the series' next step on the cap (at most once a second);
    True when one was taken."""
    if now < tuning.cap_cut_until or now < tuning.noise_until:
        return tuning, False

    def halved(judged: Tuning) -> Tuning:
        return replace(judged, cap=max(1, int(judged.cap * CUT)))

    stepped, step = _next_step(tuning, seen, now, halved, tuning.rate)
    return (replace(stepped, cap_cut_until=now + CAP_REST) if step else stepped), step


def cut_rate(
    tuning: Tuning, seen: Seen, now: float, *, window: float, min_rate: float
) -> tuple[Tuning, bool]:
    """A 429 with a wait: the series' next step on the rate (at most once per ``window``);
    True when one was taken. A tool without a rate gets one as the series starts: the rate
    achieved, or ``LEARN_START``."""
    if now < tuning.cut_until or now < tuning.noise_until:
        return tuning, False

    def slowed(judged: Tuning) -> Tuning:
        floor = max(min_rate, min(seen.achieved, judged.rate))
        return replace(judged, rate=max(floor, judged.rate * CUT))

    rate = tuning.rate if tuning.rate > 0 else max(seen.achieved, LEARN_START)
    stepped, step = _next_step(tuning, seen, now, slowed, rate)
    return (replace(stepped, cut_until=now + window) if step else stepped), step


def climb(tuning: Tuning, seen: Seen, *, ceiling: float, declared_cap: int) -> Tuning:
    """After a clean stretch: the cap up by one and the rate up 15%, up to what is declared
    (an undeclared rate has no ceiling: ``ceiling`` 0). A series of cuts ends only after a
    stretch twice as long: random 429s seldom leave one, so they are judged as noise."""
    if tuning.last_cap and seen.clean < SERIES_END:
        return tuning
    cap = min(declared_cap, tuning.cap + 1) if tuning.cap < declared_cap else tuning.cap
    rate = tuning.rate
    if rate > 0 and (ceiling <= 0 or rate < ceiling):
        rate = rate * LEARN_STEP if ceiling <= 0 else min(ceiling, rate * LEARN_STEP)
    return replace(tuning, cap=cap, rate=rate, last_rate=0.0, last_cap=0, last_share=0.0)
