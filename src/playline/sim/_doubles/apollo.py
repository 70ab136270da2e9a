"""Apollo's REST API v1, as its OpenAPI document (the spec behind https://docs.apollo.io)
and the pages of docs.apollo.io describe it (see ``playline.providers.apollo``).

- ``POST /api/v1/people/match`` (the person's fields in the query string, or a JSON body) and
  ``POST /api/v1/people/bulk_match`` (``{"details": [...]}``, up to 10; flags in the query),
  the key in ``x-api-key`` (anything else: 401, ``text/plain``);
- found: ``200 {"person": {...}}``; a bulk answer ``{"status": "success",
  "total_requested_enrichments", "unique_enriched_records", "missing_records",
  "credits_consumed", "matches": [...], "request_id"}``; a person's ``email_status`` is
  ``verified``, ``extrapolated`` (with ``extrapolated_email_confidence``) or ``unavailable``
  (``email`` null); nobody matched: ``200 {"person": null}``, and ``null`` at that place of
  ``matches`` (both assumed: the documentation shows no such answer);
- a person is found by Apollo id, email, LinkedIn URL, or a name (``first_name`` and
  ``last_name``, or ``name``) with a ``domain`` or an ``organization_name``; a name alone
  finds nobody (``hashed_email`` is not modelled: the adapter never sends it);
- a matched person costs 1 credit (demographics or email; 8 more for a mobile phone, which
  the double never reveals), nobody matched 0; a person matched twice in one bulk request is
  charged once;
- 400 ``INVALID_REQUEST`` (no details), 400 ``RECORD_LIMIT_EXCEEDED`` (more than 10), 422
  ``UNKNOWN_ERROR`` (details that are not a list of objects);
- per endpoint, windows of a minute, an hour and a day (``people/match`` 200, 600, 6000;
  ``people/bulk_match`` 20, 100, 6000: the usage-stats example), counted in requests; each
  answer past the checks says ``x-rate-limit-{minute,hourly,24-hour}``,
  ``x-{minute,hourly,24-hour}-usage`` and ``x-{minute,hourly,24-hour}-requests-left``; past a
  window, 429 ``{"message": "The maximum number of api calls allowed for ... is N times per
  hour. ..."}`` with ``retry-after``;
- ``run_waterfall_email`` / ``run_waterfall_phone`` need ``webhook_url`` or ``poll_only=true``
  (400 otherwise, assumed words). The answer carries the demographics (no ``email``), a
  ``request_id`` (a signed 64-bit integer, often negative) and ``waterfall: {"status":
  "accepted"}``; ``GET /api/v1/webhook_result/{request_id}`` answers 404 ``result_pending``
  with ``retry_after_seconds`` (``pending_polls`` times), then 200 with ``webhook_result``
  (``people[].emails[]`` with ``email_status_cd``, ``credits_consumed``: the request's whole
  charge, assumed), 404 ``request_id_unknown``, 400 ``invalid_request_id``, and 410
  ``request_id_expired`` 30 days after the result was ready. The vendors know more people than
  Apollo (``WATERFALL_COVERAGE``) and charge 1 credit per email found (assumed). With
  ``waterfall_configured`` False the answer is 200 with a waterfall status other than
  ``accepted``, no job and no charge (the word, ``rejected``, is assumed);
- out of credits (``credits``): 422 ``{"error": "You have insufficient credits ..."}``
  (assumed: the documentation shows no such answer); a request is refused when it would
  charge more than is left, or when nothing is left;
- ``GET /api/v1/users/api_profile?include_credit_usage=true`` and ``POST
  /api/v1/usage_stats/credit_usage_stats`` say the credits left; ``POST
  /api/v1/usage_stats/api_usage_stats`` the windows.

``quota`` is not used: Apollo's only request allowance is its day window (a ``Limit``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any, ClassVar

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from .._inputs import normalize_domain, normalize_email, normalize_text
from .._world import Person, unit
from ._base import Double, Limit, Refusal, linkedin_of

__all__ = ["ApolloDouble", "apollo_id"]

_UNAUTHORIZED = (
    "Invalid API key. See https://docs.apollo.io/reference/authentication for how to authenticate."
)
_UPGRADE = "Please upgrade your plan from https://app.apollo.io/#/settings/plans/upgrade."
_WINDOWS = {60.0: ("minute", "minute"), 3600.0: ("hourly", "hour"), 86400.0: ("24-hour", "day")}
_COUNTRIES = {
    "US": "United States", "GB": "United Kingdom", "DE": "Germany", "FR": "France",
    "CA": "Canada", "NL": "Netherlands", "AU": "Australia", "IN": "India", "SE": "Sweden",
}  # fmt: skip
_SENIORITY = (
    ("Founder", "founder"), ("CEO", "c_suite"), ("CTO", "c_suite"), ("CFO", "c_suite"),
    ("COO", "c_suite"), ("VP", "vp"), ("Head", "head"), ("Director", "director"),
    ("Manager", "manager"), ("Lead", "manager"),
)  # fmt: skip
_FLAGS = ("run_waterfall_email", "run_waterfall_phone", "reveal_phone_number")


def apollo_id(person: Person) -> str:
    """A person's Apollo id (24 hex digits, as Apollo's ids look), their ordinal in it."""
    return f"{person.ordinal:024x}"


def _failed(status: int, code: str, message: str) -> JSONResponse:
    """The error envelope of the enrichment endpoints (SPEC /people/bulk_match)."""
    return JSONResponse({"status": "failed", "error_code": code, "error_message": message}, status)


def _true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().casefold() == "true")


class ApolloDouble(Double):
    name = "apollo"
    coverage = 0.6  # Apollo's own database
    WATERFALL_COVERAGE = 0.85  # Apollo with the waterfall's vendors
    limits: ClassVar[tuple[Limit, ...]] = (
        Limit(200, 60.0, "people/match"),
        Limit(600, 3600.0, "people/match"),
        Limit(6000, 86400.0, "people/match"),
        Limit(20, 60.0, "people/bulk_match"),
        Limit(100, 3600.0, "people/bulk_match"),
        Limit(6000, 86400.0, "people/bulk_match"),
    )
    PLAN = 10_000  # lead credits a cycle, when ``credits`` is None
    RETRY_AFTER = 10  # seconds a pending poll asks to wait
    KEPT = 30 * 86400.0  # seconds a webhook result is kept

    def reset(self) -> None:
        super().reset()
        self.waterfall_configured = True  # the team's waterfall settings (the app's)
        self._named: dict[str, list[str]] | None = None

    # -- the world, as Apollo knows it ------------------------------------------------------

    def email_status(self, person: Person) -> str:
        """The ``email_status`` Apollo gives a person it knows: ``verified``, ``extrapolated``
        (a pattern guess: also every address at a catch-all domain) or ``unavailable``."""
        share = unit(self.world.seed, "apollo-email", person.ordinal)
        if share >= 0.9:
            return "unavailable"
        if share >= 0.7 or self.catch_all(person.email):
            return "extrapolated"
        return "verified"

    def finds_email(self, person: Person) -> bool:
        """Whether people/match returns this person's address."""
        return self.knows(person) and self.email_status(person) != "unavailable"

    def waterfall_finds(self, person: Person) -> bool:
        """Whether an email waterfall (Apollo, then the vendors) finds this person's address."""
        return self.knows(person, self.WATERFALL_COVERAGE)

    def _domains_named(self, name: str) -> list[str]:
        if self._named is None:
            named: dict[str, list[str]] = {}
            for company in self.world.companies:
                named.setdefault(normalize_text(company.name), []).append(company.domain)
            self._named = named
        return self._named.get(normalize_text(name), [])

    def _identify(self, fields: Mapping[str, Any], share: float | None = None) -> Person | None:
        """The person the fields identify, if Apollo (``share``: with its vendors) knows
        them: by Apollo id, email, LinkedIn URL, or a name with a domain or a company name.
        A name alone identifies nobody (SPEC: "no records have been enriched")."""
        found = self._lookup(fields)
        return found if found is not None and self.knows(found, share) else None

    def _lookup(self, fields: Mapping[str, Any]) -> Person | None:
        people = self.world.people
        apollo = fields.get("id")
        if isinstance(apollo, str) and len(apollo) == 24:
            try:
                ordinal = int(apollo, 16)
            except ValueError:
                ordinal = -1
            if 0 <= ordinal < len(people):
                return people[ordinal]
        email = fields.get("email")
        if isinstance(email, str) and email.strip():
            found = self.world.person_by_email.get(normalize_email(email))
            if found is not None:
                return found
        linkedin = fields.get("linkedin_url")
        if isinstance(linkedin, str) and "/in/" in linkedin:
            key = linkedin.strip().casefold().split("?", 1)[0].rstrip("/").rsplit("/in/", 1)[1]
            try:
                found = people[int(key.rsplit("-", 1)[-1], 16)]
            except (ValueError, IndexError):
                found = None
            if found is not None and linkedin_of(found).casefold().endswith("/in/" + key):
                return found
        first, last, name = fields.get("first_name"), fields.get("last_name"), fields.get("name")
        if not (isinstance(first, str) and isinstance(last, str) and first and last):
            if not (isinstance(name, str) and " " in name.strip()):
                return None
            first, last = name.strip().split(None, 1)
        domains = []
        if isinstance(fields.get("domain"), str):
            domains.append(normalize_domain(fields["domain"]))
        if isinstance(fields.get("organization_name"), str):
            domains += self._domains_named(fields["organization_name"])
        for domain in domains:
            found = self.world.person(normalize_text(first), normalize_text(last), domain)
            if found is not None:
                return found
        return None

    def _person(self, person: Person, *, email: bool = True) -> dict[str, Any]:
        """A person as Apollo describes one; ``email`` False: without the address (an email
        waterfall delivers it later)."""
        company = self.company(person.domain)
        status = self.email_status(person)
        confidence = None
        if status == "extrapolated":
            confidence = round(0.5 + 0.45 * unit(self.world.seed, "apollo-conf", person.ordinal), 2)
        org_id = f"{company.ordinal:024x}" if company else None
        seniority = next((s for word, s in _SENIORITY if word in person.title), "senior")
        return {
            "id": apollo_id(person),
            "first_name": person.first_name,
            "last_name": person.last_name,
            "name": f"{person.first_name} {person.last_name}",
            "linkedin_url": linkedin_of(person),
            "title": person.title,
            "email_status": status if email else None,
            "extrapolated_email_confidence": confidence if email else None,
            "email": person.email if email and status != "unavailable" else None,
            "personal_emails": [],
            "headline": f"{person.title} at {company.name}" if company else person.title,
            "organization_id": org_id,
            "employment_history": [],
            "city": None,
            "state": None,
            "country": _COUNTRIES.get(company.country) if company else None,
            "departments": ["c_suite"] if seniority in ("c_suite", "founder") else [],
            "seniority": seniority,
            "organization": None
            if company is None
            else {
                "id": org_id,
                "name": company.name,
                "primary_domain": company.domain,
                "website_url": f"http://www.{company.domain}",
                "industry": company.industry.lower(),
            },
        }

    # -- requests ---------------------------------------------------------------------------

    def _admit(self, request: Request, group: str | None) -> None:
        """Refuse a wrong key (401, text); then, for an enrichment (``group``), a request past
        the endpoint's windows (429)."""
        if request.headers.get("x-api-key") != self.key:
            raise self.refuse("auth", PlainTextResponse(_UNAUTHORIZED, 401))
        if group is not None:
            wait = self.take_window(1, group)
            if wait is not None:
                raise Refusal(self._too_many(group, wait))

    def _too_many(self, group: str, wait: float) -> Response:
        spent = [s for s, (left, _) in self.left(group).items() if left == 0] or [60.0]
        limit = next(x for x in self.limits if x.group == group and x.seconds == spent[-1])
        return JSONResponse(
            {
                "message": f"The maximum number of api calls allowed for api/v1/{group} is "
                f"{limit.count} times per {_WINDOWS[limit.seconds][1]}. {_UPGRADE}"
            },
            429,
            {"retry-after": str(max(1, math.ceil(wait)))},
        )

    def rate_limited(self, wait: float) -> Response:
        return self._too_many("people/match", wait)

    def _windows(self, group: str) -> dict[str, str]:
        """The rate-limit headers of an answer of ``group``'s endpoint."""
        headers = {}
        for seconds, (left, _) in self.left(group).items():
            header, _ = _WINDOWS[seconds]
            count = next(x.count for x in self.limits if x.group == group and x.seconds == seconds)
            headers[f"x-rate-limit-{header}"] = str(count)
            headers[f"x-{header}-usage"] = str(count - left)
            headers[f"x-{header}-requests-left"] = str(left)
        return headers

    def _pay(self, credits: float) -> None:
        """Refuse a request that would charge more than is left, or any when nothing is."""
        if self.credits is not None and (self.credits <= 0 or not self.can_pay(credits)):
            message = (
                f"You have insufficient credits to complete this request ({self.credits:g} "
                f"left). {_UPGRADE}"
            )
            raise self.refuse("credits", JSONResponse({"error": message}, 422))

    def _request_id(self) -> int:
        """A new request id: a signed 64-bit integer, often negative."""
        digest = hashlib.blake2b(f"{self.world.seed}|apollo|{self.job_id()}".encode()).digest()
        return int.from_bytes(digest[:8], "big", signed=True)

    def _waterfall(self, flags: Mapping[str, Any]) -> bool | None:
        """Whether the request asks for a waterfall (None: no); 400 when it gives no way to
        deliver the result (no ``webhook_url`` and no ``poll_only``)."""
        if not any(_true(flags.get(f)) for f in _FLAGS):
            return None
        if not (flags.get("webhook_url") or _true(flags.get("poll_only"))):
            raise Refusal(
                _failed(
                    400,
                    "INVALID_REQUEST",
                    "webhook_url is required with run_waterfall_email, run_waterfall_phone "
                    "or reveal_phone_number (or set poll_only=true and poll the result)",
                )
            )
        return self.waterfall_configured

    def _submit(self, asked: list[Mapping[str, Any]], sync: list[Person | None]) -> dict[str, Any]:
        """Accept a waterfall for ``asked`` (Apollo's own matches: ``sync``): its job."""
        rid = self._request_id()
        people = [self._identify(fields, self.WATERFALL_COVERAGE) for fields in asked]
        with self.lock:
            self.jobs[str(rid)] = {"people": people, "matched": sync, "polls": 0, "ready": None}
        return {
            "status": "accepted",
            "message": "Waterfall enrichment request accepted. Results will be sent to the "
            "provided webhook URL.",
            "rid": rid,
        }

    async def match(self, request: Request) -> Response:
        self._admit(request, "people/match")
        fields: dict[str, Any] = dict(request.query_params)
        if await request.body():  # the older tutorial sends the fields as JSON
            try:
                sent = orjson.loads(await request.body())
            except orjson.JSONDecodeError:
                raise Refusal(_failed(422, "UNKNOWN_ERROR", "the body is not JSON")) from None
            if isinstance(sent, dict):
                fields = {**sent, **fields}
        waterfall = self._waterfall(fields)
        person = self._identify(fields)
        if waterfall is False:
            return self._rejected({"person": None if person is None else self._person(person)})
        cost = 0 if person is None else 1
        self._pay(max(cost, 1) if waterfall else cost)
        if person is not None:
            self.charge(f"{'waterfall' if waterfall else 'people_match'}|{person.ordinal}", 1)
        body: dict[str, Any] = {
            "person": None if person is None else self._person(person, email=not waterfall)
        }
        if waterfall:
            job = self._submit([fields], [person])
            body["waterfall"] = {"status": job["status"], "message": job["message"]}
            body["request_id"] = job["rid"]
        return JSONResponse(body, headers=self._windows("people/match"))

    def _rejected(self, body: dict[str, Any]) -> Response:
        body["waterfall"] = {
            "status": "rejected",
            "message": "Waterfall enrichment is not configured for your team: configure "
            "waterfall settings in Apollo before running waterfall enrichment.",
        }
        return JSONResponse(body, headers=self._windows("people/match"))

    async def bulk_match(self, request: Request) -> Response:
        self._admit(request, "people/bulk_match")
        try:
            body = orjson.loads(await request.body() or b"{}")
        except orjson.JSONDecodeError:
            body = None
        details = body.get("details") if isinstance(body, dict) else None
        if details is None or details == []:
            raise Refusal(_failed(400, "INVALID_REQUEST", "invalid request, missing details"))
        if not isinstance(details, list) or not all(isinstance(d, dict) for d in details):
            raise Refusal(
                _failed(422, "UNKNOWN_ERROR", "no implicit conversion of Symbol into Integer")
            )
        if len(details) > 10:
            raise Refusal(
                _failed(
                    400, "RECORD_LIMIT_EXCEEDED", "cannot enrich more than 10 in a single request"
                )
            )
        waterfall = self._waterfall(request.query_params)
        people = [self._identify(d) for d in details]
        unique = {p.ordinal: p for p in people if p is not None}
        self._pay(max(len(unique), 1) if waterfall else len(unique))
        for ordinal in unique:  # a person asked twice in one request is charged once
            self.charge(f"{'waterfall' if waterfall else 'people_match'}|{ordinal}", 1)
        out: dict[str, Any] = {
            "status": "success",
            "error_code": None,
            "error_message": None,
            "total_requested_enrichments": len(details),
        }
        if waterfall is None:
            out |= {
                "unique_enriched_records": len(unique),
                "missing_records": sum(p is None for p in people),
                "credits_consumed": float(len(unique)),
            }
        matches = [None if p is None else self._person(p, email=not waterfall) for p in people]
        out["matches"] = matches
        if waterfall is False:
            return self._rejected(out)
        if waterfall:
            job = self._submit(details, people)
            out["waterfall"] = {"status": job["status"], "message": job["message"]}
            out["request_id"] = job["rid"]
        else:
            out["request_id"] = self._request_id()
        return JSONResponse(out, headers=self._windows("people/bulk_match"))

    def webhook_result(self, request: Request) -> Response:
        self._admit(request, None)
        said = request.path_params["request_id"]
        try:
            rid = int(said)
        except ValueError:
            rid = None
        if rid is None or not -(2**63) <= rid < 2**63:
            return JSONResponse({"error_code": "invalid_request_id"}, 400)
        with self.lock:
            job = self.jobs.get(str(rid))
            if job is None:
                return JSONResponse({"error_code": "request_id_unknown"}, 404)
            if job["ready"] is None and job["polls"] < self.pending_polls:
                job["polls"] += 1
                return JSONResponse(
                    {"error_code": "result_pending", "retry_after_seconds": self.RETRY_AFTER},
                    404,
                )
            first = job["ready"] is None
            if first:
                job["ready"] = self.clock()
            elif self.clock() - job["ready"] > self.KEPT:
                return JSONResponse({"error_code": "request_id_expired"}, 410)
        if first:  # the vendors' charges, once, when the waterfall ends
            for ordinal in {p.ordinal for p in job["people"] if p is not None}:
                self.charge(f"waterfall_email|{ordinal}", 1)
        return JSONResponse(self._result(rid, job))

    def _result(self, rid: int, job: Mapping[str, Any]) -> dict[str, Any]:
        people = {p.ordinal for p in job["people"] if p is not None}
        matched = {p.ordinal for p in job["matched"] if p is not None}
        entries = []
        for person in job["people"]:
            if person is None:
                continue
            unverified = self.catch_all(person.email)
            vendor = "icypeas_single_email_search"
            entries.append(
                {
                    "id": apollo_id(person),
                    "emails": [
                        {
                            "email": person.email,
                            "email_source_cd": None,
                            "position": 0,
                            "email_status_cd": "Unverified" if unverified else "Verified",
                            "extrapolated_email_confidence": None,
                            "third_party_data_provider_id": vendor,
                            "vendor_validation_statuses": [],
                        }
                    ],
                    "phone_numbers": [],
                    "waterfall": {
                        "emails": [
                            {
                                "vendors": [
                                    {
                                        "id": f"{vendor}-1",
                                        "name": "Icypeas",
                                        "status": "UNVERIFIED" if unverified else "VERIFIED",
                                        "emails": [person.email],
                                    }
                                ]
                            }
                        ]
                    },
                }
            )
        asked = len(job["people"])
        return {
            "request_id": str(rid),
            "webhook_status": "success",
            "request_type": "waterfall",
            "last_dispatched_at": None,
            "failure_reason": None,
            "webhook_result": {
                "status": "success",
                "total_requested_enrichments": asked,
                "target_fields": ["emails"],
                "records_enriched": len(people),
                "email_records_enriched": len(people),
                "enrichment_not_found": asked - len(people),
                "email_records_not_found": asked - len(people),
                "credits_consumed": float(len(people) + len(matched)),
                "request_id": str(rid),
                "people": entries,
            },
        }

    # -- the account ------------------------------------------------------------------------

    def _credits(self) -> tuple[float, float]:
        """Credits used and the cycle's allowance."""
        used = self.charged
        left = self.PLAN - used if self.credits is None else self.credits
        return used, used + max(0.0, left)

    def api_profile(self, request: Request) -> Response:
        self._admit(request, None)
        body: dict[str, Any] = {
            "id": "66c8db577ed7f201b25c0eef",
            "team_id": "6095a710bd01d100a506d4ac",
            "first_name": "Play",
            "last_name": "Line",
            "title": "Developer",
            "email": "playline@example.com",
        }
        if _true(request.query_params.get("include_credit_usage")):
            used, limit = self._credits()
            body |= {
                "num_credits_remaining": limit - used,
                "effective_num_lead_credits": limit,
                "num_lead_credits_used": used,
                "effective_num_direct_dial_credits": 0,
                "num_direct_dial_credits_used": 0,
                "total_unified_credits_used": used,
            }
        return JSONResponse(body)

    def credit_usage(self, request: Request) -> Response:
        self._admit(request, None)
        used, limit = self._credits()
        return JSONResponse(
            {
                "credit_usage_stats": {
                    "lead_credit": {"limit": limit, "consumed": used, "left_over": limit - used},
                    "direct_dial_credit": {"limit": 0, "consumed": 0, "left_over": 0},
                },
                "current_credit_cycle": {
                    "start_date": "2026-11-01T00:00:00.000Z",
                    "end_date": "2026-12-01T00:00:00.000Z",
                },
            }
        )

    def api_usage(self, request: Request) -> Response:
        self._admit(request, None)
        stats = {}
        for group in ("people/match", "people/bulk_match"):
            windows = {}
            for seconds, (left, _) in self.left(group).items():
                count = next(
                    x.count for x in self.limits if x.group == group and x.seconds == seconds
                )
                windows[_WINDOWS[seconds][1]] = {
                    "limit": count,
                    "consumed": count - left,
                    "left_over": left,
                }
            route = orjson.dumps(["api/v1/people", group.split("/", 1)[1]]).decode()
            stats[route.replace(",", ", ")] = windows
        return JSONResponse(stats)

    def routes(self) -> list[BaseRoute]:
        def route(path: str, handler: Any, name: str, method: str) -> Route:
            async def endpoint(request: Request) -> Response:
                return await self.answer(request, name, lambda: handler(request))

            return Route(path, endpoint, methods=[method])

        return [
            route("/api/v1/people/match", self.match, "people/match", "POST"),
            route("/api/v1/people/bulk_match", self.bulk_match, "people/bulk_match", "POST"),
            route(
                "/api/v1/webhook_result/{request_id}",
                self.webhook_result,
                "webhook_result",
                "GET",
            ),
            route("/api/v1/users/api_profile", self.api_profile, "users/api_profile", "GET"),
            route(
                "/api/v1/usage_stats/credit_usage_stats",
                self.credit_usage,
                "usage_stats/credit_usage_stats",
                "POST",
            ),
            route(
                "/api/v1/usage_stats/api_usage_stats",
                self.api_usage,
                "usage_stats/api_usage_stats",
                "POST",
            ),
        ]
