"""FullEnrich's API v1, as https://docs.fullenrich.com/api/v1/ (and v2's openapi.yml, for
what v1's pages leave out) describes it.

- ``POST /api/v1/contact/enrich/bulk`` ``{"name", "webhook_url"?, "datas": [{"firstname",
  "lastname", "domain" | "company_name", "linkedin_url", "enrich_fields", "custom"}]}`` (up to
  100 contacts) answers ``{"enrichment_id"}``; a bad body is 400 ``{"code", "message"}``
  (``error.enrichment.name.empty``, ``.data.empty``, ``.firstname.empty``, ...);
- ``GET /api/v1/contact/enrich/bulk/{id}``: while the batch runs (``pending_polls`` polls),
  400 ``error.enrichment.in_progress`` (200 ``IN_PROGRESS`` with ``forceResults=true``); then
  the batch: ``{"id", "name", "status": "FINISHED", "datas": [{"custom", "contact": {...}}],
  "cost": {"credits"}}``, one row per contact in the order sent, a miss being a row of empty
  fields; out of credits mid-batch, 402 with ``status: CREDITS_INSUFFICIENT`` and the rows
  not done left empty; ``canceled`` ends the next so many batches ``CANCELED`` (the
  dashboard's button); an unknown id, or one older than 3 months, 404
  ``error.enrichment.not_found``. v1's own answers for a running batch and for one out of
  credits are undocumented: ``answers = "statuses"`` gives them as 200 with the status;
- a work email found costs 1 credit, a mobile phone 10, nothing found 0; the same input
  (same spelling, same field) enriched again by a later batch is free, and counted as a
  repeat (asked again, not charged again); the batch is charged when it finishes, which is
  when a poll finds it done;
- ``GET /api/v1/account/credits`` answers ``{"balance"}``; ``GET /api/v1/account/keys/verify``
  ``{"workspace_id"}``;
- 60 API calls a minute, polls and balance included: past them, 429 ``error.rate.limit``
  ("Too many requests. Try again in 1m"), no header; a missing, non-Bearer or unknown key:
  401 ``error.authorization.not_set``, ``.not_bearer``, ``error.api.key``.

What the documentation leaves open, and what this double assumes: submitting without
credits is accepted (the batch then ends ``CREDITS_INSUFFICIENT``); the batch stops at the
first contact it cannot pay for in full; more than 100 contacts is 400
``error.enrichment.data.exceeded`` and a ``custom`` value that is not a string 400
``error.enrichment.custom.value.type`` (codes made up: the docs say only that it is an
error); a 503 has the same envelope. The workspace's queue (100 contacts at a time) is not
modelled: a batch is done after ``pending_polls`` polls, whatever its size.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, ClassVar

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from .._inputs import normalize_domain, normalize_text
from .._world import Person, unit
from ._base import Double, Limit, Refusal, linkedin_of

__all__ = ["FullEnrichDouble"]

_FIELDS = ("contact.emails", "contact.work_emails", "contact.personal_emails", "contact.phones")
_EMAIL_FIELDS = ("contact.emails", "contact.work_emails")
_PRICE = {"email": 1.0, "phone": 10.0}
_KEEP = 90 * 86_400.0  # results are kept 3 months (GDPR)


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"code": code, "message": message}, status)


def _bad(code: str, message: str) -> Refusal:
    return Refusal(_error(400, code, message))


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _blank(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row with nothing found: every field there, empty."""
    return {
        "custom": row.get("custom") or {},
        "contact": {
            "firstname": "",
            "lastname": "",
            "domain": "",
            "most_probable_email": "",
            "most_probable_email_status": "",
            "most_probable_personal_email": "",
            "most_probable_personal_email_status": "",
            "most_probable_phone": "",
            "emails": [],
            "personal_emails": [],
            "phones": [],
            "social_medias": [],
        },
    }


class FullEnrichDouble(Double):
    name = "fullenrich"
    coverage = 0.6  # the people whose work email FullEnrich's vendors find
    phone_coverage = 0.4  # ... and whose mobile phone
    limits: ClassVar[tuple[Limit, ...]] = (Limit(60, 60.0),)
    PLAN = 250_000  # credits on the account when no ``credits`` fault is set
    _SETTABLE: ClassVar[dict[str, type | tuple[type, ...]]] = {**Double._SETTABLE, "canceled": int}
    # how a poll says what is not a result, v1's own answers being undocumented: "codes", as
    # v2's reference (400 in progress, 402 out of credits), or "statuses" (200, the status)
    answers = "codes"

    def reset(self) -> None:
        super().reset()
        self.prices = dict(_PRICE)  # a custom plan may charge otherwise
        self.canceled = 0  # the next so many batches are canceled (from the dashboard)
        self._enriched: dict[tuple[str, ...], int] = {}  # (field, input...) -> the batch's turn
        self._turn = 0  # batches submitted and finished, in order

    def rate_limited(self, wait: float) -> Response:
        return _error(429, "error.rate.limit", "Too many requests. Try again in 1m")

    def unavailable(self) -> Response:
        return _error(503, "error.unavailable", "Service unavailable, try again later")

    # -- requests -------------------------------------------------------------------------

    def _admit(self, request: Request) -> None:
        """Refuse a missing, non-Bearer or unknown key, then a call past the minute's 60."""
        header = request.headers.get("authorization")
        if not header:
            raise self.refuse(
                "auth", _error(401, "error.authorization.not_set", "Authorization headers not set")
            )
        scheme, _, key = header.strip().partition(" ")
        if scheme.casefold() != "bearer":
            raise self.refuse(
                "auth",
                _error(
                    401,
                    "error.authorization.not_bearer",
                    "Authorization headers do not have prefix 'bearer'",
                ),
            )
        if key.strip() != self.key:
            raise self.refuse("auth", _error(401, "error.api.key", "Unknown api key"))
        wait = self.take_window(1)
        if wait is not None:
            raise Refusal(self.rate_limited(wait))

    async def start(self, request: Request) -> Response:
        self._admit(request)
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            raise _bad("error.body.invalid", "Body is not valid JSON") from None
        if not isinstance(body, dict):
            raise _bad("error.body.invalid", "Body must be an object")
        if not _text(body.get("name")):
            raise _bad("error.enrichment.name.empty", "Enrichment name not set")
        webhook = body.get("webhook_url")
        if webhook is not None and not _text(webhook).startswith(("http://", "https://")):
            raise _bad(
                "error.enrichment.webhook_url", "Webhook URL must be start with http or https"
            )
        rows = body.get("datas")
        if not isinstance(rows, list) or not rows:
            raise _bad("error.enrichment.data.empty", "Data is empty")
        if len(rows) > 100:
            raise _bad(
                "error.enrichment.data.exceeded", "Data contains too many contacts (max: 100)"
            )
        for row in rows:
            self._check(row)
        job = str(uuid.uuid5(uuid.NAMESPACE_URL, f"fullenrich|{self.world.seed}|{self.job_id()}"))
        self.jobs[job] = {
            "id": job,
            "name": body["name"],
            "rows": rows,
            "polls": 0,
            "turn": self._turn,
            "created": self.clock(),
            "result": None,
        }
        self._turn += 1
        return JSONResponse({"enrichment_id": job})

    def _check(self, row: Any) -> None:
        """A contact as the bulk endpoint validates it (400 in its words)."""
        if not isinstance(row, dict):
            raise _bad("error.enrichment.data.empty", "Data is empty")
        fields = row.get("enrich_fields")
        if not isinstance(fields, list) or not fields:
            raise _bad("error.enrichment.enrich_fields.empty", "enrichFields cannot be empty")
        for field in fields:
            if field not in _FIELDS:
                raise _bad(
                    "error.enrichment.enrich_field.value",
                    f"enrichField '{field}' not valid must be contact.emails or contact.phones "
                    "or contact.personal_emails",
                )
        linkedin = _text(row.get("linkedin_url"))
        if linkedin and "linkedin.com/" not in linkedin.casefold():
            raise _bad("error.enrichment.linkedin_url.invalid", "LinkedIn URL is invalid")
        if not linkedin:
            if not _text(row.get("firstname")):
                raise _bad("error.enrichment.firstname.empty", "First name cannot be empty")
            if not _text(row.get("lastname")):
                raise _bad("error.enrichment.lastname.empty", "Last name cannot be empty")
            if not (_text(row.get("domain")) or _text(row.get("company_name"))):
                raise _bad("error.enrichment.domain.empty", "Domain cannot be empty")
        custom = row.get("custom", {})
        if not isinstance(custom, dict):
            raise _bad("error.enrichment.custom.value.type", "Custom field must be an object")
        if len(custom) > 10:
            raise _bad(
                "error.enrichment.custom.key.exceeded",
                "Custom field contains too many keys (max: 10 keys)",
            )
        for value in custom.values():
            if not isinstance(value, str):
                raise _bad(
                    "error.enrichment.custom.value.type", "Custom field value must be a string"
                )
            if len(value) > 100:
                raise _bad(
                    "error.enrichment.custom.value.exceeded",
                    "Custom field value max len exceeded (max: 100 character)",
                )

    def result(self, request: Request) -> Response:
        self._admit(request)
        job = self.jobs.get(request.path_params["enrichment_id"])
        if job is None or self.clock() - job["created"] > _KEEP:
            raise self.refuse(
                "unknown_job", _error(404, "error.enrichment.not_found", "Enrichment ID not found")
            )
        if job["result"] is None and job["polls"] < self.pending_polls:
            job["polls"] += 1
            force = request.query_params.get("forceResults", "").casefold() == "true"
            if not (force or self.answers == "statuses"):
                return _error(
                    400,
                    "error.enrichment.in_progress",
                    "Enrichment not ready, try again in 30 seconds",
                )
            so_far = [_blank(row) for row in job["rows"]]
            return JSONResponse(self._batch(job, "IN_PROGRESS", so_far, 0))
        if job["result"] is None and self.canceled > 0:
            self.canceled -= 1
            job["result"] = self._batch(job, "CANCELED", [_blank(r) for r in job["rows"]], 0)
        if job["result"] is None:
            self._finish(job)
        done = job["result"]
        short = done["status"] == "CREDITS_INSUFFICIENT" and self.answers == "codes"
        return JSONResponse(done, 402 if short else 200)

    def balance(self, request: Request) -> Response:
        self._admit(request)
        left = self.credits if self.credits is not None else max(0.0, self.PLAN - self.charged)
        return JSONResponse({"balance": left})

    def verify(self, request: Request) -> Response:
        self._admit(request)
        return JSONResponse({"workspace_id": str(uuid.uuid5(uuid.NAMESPACE_URL, self.key))})

    # -- a batch's work -------------------------------------------------------------------

    def _batch(
        self, job: Mapping[str, Any], status: str, rows: list[dict[str, Any]], credits: float
    ) -> dict[str, Any]:
        return {
            "id": job["id"],
            "name": job["name"],
            "status": status,
            "datas": rows,
            "cost": {"credits": credits},
        }

    def _finish(self, job: dict[str, Any]) -> None:
        """Enrich the batch's contacts in order, charging each what it found, until one
        cannot be paid for: the rest stay empty and the batch is CREDITS_INSUFFICIENT."""
        status, spent, rows = "FINISHED", 0.0, []
        for row in job["rows"]:
            person = self._who(row) if status == "FINISHED" else None
            fields = row["enrich_fields"]
            found = {
                "email": person is not None
                and any(f in fields for f in _EMAIL_FIELDS)
                and self.knows(person),
                "phone": person is not None
                and "contact.phones" in fields
                and self.knows_phone(person),
            }
            asked = tuple(
                _text(row.get(k)).casefold()
                for k in ("firstname", "lastname", "domain", "company_name", "linkedin_url")
            )
            fresh = {
                kind: found[kind] and self._enriched.get((kind, *asked), job["turn"]) >= job["turn"]
                for kind in found
            }
            price = sum(self.prices[kind] for kind in found if fresh[kind])
            if status != "FINISHED" or not self.can_pay(price):
                status = "CREDITS_INSUFFICIENT"
                rows.append(_blank(row))
                continue
            assert person is not None or not any(found.values())
            for kind in found:
                if not found[kind] or person is None:
                    continue
                if fresh[kind]:
                    self.charge(f"{kind}|{person.ordinal}", self.prices[kind])
                else:  # enriched again within 3 months: free (a repeat, not a second charge)
                    with self.lock:
                        self.repeats += 1
                self._enriched.setdefault((kind, *asked), self._turn)
            spent += price
            rows.append(self._row(row, person, found["email"], found["phone"]))
        self._turn += 1
        job["result"] = self._batch(job, status, rows, spent)

    def knows_phone(self, person: Person) -> bool:
        return unit(self.world.seed, self.name, "phone", person.ordinal) < self.phone_coverage

    def _who(self, row: Mapping[str, Any]) -> Person | None:
        """The world's person this contact names (whatever FullEnrich finds of them)."""
        linkedin = _text(row.get("linkedin_url")).casefold().split("?", 1)[0].rstrip("/")
        if linkedin:
            slug = linkedin.rsplit("/in/", 1)[-1]
            try:
                person = self.world.people[int(slug.rsplit("-", 1)[-1], 16)]
            except (ValueError, IndexError):
                return None
            return person if linkedin_of(person).casefold().endswith(f"/in/{slug}") else None
        domain = _text(row.get("domain"))
        if not domain:
            company = self.company_named(_text(row.get("company_name")))
            domain = company.domain if company else ""
        return self.world.person(
            normalize_text(_text(row.get("firstname"))),
            normalize_text(_text(row.get("lastname"))),
            normalize_domain(domain),
        )

    def _row(
        self, row: Mapping[str, Any], person: Person | None, email: bool, phone: bool
    ) -> dict[str, Any]:
        out = _blank(row)
        if person is None or not (email or phone):
            return out
        contact = out["contact"]
        company = self.company(person.domain)
        profile = linkedin_of(person)
        contact.update(
            firstname=person.first_name,
            lastname=person.last_name,
            domain=person.domain,
            social_medias=[{"url": profile, "type": "LINKEDIN"}],
        )
        if email:
            word = "DELIVERABLE"
            if company is not None and company.catch_all:
                hp = unit(self.world.seed, self.name, "high", person.ordinal) < 0.5
                word = "HIGH_PROBABILITY" if hp else "CATCH_ALL"
            emails = [{"email": person.email, "status": word}]
            guess = f"{person.first_name[0]}.{person.email}".casefold()  # a pattern that bounces
            if word == "DELIVERABLE" and person.ordinal % 3 == 0:
                emails.append({"email": guess, "status": "INVALID"})
            contact.update(
                most_probable_email=person.email, most_probable_email_status=word, emails=emails
            )
        if phone:
            region = company.country if company is not None else ""
            contact.update(
                most_probable_phone=person.phone,
                phones=[{"number": person.phone, "region": region}],
            )
        if _text(row.get("linkedin_url")):  # a LinkedIn URL buys the profile too
            contact["profile"] = {
                "linkedin_url": profile,
                "firstname": person.first_name,
                "lastname": person.last_name,
                "position": {
                    "title": person.title,
                    "company": {
                        "name": company.name if company else "",
                        "domain": person.domain,
                    },
                },
            }
        return out

    def routes(self) -> list[BaseRoute]:
        def route(path: str, handler: Any, name: str, method: str = "GET") -> Route:
            faults = not path.startswith("/api/v1/account/")  # a test's faults are for calls

            async def endpoint(request: Request) -> Response:
                return await self.answer(request, name, lambda: handler(request), faults=faults)

            return Route(path, endpoint, methods=[method])

        return [
            route("/api/v1/contact/enrich/bulk", self.start, "enrich", "POST"),
            route("/api/v1/contact/enrich/bulk/{enrichment_id}", self.result, "result"),
            route("/api/v1/account/credits", self.balance, "credits"),
            route("/api/v1/account/keys/verify", self.verify, "verify"),
        ]
