"""Token-aware rate limits: a tool's calls counted in tokens per minute, not only requests.

An LLM provider limits an account (per model) in requests a minute and in tokens a minute,
and counts a request's tokens *before* it runs, from an estimate: OpenAI counts the prompt
plus ``max_tokens`` against TPM and gives nothing back afterwards ("Rate limits in headers"
and "Error mitigation", https://platform.openai.com/docs/guides/rate-limits); Anthropic takes
the input from ITPM and ``max_tokens`` from OTPM, and "the estimate is adjusted at the end"
for the output not used (https://docs.anthropic.com/en/api/rate-limits).

A tool that declares ``Rate(tokens_per_minute=, output_tokens_per_minute=)`` has a
``TokenGate``: one token bucket per limit, holding the limit and refilled at it every minute
and ``WINDOW_MARGIN`` (``_declared.py``: a little under the provider's pace), as the providers
count. Before a call goes out, its estimate (the transport's ``tokens(input)``:
``HttpTool(tokens=...)``) is taken from the buckets, first come first served, waiting until
they hold it; a call larger than a whole bucket can never go and fails at once
(``too_many_tokens``). After its answer, the count is
corrected by what the transport heard (``tokens_used``) at the time the call went out: up
when it used more, down when it used less unless the provider keeps the estimate
(``Rate(tokens_returned=False)``). A call answered 429 counts nothing (the provider took
nothing); a 5xx, a timeout or an answer that says nothing keeps the estimate.

The providers' headers say what the account has left, whoever spent it (other processes,
other programs with the key): OpenAI's ``x-ratelimit-remaining-tokens`` with
``x-ratelimit-reset-tokens`` (a duration: ``6m0s``, ``1s``, ``120ms``), Anthropic's
``anthropic-ratelimit-input-tokens-remaining`` / ``-output-tokens-remaining`` with their
``-reset`` (an RFC 3339 time). Fewer left than the gate thinks: its bucket goes down to the
provider's count, less the tokens of the requests in flight the provider has not counted
yet (``TokenBucket.said``), and refills at its pace from there; a kind with no declared
limit lets out no more than what is left until the reset, as ``_remaining.py`` does for
requests. ``HttpTool(token_headers=)``
names other families; the requests' own headers of both providers (``-requests``) reach
the request gate the same way (``requests_said``).

The transport reports what it heard through a context variable the engine sets around a
call (``take`` sets it, ``Spend.settle`` reads it), so concurrent calls never mix their
answers up; a Python-declared transport reports with ``heard(...)`` too.

The buckets are this process's. On a store that processes share, a shared gate's buckets
are in the store (``SharedTokenGate``, ``_shared_tokens.py``: the same rules, every process's
tokens in one bucket per limit); this gate is for a tool whose gate is not shared.
"""

from __future__ import annotations

import asyncio
import contextvars
import email.utils
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from .._clock import Clock
from ..errors import PlayDefinitionError, ToolError
from ._declared import WINDOW_MARGIN
from ._spec import ToolSpec

__all__ = [
    "TOKEN_HEADERS",
    "Spend",
    "TokenBucket",
    "TokenGate",
    "as_tokens",
    "heard",
    "requests_said",
    "reset_seconds",
    "token_gate",
    "tokens_said",
]

Tokens = tuple[int, int]  # (against tokens_per_minute, against output_tokens_per_minute)
KINDS = ("tokens", "output")
MINUTE = 60.0

# The header families recognised: per kind, (remaining, reset) pairs, tried in order.
TOKEN_HEADERS: dict[str, tuple[tuple[str, str], ...]] = {
    "tokens": (
        ("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),  # OpenAI
        ("anthropic-ratelimit-input-tokens-remaining", "anthropic-ratelimit-input-tokens-reset"),
    ),
    "output": (
        (
            "anthropic-ratelimit-output-tokens-remaining",
            "anthropic-ratelimit-output-tokens-reset",
        ),
    ),
}
_REQUEST_HEADERS = (
    ("x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),  # OpenAI
    ("anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"),
)
_EPOCH = 1e9  # a reset above this is a time (epoch seconds), not a number of seconds


def as_tokens(value: Any, what: str) -> Tokens:
    """``value`` (an int, or ``(input, output)``) as ``Tokens``; ``ValueError`` saying what
    is wrong otherwise."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return (value, 0)
    if (
        isinstance(value, tuple | list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
    ):
        return (int(value[0]), int(value[1]))
    raise ValueError(
        f"{what} gave {value!r}: a whole number of tokens >= 0, or (input, output) tokens"
    )


# -- the buckets ---------------------------------------------------------------------------


# A shortfall below _EPSILON tokens is none, and a wait is at least _QUANTUM seconds: a
# clock read as epoch seconds (1.7e9) resolves 2.4e-7 s, so the refill of a shorter wait may
# round to nothing and the call would wait again and again.
_EPSILON = 1e-3
_QUANTUM = 1e-3


class TokenBucket:
    """A bucket of ``limit`` tokens refilled at ``limit`` every ``seconds``, as the providers
    count (Anthropic: "the token bucket algorithm ... continuously replenished up to your
    maximum limit, rather than being reset at fixed intervals"; OpenAI may enforce a minute's
    limit over shorter spans), and what the provider last said is left (``said``). A call
    takes its tokens from it; a correction after the answer gives some back or takes more
    (the bucket may then owe: the next call waits for the refill)."""

    def __init__(self, seconds: float, limit: int, *, said_only: bool = False) -> None:
        self.limit = limit
        self._said_only = said_only  # no limit declared: only what the provider says
        self._rate = limit / seconds  # tokens refilled a second
        self._level = float(limit)
        self._at: float | None = None  # when ``_level`` was last brought up to date
        self._left: float = math.inf  # what the provider said is left ...
        self._until = 0.0  # ... until then (monotonic)

    def _refill(self, now: float) -> None:
        if self._at is not None and now > self._at:
            self._level = min(float(self.limit), self._level + (now - self._at) * self._rate)
        self._at = now if self._at is None else max(self._at, now)

    def used(self, now: float) -> float:
        """Tokens counted and not yet refilled at ``now`` (more than ``limit``: it owes)."""
        self._refill(now)
        return self.limit - self._level

    def wait(self, amount: int, now: float) -> float:
        """Seconds until ``amount`` tokens fit (0: they fit now; ``inf``: never)."""
        if amount > self.limit:
            return math.inf
        if amount <= 0:
            return 0.0
        wait = 0.0
        if now < self._until and amount > self._left:
            wait = self._until - now  # the provider said less is left until then
        self._refill(now)
        short = amount - self._level
        if short <= _EPSILON:  # (a refill's float noise never makes a call wait forever)
            return wait
        return max(wait, short / self._rate, _QUANTUM)

    def take(self, amount: int, now: float) -> list[float]:
        """Count ``amount`` tokens going out at ``now``; returns their entry (to correct)."""
        self._refill(now)
        self._level -= amount
        if amount > 0 and now < self._until:
            self._left = max(0.0, self._left - amount)
        return [now, float(amount)]

    def correct(self, entry: list[float], amount: float) -> None:
        """The call of ``entry`` counts ``amount`` tokens, not what it took: the difference
        goes back to the bucket (never past full) or is taken too."""
        self._level = min(float(self.limit), self._level + entry[1] - amount)
        entry[1] = float(amount)

    def said(self, left: int, reset: float, now: float, in_flight: int = 0) -> None:
        """The provider says ``left`` tokens remain now, full again in ``reset`` seconds.

        The bucket of a declared limit refills as the provider's does, so it takes the
        provider's level when that is lower (what other processes or programs spent, what
        an estimate missed), less ``in_flight``: the tokens of the requests sent that the
        provider may not have counted yet. A bucket that knows no limit (``said_only``) lets
        out no more than ``left`` until the reset (taken ``WINDOW_MARGIN`` longer: a reset
        may be rounded down)."""
        if not self._said_only:
            self._refill(now)
            self._level = min(self._level, float(left - in_flight))
            return
        self._left = float(max(0, left))
        self._until = now + max(0.0, reset) + WINDOW_MARGIN


class TokenGate:
    """A tool's token buckets (per provider account, this process's): see the module
    docstring. ``estimate`` is the transport's ``tokens(input)``.

    A transport with ``tokens_scope(input) -> str`` has buckets of their own per scope, each
    of the declared limits: the LLM adapters' scope is the model, as OpenAI and Anthropic
    limit tokens per model (a request's scope is its first input's). ``buckets`` are those
    of the scope ``""``."""

    def __init__(
        self,
        spec: ToolSpec,
        clock: Clock,
        estimate: Callable[[Mapping[str, Any]], Any],
    ) -> None:
        self._spec = spec
        self._clock = clock
        self._estimate = estimate
        scope = getattr(spec.transport, "tokens_scope", None)
        self._scope: Callable[[Mapping[str, Any]], Any] | None = scope if callable(scope) else None
        self.returned = spec.rate.tokens_returned
        self.buckets = self._new_buckets()
        self._scoped: dict[str, dict[str, TokenBucket | None]] = {"": self.buckets}
        # what the provider said of a kind the tool declares no limit for: a bucket of its own
        self._said_only: dict[tuple[str, str], TokenBucket] = {}
        # (scope, kind index) -> the tokens of the requests sent and not yet answered
        self._flying: dict[tuple[str, int], int] = {}
        self._lock = asyncio.Lock()
        self.waiting = 0

    def estimate(self, inputs: Iterable[Mapping[str, Any]]) -> Tokens:
        """The estimated tokens of a request carrying ``inputs`` (their sum)."""
        total = [0, 0]
        for item in inputs:
            try:
                raw = self._estimate(item)
            except Exception as exc:
                raise ToolError(
                    self._spec.id,
                    f"its tokens estimate (tokens=) failed on an input: {exc!r}",
                    code="tokens_estimate",
                    outcome="fatal",
                ) from exc
            try:
                one = as_tokens(raw, "its tokens estimate (tokens=)")
            except ValueError as exc:
                raise ToolError(
                    self._spec.id, str(exc), code="tokens_estimate", outcome="fatal"
                ) from None
            total[0] += one[0]
            total[1] += one[1]
        return (total[0], total[1])

    def _new_buckets(self) -> dict[str, TokenBucket | None]:
        return {
            kind: None if limit is None else TokenBucket(MINUTE + WINDOW_MARGIN, limit)
            for kind, limit in zip(KINDS, self._spec.rate.token_limits, strict=True)
        }

    def scope_of(self, inputs: Iterable[Mapping[str, Any]]) -> str:
        """The scope a request's tokens count in (its first input's; ``""``: the tool's)."""
        if self._scope is None:
            return ""
        first = next(iter(inputs), None)
        return "" if first is None else str(self._scope(first))

    def _buckets(self, scope: str) -> dict[str, TokenBucket | None]:
        buckets = self._scoped.get(scope)
        if buckets is None:
            buckets = self._scoped[scope] = self._new_buckets()
        return buckets

    def _kinds(self, scope: str) -> Iterable[tuple[int, TokenBucket]]:
        buckets = self._buckets(scope)
        for index, kind in enumerate(KINDS):
            bucket = buckets[kind] or self._said_only.get((scope, kind))
            if bucket is not None:
                yield index, bucket

    async def take(self, inputs: Iterable[Mapping[str, Any]]) -> Spend:
        """Take the estimate of a request carrying ``inputs`` from the buckets, waiting
        (first come, first served) until they have room; returns the ``Spend`` that the
        request's answers report to (set as the current one: ``heard``). Raises a fatal
        ``ToolError`` when the estimate is larger than a whole bucket. Nothing is taken if
        the wait is cancelled."""
        inputs = list(inputs)
        tokens = self.estimate(inputs)
        scope = self.scope_of(inputs)
        self.check(tokens, scope)
        self.waiting += 1
        try:
            entries = await self._take(tokens, scope)
        finally:
            self.waiting -= 1
        for index in entries:
            self._flying[scope, index] = self._flying.get((scope, index), 0) + tokens[index]
        spend = Spend(self, tokens, entries, scope)
        _current.set(spend)
        return spend

    def check(self, tokens: Tokens, scope: str) -> None:
        """A fatal ``ToolError`` (``too_many_tokens``) when ``tokens`` are more than a whole
        bucket of ``scope`` holds: such a call could never go out."""
        for index, kind in enumerate(KINDS):
            bucket = self._buckets(scope)[kind]
            if bucket is not None and tokens[index] > bucket.limit:
                name = ("tokens_per_minute", "output_tokens_per_minute")[index]
                raise ToolError(
                    self._spec.id,
                    f"a call estimated at {tokens[index]:,} {'output ' * index}tokens is "
                    f"larger than the tool's whole Rate({name}={bucket.limit:,}): it can "
                    "never go out. Shorten the input or lower its max_tokens.",
                    code="too_many_tokens",
                    outcome="fatal",
                )

    async def _take(self, tokens: Tokens, scope: str) -> dict[int, list[float]]:
        """The entries of ``tokens`` taken from this process's buckets, in turn."""
        async with self._lock:
            return await self._in_turn(tokens, scope)

    async def _in_turn(self, tokens: Tokens, scope: str) -> dict[int, list[float]]:
        """Wait until ``tokens`` fit in every bucket of ``scope`` (``_kinds``), then take
        them (under ``_lock``: first come, first served)."""
        while True:
            now = self._clock.monotonic()
            waits = (w.wait(tokens[i], now) for i, w in self._kinds(scope))
            wait = max(waits, default=0.0)
            if wait <= 0:
                break
            await self._clock.sleep(min(wait, MINUTE + WINDOW_MARGIN))
        return {i: w.take(tokens[i], now) for i, w in self._kinds(scope)}

    def said(self, kind: str, left: int, reset: float, scope: str = "", counted: int = 0) -> None:
        """The provider says ``left`` tokens of ``kind`` remain, full in ``reset`` seconds
        (in ``scope``: the model its answer was for; ``counted``: the tokens of the request
        it answered, among those in flight but counted)."""
        index = KINDS.index(kind)
        in_flight = self._flying.get((scope, index), 0) - counted
        bucket = self._buckets(scope).get(kind)
        if bucket is None:
            bucket = self._said_only.setdefault(
                (scope, kind), TokenBucket(MINUTE, 2**62, said_only=True)
            )
        bucket.said(left, reset, self._clock.monotonic(), in_flight)

    def _bucket_of(self, index: int, scope: str) -> TokenBucket | None:
        kind = KINDS[index]
        return self._buckets(scope)[kind] or self._said_only.get((scope, kind))

    def correct(self, index: int, scope: str, entry: list[float], amount: float) -> None:
        """The request whose ``entry`` (of kind ``index``, in ``scope``) took tokens counts
        ``amount`` (``Spend.settle``)."""
        bucket = self._bucket_of(index, scope)
        if bucket is not None:
            bucket.correct(entry, amount)


class Spend:
    """One request's tokens in its gate's buckets, corrected by what its answers say."""

    def __init__(
        self, gate: TokenGate, tokens: Tokens, entries: dict[int, list[float]], scope: str = ""
    ) -> None:
        self.gate = gate
        self.tokens = tokens
        self.scope = scope
        self._entries = entries
        self._used: list[int] | None = None
        self._throttled = False
        self._open = True

    def heard(
        self,
        status: int,
        used: Tokens | None,
        said: Iterable[tuple[str, int, float]] = (),
    ) -> None:
        """An answer to the request: its status, the tokens it says were used (None: it
        does not say), and what its headers say is left (kind, left, seconds to reset)."""
        for kind, left, reset in said:
            counted = self.tokens[KINDS.index(kind)] if self._open else 0
            self.gate.said(kind, left, reset, self.scope, counted)
        if not self._open:
            return
        self._throttled = status == 429
        if used is not None:
            self._used = [*(self._used or (0, 0))]
            self._used[0] += used[0]
            self._used[1] += used[1]

    def settle(self) -> None:
        """The request is over: a 429 gives its estimate back, what its answers said they
        used corrects it, else it stands."""
        if not self._open:
            return
        self._open = False
        if _current.get() is self:
            _current.set(None)
        flying = self.gate._flying
        for index in self._entries:
            flying[self.scope, index] -= self.tokens[index]
        if self._throttled and self._used is None:
            counted: tuple[float, float] = (0, 0)
        elif self._used is not None:
            used = self._used
            if self.gate.returned:
                counted = (used[0], used[1])
            else:
                counted = (max(used[0], self.tokens[0]), max(used[1], self.tokens[1]))
        else:
            return
        for index, entry in self._entries.items():
            self.gate.correct(index, self.scope, entry, counted[index])


_current: contextvars.ContextVar[Spend | None] = contextvars.ContextVar(
    "playline_token_spend", default=None
)


def heard(status: int, used: Tokens | None, said: Iterable[tuple[str, int, float]] = ()) -> None:
    """A transport reports an answer to the call being sent (``Spend.heard``): nothing
    happens outside a call through a token gate."""
    spend = _current.get()
    if spend is not None:
        spend.heard(status, used, said)


def token_gate(
    spec: ToolSpec,
    clock: Clock,
    make: Callable[[ToolSpec, Clock, Callable[[Mapping[str, Any]], Any]], TokenGate] = TokenGate,
) -> TokenGate | None:
    """The token gate of ``spec`` (None when it neither declares token limits nor estimates
    its tokens), made by ``make`` (a shared gate's: ``_shared_tokens.py``). A token limit
    without an estimate is a ``PlayDefinitionError``."""
    estimate = getattr(spec.transport, "tokens", None)
    declared = any(limit is not None for limit in spec.rate.token_limits)
    if estimate is None or not callable(estimate):
        if declared:
            raise PlayDefinitionError(
                f"Tool {spec.id!r} declares Rate(tokens_per_minute=...) but cannot estimate "
                "a call's tokens: give pl.HttpTool(..., tokens=fn(input) -> int | (input, "
                "output)), or a `tokens(input)` method on its transport."
            )
        return None
    return make(spec, clock, estimate)


# -- the headers ---------------------------------------------------------------------------

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def reset_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds until a reset given as seconds, epoch seconds, a Go-style duration
    (``6m0s``, ``1s``, ``120ms``, OpenAI's), an RFC 3339 time (Anthropic's) or an HTTP
    date; None when it says nothing readable."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    now = time.time() if now is None else now
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(number) or number < 0:
            return None
        return max(0.0, number - now) if number > _EPOCH else number
    parts = _DURATION.findall(text)
    if parts and "".join(n + u for n, u in parts) == text:
        scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
        return sum(float(n) * scale[u] for n, u in parts)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text).timestamp()
        except (TypeError, ValueError):
            return None
    return max(0.0, when - now)


def _left(value: str | None) -> int | None:
    try:
        left = float(value) if value is not None else None
    except ValueError:
        return None
    return int(left) if left is not None and math.isfinite(left) and left >= 0 else None


def tokens_said(
    headers: Mapping[str, str],
    names: Mapping[str, Iterable[tuple[str, str]]] = TOKEN_HEADERS,
    now: float | None = None,
) -> list[tuple[str, int, float]]:
    """What an answer's headers say is left of each kind of token limit: ``(kind, left,
    seconds until reset)``, the fewest left per kind. A remaining header without a readable
    reset is taken to last a minute."""
    lowered = {k.lower(): v for k, v in headers.items()}
    out: dict[str, tuple[int, float]] = {}
    for kind, pairs in names.items():
        for remaining, reset in pairs:
            left = _left(lowered.get(remaining.lower()))
            if left is None:
                continue
            seconds = reset_seconds(lowered.get(reset.lower()), now)
            said = (left, MINUTE if seconds is None else seconds)
            if kind not in out or said[0] < out[kind][0]:
                out[kind] = said
    return [(kind, left, reset) for kind, (left, reset) in out.items()]


def requests_said(headers: Mapping[str, str], now: float | None = None) -> tuple[int, float] | None:
    """OpenAI's and Anthropic's requests headers (``x-ratelimit-remaining-requests``,
    ``anthropic-ratelimit-requests-remaining`` and their resets) as ``(requests left,
    seconds until reset)`` for the request gate (``_remaining.py``); None when absent."""
    said = tokens_said(headers, {"requests": _REQUEST_HEADERS}, now)
    return (said[0][1], said[0][2]) if said else None
