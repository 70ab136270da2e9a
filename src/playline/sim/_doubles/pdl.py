"""People Data Labs' Person Enrichment API v5, as docs.peopledatalabs.com describes it.

- ``POST /v5/person/enrich`` with the parameters as JSON (a ``GET`` with them in the query
  too; the JSON takes precedence), the key in ``X-Api-Key`` or ``?api_key=``;
  ``POST /v5/person/bulk`` with ``{"requests": [{"params": {...}, "metadata": ...}], and
  parameters for every item (``required``, ``min_likelihood``, ``titlecase``)}``, 1 to 100
  items, answered by a JSON array of per-item answers in request order, each with its own
  ``status`` and the item's ``metadata``; ``HEAD /v5/person/enrich``: the usage headers only;
- the minimum input: ``profile``, ``email``, ``phone``, ``email_hash``, ``lid`` or ``pdl_id``,
  or a name (``first_name`` and ``last_name``, or ``name``) with ``company``, ``school``, a
  location or ``birth_date``; less is ``400 invalid_request_error``;
- found: ``200 {"status": 200, "likelihood": 1-10, "data": {...}}`` (lowercase unless
  ``titlecase``, URLs without a scheme); below ``min_likelihood`` (2 by default) or failing
  ``required`` (``"work_email"``, ``"emails AND (mobile_phone OR phone_numbers)"``): ``404
  not_found``;
- 1 credit per match, a 404 free; ``x-call-credits-spent`` says what a call cost (a bulk
  request's total), ``x-totallimit-remaining`` what is left; with no credits left every
  enrichment is ``402 payment_required``;
- 100 requests a minute per endpoint (a free key's; a bulk request is one); past it ``429
  rate_limit_error``; ``x-ratelimit-limit`` / ``x-ratelimit-remaining`` are JSON
  (``{"minute": 99, "day": null, "month": null}``) and ``x-ratelimit-reset`` an ISO time;
- a wrong key: ``401 authentication_error``; every error is ``{"status", "error": {"type",
  "message"}}``.

Assumed where the documentation is silent: a bulk item short of the minimum input is
answered ``400`` in its place; a bulk request meets ``402`` as a whole when no credit is
left when it arrives, and an item matched after the credits ran out in the middle is
answered ``402`` in its place; ``HEAD`` spends nothing and is not rate limited; the words of
a 400 are this double's. Who PDL knows is ``knows``; 85 % of them have a work email on
record (``has_work_email``); likelihood is 9-10 for a profile, email or id, 6-9 for a name
with a domain, 4-7 for a name with a company name.
"""

from __future__ import annotations

import json
import time
import unicodedata
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from .._inputs import normalize_domain
from .._world import Person, unit
from ._base import Double, Limit, Refusal, linkedin_of

__all__ = ["PdlDouble", "has_work_email"]

NOT_FOUND = "No records were found matching your request"
OUT_OF_CREDITS = "You have reached your account maximum (all matches have been used)"
TOO_LITTLE = (
    "Request must contain profile, email, phone, email_hash, lid or pdl_id, or a name "
    "(first_name and last_name, or name) with company, school, location, street_address, "
    "locality, region, country, postal_code or birth_date"
)
_IDENTIFYING = ("profile", "email", "phone", "email_hash", "lid", "pdl_id")
_CONTEXT = (
    "company", "school", "location", "street_address", "locality", "region", "country",
    "postal_code", "birth_date",
)  # fmt: skip
_COUNTRIES = {
    "US": "united states", "GB": "united kingdom", "DE": "germany", "FR": "france",
    "CA": "canada", "NL": "netherlands", "AU": "australia", "IN": "india", "SE": "sweden",
}  # fmt: skip
WORK_EMAIL_SHARE = 0.85


def has_work_email(seed: int, person: Person) -> bool:
    """Whether PDL's record of ``person`` holds a work email (a pure function of the seed)."""
    return unit(seed, "pdl-work-email", person.ordinal) < WORK_EMAIL_SHARE


def _error(status: int, kind: str, message: str) -> dict[str, Any]:
    return {"status": status, "error": {"type": kind, "message": message}}


def _refused(status: int, kind: str, message: str) -> tuple[int, dict[str, Any], int]:
    return status, _error(status, kind, message), 0


def _values(value: Any) -> list[str]:
    """A parameter's values: PDL takes a string or a list of strings."""
    items = value if isinstance(value, list) else [value]
    return [v for v in items if isinstance(v, str) and v.strip()]


def _present(params: Mapping[str, Any], name: str) -> bool:
    return bool(_values(params.get(name)))


class _Required:
    """PDL's ``required``: field names joined by ``AND``, ``OR``, ``NOT`` and parentheses;
    a field holds when the record has a value for it."""

    def __init__(self, expression: str) -> None:
        self.tokens = expression.replace("(", " ( ").replace(")", " ) ").split()
        self.at = 0

    def holds(self, data: Mapping[str, Any]) -> bool:
        value = self._or(data)
        if self.at != len(self.tokens):
            raise ValueError("unexpected " + self.tokens[self.at])
        return value

    def _next(self) -> str:
        if self.at >= len(self.tokens):
            raise ValueError("the expression ends early")
        self.at += 1
        return self.tokens[self.at - 1]

    def _peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def _or(self, data: Mapping[str, Any]) -> bool:
        value = self._and(data)
        while self._peek() == "OR":
            self._next()
            value = self._and(data) or value
        return value

    def _and(self, data: Mapping[str, Any]) -> bool:
        value = self._not(data)
        while self._peek() == "AND":
            self._next()
            value = self._not(data) and value
        return value

    def _not(self, data: Mapping[str, Any]) -> bool:
        token = self._next()
        if token == "NOT":
            return not self._not(data)
        if token == "(":
            value = self._or(data)
            if self._next() != ")":
                raise ValueError("a parenthesis is not closed")
            return value
        if token in ("AND", "OR", ")"):
            raise ValueError(f"unexpected {token}")
        field = data.get(token)
        return field is not None and field != [] and field != ""


class PdlDouble(Double):
    name = "pdl"
    coverage = 0.65
    limits: ClassVar[tuple[Limit, ...]] = (Limit(100, 60.0, "enrich"), Limit(100, 60.0, "bulk"))
    PLAN = 10_000  # credits on the account when ``credits`` is None (unlimited)
    BULK_MAX = 100

    # -- answers in PDL's words ------------------------------------------------------------

    def usage(self, group: str = "enrich", spent: float | None = None) -> dict[str, str]:
        """The headers of every answer: the minute's window, the credits left, and what this
        call cost when it was an enrichment."""
        left, reset = self.left(group).get(60.0, (100, 60.0))
        when = datetime.fromtimestamp(time.time() + reset, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        remaining = self.PLAN - self.charged if self.credits is None else self.credits
        headers = {
            "x-ratelimit-limit": json.dumps({"minute": 100, "day": None, "month": None}),
            "x-ratelimit-remaining": json.dumps({"minute": left, "day": None, "month": None}),
            "x-ratelimit-reset": when,
            "x-lifetime-used": str(int(self.charged)),
            "x-totallimit-remaining": str(int(remaining)),
            "x-totallimit-purchased-remaining": str(int(remaining)),
            "x-totallimit-overages-remaining": "0",
        }
        if spent is not None:
            headers["x-call-credits-spent"] = str(int(spent))
            headers["x-call-credits-type"] = "enrich"
        return headers

    def _refusal(self, status: int, kind: str, message: str, group: str = "enrich") -> Response:
        return JSONResponse(_error(status, kind, message), status, self.usage(group))

    def rate_limited(self, wait: float) -> Response:
        return self._refusal(
            429, "rate_limit_error", "An error occurred due to requests hitting the API too quick"
        )

    def unavailable(self) -> Response:
        return self._refusal(503, "api_error", "An internal error occurred")

    def _admit(self, request: Request, group: str | None) -> None:
        """Refuse a wrong key; then, for an enrichment (``group``), the rate window."""
        key = request.headers.get("x-api-key") or request.query_params.get("api_key")
        if key != self.key:
            raise self.refuse(
                "auth",
                self._refusal(
                    401, "authentication_error", "Request contained a missing or invalid key"
                ),
            )
        if group is not None and self.take_window(1, group) is not None:
            raise Refusal(self.rate_limited(0))

    async def _json(self, request: Request) -> dict[str, Any]:
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise Refusal(
                self._refusal(400, "invalid_request_error", "The request body is not a JSON object")
            )
        return body

    # -- the world, as PDL knows it --------------------------------------------------------

    def _domains(self, companies: list[str]) -> list[tuple[str, bool]]:
        """Each ``company`` value as a domain, and whether it was given as one (a website)
        rather than a name."""
        out = []
        for value in companies:
            if "." in value and " " not in value.strip():
                out.append((normalize_domain(value), True))
            elif (company := self.company_named(value)) is not None:
                out.append((company.domain, False))
        return out

    def _match(self, params: Mapping[str, Any]) -> tuple[Person | None, int]:
        """The person the parameters name, and how likely it is them."""
        for value in _values(params.get("pdl_id")):
            ordinal = value.rsplit("_", 1)[-1]
            if ordinal.isdigit() and int(ordinal) < len(self.world.people):
                known = self.world.people[int(ordinal)]
                if self.knows(known) and self.pdl_id(known) == value:
                    return known, 10
        anchored = [self.person_by_linkedin(v) for v in _values(params.get("profile"))]
        anchored += [self.person_by_email(v) for v in _values(params.get("email"))]
        for person in anchored:
            if person is not None:
                return person, 9 + person.ordinal % 2
        firsts, lasts = _values(params.get("first_name")), _values(params.get("last_name"))
        names = [n.strip().split(None, 1) for n in _values(params.get("name")) if " " in n.strip()]
        pairs = [(f, la) for f in firsts for la in lasts] + [(n[0], n[1]) for n in names]
        for domain, website in self._domains(_values(params.get("company"))):
            for first, last in pairs:
                if (person := self.person(first, last, domain)) is not None:
                    return person, (6 if website else 4) + person.ordinal % 4
        return None, 0

    @staticmethod
    def pdl_id(person: Person) -> str:
        return f"pdl{person.ordinal * 7919 % 99991:05d}_{person.ordinal:05d}"

    def _record(self, person: Person, titlecase: bool) -> dict[str, Any]:
        company = self.company(person.domain)
        email = person.email if has_work_email(self.world.seed, person) else None
        profile = linkedin_of(person).removeprefix("https://www.")
        mobile = person.phone if person.ordinal % 3 == 0 else None

        def case(text: str | None) -> str | None:
            if text is None:
                return None
            text = unicodedata.normalize("NFC", text).casefold()
            return text.title() if titlecase else text

        return {
            "id": self.pdl_id(person),
            "full_name": case(f"{person.first_name} {person.last_name}"),
            "first_name": case(person.first_name),
            "middle_name": None,
            "last_name": case(person.last_name),
            "linkedin_url": profile,
            "linkedin_username": profile.rsplit("/", 1)[-1],
            "work_email": email,
            "personal_emails": [],
            "emails": [{"address": email, "type": "professional"}] if email else [],
            "mobile_phone": mobile,
            "phone_numbers": [mobile] if mobile else [],
            "job_title": case(person.title),
            "job_company_name": case(company.name) if company else None,
            "job_company_website": person.domain,
            "job_company_industry": case(company.industry) if company else None,
            "location_country": _COUNTRIES.get(company.country) if company else None,
            "location_name": None,
        }

    # -- enrichments -----------------------------------------------------------------------

    def _enrich(self, params: Mapping[str, Any]) -> tuple[int, dict[str, Any], int]:
        """One enrichment: its status, its answer, and the credits it cost."""
        named = (_present(params, "first_name") and _present(params, "last_name")) or _present(
            params, "name"
        )
        if not any(_present(params, n) for n in _IDENTIFYING) and not (
            named and any(_present(params, n) for n in _CONTEXT)
        ):
            return _refused(400, "invalid_request_error", TOO_LITTLE)
        wanted = params.get("min_likelihood", 2)
        if isinstance(wanted, str) and wanted.strip().isdigit():
            wanted = int(wanted)
        if isinstance(wanted, bool) or not isinstance(wanted, int) or not 0 <= wanted <= 10:
            return _refused(
                400, "invalid_request_error", "min_likelihood must be an integer from 0 to 10"
            )
        if not self.can_pay(1):
            with self.lock:
                self.refused["credits"] += 1
            return _refused(402, "payment_required", OUT_OF_CREDITS)
        person, likelihood = self._match(params)
        if person is None or likelihood < wanted:
            return _refused(404, "not_found", NOT_FOUND)
        data = self._record(person, params.get("titlecase") in (True, "true", "True"))
        required = params.get("required")
        if isinstance(required, str) and required.strip():
            try:
                met = _Required(required).holds(data)
            except ValueError as exc:
                return _refused(400, "invalid_request_error", f"required: {exc}")
            if not met:
                return _refused(404, "not_found", NOT_FOUND)
        self.charge(f"enrich|{person.ordinal}", 1)
        return 200, {"status": 200, "likelihood": likelihood, "data": data}, 1

    async def enrich(self, request: Request) -> Response:
        if request.method == "HEAD":  # the usage headers, nothing spent
            self._admit(request, None)
            return Response(b"", 200, self.usage())
        self._admit(request, "enrich")
        params: dict[str, Any] = {k: v for k, v in request.query_params.items() if k != "api_key"}
        if request.method == "POST":
            params.update(await self._json(request))  # the JSON takes precedence
        status, answer, spent = self._enrich(params)
        return JSONResponse(answer, status, self.usage("enrich", spent))

    async def bulk(self, request: Request) -> Response:
        self._admit(request, "bulk")
        body = await self._json(request)
        items = body.get("requests")
        if not isinstance(items, list) or not 1 <= len(items) <= self.BULK_MAX:
            raise Refusal(
                self._refusal(
                    400,
                    "invalid_request_error",
                    f"requests must be an array of 1 to {self.BULK_MAX} request objects",
                    "bulk",
                )
            )
        if not self.can_pay(1):
            raise self.refuse(
                "credits",
                self._refusal(402, "payment_required", OUT_OF_CREDITS, "bulk"),
            )
        shared: dict[str, Any] = {
            k: body[k] for k in ("required", "min_likelihood", "titlecase") if k in body
        }
        answers, spent = [], 0
        for item in items:
            params = item.get("params") if isinstance(item, dict) else None
            if isinstance(params, dict):
                _, answer, cost = self._enrich({**shared, **params})
            else:
                answer, cost = _error(400, "invalid_request_error", "params must be an object"), 0
            spent += cost
            if isinstance(item, dict) and "metadata" in item:
                answer["metadata"] = item["metadata"]
            answers.append(answer)
        return JSONResponse(answers, 200, self.usage("bulk", spent))

    def routes(self) -> list[BaseRoute]:
        def route(path: str, handler: Any, name: str, methods: list[str]) -> Route:
            async def endpoint(request: Request) -> Response:
                return await self.answer(request, name, lambda: handler(request))

            return Route(path, endpoint, methods=methods)

        return [
            route("/v5/person/enrich", self.enrich, "person/enrich", ["GET", "POST", "HEAD"]),
            route("/v5/person/bulk", self.bulk, "person/bulk", ["POST"]),
        ]
