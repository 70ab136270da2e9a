"""NeverBounce's API v4 (served under ``/v4`` and ``/v4.2``), as
https://developers.neverbounce.com describes it:

- the key is the ``key`` parameter, in the query, a form or a JSON body; GET and POST are
  alike on every endpoint. Every application error is HTTP 200 with ``status`` other than
  ``success`` and a ``message``: ``general_failure`` ("Missing required parameter 'key'"),
  ``auth_failure`` (a wrong key), ``throttle_triggered`` (too fast), ``temp_unavail``;
- ``single/check?email`` answers ``{"status": "success", "result": valid | invalid |
  disposable | catchall | unknown, "flags", "suggested_correction"}``, with
  ``address_info`` and ``credits_info`` when asked (``=1``); a check costs 1 credit;
- ``jobs/create`` takes ``input_location: "supplied"`` and ``input`` (objects with an
  ``email``, or rows whose first column is the address), ``auto_parse``, ``auto_start``;
  it answers ``job_id``. Started (``auto_start``), a job takes 1 credit for each billable
  row (an address of good syntax) at once; a job the credits cannot pay is refused;
  without ``auto_start`` it stays ``waiting`` (``jobs/start`` is not modelled);
- ``jobs/status?job_id`` answers ``job_status`` ``running`` for the first
  ``pending_polls`` polls, then ``complete``, with ``total`` counts; ``jobs/results?job_id
  &page&items_per_page`` (1-1000) pages the items as ``{data, verification}`` in the order
  submitted; an unknown (or deleted) job is a ``general_failure``;
- ``account/info`` says the credits used and remaining (``credits``; None: a large balance).

``fail_jobs`` (settable as the other faults): the next so many jobs fail while parsing
(``job_status: failed`` with a ``failure_reason``, nothing charged), as a list of poorly
formatted data does.

What the documentation leaves open, assumed here: the words of ``auth_failure``,
``throttle_triggered`` and an out-of-credits ``general_failure`` (which names credits);
a limit of 5 requests a second over ``single/check`` and ``jobs/create`` (polls are not
limited); a payload over 25 MB is 413; the verdicts come from the simulated world: a
person's address is valid (catchall at a catch-all company), another mailbox at a company
invalid, a domain no company has invalid with ``bad_dns``, webmail unknown, throwaway
domains disposable, a misspelt webmail domain invalid with a ``suggested_correction``,
bad syntax invalid with ``bad_syntax`` (free in a job); role mailboxes (``info@``...) exist at
every company and carry ``role_account`` (in a single check, only with ``address_info``).
"""

from __future__ import annotations

import json
import re
import urllib.parse
from typing import Any, ClassVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from .._inputs import normalize_email
from ._base import Double, Limit, Refusal

__all__ = ["NeverBounceDouble"]

_SYNTAX = re.compile(r"^[^@\s\"<>(),;:]+@(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,}$", re.I)
_WEBMAIL = frozenset({"gmail.com", "yahoo.com", "outlook.com", "hotmail.com", "icloud.com"})
_THROWAWAY = frozenset({"mailinator.com", "guerrillamail.com", "yopmail.com", "10minutemail.com"})
_TYPOS = {"gmial.com": "gmail.com", "gmal.com": "gmail.com", "hotmial.com": "hotmail.com",
          "yaho.com": "yahoo.com", "outlok.com": "outlook.com"}  # fmt: skip
_ROLES = frozenset({"info", "support", "sales", "contact", "admin", "hello", "team", "office",
                    "billing", "help", "hr", "jobs", "marketing", "noreply"})  # fmt: skip
_MAX_BODY = 25 * 1024 * 1024  # bytes of a job's supplied data (413 above)
_FIRST_JOB = 150_970  # job ids are integers


def _envelope(status: str, message: str) -> JSONResponse:
    return JSONResponse({"status": status, "message": message, "execution_time": 7})


def _success(body: dict[str, Any]) -> JSONResponse:
    return JSONResponse({"status": "success", **body, "execution_time": 42})


def _missing(name: str) -> Refusal:
    return Refusal(_envelope("general_failure", f"Missing required parameter '{name}'"))


def _yes(value: Any) -> bool:
    """A boolean parameter: 1/0 (query, form) or true/false (JSON)."""
    return value is True or value == 1 or str(value).strip().casefold() in ("1", "true")


def _address_info(email: str) -> dict[str, str]:
    normalized = email.strip().casefold()
    local, _, host = normalized.rpartition("@")
    addr, _, alias = local.partition("+")
    labels = host.split(".")
    return {
        "original_email": email,
        "normalized_email": normalized,
        "addr": addr,
        "alias": alias,
        "host": host,
        "fqdn": host,
        "domain": labels[-2] if len(labels) > 1 else host,
        "subdomain": ".".join(labels[:-2]),
        "tld": labels[-1] if len(labels) > 1 else "",
    }


class NeverBounceDouble(Double):
    name = "neverbounce"
    limits: ClassVar[tuple[Limit, ...]] = (Limit(5, 1.0),)
    BALANCE = 1_000_000  # credits an account has when ``credits`` is None
    _SETTABLE: ClassVar[dict[str, type | tuple[type, ...]]] = {
        **Double._SETTABLE,
        "fail_jobs": int,
    }

    def reset(self) -> None:
        super().reset()
        self.fail_jobs = 0  # the next so many jobs created fail (poorly formatted data)

    def rate_limited(self, wait: float) -> Response:
        return _envelope(
            "throttle_triggered", "Too many requests in a short amount of time; try again shortly"
        )

    def unavailable(self) -> Response:
        return _envelope("temp_unavail", "A partial service interruption; try again shortly")

    # -- requests --------------------------------------------------------------------------

    async def _params(self, request: Request) -> dict[str, Any]:
        """The request's parameters: its query, then its JSON or form body."""
        params: dict[str, Any] = dict(request.query_params)
        raw = await request.body()
        if len(raw) > _MAX_BODY:
            raise Refusal(JSONResponse({"message": "Request Entity Too Large"}, 413))
        if not raw:
            return params
        if "json" in request.headers.get("content-type", ""):
            try:
                body = json.loads(raw)
            except ValueError:
                raise Refusal(
                    _envelope("general_failure", "The request body is not valid JSON")
                ) from None
            if not isinstance(body, dict):
                raise Refusal(_envelope("general_failure", "The request body is not an object"))
            return {**params, **body}
        form = urllib.parse.parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True)
        return {**params, **dict(form)}

    def _admit(self, params: dict[str, Any], metered: bool) -> None:
        """Refuse a missing or wrong key; then, for a check or a job (``metered``), a request
        past the rate limit."""
        if not params.get("key"):
            raise self.refuse(
                "auth", _envelope("general_failure", "Missing required parameter 'key'")
            )
        if params["key"] != self.key:
            raise self.refuse(
                "auth", _envelope("auth_failure", "We were unable to authenticate your request")
            )
        if metered and self.take_window() is not None:
            raise Refusal(self.rate_limited(1.0))

    def _no_credits(self, needed: int) -> Refusal:
        left = self.BALANCE if self.credits is None else int(self.credits)
        return self.refuse(
            "credits",
            _envelope(
                "general_failure",
                f"Insufficient credits: this request needs {needed}, the account has {left}; "
                "purchase credits or add a default payment method",
            ),
        )

    def verdict(self, email: str) -> tuple[str, list[str], str]:
        """``(result, flags, suggested_correction)`` for an address, from the world."""
        address = email.strip()
        if not _SYNTAX.match(address):
            return "invalid", ["bad_syntax"], ""
        local, host = normalize_email(address).rsplit("@", 1)
        if host in _TYPOS:
            return "invalid", ["bad_dns", "spelling_mistake"], f"{local}@{_TYPOS[host]}"
        flags = ["has_dns", "has_dns_mx"]
        role = local.split("+", 1)[0] in _ROLES
        if role:
            flags.append("role_account")
        if host in _THROWAWAY:
            return "disposable", [*flags, "disposable_email"], ""
        if host in _WEBMAIL:
            return "unknown", [*flags, "free_email_host"], ""
        company = self.company(host)
        if company is None:
            return "invalid", ["bad_dns"], ""
        flags.append("smtp_connectable")
        if company.catch_all:
            return "catchall", [*flags, "accepts_all"], ""
        if role or normalize_email(address) in self.world.person_by_email:
            return "valid", flags, ""
        return "invalid", flags, ""

    def _left(self) -> int:
        return int(self.BALANCE - self.charged if self.credits is None else self.credits)

    async def check(self, request: Request) -> Response:
        params = await self._params(request)
        self._admit(params, metered=True)
        email = params.get("email")
        if not isinstance(email, str) or not email.strip():
            raise _missing("email")
        if not self.can_pay(1):
            raise self._no_credits(1)
        result, flags, correction = self.verdict(email)
        self.charge(f"verify|{normalize_email(email)}", 1)
        with_info = _yes(params.get("address_info"))
        body: dict[str, Any] = {
            "result": result,
            "flags": flags if with_info else [f for f in flags if f != "role_account"],
            "suggested_correction": correction,
            "retry_token": "",
        }
        if with_info:
            body["address_info"] = _address_info(email)
        if _yes(params.get("credits_info")):
            body["credits_info"] = {
                "paid_credits_used": 1,
                "free_credits_used": 0,
                "paid_credits_remaining": self._left(),
                "free_credits_remaining": 0,
            }
        return _success(body)

    async def create(self, request: Request) -> Response:
        params = await self._params(request)
        self._admit(params, metered=True)
        location, rows = params.get("input_location"), params.get("input")
        if location is None:
            raise _missing("input_location")
        if rows is None:
            raise _missing("input")
        if location != "supplied":
            raise Refusal(
                _envelope("general_failure", f"input_location '{location}' is not supported")
            )
        if isinstance(rows, str):
            try:
                rows = json.loads(rows)
            except ValueError:
                rows = None
        data = [self._row(row) for row in rows] if isinstance(rows, list) and rows else None
        if data is None or any(row is None for row in data):
            raise Refusal(
                _envelope(
                    "general_failure",
                    "The input is not a list of objects with an email (or rows of columns)",
                )
            )
        emails = [str(row["email"]) for row in data if row is not None]
        billable = [e for e in emails if _SYNTAX.match(e.strip())]
        started = _yes(params.get("auto_parse")) and _yes(params.get("auto_start"))
        failure = None
        if started and self.fail_jobs > 0:  # it fails parsing: never started, never paid
            self.fail_jobs -= 1
            failure = "The list could not be processed: poorly formatted data"
        elif started:
            if not self.can_pay(len(billable)):
                raise self._no_credits(len(billable))
            for email in billable:  # credits are taken when the job starts
                self.charge(f"verify|{normalize_email(email)}", 1)
        job_id = _FIRST_JOB + next(self._ids)
        self.jobs[str(job_id)] = {
            "id": job_id,
            "rows": data,
            "billable": len(billable),
            "started": started,
            "polls": 0,
            "done": False,
            "failure_reason": failure,
            "filename": params.get("filename") or "Created from Array.csv",
        }
        return _success({"job_id": job_id})

    @staticmethod
    def _row(row: Any) -> dict[str, Any] | None:
        if isinstance(row, dict) and isinstance(row.get("email"), str):
            return {str(k): v for k, v in row.items()}
        if isinstance(row, list) and row and isinstance(row[0], str):
            return {"email": row[0], **{str(i): v for i, v in enumerate(row[1:], 1)}}
        return None

    def _job(self, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("job_id") in (None, ""):
            raise _missing("job_id")
        job = self.jobs.get(str(params["job_id"]).strip())
        if job is None:
            raise self.refuse(
                "job", _envelope("general_failure", f"Job #{params['job_id']} was not found")
            )
        return job

    def _verdicts(self, job: dict[str, Any]) -> list[tuple[str, list[str], str]]:
        return [self.verdict(str(row["email"])) for row in job["rows"]]

    async def status(self, request: Request) -> Response:
        params = await self._params(request)
        self._admit(params, metered=False)
        job = self._job(params)
        if job["started"] and not job["done"]:
            job["polls"] += 1
            job["done"] = job["polls"] > self.pending_polls
        if job["failure_reason"] and job["done"]:
            state, percent = "failed", 0
        elif not job["started"]:
            state, percent = "waiting", 0
        elif job["done"]:
            state, percent = "complete", 100
        else:
            state, percent = "running", min(99, 20 * job["polls"])
        verdicts = self._verdicts(job) if job["done"] else []
        counts = {r: sum(1 for v in verdicts if v[0] == r) for r in _RESULTS}
        return _success(
            {
                "id": job["id"],
                "filename": job["filename"],
                "created_at": "2026-11-02 09:00:00",
                "started_at": "2026-11-02 09:00:05" if job["started"] else None,
                "finished_at": "2026-11-02 09:01:00" if job["done"] else None,
                "failure_reason": job["failure_reason"] if job["done"] else None,
                "total": {
                    "records": len(job["rows"]),
                    "billable": job["billable"],
                    "processed": len(verdicts),
                    **counts,
                    "duplicates": 0,
                    "bad_syntax": sum(1 for v in verdicts if "bad_syntax" in v[1]),
                },
                "bounce_estimate": 0,
                "percent_complete": percent,
                "job_status": state,
            }
        )

    async def results(self, request: Request) -> Response:
        params = await self._params(request)
        self._admit(params, metered=False)
        job = self._job(params)
        if not job["done"] or job["failure_reason"]:
            raise Refusal(_envelope("general_failure", "The job has not completed"))
        try:
            page = int(params.get("page") or 1)
            per_page = int(params.get("items_per_page") or 10)
        except ValueError:
            page = per_page = 0
        if page < 1 or not 1 <= per_page <= 1000:
            raise Refusal(
                _envelope("general_failure", "page is 1 or more, items_per_page 1 to 1000")
            )
        items = [
            {
                "data": row,
                "verification": {
                    "result": result,
                    "flags": flags,
                    "suggested_correction": correction,
                    "address_info": _address_info(str(row["email"])),
                },
            }
            for row, (result, flags, correction) in zip(
                job["rows"], self._verdicts(job), strict=True
            )
        ]
        counts = {r: sum(1 for i in items if i["verification"]["result"] == r) for r in _RESULTS}
        return _success(
            {
                "total_results": len(items),
                "total_pages": -(-len(items) // per_page),
                "query": {
                    "job_id": job["id"],
                    "valids": counts["valid"],
                    "invalids": counts["invalid"],
                    "disposables": counts["disposable"],
                    "catchalls": counts["catchall"],
                    "unknowns": counts["unknown"],
                    "page": page,
                    "items_per_page": per_page,
                },
                "results": items[(page - 1) * per_page : page * per_page],
            }
        )

    async def account(self, request: Request) -> Response:
        params = await self._params(request)
        self._admit(params, metered=False)
        done = sum(1 for job in self.jobs.values() if job["done"])
        return _success(
            {
                "credits_info": {
                    "paid_credits_used": int(self.charged),
                    "free_credits_used": 0,
                    "paid_credits_remaining": self._left(),
                    "free_credits_remaining": 0,
                },
                "job_counts": {
                    "completed": done,
                    "under_review": 0,
                    "queued": 0,
                    "processing": len(self.jobs) - done,
                },
            }
        )

    def routes(self) -> list[BaseRoute]:
        def route(path: str, handler: Any, name: str) -> Route:
            faults = name != "account/info"  # the account endpoint meets no test's fault

            async def endpoint(request: Request) -> Response:
                return await self.answer(request, name, lambda: handler(request), faults=faults)

            return Route(path, endpoint, methods=["GET", "POST"])

        served = (
            ("single/check", self.check),
            ("jobs/create", self.create),
            ("jobs/status", self.status),
            ("jobs/results", self.results),
            ("account/info", self.account),
        )
        return [
            route(f"{version}/{path}", handler, path)
            for version in ("/v4", "/v4.2")
            for path, handler in served
        ]


_RESULTS = ("valid", "invalid", "disposable", "catchall", "unknown")
