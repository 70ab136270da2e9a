"""LeadMagic's API (``/v1``), as https://leadmagic.io/docs/v1/making-api-calls and its
reference pages describe it (see ``playline/providers/leadmagic.py`` for every page).

- ``POST /v1/people/email-finder`` ``{first_name, last_name | full_name, domain |
  company_name}``, ``POST /v1/people/email-validation`` ``{email}``, ``POST
  /v1/people/mobile-finder`` ``{profile_url | work_email | personal_email}``, ``GET
  /v1/credits``; the key in ``X-API-Key`` (any case);
- a finder's miss is 200 with ``email`` (``mobile_number``) null and ``credits_consumed: 0``;
  a found email's ``status`` is ``valid``, ``valid_catch_all`` (a catch-all domain, with
  engagement data on the person) or ``catch_all``; a validation's ``email_status`` is
  ``valid``, ``valid_catch_all``, ``catch_all``, ``unknown`` (a domain nobody answers for) or
  ``invalid`` (no such mailbox, or an address that is not RFC syntax: 200, not 400);
- prices: an email found 1 credit (a ``catch_all`` one free: "risky emails are always
  free"), a validation 0.05 (``catch_all`` and ``unknown`` free), a mobile found 5; each
  answer says its charge in ``credits_consumed`` and ``X-Credits-Cost``, and what is left in
  ``X-Credits-Remaining``;
- a request needs the operation's full price on the account beforehand, else ``402
  insufficient_credits`` ("need 5, have 2.50"), found or not;
- 300 requests a minute per endpoint, bursts of ~5 a second, and the account-wide gateway's
  5,000 a minute and 500,000 a day; every answer carries ``RateLimit-Limit``,
  ``RateLimit-Remaining``, ``RateLimit-Reset`` (seconds), their ``X-RateLimit-*`` twins and
  ``X-RateLimit-Remaining-Daily``; past a limit: ``429 rate_limit_exceeded`` with
  ``Retry-After``;
- errors are RFC 9457 problems: ``{"success": false, "errors": [{type, title, status,
  code, detail, param, action, context}], "meta": {request_id, timestamp}}`` (400
  ``validation_error``, 401 ``missing_authentication`` / ``invalid_api_key``, 402
  ``insufficient_credits``, 429 ``rate_limit_exceeded``, 503 ``service_unavailable``).

Assumed where the documentation is silent: the not-found bodies (the found shape with nulls,
and the messages of the pages' tables), which lookups LeadMagic answers (the world's people it
knows; a mobile for 70% of them), the order of the checks (key, rate, request, credits).
``credits`` is the account's balance (None: a plan of 10,000 less what was charged).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from .._inputs import normalize_domain, normalize_email, normalize_text
from .._world import Company, Person, unit
from ._base import Double, Limit, Refusal

__all__ = ["LeadMagicDouble"]

_DOCS = "https://leadmagic.io/docs/v1/making-api-calls"
_RFC = re.compile(
    r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$"
)
_FINDER, _VALIDATION, _MOBILE = "email-finder", "email-validation", "mobile-finder"
PRICES = {_FINDER: 1.0, _VALIDATION: 0.05, _MOBILE: 5.0}
PER_MINUTE = 300


class LeadMagicDouble(Double):
    name = "leadmagic"
    coverage = 0.6
    mobile_share = 0.7  # of the people it knows, those it has a mobile number for
    engaged_share = 0.5  # of those at catch-all domains, those with engagement data
    limits: ClassVar[tuple[Limit, ...]] = (
        *(
            limit
            for route in (_FINDER, _VALIDATION, _MOBILE)
            for limit in (Limit(5, 1.0, route), Limit(PER_MINUTE, 60.0, route))
        ),
        Limit(5_000, 60.0, "gateway"),
        Limit(500_000, 86_400.0, "gateway"),
    )
    PLAN = 10_000.0  # credits an account has when ``credits`` is None
    _by_name: dict[str, list[Company]] | None = None  # companies by name, built once

    # -- the world, as LeadMagic knows it ---------------------------------------------------

    def has_mobile(self, person: Person) -> bool:
        return unit(self.world.seed, self.name, "mobile", person.ordinal) < self.mobile_share

    def engaged(self, person: Person) -> bool:
        return unit(self.world.seed, self.name, "engaged", person.ordinal) < self.engaged_share

    def _companies_named(self, name: str) -> list[Company]:
        if self._by_name is None:
            index: dict[str, list[Company]] = {}
            for company in self.world.companies:
                index.setdefault(normalize_text(company.name), []).append(company)
            self._by_name = index
        return self._by_name.get(normalize_text(name), [])

    def balance(self) -> float:
        return self.credits if self.credits is not None else max(0.0, self.PLAN - self.charged)

    # -- answers in LeadMagic's words ------------------------------------------------------

    def _problem(
        self, status: int, code: str, title: str, headers: Mapping[str, str] | None = None,
        **more: Any,
    ) -> JSONResponse:  # fmt: skip
        error = {
            "type": f"https://api.leadmagic.io/errors/{code}",
            "title": title,
            "status": status,
            "code": code,
            **more,
            "docs": _DOCS,
        }
        meta = {
            "request_id": self.job_id("req_"),
            "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds"),
        }
        return JSONResponse(
            {"success": False, "errors": [error], "meta": meta},
            status,
            dict(headers or {}),
            media_type="application/problem+json",
        )

    def rate_limited(self, wait: float) -> Response:
        seconds = max(1, math.ceil(wait))
        return self._problem(
            429,
            "rate_limit_exceeded",
            f"Rate limit exceeded: {PER_MINUTE} requests per 1 minute. Wait and try again.",
            {
                "Retry-After": str(seconds),
                "RateLimit-Limit": str(PER_MINUTE),
                "RateLimit-Remaining": "0",
                "RateLimit-Reset": str(seconds),
            },
            detail="You have exceeded the maximum allowed request rate.",
            action=f"Wait {seconds} seconds before retrying.",
            context={
                "limit": PER_MINUTE,
                "window": "1 minute",
                "remaining": 0,
                "reset_at": int(time.time()) + seconds,
                "retry_after_seconds": seconds,
            },
        )

    def unavailable(self) -> Response:
        return self._problem(503, "service_unavailable", "Service temporarily down.")

    def _invalid(self, param: list[str], detail: str) -> Refusal:
        return self.refuse(
            "request",
            self._problem(
                400,
                "validation_error",
                "Request validation failed. Check your input parameters.",
                param=param,
                detail=detail,
            ),
        )

    def _admit(self, request: Request, route: str | None) -> None:
        """Refuse a missing or wrong key; then, for an operation (``route``), its rate
        limits and the gateway's."""
        key = request.headers.get("x-api-key")
        if not key:
            raise self.refuse(
                "auth",
                self._problem(
                    401,
                    "missing_authentication",
                    "Authentication required. Provide a valid API key in the X-API-Key "
                    "header (case-insensitive).",
                ),
            )
        if key != self.key:
            raise self.refuse(
                "auth",
                self._problem(
                    401,
                    "invalid_api_key",
                    "Invalid API key. The key does not exist or is incorrect.",
                ),
            )
        if route is None:
            return
        wait = self.take_window(1, route)
        if wait is None:
            wait = self.take_window(1, "gateway")
        if wait is not None:
            raise Refusal(self.rate_limited(wait))

    async def _body(self, request: Request) -> dict[str, Any]:
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            raise self._invalid(["body"], "The request body is not valid JSON.") from None
        if not isinstance(body, dict):
            raise self._invalid(["body"], "The request body must be a JSON object.")
        return body

    def _pay_first(self, route: str) -> None:
        """LeadMagic asks for the operation's price on the account before it looks."""
        price = PRICES[route]
        if self.credits is None or self.credits + 1e-9 >= price:
            return
        have = self.credits
        raise self.refuse(
            "credits",
            self._problem(
                402,
                "insufficient_credits",
                f"Insufficient credits: need {price:g}, have {have:.2f}. Add credits to continue.",
                action="Add credits at https://app.leadmagic.io/billing.",
                context={
                    "credits_required": price,
                    "credits_available": round(have, 2),
                    "credits_needed": round(price - have, 2),
                },
            ),
        )

    def _answer(self, body: dict[str, Any], item: str, credits: float) -> JSONResponse:
        """A 200 that charged ``credits`` for ``item``, saying so in its body and header."""
        self.charge(item, credits)
        said = int(credits) if credits == int(credits) else credits
        return JSONResponse(
            {**body, "credits_consumed": said}, headers={"X-Credits-Cost": f"{credits:g}"}
        )

    # -- the operations --------------------------------------------------------------------

    async def find(self, request: Request) -> Response:
        self._admit(request, _FINDER)
        body = await self._body(request)
        first, last, full = (_text(body.get(k)) for k in ("first_name", "last_name", "full_name"))
        domain, company_name = _text(body.get("domain")), _text(body.get("company_name"))
        if not (first or last or full) or not (domain or company_name):
            raise self._invalid(
                ["first_name", "last_name", "full_name", "domain", "company_name"],
                "Provide at least one name field (first_name, last_name or full_name) and one "
                "company field (domain or company_name).",
            )
        self._pay_first(_FINDER)
        domains = (
            [normalize_domain(domain)]
            if domain
            else [c.domain for c in self._companies_named(company_name or "")]
        )
        person = None
        for candidate in domains:
            if first and last:
                person = self.person(first, last, candidate)
            elif full:
                person = self.person_named(full, candidate)
            if person is not None:
                break
        if person is None:
            miss = {
                "email": None,
                "status": "not_found",
                "credits_consumed": 0,
                "message": "No email found.",
                "first_name": first,
                "last_name": last,
                "domain": domains[0] if domains else None,
            }
            return self._answer(miss, "", 0)
        company = self.company(person.domain)
        status, message, credits = "valid", "Valid email found.", 1.0
        if company is not None and company.catch_all:
            status, message, credits = (
                ("valid_catch_all", "Valid catch-all email found.", 1.0)
                if self.engaged(person)
                else ("catch_all", "Catch-all email found.", 0.0)
            )
        found = {
            "email": person.email,
            "status": status,
            "credits_consumed": credits,
            "message": message,
            "first_name": person.first_name,
            "last_name": person.last_name,
            "domain": person.domain,
            **_mx(company),
            **_company_fields(company),
            "employment_verified": True,
        }
        return self._answer(found, f"{_FINDER}|{person.ordinal}", credits)

    async def validate(self, request: Request) -> Response:
        self._admit(request, _VALIDATION)
        body = await self._body(request)
        email = body.get("email")
        if not isinstance(email, str) or not email.strip():
            raise self._invalid(["email"], "Email is required. Expected format: user@domain.com")
        self._pay_first(_VALIDATION)
        email = email.strip()
        domain = email.rsplit("@", 1)[-1].casefold()
        company = self.company(domain) if "@" in email else None
        if not _RFC.match(email) or ".." in email:
            status, message, company = (
                "invalid",
                "Email is invalid (RFC non-compliant format).",
                None,
            )
        elif company is None:
            status, message = "unknown", "Unable to determine email validity."
        else:
            person = self.world.person_by_email.get(normalize_email(email))
            if company.catch_all:
                status, message = (
                    ("valid_catch_all", "Email is valid (catch-all domain with engagement data).")
                    if person is not None and self.knows(person) and self.engaged(person)
                    else (
                        "catch_all",
                        "Domain accepts all emails (catch-all). Unable to verify specific address.",
                    )
                )
            elif person is not None:
                status, message = "valid", "Email is valid."
            else:
                status, message = "invalid", "Email is invalid."
        credits = 0.0 if status in ("catch_all", "unknown") else PRICES[_VALIDATION]
        verdict = {
            "email": email.casefold(),
            "email_status": status,
            "credits_consumed": credits,
            "message": message,
            "is_domain_catch_all": bool(company and company.catch_all),
            **_mx(company),
            **_company_fields(company),
        }
        return self._answer(verdict, f"{_VALIDATION}|{normalize_email(email)}", credits)

    async def mobile(self, request: Request) -> Response:
        self._admit(request, _MOBILE)
        body = await self._body(request)
        profile, work, personal = (
            _text(body.get(k)) for k in ("profile_url", "work_email", "personal_email")
        )
        if not (profile or work or personal):
            raise self._invalid(
                ["profile_url", "work_email", "personal_email"],
                "Provide at least one identifier: profile_url, work_email or personal_email.",
            )
        self._pay_first(_MOBILE)
        person = None
        if profile:  # a profile URL, or its username alone
            person = self.person_by_linkedin(profile if "/" in profile else f"/in/{profile}")
        for email in (work, personal):
            if person is None and email:
                person = self.person_by_email(email)
        answer: dict[str, Any] = {"profile_url": profile, "email": work or personal}
        if person is None or not self.has_mobile(person):
            answer |= {
                "mobile_number": None,
                "message": "No mobile number found for this contact.",
            }
            return self._answer(answer, "", 0)
        answer |= {"mobile_number": _written(person.phone), "message": "Mobile number found."}
        return self._answer(answer, f"{_MOBILE}|{person.ordinal}", PRICES[_MOBILE])

    def credits_left(self, request: Request) -> Response:
        self._admit(request, None)
        left = self.balance()
        return JSONResponse(
            {
                "credits": left,
                "is_frozen": False,
                "credits_frozen": 0,
                "credits_liquid": left,
                "credit_freeze_message": None,
                "credit_freeze_plan_hint": None,
            }
        )

    # -- every answer's headers ------------------------------------------------------------

    def _headers(self, response: Response, route: str | None) -> None:
        """The rate-limit and credit headers LeadMagic puts on every answer (what the
        answer set itself, a 429's, is kept)."""
        said: dict[str, str] = {"X-Credits-Remaining": f"{self.balance():.2f}"}
        if route is not None:
            left, reset = self.left(route).get(60.0, (PER_MINUTE, 60.0))
            daily, _ = self.left("gateway").get(86_400.0, (500_000, 86_400.0))
            seconds = str(max(0, math.ceil(reset)))
            said |= {
                "RateLimit-Limit": str(PER_MINUTE),
                "RateLimit-Remaining": str(left),
                "RateLimit-Reset": seconds,
                "X-RateLimit-Limit": str(PER_MINUTE),
                "X-RateLimit-Remaining": str(left),
                "X-RateLimit-Reset": seconds,
                "X-RateLimit-Remaining-Daily": str(daily),
                "X-RateLimit-Soft-Mode": "false",
                "X-Credits-Cost": "0",
            }
        for name, value in said.items():
            if name not in response.headers:
                response.headers[name] = value

    def routes(self) -> list[BaseRoute]:
        def route(
            path: str,
            handler: Callable[[Request], Awaitable[Response] | Response],
            name: str,
            method: str,
            group: str | None,
        ) -> Route:
            async def endpoint(request: Request) -> Response:
                # the account endpoint meets no fault: a test's faults are for its calls
                response = await self.answer(
                    request, name, lambda: handler(request), faults=group is not None
                )
                self._headers(response, group)
                return response

            return Route(path, endpoint, methods=[method])

        return [
            route("/v1/people/email-finder", self.find, _FINDER, "POST", _FINDER),
            route("/v1/people/email-validation", self.validate, _VALIDATION, "POST", _VALIDATION),
            route("/v1/people/mobile-finder", self.mobile, _MOBILE, "POST", _MOBILE),
            route("/v1/credits", self.credits_left, "credits", "GET", None),
        ]


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _written(phone: str) -> str:
    """A world number as LeadMagic writes one: ``+1-555-123-4567``, ``+44 123 456 789``."""
    if phone.startswith("+1") and len(phone) == 12:
        return f"+1-{phone[2:5]}-{phone[5:8]}-{phone[8:]}"
    code, rest = phone[1:-9], phone[-9:]
    return f"+{code} {rest[:3]} {rest[3:6]} {rest[6:]}"


def _mx(company: Company | None) -> dict[str, Any]:
    if company is None:
        return {"mx_record": None, "mx_provider": None, "mx_security_gateway": False}
    google = company.ordinal % 3 != 0
    outlook = f"{company.domain.replace('.', '-')}.mail.protection.outlook.com"
    record = "aspmx.l.google.com" if google else outlook
    return {
        "mx_record": record,
        "mx_provider": "Google Workspace" if google else "Microsoft 365",
        "mx_security_gateway": company.ordinal % 11 == 0,
        "has_mx": True,
        "mx_records_full": [{"priority": 1 if google else 0, "exchange": record}],
    }


def _company_fields(company: Company | None) -> dict[str, Any]:
    if company is None:
        return {"company_name": None, "company_industry": None, "company_size": None}
    return {
        "company_name": company.name,
        "company_industry": company.industry,
        "company_size": company.size,
        "company_profile_url": f"linkedin.com/company/{company.domain.split('.', 1)[0]}",
    }
