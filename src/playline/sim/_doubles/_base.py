"""What every provider double shares: its key, its clock and rate windows, its credits and
quota, the charges it made (and which of them were made twice), its async jobs, the faults a
test or a user asks of it, and its control plane under ``/__double``.

A double answers as its provider's public documentation says the provider does; each
provider's module names the pages. What the documentation leaves open, a module says it
assumes. The people a double knows are the simulator's world (``_world.py``): whether a
provider knows a person is a pure function of the seed, the provider and the person.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from .._inputs import normalize_domain, normalize_email, normalize_text
from .._world import Company, Person, World, unit

__all__ = ["Double", "Limit", "Refusal", "json_body", "linkedin_of"]


def linkedin_of(person: Person) -> str:
    """A person's LinkedIn profile URL in the simulated world."""
    return (
        f"https://www.linkedin.com/in/{normalize_text(person.first_name)}-"
        f"{normalize_text(person.last_name)}-{person.ordinal:x}".replace(" ", "-")
    )


def _profile_key(url: str) -> str:
    """``"https://www.linkedin.com/in/ada-lovelace-1f/"`` -> ``"ada-lovelace-1f"``."""
    path = url.strip().casefold().split("?", 1)[0].rstrip("/")
    return path.rsplit("/in/", 1)[-1] if "/in/" in path else ""


@dataclass(frozen=True)
class Limit:
    """A rate limit of the provider: ``count`` requests per ``seconds``, over a group of its
    endpoints (a sliding window: what a runtime that keeps to the documented rate never
    exceeds, whichever window the provider really uses)."""

    count: int
    seconds: float
    group: str = "default"


class Refusal(Exception):
    """An answer that ends a request early (a wrong key, a rate limit, no credits)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


async def json_body(request: Request) -> Any:
    """The request's JSON body, or a 400 refusal in the provider's words when it is not JSON."""
    try:
        return orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        raise Refusal(JSONResponse({"error": "the body is not JSON"}, 400)) from None


class Double:
    """One provider's double: subclasses declare ``name``, ``limits`` and their ``routes``.

    Counters (read by tests and by ``GET /<name>/__double``): ``calls`` per route,
    ``charged`` credits, ``charges`` per charged item, ``duplicates`` (an item charged a second
    time: what a runtime that never pays twice must not cause), ``repeats`` (an item asked
    again that the provider does not charge again: Hunter's month, Prospeo's re-enrichments),
    ``throttled`` (rate-limit answers), ``refused`` (other refusals by cause).

    Faults (set as attributes, or with ``POST /<name>/__double``): ``credits`` left (None:
    unlimited), ``quota`` requests left this period (None: unlimited), ``storm`` (the next so
    many requests are rate limited), ``down`` (the next so many answer 503), ``pending_polls``
    (polls of a job that answer "not ready" before it is done), ``malformed`` (the next so
    many answers are cut short).
    """

    name: ClassVar[str]
    limits: ClassVar[tuple[Limit, ...]] = ()
    coverage: ClassVar[float] = 0.6  # the share of the world's people the provider knows

    def __init__(self, world: World, key: str, *, clock: Callable[[], float] | None = None):
        self.world = world
        self.key = key
        self.clock = clock or time.monotonic
        self.latency = 0.0  # seconds each answer takes
        self._companies_by_name: dict[str, Company | None] | None = (
            None  # companies by name, once asked
        )
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.calls: Counter[str] = Counter()
            self.charges: Counter[str] = Counter()
            self.charged = 0.0
            self.duplicates = 0
            self.repeats = 0  # items asked again that the provider does not charge again
            self.throttled = 0
            self.refused: Counter[str] = Counter()
            self.credits: float | None = None
            self.quota: int | None = None
            self.storm = 0
            self.down = 0
            self.malformed = 0
            self.pending_polls = 1
            self.blocked_until = 0.0
            self.jobs: dict[str, dict[str, Any]] = {}
            self._sends: dict[tuple[str, float], deque[float]] = {}
            self._buckets: dict[tuple[str, float], tuple[float, float]] = {}
            self._ids = itertools.count(1)

    # -- the world, as this provider knows it ----------------------------------------------

    def knows(self, person: Person, share: float | None = None) -> bool:
        return unit(self.world.seed, self.name, person.ordinal) < (
            self.coverage if share is None else share
        )

    def person(self, first: Any, last: Any, domain: Any) -> Person | None:
        """The person of these fields (any case, spacing, URL form), if the provider knows them."""
        if not all(isinstance(v, str) for v in (first, last, domain)):
            return None
        found = self.world.person(
            normalize_text(first), normalize_text(last), normalize_domain(domain)
        )
        return found if found is not None and self.knows(found) else None

    def person_named(self, full_name: Any, domain: Any) -> Person | None:
        if not isinstance(full_name, str) or " " not in full_name.strip():
            return None
        first, last = full_name.strip().split(None, 1)
        return self.person(first, last, domain)

    def person_by_email(self, email: Any) -> Person | None:
        if not isinstance(email, str):
            return None
        found = self.world.person_by_email.get(normalize_email(email))
        return found if found is not None and self.knows(found) else None

    def person_by_linkedin(self, url: Any) -> Person | None:
        if not isinstance(url, str):
            return None
        key = _profile_key(url)
        ordinal = key.rsplit("-", 1)[-1] if "-" in key else ""
        try:
            found = self.world.people[int(ordinal, 16)]
        except (ValueError, IndexError):
            return None
        return found if _profile_key(linkedin_of(found)) == key and self.knows(found) else None

    def company(self, domain: Any) -> Company | None:
        return self.world.company(normalize_domain(domain)) if isinstance(domain, str) else None

    def company_named(self, name: Any) -> Company | None:
        """The company of this name (any case and spacing); None for a name two companies
        share (a provider could not tell which)."""
        if not isinstance(name, str):
            return None
        if self._companies_by_name is None:
            by_name: dict[str, Company | None] = {}
            for company in self.world.companies:
                key = normalize_text(company.name)
                by_name[key] = None if key in by_name else company
            self._companies_by_name = by_name
        return self._companies_by_name.get(normalize_text(name))

    def catch_all(self, email: str) -> bool:
        company = self.company(email.rsplit("@", 1)[-1])
        return bool(company and company.catch_all)

    # -- requests --------------------------------------------------------------------------

    def job_id(self, prefix: str = "") -> str:
        return f"{prefix}{self.name[:2]}{next(self._ids):06d}"

    def charge(self, item: str, credits: float, *, repeat_free: bool = False) -> float:
        """The provider charges ``credits`` for ``item`` (its operation and normalised input);
        returns what it charged. ``repeat_free``: the provider does not charge an item again
        (Hunter within its billing month), so a repeat costs nothing and is no duplicate."""
        if credits <= 0:
            return 0.0
        with self.lock:
            if self.charges[item] and repeat_free:
                self.repeats += 1
                return 0.0
            if self.charges[item]:
                self.duplicates += 1
            self.charges[item] += 1
            self.charged += credits
            if self.credits is not None:
                self.credits = max(0.0, self.credits - credits)
        return credits

    def can_pay(self, credits: float) -> bool:
        return self.credits is None or self.credits >= credits

    def take_window(self, count: int = 1, group: str = "default") -> float | None:
        """Count ``count`` requests against the limits of ``group``; the seconds to wait
        instead when a limit has no room for them (nothing is counted then). A limit of a
        second or less is a token bucket (``count`` saved up), a longer one a sliding window."""
        now = self.clock()
        limits = [limit for limit in self.limits if limit.group == group]
        with self.lock:
            waits = [wait for limit in limits if (wait := self._wait(limit, now, count)) > 0]
            if waits:
                self.throttled += 1
                return max(waits)
            for limit in limits:
                if limit.seconds <= 1:
                    tokens, _ = self._buckets[(group, limit.seconds)]
                    self._buckets[(group, limit.seconds)] = (tokens - count, now)
                else:
                    self._sends[(group, limit.seconds)].extend([now] * count)
        return None

    def _wait(self, limit: Limit, now: float, count: int) -> float:
        rate = limit.count / limit.seconds
        key = (limit.group, limit.seconds)
        if limit.seconds <= 1:
            tokens, stamp = self._buckets.get(key, (float(limit.count), now))
            tokens = min(float(limit.count), tokens + (now - stamp) * rate)
            self._buckets[key] = (tokens, now)
            return 0.0 if tokens >= count - 1e-6 else (count - tokens) / rate
        sends = self._sends.setdefault(key, deque())
        while sends and sends[0] <= now - limit.seconds:
            sends.popleft()
        if len(sends) + count <= limit.count:
            return 0.0
        return sends[0] + limit.seconds - now if sends else limit.seconds

    def left(self, group: str = "default") -> dict[float, tuple[int, float]]:
        """Per window of ``group``: requests left and seconds until the oldest one leaves it."""
        now = self.clock()
        out = {}
        with self.lock:
            for limit in self.limits:
                if limit.group != group or limit.seconds <= 1:
                    continue
                sends = self._sends.get((group, limit.seconds), deque())
                live = [s for s in sends if s > now - limit.seconds]
                reset = live[0] + limit.seconds - now if live else limit.seconds
                out[limit.seconds] = (max(0, limit.count - len(live)), reset)
        return out

    def fault(self) -> str | None:
        """The fault the next request meets (``storm``, ``down``, ``malformed``), counted down."""
        with self.lock:
            for name in ("storm", "down", "malformed"):
                if getattr(self, name) > 0:
                    setattr(self, name, getattr(self, name) - 1)
                    if name == "storm":
                        self.throttled += 1
                    return name
        return None

    def refuse(self, cause: str, response: Response) -> Refusal:
        with self.lock:
            self.refused[cause] += 1
        return Refusal(response)

    def rate_limited(self, wait: float) -> Response:
        """The provider's answer to a request past its rate limit (``wait`` seconds early)."""
        return JSONResponse(
            {"error": "rate limited"}, 429, {"Retry-After": str(max(1, math.ceil(wait)))}
        )

    def unavailable(self) -> Response:
        """The provider's answer while it is down."""
        return JSONResponse({"error": "service unavailable"}, 503)

    async def answer(
        self, request: Request, route: str, handle: Callable[[], Any], *, faults: bool = True
    ) -> Response:
        """Count the request, wait the latency, meet the fault in force (a storm of rate-limit
        answers, an outage, an answer cut short), else run ``handle`` (which may raise a
        ``Refusal``). An account endpoint (``faults=False``) meets no fault: a test's faults
        are for the calls it makes."""
        with self.lock:
            self.calls[route] += 1
        if self.latency:
            await asyncio.sleep(self.latency)
        fault = self.fault() if faults else None
        if fault == "storm":
            return self.rate_limited(1.0)
        if fault == "down":
            return self.unavailable()
        try:
            result = handle()
            if asyncio.iscoroutine(result):
                result = await result
        except Refusal as refusal:
            return refusal.response
        assert isinstance(result, Response)
        if fault == "malformed":  # the connection cut mid-body: the provider did its work
            cut = bytes(result.body)[: max(1, len(result.body) // 2)]
            headers = {k: v for k, v in result.headers.items() if k != "content-length"}
            return Response(cut, result.status_code, headers)
        return result

    def routes(self) -> list[BaseRoute]:
        """The provider's endpoints, under its documented paths."""
        raise NotImplementedError

    # -- the control plane -----------------------------------------------------------------

    _SETTABLE: ClassVar[dict[str, type | tuple[type, ...]]] = {
        "credits": (int, float, type(None)),
        "quota": (int, type(None)),
        "storm": int,
        "down": int,
        "malformed": int,
        "pending_polls": int,
        "latency": (int, float),
    }

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "provider": self.name,
                "calls": dict(self.calls),
                "charged": round(self.charged, 6),
                "charges": sum(self.charges.values()),
                "duplicates": self.duplicates,
                "repeats": self.repeats,
                "throttled": self.throttled,
                "refused": dict(self.refused),
                "credits": self.credits,
                "quota": self.quota,
                "jobs": len(self.jobs),
            }

    def configure(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        """Set faults from a JSON document (``POST /__double``); ValueError for a bad one."""
        for name, value in doc.items():
            kind = self._SETTABLE.get(name)
            if name == "reset" and value is True:
                self.reset()
                continue
            if kind is None or isinstance(value, bool) or not isinstance(value, kind):
                raise ValueError(
                    f"{name}={value!r}: settable are reset (true), "
                    + ", ".join(f"{k} (a number)" for k in self._SETTABLE)
                )
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{name}={value!r}: a finite number")
            setattr(self, name, value)
        return self.snapshot()

    def control_routes(self) -> list[BaseRoute]:
        async def control(request: Request) -> Response:
            if request.method == "POST":
                try:
                    return JSONResponse(self.configure(orjson.loads(await request.body())))
                except (ValueError, AttributeError) as exc:
                    return JSONResponse({"error": str(exc)}, 400)
            return JSONResponse(self.snapshot())

        return [Route("/__double", control, methods=["GET", "POST"])]
