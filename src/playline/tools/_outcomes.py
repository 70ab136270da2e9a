"""Outcome rules: what a provider's answer means, declared (``pl.Outcome``).

Providers encode the same outcomes differently: People Data Labs answers 404 for "not
found", Apollo 200 with nothing, Hunter 403 for "too fast" and 429 for "monthly quota used
up", Prospeo 200 with ``error: true`` and ``NO_MATCH``, LeadMagic 402 for "out of credits".
A tool lists rules in order; the first whose status and body match says the outcome:

- ``found``: the answer holds a result; ``not_found``: it says there is none (not charged
  unless the tool's cost says so);
- ``pending``: an async job was accepted, its id at ``job`` (polled; see ``HttpPoll``);
- ``rate_limited``: too fast, wait (``Retry-After``, ``RateLimit-Reset``,
  ``X-RateLimit-Reset``, a body field, or the rule's ``wait``), then send the same request;
- ``blocked``: every request to the account is refused for a while (ZeroBounce blocks for a
  minute to a day): wait as for ``rate_limited``, longer by default;
- ``quota_exhausted``, ``insufficient_credits``: the account can buy nothing more; its calls
  fail for the rest of the run with that cause (a waterfall goes on with its next step);
- ``retryable``: the provider did no work and says to try again: sent again with backoff;
- ``fatal``: the provider refused the request: the cell fails with its message.

Rules after the tool's: 429 is ``rate_limited``, 2xx is ``found`` (``not_found`` when the
result is empty). An answer no rule matches fails its cell with the status and the start of
the body (never a secret).
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal, cast

from .._limits import is_amount
from ..errors import PlayDefinitionError
from ._result import dotted, is_value

__all__ = [
    "OUTCOMES",
    "Answer",
    "Outcome",
    "OutcomeName",
    "Reported",
    "match",
    "parse_retry_after",
    "remaining_of",
    "retry_after_seconds",
    "wait_of",
]

OutcomeName = Literal[
    "found",
    "not_found",
    "pending",
    "rate_limited",
    "blocked",
    "quota_exhausted",
    "insufficient_credits",
    "retryable",
    "fatal",
]
OUTCOMES: tuple[str, ...] = OutcomeName.__args__  # type: ignore[attr-defined]
DEFAULT_WAIT = {"rate_limited": 1.0, "blocked": 60.0}  # seconds, when the answer names none
_EPOCH = 1_000_000_000  # a reset header past this is a time (epoch seconds), not a delay


@dataclass(frozen=True, slots=True)
class Answer:
    """A provider's answer to one input: an HTTP status, its headers, the JSON body (or the
    item of a bulk answer), and the raw text for messages."""

    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)
    text: str = ""


@dataclass(frozen=True)
class Outcome:
    """A rule: an answer whose ``status`` and ``body`` match means ``outcome``.

    ``status``: a code, several (a list, a range), or a class such as ``"4xx"``; None for any.
    ``body``: dotted paths and the values they must hold (``{"error": True, "error_code":
    "NO_MATCH"}``; None for absent), or a function of the body; None for any body.
    ``wait``: seconds to wait (``rate_limited``, ``blocked``) when the answer names none;
    ``wait_from``: a body path holding them. ``job``: where a ``pending`` answer's job id is
    (a poll's pending answers need none: the job stays the one polled).
    ``message``: a body path with the provider's words, for the cell's error.
    ``credits``: what a ``found`` or ``not_found`` answer matching it costs, instead of the
    tool's declared cost (Prospeo's catch-all emails and ZeroBounce's ``unknown`` are free).
    ``repeat``: the answer says the provider answered this input before and charges nothing
    now (Prospeo's ``free_enrichment``). Sent again after a request that may have reached the
    provider (no answer, a crash), the call then costs the tool's declared cost: the earlier
    request is the one the provider charged.
    """

    outcome: OutcomeName
    _: KW_ONLY
    status: int | str | Iterable[int] | None = None
    body: Mapping[str, Any] | Callable[[Any], bool] | None = None
    wait: float | None = None
    wait_from: str | None = None
    job: str | None = None
    message: str | None = None
    credits: float | None = None
    repeat: bool = False

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise PlayDefinitionError(
                f"pl.Outcome({self.outcome!r}): the outcome is one of {', '.join(OUTCOMES)}."
            )
        object.__setattr__(self, "status", _statuses(self.status))
        if self.body is not None and not (callable(self.body) or isinstance(self.body, Mapping)):
            raise PlayDefinitionError(
                f"pl.Outcome({self.outcome!r}, body={self.body!r}): give dotted paths and the "
                'values they hold, e.g. body={"error_code": "NO_MATCH"}, or a function of '
                "the body."
            )
        if self.credits is not None and (
            self.outcome not in ("found", "not_found") or not is_amount(self.credits)
        ):
            raise PlayDefinitionError(
                f"pl.Outcome({self.outcome!r}, credits={self.credits!r}): what a found or "
                "not_found answer costs, a number >= 0 (credits=0 for a free status)."
            )
        if self.repeat is not False and (
            self.repeat is not True or self.outcome not in ("found", "not_found")
        ):
            raise PlayDefinitionError(
                f"pl.Outcome({self.outcome!r}, repeat={self.repeat!r}): True marks a found or "
                "not_found answer the provider gives free because it answered the input before."
            )
        if self.wait is not None and not (
            isinstance(self.wait, int | float) and math.isfinite(self.wait) and self.wait >= 0
        ):
            raise PlayDefinitionError(
                f"pl.Outcome({self.outcome!r}, wait={self.wait!r}): seconds, a number >= 0."
            )

    @property
    def codes(self) -> frozenset[int] | None:
        """The statuses it matches (``status`` as given is read into these), None for any."""
        return cast("frozenset[int] | None", self.status)

    def matches(self, answer: Answer) -> bool:
        codes = self.codes
        if codes is not None and answer.status not in codes:
            return False
        if self.body is None:
            return True
        if callable(self.body):
            try:
                return bool(self.body(answer.body))
            except Exception:  # a predicate that cannot read this body does not match it
                return False
        return all(dotted(answer.body, path) == want for path, want in self.body.items())


@dataclass(frozen=True)
class Reported:
    """Where a provider says what it charged for an answer (``pl.HttpTool(reported=...)``):
    a ``header`` (People Data Labs' ``x-call-credits-spent``, LeadMagic's ``X-Credits-Cost``),
    a body ``path`` (an item's, in a bulk answer), or ``read``, a function of the ``Answer``
    returning credits (None: it does not say). With ``debited``, the value at ``path`` says
    whether the tool's declared cost was charged (Icypeas' per-item ``DEBITED``): the declared
    cost when it holds that value, nothing otherwise.

    The ledger keeps the reported figure beside the declared one, ``playline show`` and the
    UI show where they differ, and budgets count the higher. A header of a bulk answer is
    the request's total, shared equally by its items."""

    header: str | None = None
    path: str | None = None
    debited: Any = None
    read: Callable[[Answer], float | None] | None = None

    def __post_init__(self) -> None:
        given = [name for name in ("header", "path", "read") if getattr(self, name) is not None]
        if len(given) != 1:
            raise PlayDefinitionError(
                "pl.Reported(...) reads the charge from one place: header='x-call-credits-"
                "spent', path='meta.credits' (with debited='DEBITED' for a flag), or read=a "
                f"function of the answer; given: {', '.join(given) or 'none'}."
            )
        for name in ("header", "path"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, str) and value):
                raise PlayDefinitionError(f"pl.Reported({name}={value!r}): give its name.")
        if self.read is not None and not callable(self.read):
            raise PlayDefinitionError("pl.Reported(read=...): a function of the answer.")
        if self.debited is not None and self.path is None:
            raise PlayDefinitionError(
                "pl.Reported(debited=...) says which value at path= means charged: give "
                "path= too, e.g. pl.Reported(path='status', debited='DEBITED')."
            )

    def credits(self, answer: Answer, declared: float) -> float | None:
        """What ``answer`` says was charged (``declared``: the tool's cost, for a flag),
        or None when it says nothing readable."""
        if self.read is not None:
            try:
                return _number(self.read(answer))
            except Exception:  # a function that cannot read this answer: it says nothing
                return None
        if self.header is not None:
            wanted = self.header.lower()
            said = next((v for k, v in answer.headers.items() if k.lower() == wanted), None)
            return _number(said)
        assert self.path is not None
        value = dotted(answer.body, self.path)
        if self.debited is not None:
            return float(declared) if value == self.debited else 0.0
        return _number(value)


def _statuses(status: object) -> frozenset[int] | None:
    if status is None:
        return None
    if isinstance(status, bool):
        pass
    elif isinstance(status, int):
        return frozenset({status})
    elif isinstance(status, str) and len(status) == 3 and status[0] in "12345":
        if status[1:].lower() == "xx":
            first = int(status[0]) * 100
            return frozenset(range(first, first + 100))
    elif isinstance(status, Iterable) and not isinstance(status, str | bytes | Mapping):
        codes = list(status)
        if codes and all(isinstance(c, int) and not isinstance(c, bool) for c in codes):
            return frozenset(codes)
    raise PlayDefinitionError(
        f"pl.Outcome(status={status!r}): give a status code (404), several ([402, 403], "
        'range(500, 600)) or a class ("5xx").'
    )


_FALLBACK = (Outcome("rate_limited", status=429),)


def match(rules: Iterable[Outcome], answer: Answer, result: str | None) -> Outcome | None:
    """The first rule ``answer`` matches, then the fallbacks: 429 is rate limited, a 2xx
    found (not found when ``result`` holds nothing). None: no rule says what it means."""
    for rule in (*rules, *_FALLBACK):
        if rule.matches(answer):
            return rule
    if 200 <= answer.status < 300:
        data = answer.body if result is None else dotted(answer.body, result)
        return _FOUND if is_value(data) else _NOT_FOUND
    return None


_FOUND, _NOT_FOUND = Outcome("found"), Outcome("not_found")


def wait_of(rule: Outcome, answer: Answer, now: float | None = None) -> float:
    """Seconds a ``rate_limited`` or ``blocked`` answer asks to wait: the rule's body path,
    else ``Retry-After`` (seconds or an HTTP date), ``RateLimit-Reset`` (seconds),
    ``X-RateLimit-Reset`` (seconds, or a time in epoch seconds), else the rule's ``wait``
    or the outcome's default."""
    now = time.time() if now is None else now
    if rule.wait_from:
        seconds = _number(dotted(answer.body, rule.wait_from))
        if seconds is not None:
            return seconds
    headers = {k.lower(): v for k, v in answer.headers.items()}
    seconds = retry_after_seconds(headers.get("retry-after"), now)
    if seconds is not None:
        return seconds
    for name in ("ratelimit-reset", "x-ratelimit-reset"):
        seconds = _number(headers.get(name))
        if seconds is not None:
            return max(0.0, seconds - now) if seconds > _EPOCH else seconds
    if rule.wait is not None:
        return float(rule.wait)
    return DEFAULT_WAIT.get(rule.outcome, 1.0)


# Remaining-budget headers and the window each one counts when the answer names no reset:
# IETF RateLimit (LeadMagic), the common X-RateLimit, Apollo's per window (the day's under
# its two documented names) and Prospeo's (with their resets in seconds).
_REMAINING = (
    ("ratelimit-remaining", ("ratelimit-reset",), 60.0),
    ("x-ratelimit-remaining", ("x-ratelimit-reset",), 60.0),
    ("x-minute-requests-left", (), 60.0),
    ("x-hourly-requests-left", (), 3600.0),
    ("x-24-hour-requests-left", (), 86400.0),
    ("x-daily-requests-left", (), 86400.0),
    ("x-minute-request-left", ("x-minute-reset-seconds",), 60.0),
    ("x-daily-request-left", ("x-daily-reset-seconds",), 86400.0),
)


def remaining_of(headers: Mapping[str, str], now: float | None = None) -> tuple[int, float] | None:
    """What an answer's remaining-budget headers say of the window with the fewest requests
    left: how many, and the seconds until it resets (the header's reset, in seconds or as an
    epoch time, else the window's length); None when it says nothing."""
    now = time.time() if now is None else now
    lowered = {k.lower(): v for k, v in headers.items()}
    tightest: tuple[int, float] | None = None
    for name, resets, window in _REMAINING:
        left = _number(lowered.get(name))
        if left is None:
            continue
        reset = next((r for r in (_number(lowered.get(h)) for h in resets) if r is not None), None)
        if reset is None:
            reset = window
        elif reset > _EPOCH:
            reset = max(0.0, reset - now)
        said = (int(left), reset)
        if tightest is None or (said[0], -said[1]) < (tightest[0], -tightest[1]):
            tightest = said
    return tightest


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date), else None."""
    if not value:
        return None
    seconds = _number(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.001, when - (time.time() if now is None else now))


def parse_retry_after(value: str | None, now: float | None = None) -> float:
    """Seconds to wait from a ``Retry-After`` header: seconds or an HTTP date; 1 when absent."""
    seconds = retry_after_seconds(value, now)
    return 1.0 if seconds is None else seconds


def _number(value: Any) -> float | None:
    """A non-negative finite number of seconds in ``value`` (a number or its text), else None."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
