"""Hunter's API v2, as https://hunter.io/api-documentation/v2 describes it.

- ``GET /v2/email-finder?first_name&last_name|full_name&domain|company`` and ``GET
  /v2/email-verifier?email``, the key in ``X-API-KEY`` or ``?api_key=``;
- found: ``200 {"data": {"email", "score", "accept_all", "verification": {"status"}...},
  "meta": {"params"}}``; not found: 200 with ``data.email`` null, not counted;
- 15 requests/s and 500/min for the finder, 10/s and 300/min for the verifier; past them
  ``403`` (Hunter's "rate limit reached"); a used-up month is ``429`` ("usage limit
  reached"); a bad key ``401``; missing parameters ``400 wrong_params``;
- a finder search costs 1 when it returns an email; a verification 1, free when its
  verdict is ``unknown``, ``webmail`` or ``disposable``; a search or verification repeated
  within the billing month is free (help.hunter.io 1911617); ``GET /v2/account`` says what
  is used and available (searches and verifications).

``quota`` counts searches and verifications left this month (None: a large plan).
"""

from __future__ import annotations

from typing import Any, ClassVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ._base import Double, Limit, Refusal

__all__ = ["HunterDouble"]


def _errors(status: int, id: str, details: str) -> JSONResponse:
    return JSONResponse({"errors": [{"id": id, "code": status, "details": details}]}, status)


class HunterDouble(Double):
    name = "hunter"
    coverage = 0.55
    limits: ClassVar[tuple[Limit, ...]] = (
        Limit(15, 1.0, "finder"),
        Limit(500, 60.0, "finder"),
        Limit(10, 1.0, "verifier"),
        Limit(300, 60.0, "verifier"),
    )
    PLAN = 10_000  # searches a month, as the account endpoint says

    def rate_limited(self, wait: float) -> Response:
        return _errors(403, "too_many_requests", "You have reached the rate limit")

    def unavailable(self) -> Response:
        return _errors(503, "service_unavailable", "Hunter is unavailable")

    def _admit(self, request: Request, group: str | None) -> None:
        """Refuse a wrong key; then, for a search or a verification (``group``), the faults,
        the rate limits and the month's quota."""
        key = request.headers.get("x-api-key") or request.query_params.get("api_key")
        if key != self.key:
            raise self.refuse(
                "auth", _errors(401, "authentication_failed", "No user found for the API key")
            )
        if group is None:
            return
        wait = self.take_window(1, group)
        if wait is not None:
            raise Refusal(self.rate_limited(wait))
        if self.quota is not None and self.quota <= 0:
            raise self.refuse(
                "quota",
                _errors(429, "too_many_requests", "You have reached your usage limit. "
                        "Upgrade your plan if necessary."),
            )  # fmt: skip

    def _used(self, item: str, credits: float) -> None:
        """A search or verification charged, unless it repeats one of this month (free)."""
        if self.charge(item, credits, repeat_free=True) and self.quota is not None:
            self.quota -= 1

    def find(self, request: Request) -> Response:
        self._admit(request, "finder")
        q = request.query_params
        domain = q.get("domain") or ""
        if not (q.get("domain") or q.get("company")):
            raise Refusal(_errors(400, "wrong_params", "You are missing the domain parameter"))
        if q.get("full_name"):
            person = self.person_named(q["full_name"], domain)
        elif q.get("first_name") and q.get("last_name"):
            person = self.person(q["first_name"], q["last_name"], domain)
        else:
            raise Refusal(
                _errors(
                    400, "wrong_params", "You are missing the first_name or last_name parameter"
                )
            )
        params = {
            k: q.get(k) for k in ("first_name", "last_name", "full_name", "domain", "company")
        }
        data: dict[str, Any] = {
            "first_name": q.get("first_name"),
            "last_name": q.get("last_name"),
            "email": None,
            "score": None,
            "domain": domain or None,
            "accept_all": None,
            "position": None,
            "linkedin_url": None,
            "company": None,
            "sources": [],
            "verification": {"date": None, "status": None},
        }
        if person is not None:
            company = self.company(person.domain)
            catch_all = bool(company and company.catch_all)
            data.update(
                first_name=person.first_name,
                last_name=person.last_name,
                email=person.email,
                score=70 + person.ordinal % 30,
                domain=person.domain,
                accept_all=catch_all,
                position=person.title,
                company=company.name if company else None,
                verification={
                    "date": "2026-11-02",
                    "status": "accept_all" if catch_all else "valid",
                },
            )
            self._used(f"finder|{person.ordinal}", 1)
        return JSONResponse({"data": data, "meta": {"params": params}})

    def verify(self, request: Request) -> Response:
        self._admit(request, "verifier")
        email = (request.query_params.get("email") or "").strip()
        if "@" not in email:
            raise Refusal(_errors(400, "invalid_email", "This email address is invalid"))
        known = self.world.person_by_email.get(email.casefold())
        if self.catch_all(email):
            status, result = "accept_all", "risky"
        elif known is not None:
            status, result = "valid", "deliverable"
        elif email.rsplit("@", 1)[-1].casefold() in ("gmail.com", "yahoo.com", "outlook.com"):
            status, result = "webmail", "risky"
        elif self.company(email.rsplit("@", 1)[-1]) is not None:
            status, result = "invalid", "undeliverable"
        else:
            status, result = "unknown", "risky"
        self._used(f"verifier|{email.casefold()}", 0 if status in ("unknown", "webmail") else 1)
        return JSONResponse(
            {
                "data": {
                    "status": status,
                    "result": result,
                    "score": {"valid": 95, "accept_all": 60, "invalid": 10}.get(status, 40),
                    "email": email,
                    "regexp": True,
                    "gibberish": False,
                    "disposable": False,
                    "webmail": status == "webmail",
                    "mx_records": status != "unknown",
                    "smtp_server": status != "unknown",
                    "smtp_check": status == "valid",
                    "accept_all": status == "accept_all",
                    "block": False,
                    "sources": [],
                },
                "meta": {"params": {"email": email}},
            }
        )

    def account(self, request: Request) -> Response:
        self._admit(request, None)
        used = sum(n for item, n in self.charges.items() if item.startswith("finder|"))
        available = self.PLAN if self.quota is None else used + self.quota
        return JSONResponse(
            {
                "data": {
                    "email": "playline@example.com",
                    "plan_name": "Growth",
                    "reset_date": "2027-01-01",
                    "requests": {
                        "searches": {"used": used, "available": available},
                        "verifications": {"used": 0, "available": 2 * available},
                    },
                },
                "meta": {},
            }
        )

    def routes(self) -> list[BaseRoute]:
        def route(path: str, handler: Any, name: str, faults: bool = True) -> Route:
            async def endpoint(request: Request) -> Response:
                return await self.answer(request, name, lambda: handler(request), faults=faults)

            return Route(path, endpoint, methods=["GET"])

        return [
            route("/v2/email-finder", self.find, "email-finder"),
            route("/v2/email-verifier", self.verify, "email-verifier"),
            route("/v2/account", self.account, "account", faults=False),
        ]
