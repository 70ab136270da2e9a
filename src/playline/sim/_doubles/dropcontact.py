"""Dropcontact's API, as https://developer.dropcontact.com describes it (the quickstart, the
errors, rate-limits and credits pages, and the reference of the input and enriched records).

- ``POST /v1/enrich/all {"data": [record...], "language": "en"|"fr", "siren": bool}``, the key
  in ``X-Access-Token``: 1 to 250 records of at most 15 kB each (``400`` in Dropcontact's
  words otherwise: "Missing data in JSON", "Too many records...", "Data size is too big...");
  answers ``{"credits_left", "request_id", "error": false, "success": true}``;
- ``GET /v1/enrich/all/{request_id}``: ``200 {"error": false, "success": false, "reason":
  "Request not ready yet, try again in 30 seconds"}`` for ``pending_polls`` polls, then
  ``{"data": [enriched record...], "success": true, "error": false, "credits_left"}``, one
  record per record sent, in order. An unknown ``request_id`` (or one older than the 30 days
  results are kept) answers "not ready" too, as the errors page says. ``?forceResults=true``
  answers the records at once with ``status``: ``in_progress`` (as sent) or ``ready``;
- an enriched record holds only populated attributes: names re-capitalised (a ``full_name``
  split), ``website`` as ``www.<domain>``, ``linkedin`` as ``www.linkedin.com/in/...``,
  ``num_siren`` as ``siren``, ``custom_fields`` as sent, and ``email``, a list of ``{email,
  qualification}`` (``nominative@pro``, ``catch-all@pro``, ``generic@pro``, ``invalid@pro``,
  ``invalid@invalid domain``, ``non_validated@perso``; in French with ``language: "fr"``), absent
  when nothing was found;
- pay on success (credits page): a batch needs a credit per record (``403`` for the whole
  batch otherwise, nothing processed); the credits are taken at the submit and given back
  when the job is done for the records that came back with no address. A record with an
  address is charged 1 (one sent for verification always comes back, qualified);
- ``GET /v1/account/credits`` answers ``{"credits": N}`` (errors in ``detail``);
- 60 requests a second, over all endpoints; past it ``429 {"error": true, "reason",
  "success": false}`` with no ``Retry-After``; a wrong key ``401`` "Unknown account"; a body
  FastAPI cannot read ``422 {"detail": [...]}``.

What the documentation leaves open, and what this double assumes: the default ``language``
(``en``); the 403's words for too few credits; that a record with no company identifier,
email or LinkedIn URL comes back unprocessed and free; that unknown record keys are refused
``422`` with type ``unexpected_field``; that some companies have a public role mailbox
(``contact@``) returned with every record of theirs (charged, like any address returned);
that an address at a company of the world is ``invalid`` unless someone there has it (or the
domain is catch-all), and one at a domain no company has is ``invalid@invalid domain``.

``credits`` left (None: the plan's ``PLAN``, less what was charged and what is held).
"""

from __future__ import annotations

import random
import string
import time
from collections.abc import Mapping
from typing import Any, ClassVar

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from .._inputs import normalize_domain, normalize_email, normalize_text
from .._world import Company, Person, unit
from ._base import Double, Limit, Refusal, linkedin_of

__all__ = ["DropcontactDouble"]

NOT_READY = "Request not ready yet, try again in 30 seconds"
# the record's documented keys (input-record reference, and the legacy client's phone/country)
FIELDS = frozenset({
    "civility", "first_name", "last_name", "full_name", "email", "phone", "mobile_phone",
    "linkedin", "job", "job_function", "job_level", "location", "country", "company",
    "website", "company_linkedin", "num_siren", "siret", "siret_address", "siret_zip",
    "custom_fields",
})  # fmt: skip
COMPANY_KEYS = ("company", "website", "company_linkedin", "num_siren", "siret")
FREE_MAIL = frozenset({"gmail.com", "yahoo.com", "outlook.com", "hotmail.com", "orange.fr"})
ROLE_MAILBOXES = frozenset({"contact", "info", "support", "hello", "sales", "admin"})
# qualification words by language: (local part, domain part)
WORDS = {
    "en": {"nominative": "nominative", "catch_all": "catch-all", "generic": "generic",
           "invalid": "invalid", "non_validated": "non_validated", "pro": "pro",
           "perso": "perso", "invalid_domain": "invalid domain"},
    "fr": {"nominative": "nominatif", "catch_all": "catch-all", "generic": "generique",
           "invalid": "invalide", "non_validated": "non_validé", "pro": "pro",
           "perso": "perso", "invalid_domain": "domaine invalide"},
}  # fmt: skip


def _reason(status: int, reason: str) -> JSONResponse:
    return JSONResponse({"error": True, "reason": reason, "success": False}, status)


def _detail(status: int, detail: Any) -> JSONResponse:
    return JSONResponse({"detail": detail}, status)


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _asked(record: Mapping[str, Any], domain: str | None) -> str:
    """The charge item of a record that found no one: its normalised question."""
    names = (normalize_text(str(record.get(k) or "")) for k in ("first_name", "last_name",
             "full_name", "linkedin"))  # fmt: skip
    return "enrich|" + "|".join(names) + f"|{domain}"


def _capitalised(name: str) -> str:
    """Dropcontact re-capitalises names: ``"o'brien"`` -> ``"O'Brien"``."""
    return " ".join(part.title() for part in name.split())


def _profile(url: str) -> str:
    """A LinkedIn URL as Dropcontact returns it: ``www.linkedin.com/in/<profile>``."""
    path = url.strip().split("?", 1)[0].rstrip("/")
    return f"www.linkedin.com/in/{path.rsplit('/in/', 1)[-1]}" if "/in/" in path else url.strip()


class DropcontactDouble(Double):
    name = "dropcontact"
    coverage = 0.5
    limits: ClassVar[tuple[Limit, ...]] = (Limit(60, 1.0),)
    PLAN = 20_000  # credits of a plan with no ``credits`` set
    MAX_RECORDS = 250
    MAX_RECORD_BYTES = 15 * 1024
    RETENTION = 30 * 86_400.0  # seconds a job's results are kept (wall time)
    MAILBOX_SHARE = 0.15  # companies whose role mailbox comes back with their records

    def reset(self) -> None:
        super().reset()
        with self.lock:
            self.held = 0.0  # credits taken at submits, to be given back when jobs are done

    # -- Dropcontact's own answers ---------------------------------------------------------

    def rate_limited(self, wait: float) -> Response:
        return _reason(429, "Too many requests, please try again in a few seconds")

    def unavailable(self) -> Response:
        return _detail(503, "Service Unavailable")

    def _admit(self, request: Request, *, detail: bool = False) -> None:
        """Refuse a wrong key, then a request past the rate (``detail``: the credits
        endpoint's error form)."""
        if request.headers.get("x-access-token") != self.key:
            answer = _detail(401, "Unknown account") if detail else _reason(401, "Unknown account")
            raise self.refuse("auth", answer)
        if self.take_window() is not None:
            limited = _detail(429, "Too many requests") if detail else self.rate_limited(1.0)
            raise Refusal(limited)

    def _left(self) -> float | int:
        """The credits left, as Dropcontact says them (a whole number when it is one)."""
        with self.lock:
            plan = self.PLAN - self.charged - self.held
            left = self.credits if self.credits is not None else plan
        return int(left) if float(left).is_integer() else left

    # -- the world, as Dropcontact sees a record --------------------------------------------

    def _company_of(self, record: Mapping[str, Any]) -> tuple[str | None, Company | None]:
        """The record's company domain (its website, else its company's name), and the
        company of the world there."""
        website = _text(record.get("website"))
        if website:
            domain = normalize_domain(website)
            return domain, self.company(domain)
        name = _text(record.get("company"))
        company = self.company_named(name) if name else None
        return (company.domain if company else None), company

    def _who(self, record: Mapping[str, Any], domain: str | None) -> Person | None:
        """The person the record names, if Dropcontact knows them: by LinkedIn URL, else by
        first and last name (or full name) at the company."""
        linkedin = _text(record.get("linkedin"))
        if linkedin and (person := self.person_by_linkedin(linkedin)) is not None:
            return person
        if domain is None:
            return None
        first, last = _text(record.get("first_name")), _text(record.get("last_name"))
        if first and last:
            return self.person(first, last, domain)
        return self.person_named(record.get("full_name"), domain)

    def _mailbox(self, company: Company | None) -> str | None:
        if company is None or unit(self.world.seed, "dropcontact-mailbox", company.ordinal) >= (
            self.MAILBOX_SHARE
        ):
            return None
        return f"contact@{company.domain}"

    def _verdict(self, email: str) -> tuple[str, str]:
        """How Dropcontact qualifies an address sent for verification: (local, domain)."""
        local, _, domain = normalize_email(email).rpartition("@")
        if domain in FREE_MAIL:
            return "non_validated", "perso"
        company = self.company(domain)
        if company is None:
            return "invalid", "invalid_domain"
        if local in ROLE_MAILBOXES:
            return "generic", "pro"
        if company.catch_all:
            return "catch_all", "pro"
        known = self.world.person_by_email.get(normalize_email(email))
        return ("nominative" if known is not None else "invalid"), "pro"

    def enriched(self, record: Mapping[str, Any], language: str) -> tuple[dict[str, Any], str]:
        """The enriched record Dropcontact answers for ``record``, and the item it charges
        for it ("" when it is refunded: no address came back)."""
        words = WORDS[language]

        def qualification(local: str, domain: str) -> str:
            return f"{words[local]}@{words[domain]}"

        out = {k: v for k, v in record.items() if k not in ("email", "num_siren") and v}
        if record.get("num_siren"):
            out["siren"] = record["num_siren"]
        sent = _text(record.get("email"))
        identified = bool(sent or _text(record.get("linkedin"))) or any(
            _text(record.get(k)) for k in COMPANY_KEYS
        )
        if not identified:  # nothing to look up with: the record comes back as it was
            return out, ""
        domain, company = self._company_of(record)
        person = self._who(record, domain)
        first, last = _text(record.get("first_name")), _text(record.get("last_name"))
        full = _text(record.get("full_name"))
        if person is not None:
            first, last = person.first_name, person.last_name
            company = self.company(person.domain)
            domain = person.domain
        elif full and not (first and last) and " " in full:
            first, last = full.split(None, 1)
        if first and last:
            out.update(first_name=_capitalised(first), last_name=_capitalised(last),
                       full_name=_capitalised(f"{first} {last}"))  # fmt: skip
        emails: list[dict[str, str]] = []
        charged = ""
        if sent:
            emails.append({"email": sent, "qualification": qualification(*self._verdict(sent))})
            owner = self.world.person_by_email.get(normalize_email(sent))
            charged = f"enrich|{owner.ordinal}" if owner else f"verify|{normalize_email(sent)}"
        if person is not None and normalize_email(sent or "") != person.email:
            kind = "catch_all" if company is not None and company.catch_all else "nominative"
            emails.append({"email": person.email, "qualification": qualification(kind, "pro")})
            charged = charged or f"enrich|{person.ordinal}"
        mailbox = self._mailbox(company)
        if mailbox and normalize_email(sent or "") != mailbox:
            emails.append({"email": mailbox, "qualification": qualification("generic", "pro")})
            charged = charged or _asked(record, domain)
        if emails:
            out["email"] = emails
        if company is not None:
            out.update(company=company.name, nb_employees=company.size)
        if domain:
            out["website"] = f"www.{domain}"
        if person is not None:
            out.update(job=person.title, linkedin=_profile(linkedin_of(person)))
        elif _text(record.get("linkedin")):
            out["linkedin"] = _profile(record["linkedin"])
        return out, charged

    # -- the endpoints ---------------------------------------------------------------------

    async def enrich(self, request: Request) -> Response:
        self._admit(request)
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            unreadable = {"loc": ["body"], "msg": "JSON decode error", "type": "json_invalid"}
            raise Refusal(_detail(422, [unreadable])) from None
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or not data:
            raise Refusal(_reason(400, "Missing data in JSON"))
        if len(data) > self.MAX_RECORDS:
            raise Refusal(_reason(400, "Too many records, you can only submit up to 250 records"))
        problems = []
        for index, record in enumerate(data):
            if not isinstance(record, dict):
                problems.append({"loc": ["body", "data", index], "msg": "value is not a valid "
                                 "dict", "type": "type_error.dict"})  # fmt: skip
                continue
            if len(orjson.dumps(record)) > self.MAX_RECORD_BYTES:
                raise Refusal(_reason(400, "Data size is too big, you can only submit up to "
                                      "15 kB of data in a single record"))  # fmt: skip
            problems.extend(
                {"loc": ["body", "data", index, key], "msg": "unexpected field",
                 "type": "unexpected_field"}
                for key in sorted(set(record) - FIELDS)
            )  # fmt: skip
        language = body.get("language", "en")
        if language not in WORDS:
            problems.append({"loc": ["body", "language"], "msg": "value is not 'en' or 'fr'",
                             "type": "value_error"})  # fmt: skip
        if problems:
            raise Refusal(_detail(422, problems))
        if not self.can_pay(len(data)):
            raise self.refuse(
                "credits",
                _reason(403, f"Not enough credits: this request needs {len(data)} credits "
                        f"and your account has {int(self._left())} left"),
            )  # fmt: skip
        # the credits are taken now: those of the records found for good, the others held
        # until the job is done and then given back
        items = [self.enriched(record, language)[1] for record in data]
        for item in items:
            if item:
                self.charge(item, 1)
        held = float(sum(1 for item in items if not item))
        with self.lock:
            if self.credits is not None:
                self.credits = max(0.0, self.credits - held)
            self.held += held
            request_id = self._request_id()
            self.jobs[request_id] = {
                "records": data,  # the job keeps its inputs: its results are theirs
                "language": language,
                "held": held,
                "from_credits": self.credits is not None,
                "polls": 0,
                "done": False,
                "at": time.time(),
            }
        return JSONResponse(
            {"credits_left": self._left(), "request_id": request_id, "error": False,
             "success": True}
        )  # fmt: skip

    def _request_id(self) -> str:
        """A fresh id like ``qzmxkpvlrtdnhwa`` (random: a restarted double never numbers a
        new job as an old one)."""
        while True:
            chosen = "".join(random.choices(string.ascii_lowercase, k=15))
            if chosen not in self.jobs:
                return chosen

    def result(self, request: Request) -> Response:
        self._admit(request)
        request_id = request.path_params["request_id"]
        force = request.query_params.get("forceResults", "").casefold() == "true"
        with self.lock:
            job = self.jobs.get(request_id)
            if job is not None and time.time() - job["at"] > self.RETENTION:
                del self.jobs[request_id]  # no longer kept: as unknown as a wrong id
                job = None
            if job is not None:
                job["polls"] += 1
                finished = not job["done"] and job["polls"] > self.pending_polls
                if finished:
                    job["done"] = True
                    self.held -= job["held"]  # the refunds of the records not found
                    if job["from_credits"] and self.credits is not None:
                        self.credits += job["held"]
        if job is None or not (job["done"] or force):
            return JSONResponse({"error": False, "success": False, "reason": NOT_READY})
        if job["done"]:
            data = [self.enriched(record, job["language"])[0] for record in job["records"]]
        else:  # forceResults on a job in progress: the records not processed, as sent
            data = [dict(record) for record in job["records"]]
        body: dict[str, Any] = {"data": data, "success": True, "error": False,
                                "credits_left": self._left()}  # fmt: skip
        if force:
            body["status"] = "ready" if job["done"] else "in_progress"
        return JSONResponse(body)

    def account_credits(self, request: Request) -> Response:
        self._admit(request, detail=True)
        return JSONResponse({"credits": self._left()})

    def routes(self) -> list[BaseRoute]:
        def route(path: str, handler: Any, name: str, method: str, faults: bool = True) -> Route:
            async def endpoint(request: Request) -> Response:
                return await self.answer(request, name, lambda: handler(request), faults=faults)

            return Route(path, endpoint, methods=[method])

        return [
            route("/v1/enrich/all", self.enrich, "enrich", "POST"),
            route("/v1/enrich/all/{request_id}", self.result, "result", "GET"),
            route("/v1/account/credits", self.account_credits, "credits", "GET", faults=False),
        ]
