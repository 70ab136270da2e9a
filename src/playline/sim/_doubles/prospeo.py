"""Prospeo's Enrich Person API, as https://prospeo.io/api-docs describes it.

- ``POST /enrich-person`` ``{"only_verified_email", "enrich_mobile", "only_verified_mobile",
  "data": {first_name, last_name, full_name, linkedin_url, email, person_id, company_name,
  company_website, company_linkedin_url}}``; ``POST /bulk-enrich-person``: the same flags,
  ``data`` a list of 1 to 50 records each with our ``identifier``; ``GET
  /account-information``; the key in ``X-KEY``, the bodies JSON (``Content-Type:
  application/json``, else ``INVALID_REQUEST``);
- the minimum: ``linkedin_url``, ``email`` or ``person_id``, or a name (``first_name`` and
  ``last_name``, or ``full_name``) with a company; less is ``INVALID_DATAPOINTS`` (in bulk,
  the record's identifier under ``invalid_datapoints``);
- found: ``200 {"error": false, "free_enrichment", "person": {..., "email": {"status":
  "VERIFIED" | "UNVERIFIED", "revealed", "email", ...}, "mobile"}, "company"}``; none:
  ``400 {"error": true, "error_code": "NO_MATCH"}``, also when ``only_verified_email`` is set
  and the email is not verified (a catch-all domain's); bulk: ``{"error": false,
  "total_cost", "matched": [{"identifier", "person", "company"}], "not_matched": [...],
  "invalid_datapoints": [...]}``;
- 1 credit a match, 10 with a mobile, nothing without one; re-enriching a person is free for
  the account's lifetime (``free_enrichment: true``);
- the Starter plan's limits over the enrich endpoints: 5 a second, 300 a minute, 2,000 a
  rolling day, a bulk request counting one per record; past them ``429 RATE_LIMITED`` (no
  ``Retry-After``), with the ``x-minute-request-left`` family of headers other clients read;
- a wrong key: ``401 INVALID_API_KEY``; no credits: ``400 INSUFFICIENT_CREDITS``; a server
  fault: ``400 INTERNAL_ERROR``.

Assumed where the documentation is silent: ``INSUFFICIENT_CREDITS`` answers a match the
account cannot pay for (a miss is still ``NO_MATCH``), and a whole bulk request when the
account has fewer credits than the most it could charge (a credit a record, 10 with mobiles);
a bulk answer reports the re-enrichments neither per record nor in ``total_cost``; the
account endpoint spends no rate. A re-enrichment is free, but this double counts it in
``duplicates``: a runtime that asks again has lost what it bought. Who Prospeo knows is
``knows``; a person with a mobile is one of two.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, ClassVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from .._inputs import normalize_domain
from .._world import Person
from ._base import Double, Limit, Refusal, linkedin_of

__all__ = ["ProspeoDouble"]

BULK_MAX = 50
_COUNTRIES = {
    "US": "United States", "GB": "United Kingdom", "DE": "Germany", "FR": "France",
    "CA": "Canada", "NL": "Netherlands", "AU": "Australia", "IN": "India", "SE": "Sweden",
}  # fmt: skip


def _text(data: Mapping[str, Any], name: str) -> str | None:
    value = data.get(name)
    return value.strip() if isinstance(value, str) and value.strip() else None


def _enough(data: Mapping[str, Any]) -> bool:
    """Prospeo's minimum: an identifier of the person, or a name with a company."""
    if any(_text(data, n) for n in ("linkedin_url", "email", "person_id")):
        return True
    named = (_text(data, "first_name") and _text(data, "last_name")) or _text(data, "full_name")
    company = any(_text(data, n) for n in ("company_name", "company_website",
                                            "company_linkedin_url"))  # fmt: skip
    return bool(named and company)


class ProspeoDouble(Double):
    name = "prospeo"
    coverage = 0.5
    limits: ClassVar[tuple[Limit, ...]] = (
        Limit(5, 1.0, "enrich"),
        Limit(300, 60.0, "enrich"),
        Limit(2000, 86400.0, "enrich"),
    )
    PLAN = 10_000  # credits a month when ``credits`` is None (unlimited)

    # -- answers in Prospeo's words --------------------------------------------------------

    def usage(self) -> dict[str, str]:
        """The rate-limit headers of an enrich answer."""
        left = self.left("enrich")
        minute, day = left[60.0], left[86400.0]
        return {
            "x-second-rate-limit": "5",
            "x-minute-rate-limit": "300",
            "x-daily-rate-limit": "2000",
            "x-minute-request-left": str(minute[0]),
            "x-daily-request-left": str(day[0]),
            "x-minute-reset-seconds": str(math.ceil(minute[1])),
            "x-daily-reset-seconds": str(math.ceil(day[1])),
        }

    def _error(self, status: int, code: str) -> Response:
        return JSONResponse({"error": True, "error_code": code}, status, self.usage())

    def rate_limited(self, wait: float) -> Response:
        return self._error(429, "RATE_LIMITED")

    def unavailable(self) -> Response:
        return self._error(400, "INTERNAL_ERROR")  # Prospeo's server fault is a 400

    def _admit(self, request: Request) -> None:
        if request.headers.get("x-key") != self.key:
            raise self.refuse("auth", self._error(401, "INVALID_API_KEY"))

    async def _body(self, request: Request) -> dict[str, Any]:
        """The JSON body of an enrichment (``INVALID_REQUEST`` unless it is one)."""
        try:
            if not request.headers.get("content-type", "").startswith("application/json"):
                raise ValueError
            body = json.loads(await request.body())
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise Refusal(self._error(400, "INVALID_REQUEST"))
        return body

    def _take(self, records: int) -> None:
        """Count ``records`` requests against the windows (a bulk request's records each)."""
        if self.take_window(records, "enrich") is not None:
            raise Refusal(self.rate_limited(0))

    # -- the world, as Prospeo knows it ----------------------------------------------------

    @staticmethod
    def person_id(person: Person) -> str:
        return f"{person.ordinal:024x}"

    def _find(self, data: Mapping[str, Any]) -> Person | None:
        if (value := _text(data, "person_id")) is not None:
            try:
                person = self.world.people[int(value, 16)]
            except (ValueError, IndexError):
                person = None
            if person is not None and self.knows(person):
                return person
        for found in (
            self.person_by_linkedin(_text(data, "linkedin_url")),
            self.person_by_email(_text(data, "email")),
        ):
            if found is not None:
                return found
        domain = _text(data, "company_website")
        if domain is not None:
            domain = normalize_domain(domain)
        elif (name := _text(data, "company_name")) is not None:
            company = self.company_named(name)
            domain = company.domain if company else None
        if domain is None:
            return None
        if (full := _text(data, "full_name")) is not None:
            return self.person_named(full, domain)
        return self.person(data.get("first_name"), data.get("last_name"), domain)

    def _record(self, person: Person, verified: bool, mobile: bool) -> dict[str, Any]:
        company = self.company(person.domain)
        return {
            "person": {
                "person_id": self.person_id(person),
                "first_name": person.first_name,
                "last_name": person.last_name,
                "full_name": f"{person.first_name} {person.last_name}",
                "linkedin_url": linkedin_of(person),
                "current_job_title": person.title,
                "headline": f"{person.title} at {company.name}" if company else person.title,
                "linkedin_member_id": None,
                "last_job_change_detected_at": None,
                "job_history": [],
                "location": {
                    "country": _COUNTRIES.get(company.country) if company else None,
                    "country_code": company.country if company else None,
                },
                "skills": [],
                "email": {
                    "status": "VERIFIED" if verified else "UNVERIFIED",
                    "revealed": True,
                    "email": person.email,
                    "verification_method": "SMTP" if verified else None,
                    "email_mx_provider": None,
                },
                "mobile": {
                    "status": "VERIFIED",
                    "revealed": True,
                    "mobile": person.phone,
                    "mobile_international": person.phone,
                }
                if mobile
                else {"status": "NOT_ENRICHED"},
            },
            "company": {
                "company_id": f"c{company.ordinal:06d}" if company else None,
                "name": company.name if company else None,
                "website": f"https://{person.domain}",
                "domain": person.domain,
                "industry": company.industry if company else None,
            },
        }

    # -- enrichments -----------------------------------------------------------------------

    def _enrich(self, flags: Mapping[str, Any], data: Any) -> tuple[str, dict[str, Any], int]:
        """One record: ``matched`` (its answer and what it cost), ``NO_MATCH``,
        ``INVALID_DATAPOINTS`` or ``INSUFFICIENT_CREDITS``."""
        if not isinstance(data, Mapping) or not _enough(data):
            return "INVALID_DATAPOINTS", {}, 0
        person = self._find(data)
        if person is None:
            return "NO_MATCH", {}, 0
        verified = not self.catch_all(person.email)
        wants_mobile = flags.get("enrich_mobile") is True or flags.get("only_verified_mobile")
        mobile = bool(wants_mobile) and person.ordinal % 2 == 0
        if (flags.get("only_verified_email") is True and not verified) or (
            flags.get("only_verified_mobile") is True and not mobile
        ):
            return "NO_MATCH", {}, 0  # nothing charged: that is the flags' point
        item = f"person|{person.ordinal}"
        cost = 10 if mobile else 1
        if not self.charges[item] and not self.can_pay(cost):
            return "INSUFFICIENT_CREDITS", {}, 0
        # enriched before: free for the account's lifetime (a repeat, not a second charge)
        cost = int(self.charge(item, cost, repeat_free=True))
        return "matched", self._record(person, verified, mobile), cost

    async def enrich(self, request: Request) -> Response:
        self._admit(request)
        body = await self._body(request)
        if not isinstance(body.get("data"), dict):
            raise Refusal(self._error(400, "INVALID_REQUEST"))
        self._take(1)
        outcome, record, cost = self._enrich(body, body["data"])
        if outcome == "INSUFFICIENT_CREDITS":
            raise self.refuse("credits", self._error(400, outcome))
        if outcome != "matched":
            return self._error(400, outcome)
        answer = {"error": False, "free_enrichment": cost == 0, **record}
        return JSONResponse(answer, 200, self.usage())

    async def bulk(self, request: Request) -> Response:
        self._admit(request)
        body = await self._body(request)
        records = body.get("data")
        if not isinstance(records, list) or not 1 <= len(records) <= BULK_MAX:
            raise Refusal(self._error(400, "INVALID_REQUEST"))
        ids = [r.get("identifier") if isinstance(r, dict) else None for r in records]
        if not all(isinstance(i, str | int) and str(i).isalnum() for i in ids) or len(
            {str(i) for i in ids}
        ) != len(ids):
            raise Refusal(self._error(400, "INVALID_REQUEST"))  # each its own identifier
        self._take(len(records))
        most = len(records) * (10 if body.get("enrich_mobile") is True else 1)
        if not self.can_pay(most):
            raise self.refuse("credits", self._error(400, "INSUFFICIENT_CREDITS"))
        matched, not_matched, invalid, total = [], [], [], 0
        for identifier, record in zip(ids, records, strict=True):
            outcome, found, cost = self._enrich(body, record)
            total += cost
            if outcome == "matched":
                matched.append({"identifier": identifier, **found})
            elif outcome == "INVALID_DATAPOINTS":
                invalid.append(identifier)
            else:
                not_matched.append(identifier)
        answer = {
            "error": False,
            "total_cost": total,
            "matched": matched,
            "not_matched": not_matched,
            "invalid_datapoints": invalid,
        }
        return JSONResponse(answer, 200, self.usage())

    async def account(self, request: Request) -> Response:
        self._admit(request)
        left = self.PLAN - self.charged if self.credits is None else self.credits
        return JSONResponse(
            {
                "error": False,
                "response": {
                    "current_plan": "STARTER",
                    "current_team_members": 1,
                    "remaining_credits": int(left) if float(left).is_integer() else left,
                    "used_credits": int(self.charged),
                    "next_quota_renewal_days": 25,
                    "next_quota_renewal_date": "2027-01-01 00:00:00+00:00",
                },
            }
        )

    def routes(self) -> list[BaseRoute]:
        def route(path: str, handler: Any, name: str, method: str, faults: bool = True) -> Route:
            async def endpoint(request: Request) -> Response:
                return await self.answer(request, name, lambda: handler(request), faults=faults)

            return Route(path, endpoint, methods=[method])

        return [
            route("/enrich-person", self.enrich, "enrich-person", "POST"),
            route("/bulk-enrich-person", self.bulk, "bulk-enrich-person", "POST"),
            route("/account-information", self.account, "account-information", "GET", False),
        ]
