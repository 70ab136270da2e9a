"""What the LLM doubles (``openai``, ``anthropic``) share: per-model limits on requests and
tokens a minute as token buckets, a dated price table and a ledger of tokens and dollars,
the ``invalid_json`` fault, batch delays in the doubles' clock, and their control settings.

Limits. Both providers document limits per minute that are "continuously replenished" (a
token bucket: the capacity is the per-minute limit, refilled at a sixtieth of it a second,
full at the start). A request takes 1 from ``requests`` and its estimated tokens from the
token buckets before it runs, as the providers document; which estimate each provider uses,
and what it gives back afterwards, its module says. A request that does not fit is refused
429 with ``retry-after`` (whole seconds, at least 1) and the wait in the message; nothing is
taken then. So a client that keeps a bucket of the same size and reserves the same estimate
never meets a 429 (``tests/sim/test_llm_doubles.py`` keeps one at the limit for 10 minutes).

Ledger (``GET /<name>/__double`` under ``llm``, or ``sim.double(name).snapshot()``):
requests, input and output tokens and dollars per model, live and batch apart; ``usd`` in
all. Dollars are tokens x the price table per million (a batch half of it); ``charged`` is
the same dollars, and ``duplicates`` counts a request paid again with the very same model,
messages and parameters (what a receipt should have answered).

Control (``POST /<name>/__double``, besides the faults every double has: ``storm``,
``down``, ``malformed``, ``latency``, ``credits`` in dollars): ``rpm``/``tpm`` (or ``itpm``,
``otpm``) for every model, ``model_limits`` ``{model: {"rpm": n, ...}}``; ``invalid_json``
(the next so many answers to a schema request are wrong) and ``invalid_json_rate`` (that
share of them, drawn from the request and how often it was asked); ``batch_delay`` (seconds
of the doubles' clock a batch takes); ``advance`` (move the double's clock on by so many
seconds: batches finish, buckets refill; no test need sleep).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ._answers import digest
from ._base import Double

__all__ = ["Bucket", "LlmDouble", "Price"]


@dataclass(frozen=True, kw_only=True)
class Price:
    """US dollars per million tokens."""

    input: float
    output: float


class Bucket:
    """A per-minute limit, continuously replenished: ``capacity`` at most, refilled at a
    sixtieth of it a second."""

    def __init__(self, capacity: int, now: float) -> None:
        self.capacity = capacity
        self.level = float(capacity)
        self.stamp = now

    @property
    def rate(self) -> float:
        return self.capacity / 60.0

    def refill(self, now: float) -> None:
        if now > self.stamp:
            self.level = min(float(self.capacity), self.level + (now - self.stamp) * self.rate)
            self.stamp = now

    def wait(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` fits (0: it fits now)."""
        self.refill(now)
        short = amount - self.level
        # a client keeping the same bucket on a clock of Unix seconds (whose floats step by
        # a quarter of a microsecond) must not be refused for the rounding: 10 us of refill
        return 0.0 if short <= 1e-3 + self.rate * 1e-5 else short / self.rate

    def reset_in(self) -> float:
        """Seconds until the bucket is full again."""
        return (self.capacity - self.level) / self.rate if self.rate else 0.0


class LlmDouble(Double):
    """An LLM provider's double; subclasses name their limits, prices and routes."""

    LIMIT_NAMES: ClassVar[dict[str, str]]  # control name -> bucket ("tpm" -> "tokens")
    DEFAULT_LIMITS: ClassVar[dict[str, int]]  # bucket -> per minute
    PRICES: ClassVar[dict[str, Price]]
    DEFAULT_PRICE: ClassVar[Price]  # a model the table does not name
    PRICES_DATE: ClassVar[str]
    BATCH_DELAY: ClassVar[float] = 600.0  # seconds of the doubles' clock a batch takes
    BATCH_WINDOW: ClassVar[float] = 24 * 3600.0  # a batch not done by then expires
    RETENTION: ClassVar[float] = 30 * 86_400.0  # seconds a batch's results are kept

    _SETTABLE: ClassVar[dict[str, type | tuple[type, ...]]] = {
        **Double._SETTABLE,
        "invalid_json": int,
        "invalid_json_rate": (int, float),
        "batch_delay": (int, float),
    }

    def reset(self) -> None:
        super().reset()
        with self.lock:
            self.skew = 0.0
            self.invalid_json = 0
            self.invalid_json_rate = 0.0
            self.batch_delay = self.BATCH_DELAY
            self.spoiled = 0  # wrong answers given to schema requests
            self.limit_overrides: dict[str, int] = {}
            self.model_limits: dict[str, dict[str, int]] = {}
            self.token_buckets: dict[tuple[str, str], Bucket] = {}
            self.usage: dict[str, dict[str, dict[str, float]]] = {"live": {}, "batch": {}}
            self.asked: Counter[str] = Counter()
            self.files: dict[str, dict[str, Any]] = {}

    # -- time ------------------------------------------------------------------------------

    def now(self) -> float:
        """The double's clock (its ``clock``, moved on by ``advance``)."""
        return self.clock() + self.skew

    def epoch(self) -> float:
        """Unix time as the double sees it (for ``created`` fields and reset dates)."""
        now = self.now()
        return now if now > 1e9 else time.time() + self.skew

    # -- limits ----------------------------------------------------------------------------

    def limits_of(self, model: str) -> dict[str, int]:
        per_model = self.model_limits.get(model, {})
        return {**self.DEFAULT_LIMITS, **self.limit_overrides, **per_model}

    def _bucket(self, model: str, kind: str, limit: int, now: float) -> Bucket:
        bucket = self.token_buckets.get((model, kind))
        if bucket is None or bucket.capacity != limit:
            bucket = self.token_buckets[(model, kind)] = Bucket(limit, now)
        return bucket

    def admit(self, model: str, costs: Mapping[str, int]) -> tuple[str, float] | None:
        """Take ``costs`` (bucket -> amount) from ``model``'s buckets; or, taking nothing,
        the bucket that has no room and the seconds until it has (``inf``: never)."""
        now = self.now()
        with self.lock:
            limits = self.limits_of(model)
            buckets = {kind: self._bucket(model, kind, limits[kind], now) for kind in costs}
            waits = {kind: buckets[kind].wait(amount, now) for kind, amount in costs.items()}
            for kind, amount in costs.items():
                if amount > limits[kind]:
                    waits[kind] = math.inf
            worst = max(waits, key=lambda kind: waits[kind])
            if waits[worst] > 0:
                self.throttled += 1
                return worst, waits[worst]
            for kind, amount in costs.items():
                buckets[kind].level -= amount
        return None

    def give_back(self, model: str, kind: str, amount: int) -> None:
        """Return ``amount`` to a bucket (an estimate corrected after the request)."""
        now = self.now()
        with self.lock:
            bucket = self._bucket(model, kind, self.limits_of(model)[kind], now)
            bucket.refill(now)
            bucket.level = min(float(bucket.capacity), bucket.level + amount)

    def standing(self, model: str) -> dict[str, tuple[int, int, float]]:
        """Per bucket of ``model``: its limit, what is left and seconds until it is full."""
        now = self.now()
        out = {}
        with self.lock:
            limits = self.limits_of(model)
            for kind, limit in limits.items():
                bucket = self._bucket(model, kind, limit, now)
                bucket.refill(now)
                out[kind] = (limit, max(0, math.floor(bucket.level + 1e-6)), bucket.reset_in())
        return out

    # -- money -----------------------------------------------------------------------------

    def price(self, model: str) -> Price:
        """The model's price: its entry, else the longest entry it starts with (a dated
        snapshot such as ``gpt-4o-mini-2024-07-18``), else ``DEFAULT_PRICE``."""
        if model in self.PRICES:
            return self.PRICES[model]
        prefixes = [name for name in self.PRICES if model.startswith(name)]
        return self.PRICES[max(prefixes, key=len)] if prefixes else self.DEFAULT_PRICE

    def cost(self, model: str, input_tokens: int, output_tokens: int, *, batch: bool) -> float:
        price = self.price(model)
        usd = (input_tokens * price.input + output_tokens * price.output) / 1_000_000
        return usd / 2 if batch else usd

    def record(
        self, model: str, input_tokens: int, output_tokens: int, *, batch: bool, item: str
    ) -> float:
        """Count a request answered and charge it; returns its dollars."""
        usd = self.cost(model, input_tokens, output_tokens, batch=batch)
        with self.lock:
            row = self.usage["batch" if batch else "live"].setdefault(
                model, {"requests": 0, "input_tokens": 0, "output_tokens": 0, "usd": 0.0}
            )
            row["requests"] += 1
            row["input_tokens"] += input_tokens
            row["output_tokens"] += output_tokens
            row["usd"] += usd
        self.charge(f"{model}|{item}", usd)
        return usd

    def broke(self) -> bool:
        """The account has no money left (``credits`` set, and spent)."""
        return self.credits is not None and self.credits <= 0

    # -- faults ----------------------------------------------------------------------------

    def spoil(self, key: str) -> bool:
        """Whether this answer to a schema request (``key``: its digest) is a wrong one."""
        with self.lock:
            self.asked[key] += 1
            if self.invalid_json > 0:
                self.invalid_json -= 1
            elif self.invalid_json_rate <= 0:
                return False
            else:
                drawn = int.from_bytes(digest(key, self.asked[key])[:8], "big") / 2**64
                if drawn >= self.invalid_json_rate:
                    return False
            self.spoiled += 1
            return True

    # -- the control plane -----------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        out = super().snapshot()
        with self.lock:
            usage = {
                mode: {m: dict(row) for m, row in rows.items()} for mode, rows in self.usage.items()
            }
            out["usd"] = self.charged
            out["llm"] = {
                **usage,
                "usd": self.charged,
                "spoiled": self.spoiled,
                "limits": self.limits_of("*"),
                "model_limits": {m: dict(v) for m, v in self.model_limits.items()},
                "batch_delay": self.batch_delay,
                "prices_date": self.PRICES_DATE,
                "prices": {
                    m: {"input": p.input, "output": p.output} for m, p in self.PRICES.items()
                },
            }
        return out

    def _limits_doc(self, doc: Mapping[str, Any]) -> dict[str, int]:
        out = {}
        for name, value in doc.items():
            if name not in self.LIMIT_NAMES:
                raise ValueError(f"{name}: the limits are {', '.join(self.LIMIT_NAMES)}")
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r}: a whole number of at least 1")
            out[self.LIMIT_NAMES[name]] = value
        return out

    def configure(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        rest = dict(doc)
        advance = rest.pop("advance", None)
        limits = self._limits_doc({k: rest.pop(k) for k in list(rest) if k in self.LIMIT_NAMES})
        per_model = rest.pop("model_limits", None)
        models: dict[str, dict[str, int]] = {}
        if per_model is not None:
            if not isinstance(per_model, dict):
                raise ValueError("model_limits: {model: {limit: n}}")
            for model, values in per_model.items():
                if not isinstance(values, dict):
                    raise ValueError(f"model_limits.{model}: {{limit: n}}")
                models[model] = self._limits_doc(values)
        if advance is not None and (
            isinstance(advance, bool) or not isinstance(advance, int | float) or advance < 0
        ):
            raise ValueError(f"advance={advance!r}: seconds, 0 or more")
        rate = rest.get("invalid_json_rate", 0)
        if isinstance(rate, int | float) and not 0 <= rate <= 1:
            raise ValueError(f"invalid_json_rate={rate!r}: a share, 0 to 1")
        out = super().configure(rest)
        with self.lock:
            self.limit_overrides.update(limits)
            self.model_limits.update(models)
            if advance:
                self.skew += float(advance)
        return self.snapshot() if (limits or models or advance) else out

    def advance(self, seconds: float) -> None:
        """Move the double's clock on (``POST /__double {"advance": s}``)."""
        with self.lock:
            self.skew += seconds

    # -- routes ----------------------------------------------------------------------------

    def route(
        self, path: str, handler: Callable[[Request], Any], name: str, method: str
    ) -> BaseRoute:
        async def endpoint(request: Request) -> Response:
            return await self.answer(request, name, lambda: handler(request))

        return Route(path, endpoint, methods=[method])
