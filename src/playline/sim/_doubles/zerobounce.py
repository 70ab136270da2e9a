"""ZeroBounce's API v2, as its documentation describes it (the pages are named in
``playline/providers/zerobounce.py``).

- ``GET /v2/validate?api_key&email&ip_address`` (``ip_address`` may be blank but must be
  there): one verdict, ``200 {"address", "status", "sub_status", "free_email", ...}``;
- ``POST /v2/validatebatch`` with ``{"api_key", "email_batch": [{"email_address",
  "ip_address"}]}`` (at most 200): ``200 {"email_batch": [verdicts], "errors": [{"error",
  "email_address"}]}``, a row per distinct address (duplicates removed, not charged), in an
  order of its own (by address: the documentation promises none);
- ``GET /v2/getcredits?api_key``: ``{"Credits": n}``, ``-1`` for a key it does not know;
- a wrong key, and an account without credits, answer one sentence with 200: ``{"error":
  "Invalid API key or your account ran out of credits"}`` (a batch: its ``errors`` entry for
  ``"all"``); a missing parameter is a 400 naming it;
- limits are blocks: past 50,000 validations in 10 s the key is blocked 1 minute; past 5
  batches a minute, 10 minutes; getcredits past 50,000 an hour, a day; 200 bad-key requests
  an hour, an hour (getcredits: a day); 100 bad requests a minute, an hour (every endpoint).
  While blocked, every request to the endpoint answers 429. (Not modelled: the block of a
  second batch answer in an hour holding more than 20 unknowns other than greylisted or
  antispam: this double's unknowns are those, or a handful of sandbox addresses);
- a verdict costs 1 credit, ``unknown`` nothing, the sandbox addresses nothing.

Verdicts (``verdict``, a pure function of the world and the address): the sandbox addresses
(``valid@example.com``, ``role_based@example.com``...) as the official Go SDK's table says; a
disposable domain is ``do_not_mail/disposable``; a free mail domain ``unknown/
antispam_system``; a domain no company of the world has ``invalid/no_dns_entries``; a role
address (``info@``, ``sales@``...) ``do_not_mail/role_based`` (``role_based_catch_all`` at a
catch-all company); any other address at a catch-all company ``catch-all``; a person of the
world ``valid``, except the tenth whose mail server greylists (``unknown/greylisted``); any
other address ``invalid/mailbox_not_found``.

What the documentation leaves open, and this double assumes: the body of a 429 (the text
``Too Many Requests``); that a request during a block does not lengthen it; that a batch
the credits cannot pay in full is refused whole (the ``"all"`` error, nothing charged); the
words of a 400 for a batch of more than 200.
"""

from __future__ import annotations

import datetime
from typing import Any, ClassVar

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from .._inputs import normalize_domain, normalize_email
from .._world import World, unit
from ._base import Double, Limit, Refusal, json_body

__all__ = ["SANDBOX", "ZeroBounceDouble", "verdict"]

REFUSED = "Invalid API key or your account ran out of credits"
REFUSED_BATCH = "Invalid API Key or your account ran out of credits"  # as the SDKs' tests spell it

# The sandbox addresses at example.com (zerobounce/zerobouncego utility.go): never charged.
SANDBOX: dict[str, tuple[str, str]] = {
    "disposable": ("do_not_mail", "disposable"),
    "invalid": ("invalid", "mailbox_not_found"),
    "valid": ("valid", ""),
    "toxic": ("do_not_mail", "toxic"),
    "donotmail": ("do_not_mail", "role_based"),
    "spamtrap": ("spamtrap", ""),
    "abuse": ("abuse", ""),
    "unknown": ("unknown", "mail_server_temporary_error"),
    "catch_all": ("catch-all", ""),
    "antispam_system": ("unknown", "antispam_system"),
    "does_not_accept_mail": ("invalid", "does_not_accept_mail"),
    "exception_occurred": ("unknown", "exception_occurred"),
    "failed_smtp_connection": ("unknown", "failed_smtp_connection"),
    "failed_syntax_check": ("invalid", "failed_syntax_check"),
    "forcible_disconnect": ("unknown", "forcible_disconnect"),
    "global_suppression": ("do_not_mail", "global_suppression"),
    "greylisted": ("unknown", "greylisted"),
    "leading_period_removed": ("valid", "leading_period_removed"),
    "mail_server_did_not_respond": ("unknown", "mail_server_did_not_respond"),
    "mail_server_temporary_error": ("unknown", "mail_server_temporary_error"),
    "mailbox_quota_exceeded": ("invalid", "mailbox_quota_exceeded"),
    "mailbox_not_found": ("invalid", "mailbox_not_found"),
    "no_dns_entries": ("invalid", "no_dns_entries"),
    "possible_trap": ("do_not_mail", "possible_trap"),
    "possible_typo": ("invalid", "possible_typo"),
    "role_based": ("do_not_mail", "role_based"),
    "timeout_exceeded": ("unknown", "timeout_exceeded"),
    "unroutable_ip_address": ("invalid", "unroutable_ip_address"),
    "free_email": ("valid", ""),
    "role_based_catch_all": ("do_not_mail", "role_based_catch_all"),
}
DISPOSABLE = frozenset({"mailinator.com", "yopmail.com", "guerrillamail.com", "10minutemail.com"})
FREE_MAIL = frozenset({"gmail.com", "yahoo.com", "outlook.com", "hotmail.com", "aol.com"})
ROLES = frozenset({"info", "sales", "support", "admin", "contact", "hello", "office", "billing"})
GREYLISTED = 0.1  # the share of the world's people whose mail server greylists
PLAN = 100_000  # credits the account endpoint counts down from when ``credits`` is None

# endpoint group -> seconds a key past its limit is blocked
BLOCKS = {
    "validate": 60.0,
    "validatebatch": 600.0,
    "getcredits": 86_400.0,
    "bad_key": 3600.0,
    "getcredits_bad_key": 86_400.0,
    "bad_request": 3600.0,
}
_BATCH_MAX = 200


def verdict(world: World, email: str) -> tuple[str, str]:
    """ZeroBounce's ``(status, sub_status)`` for ``email`` in ``world`` (see the module)."""
    address = normalize_email(email)
    local, at, domain = address.partition("@")
    if not at or not local or "@" in domain or "." not in domain or " " in address:
        return "invalid", "failed_syntax_check"
    local = local.lstrip(".")
    if domain == "example.com" and local in SANDBOX:
        return SANDBOX[local]
    if domain in DISPOSABLE:
        return "do_not_mail", "disposable"
    if domain in FREE_MAIL:
        return "unknown", "antispam_system"
    company = world.company(normalize_domain(domain))
    if company is None:
        return "invalid", "no_dns_entries"
    if local in ROLES:
        return "do_not_mail", "role_based_catch_all" if company.catch_all else "role_based"
    if company.catch_all:
        return "catch-all", ""
    person = world.person_by_email.get(f"{local}@{domain}")
    if person is None:
        return "invalid", "mailbox_not_found"
    if unit(world.seed, "zerobounce", "greylist", person.ordinal) < GREYLISTED:
        return "unknown", "greylisted"
    return "valid", ""


def _sandbox(email: str) -> bool:
    local, _, domain = normalize_email(email).partition("@")
    return domain == "example.com" and local.lstrip(".") in SANDBOX


class ZeroBounceDouble(Double):
    name = "zerobounce"
    limits: ClassVar[tuple[Limit, ...]] = (
        Limit(50_000, 10.0, "validate"),
        Limit(5, 60.0, "validatebatch"),
        Limit(50_000, 3600.0, "getcredits"),
        Limit(200, 3600.0, "bad_key"),
        Limit(200, 3600.0, "getcredits_bad_key"),
        Limit(100, 60.0, "bad_request"),
    )

    def reset(self) -> None:
        super().reset()
        with self.lock:
            self.blocks: dict[str, float] = {}  # endpoint group -> blocked until (clock)

    def snapshot(self) -> dict[str, Any]:
        now = self.clock()
        with self.lock:
            blocked = {g: round(t - now, 3) for g, t in self.blocks.items() if t > now}
        return {**super().snapshot(), "blocked": blocked}

    def rate_limited(self, wait: float) -> Response:
        return PlainTextResponse("Too Many Requests", 429)

    def unavailable(self) -> Response:
        return PlainTextResponse("Internal Server Error", 500)

    # -- blocks ----------------------------------------------------------------------------

    def block(self, group: str) -> Refusal:
        """Block ``group`` for its documented time; the answer to the request that crossed."""
        with self.lock:
            self.blocks[group] = self.clock() + BLOCKS[group]
        return Refusal(self.rate_limited(BLOCKS[group]))

    def _check_blocks(self, *groups: str) -> None:
        now = self.clock()
        with self.lock:
            until = max((self.blocks.get(g, 0.0) for g in groups), default=0.0)
            if until > now:
                self.throttled += 1
        if until > now:
            raise Refusal(self.rate_limited(until - now))

    def _count(self, group: str) -> None:
        """Count a request against ``group``'s limit; past it, the key is blocked."""
        if self.take_window(1, group) is not None:
            raise self.block(group)

    def _bad_request(self, body: dict[str, Any]) -> Refusal:
        self._count("bad_request")
        return self.refuse("bad_request", JSONResponse(body, 400))

    # -- answers ---------------------------------------------------------------------------

    def _row(self, address: str) -> dict[str, Any]:
        status, sub_status = verdict(self.world, address)
        local, _, domain = normalize_email(address).partition("@")
        person = self.world.person_by_email.get(normalize_email(address))
        return {
            "address": address.strip(),
            "status": status,
            "sub_status": sub_status,
            "free_email": domain in FREE_MAIL or local == "free_email",
            "did_you_mean": None,
            "account": local or None,
            "domain": domain or None,
            "domain_age_days": "4210" if sub_status != "no_dns_entries" else "",
            "smtp_provider": "playline-sim",
            "mx_found": "false"
            if sub_status in ("no_dns_entries", "failed_syntax_check")
            else "true",
            "mx_record": f"mx.{domain}" if domain else None,
            "firstname": person.first_name if person else None,
            "lastname": person.last_name if person else None,
            "gender": None,
            "country": None,
            "region": None,
            "city": None,
            "zipcode": None,
            "processed_at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[
                :-3
            ],
        }

    @staticmethod
    def _charged(row: dict[str, Any]) -> bool:
        return row["status"] != "unknown" and not _sandbox(row["address"])

    def validate(self, request: Request) -> Response:
        self._check_blocks("validate", "bad_key", "bad_request")
        q = request.query_params
        for name in ("api_key", "email", "ip_address"):  # ip_address: blank, but required
            if name not in q:
                raise self._bad_request({"error": f"Missing parameter: {name}."})
        if not q["email"].strip():
            raise self._bad_request({"error": "Missing parameter: email."})
        if q["api_key"] != self.key:
            self._count("bad_key")
            raise self.refuse("auth", JSONResponse({"error": REFUSED}))
        self._count("validate")
        if not self.can_pay(1):
            raise self.refuse("credits", JSONResponse({"error": REFUSED}))
        row = self._row(q["email"])
        if self._charged(row):
            self.charge(f"validate|{normalize_email(row['address'])}", 1)
        return JSONResponse(row)

    async def validate_batch(self, request: Request) -> Response:
        self._check_blocks("validatebatch", "bad_key", "bad_request")
        body = await json_body(request)
        if not isinstance(body, dict) or not body.get("api_key"):
            raise self._bad_request({"Message": "Missing parameter: api_key."})
        batch = body.get("email_batch")
        if not isinstance(batch, list) or not batch:
            raise self._bad_request({"Message": "Missing parameter: email_batch."})
        if len(batch) > _BATCH_MAX:
            raise self._bad_request(
                {"Message": f"email_batch holds {len(batch)} emails; at most {_BATCH_MAX}."}
            )
        if body["api_key"] != self.key:
            self._count("bad_key")
            refused = {"email_address": "all", "error": REFUSED_BATCH}
            raise self.refuse("auth", JSONResponse({"email_batch": [], "errors": [refused]}))
        self._count("validatebatch")
        errors: list[dict[str, Any]] = []
        asked: dict[str, str] = {}  # normalised -> as sent: duplicates removed
        for item in batch:
            address = item.get("email_address") if isinstance(item, dict) else None
            if not isinstance(address, str) or not address.strip():
                errors.append(
                    {"error": "Missing email_batch key: email_address.", "email_address": "unknown"}
                )
                continue
            asked.setdefault(normalize_email(address), address)
        rows = sorted((self._row(a) for a in asked.values()), key=lambda r: r["address"].casefold())
        if not self.can_pay(sum(self._charged(r) for r in rows)) or self.credits == 0:
            refused = {"email_address": "all", "error": REFUSED_BATCH}
            raise self.refuse("credits", JSONResponse({"email_batch": [], "errors": [refused]}))
        for row in rows:
            if self._charged(row):
                self.charge(f"validate|{normalize_email(row['address'])}", 1)
        return JSONResponse({"email_batch": rows, "errors": errors})

    def credits_left(self, request: Request) -> Response:
        self._check_blocks("getcredits", "getcredits_bad_key", "bad_request")
        key = request.query_params.get("api_key")
        if key is None:
            raise self._bad_request({"error": "Missing parameter: api_key."})
        if key != self.key:
            self._count("getcredits_bad_key")
            raise self.refuse("auth", JSONResponse({"Credits": -1}))
        self._count("getcredits")
        left = PLAN - self.charged if self.credits is None else self.credits
        return JSONResponse({"Credits": int(left)})

    def routes(self) -> list[BaseRoute]:
        def route(path: str, handler: Any, name: str, method: str) -> Route:
            faults = name != "getcredits"  # the account endpoint meets no test's fault

            async def endpoint(request: Request) -> Response:
                return await self.answer(request, name, lambda: handler(request), faults=faults)

            return Route(path, endpoint, methods=[method])

        return [
            route("/v2/validate", self.validate, "validate", "GET"),
            route("/v2/validatebatch", self.validate_batch, "validatebatch", "POST"),
            route("/v2/getcredits", self.credits_left, "getcredits", "GET"),
        ]
