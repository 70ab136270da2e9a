"""Icypeas's API, as https://api-doc.icypeas.com describes it (getting-started, how-it-works,
rate-limits, errors, search_statuses, certainties, pagination, find-emails/bulk-search,
reference/bulk-files, reference/subscription).

- every route is a ``POST`` under ``/api`` with a JSON body, the key alone in
  ``Authorization`` (``Bearer <key>`` is refused): ``401 "Unauthorized access."``;
- ``/api/email-search {firstname, lastname, domainOrCompany}`` only queues a search:
  ``{"success": true, "item": {"status": "NONE", "_id"}}``; ``/api/bulk-search {task:
  "email-search", name, data: [[firstname, lastname, domainOrCompany], ...] (<= 5,000),
  custom: {externalIds}}`` queues a file of them: ``{"success": true, "file", "status":
  "in_progress"}``;
- ``/api/bulk-single-searchs/read`` reads a search by ``{"id"}``, or a file's rows in the
  order they were sent (``{"mode": "bulk", "file", "limit" (<= 100)}``, paginated with
  ``next`` and ``sorts``); each item has a ``status``: ``NONE``, ``SCHEDULED``,
  ``IN_PROGRESS`` while it runs, then ``DEBITED`` (found: ``results.emails[]`` with a
  ``certainty`` ``ultra_sure``, ``very_sure`` or ``probable``), ``NOT_FOUND``,
  ``INSUFFICIENT_FUNDS`` or ``BAD_INPUT``; ``/api/search-files/read {"file"}`` says whether
  a file is ``finished``, with its stats;
- invalid bodies are ``200 {"success": false, "validationErrors": [{field, type, message}]}``;
- 10 searches a second, 1 bulk search a second, 30 result reads a minute, 15 file reads a
  minute; past them ``429 "You have exceeded the max number of requests per minute."``
  (no Retry-After);
- a found email costs 1 credit; a miss is free ("you only pay for results");
  ``/api/a/actions/subscription-information {"email"}`` (a POST naming the account's email)
  says how many credits are left.

What the documentation leaves open, assumed here: a search runs (and is charged) when it is
queued, its status shows once it has been read ``pending_polls`` times (a file: once
``/search-files/read`` has named it that many times); a search that cannot be paid for
(``credits`` below 1) is ``INSUFFICIENT_FUNDS`` whether or not it would have been found; a
bulk search is refused at once (``InsufficientCredits``) unless the credits cover one per row
(a community client's observation); a name the caller did not give is not a miss but a
``BAD_INPUT`` row (a single search is refused as invalid); an unknown id or file is ``200
success: false`` with a ``SearchNotFoundError``, and an unpaid subscription (``unpaid``,
set by tests) ``UnpaidSubscriptionError``, both as validation errors; ``probable`` is the
certainty of a catch-all domain's address. ``quota`` is not used: Icypeas counts credits.
"""

from __future__ import annotations

import datetime
from typing import Any, ClassVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from .._world import Person
from ._base import Double, Limit, Refusal, json_body

__all__ = ["IcypeasDouble"]

USER = "u_playline_double"
PENDING = ("NONE", "SCHEDULED", "IN_PROGRESS")
MAX_ROWS = 5_000  # rows of one bulk search
MAX_READ = 100  # results of one read
MAX_FILES = 50  # files of one read


def _invalid(field: str, type: str, message: str) -> JSONResponse:
    """Icypeas' refusal of a body: HTTP 200, ``success: false``, the errors by field."""
    return JSONResponse(
        {"success": False, "validationErrors": [{"field": field, "type": type, "message": message}]}
    )


def _refused(status: int, message: str) -> JSONResponse:
    return JSONResponse({"success": False, "message": message}, status)


def _text(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    return value.strip() if isinstance(value, str) else ""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


class IcypeasDouble(Double):
    name = "icypeas"
    coverage = 0.6
    limits: ClassVar[tuple[Limit, ...]] = (
        Limit(10, 1.0, "email-search"),
        Limit(1, 1.0, "bulk-search"),
        Limit(30, 60.0, "read"),  # /bulk-single-searchs/read
        Limit(15, 60.0, "search-files"),  # /search-files/read
    )
    PLAN = 10_000  # credits of an account without the credits fault

    def reset(self) -> None:
        super().reset()
        with self.lock:
            self.searches: dict[str, dict[str, Any]] = {}  # every search, by its _id
            self.files: dict[str, dict[str, Any]] = {}  # every bulk search, by its file id
            self.reads: dict[str, int] = {}  # reads of each search or file, for pending_polls
            self.unpaid = False  # the subscription has an unpaid invoice

    # -- answers in Icypeas' words ---------------------------------------------------------

    def rate_limited(self, wait: float) -> Response:
        return _refused(429, "You have exceeded the max number of requests per minute.")

    def unavailable(self) -> Response:
        return _refused(503, "Service Unavailable")

    def _admit(self, request: Request, group: str | None) -> None:
        """Refuse a key that is not the key alone; then the rate window of ``group``."""
        if request.headers.get("authorization") != self.key:
            raise self.refuse("auth", _refused(401, "Unauthorized access."))
        if group is not None and (wait := self.take_window(1, group)) is not None:
            raise Refusal(self.rate_limited(wait))

    async def _body(self, request: Request) -> dict[str, Any]:
        body = await json_body(request)
        if not isinstance(body, dict):
            raise self.refuse("input", _invalid("body", "object", "The body must be an object"))
        return body

    def _unpaid(self) -> None:
        if self.unpaid:
            raise self.refuse(
                "unpaid",
                _invalid(
                    "subscription",
                    "UnpaidSubscriptionError",
                    "A payment is pending on your subscription",
                ),
            )

    # -- searching -------------------------------------------------------------------------

    def _lookup(self, first: str, last: str, target: str) -> Person | None:
        """The person at ``target``, a domain or a company's name."""
        if "." in target and " " not in target.strip():
            return self.person(first, last, target)
        company = self.company_named(target)
        return self.person(first, last, company.domain) if company else None

    def _search(
        self, first: str, last: str, target: str, order: int, external: str, file: str | None
    ) -> dict[str, Any]:
        """Queue a search; it runs (and is charged) at once, and shows once read enough."""
        results: dict[str, Any] = {
            "firstname": first,
            "lastname": last,
            "gender": "UNKNOWN",
            "fullname": f"{first} {last}".strip(),
            "emails": [],
            "phones": [],
            "saasServices": [],
        }
        if not (first or last) or not target:
            status = "BAD_INPUT"
        elif not self.can_pay(1):
            status = "INSUFFICIENT_FUNDS"
        elif (person := self._lookup(first, last, target)) is None:
            status = "NOT_FOUND"
        else:
            company = self.company(person.domain)
            google = company is None or company.ordinal % 2 == 0
            certainty = (
                "probable"
                if company is not None and company.catch_all
                else ("very_sure" if person.ordinal % 3 == 0 else "ultra_sure")
            )
            results["emails"] = [
                {
                    "email": person.email,
                    "certainty": certainty,
                    "mxRecords": [
                        "aspmx.l.google.com" if google else "mail.protection.outlook.com"
                    ],
                    "mxProvider": "google" if google else "microsoft",
                }
            ]
            status = "DEBITED"
            self.charge(f"email-search|{person.ordinal}", 1)
        id = self.job_id("s_")
        stamp = _now()
        search = {
            "name": "__icypeas__individual",
            "user": USER,
            "results": results,
            "order": order,
            "status": status,
            "userData": {"webhookUrl": "", "externalId": external},
            "system": {"createdAt": stamp, "modifiedAt": stamp},
            "_id": id,
        }
        if file is not None:
            search["file"] = file
        with self.lock:
            self.searches[id] = search
            self.jobs[id] = {"kind": "search", "file": file}
        return search

    def _shown(self, search: dict[str, Any], ready: bool) -> dict[str, Any]:
        """A search as a read shows it: still running until ``ready``."""
        if ready:
            return search
        reads = self.reads.get(search["_id"], 0)
        return {
            **search,
            "status": "SCHEDULED" if reads <= 1 else "IN_PROGRESS",
            "results": {**search["results"], "emails": []},
        }

    def _read(self, id: str) -> bool:
        """Count a read of a search or a file; whether it is done now."""
        with self.lock:
            self.reads[id] = self.reads.get(id, 0) + 1
            return self.reads[id] > self.pending_polls

    def _finished(self, file: str) -> bool:
        return self.reads.get(file, 0) > self.pending_polls

    async def email_search(self, request: Request) -> Response:
        self._admit(request, "email-search")
        body = await self._body(request)
        first, last = _text(body, "firstname"), _text(body, "lastname")
        target = _text(body, "domainOrCompany")
        if not target:
            raise self.refuse(
                "input", _invalid("domainOrCompany", "required", "domainOrCompany is required")
            )
        if not (first or last):
            raise self.refuse(
                "input",
                _invalid("firstname", "required", "firstname or lastname is required"),
            )
        self._unpaid()
        custom = body["custom"] if isinstance(body.get("custom"), dict) else {}
        external = custom.get("externalId") if isinstance(custom.get("externalId"), str) else ""
        search = self._search(first, last, target, 0, external or "", None)
        return JSONResponse({"success": True, "item": {"status": "NONE", "_id": search["_id"]}})

    async def bulk_search(self, request: Request) -> Response:
        self._admit(request, "bulk-search")
        body = await self._body(request)
        data = body.get("data")
        if body.get("task") != "email-search":
            raise self.refuse(
                "input",
                _invalid("task", "enum", "task must be one of email-search, domain-search, "
                         "email-verification (this double serves email-search)"),
            )  # fmt: skip
        if not _text(body, "name"):
            raise self.refuse("input", _invalid("name", "required", "name is required"))
        if not isinstance(data, list) or not 1 <= len(data) <= MAX_ROWS:
            raise self.refuse(
                "input",
                _invalid("data", "array", f"data must be an array of 1 to {MAX_ROWS} rows"),
            )
        for n, row in enumerate(data):
            if not (
                isinstance(row, list) and len(row) == 3 and all(isinstance(v, str) for v in row)
            ):
                raise self.refuse(
                    "input",
                    _invalid(f"data.{n}", "array",
                             "each row is [firstname, lastname, domainOrCompany]"),
                )  # fmt: skip
        custom = body["custom"] if isinstance(body.get("custom"), dict) else {}
        externals = custom.get("externalIds")
        if externals is not None and not (
            isinstance(externals, list)
            and len(externals) == len(data)
            and all(isinstance(v, str) for v in externals)
        ):
            raise self.refuse(
                "input",
                _invalid("custom.externalIds", "array",
                         "externalIds must hold one string per row of data"),
            )  # fmt: skip
        self._unpaid()
        if not self.can_pay(len(data)):
            raise self.refuse(
                "credits",
                _invalid("data", "InsufficientCredits",
                         "InsufficientCredits: not enough credits for this bulk search"),
            )  # fmt: skip
        file = self.job_id("f_")
        rows = [
            self._search(
                row[0].strip(),
                row[1].strip(),
                row[2].strip(),
                n,
                externals[n] if externals else "",
                file,
            )["_id"]
            for n, row in enumerate(data)
        ]
        with self.lock:
            self.files[file] = {"name": _text(body, "name"), "rows": rows, "created": _now()}
            self.jobs[file] = {"kind": "file"}
        return JSONResponse({"success": True, "file": file, "status": "in_progress"})

    # -- reading ---------------------------------------------------------------------------

    @staticmethod
    def _limit(body: dict[str, Any], most: int, default: int) -> int:
        limit = body.get("limit", default)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= most:
            raise Refusal(
                _invalid("limit", "number", f"limit must be a number between 1 and {most}")
            )
        return limit

    @staticmethod
    def _page(
        items: list[dict[str, Any]], body: dict[str, Any], limit: int, key: str
    ) -> tuple[list[dict[str, Any]], list[list[Any]]]:
        """A page of ``items`` (already in their order) after the ``sorts`` of the previous
        page when ``next`` is true; the page's own ``sorts``."""
        sorts = body.get("sorts")
        if body.get("next") is True and isinstance(sorts, list) and sorts and sorts[0]:
            after = sorts[0][0]
            ids = [item[key] for item in items]
            start = ids.index(after) + 1 if after in ids else len(items)
            items = items[start:]
        page = items[:limit]
        return page, [[page[-1][key]] if page else [], [page[-1]["_id"]] if page else []]

    async def read_results(self, request: Request) -> Response:
        self._admit(request, "read")
        body = await self._body(request)
        limit = self._limit(body, MAX_READ, 10)
        if isinstance(body.get("id"), str):
            search = self.searches.get(body["id"])
            if search is None:
                raise self.refuse("unknown", self._not_found("id", body["id"]))
            file = search.get("file")
            ready = self._finished(file) if file else self._read(search["_id"])
            items = [self._shown(search, ready)]
            return JSONResponse({"success": True, "items": items, "sorts": [[], []], "total": 1})
        mode = body.get("mode")
        if mode == "bulk":
            file = body.get("file")
            if not isinstance(file, str) or file not in self.files:
                raise self.refuse("unknown", self._not_found("file", file))
            ready = self._finished(file)
            rows = [self._shown(self.searches[id], ready) for id in self.files[file]["rows"]]
            page, sorts = self._page(rows, body, limit, "order")
            return JSONResponse(
                {"success": True, "items": page, "sorts": sorts, "total": len(rows)}
            )
        if mode == "single":
            singles = [
                self._shown(s, self.reads.get(s["_id"], 0) > self.pending_polls)
                for s in reversed(self.searches.values())
                if s.get("file") is None
            ]
            page, sorts = self._page(singles, body, limit, "_id")
            return JSONResponse(
                {"success": True, "items": page, "sorts": sorts, "total": len(singles)}
            )
        raise self.refuse(
            "input",
            _invalid("mode", "enum", "give an id, or a mode: single, or bulk with a file"),
        )

    def _not_found(self, field: str, value: Any) -> JSONResponse:
        return _invalid(field, "SearchNotFoundError", f"No search found for {field} {value!r}")

    def _file(self, file: str) -> dict[str, Any]:
        rows = [self.searches[id] for id in self.files[file]["rows"]]
        finished = self._finished(file)
        certainties = {"verySure": 0, "sure": 0, "probable": 0, "undeliverable": 0}
        for row in rows:
            for email in row["results"]["emails"][:1]:
                word = {"ultra_sure": "verySure", "very_sure": "sure"}.get(
                    email["certainty"], email["certainty"]
                )
                certainties[word] = certainties.get(word, 0) + 1

        def count(status: str) -> int:
            return sum(r["status"] == status for r in rows) if finished else 0

        return {
            "_id": file,
            "name": self.files[file]["name"],
            "task": "email-search",
            "user": USER,
            "finished": finished,
            "status": "done" if finished else "in_progress",
            "stats": {
                "total": len(rows),
                "done": len(rows) if finished else 0,
                "found": count("DEBITED"),
                "aborted": count("ABORTED"),
                "insufficientCredits": count("INSUFFICIENT_FUNDS"),
                "certainties": certainties if finished else dict.fromkeys(certainties, 0),
            },
            "system": {"createdAt": self.files[file]["created"], "modifiedAt": _now()},
        }

    async def read_files(self, request: Request) -> Response:
        self._admit(request, "search-files")
        body = await self._body(request)
        limit = self._limit(body, MAX_FILES, 10)
        file = body.get("file")
        if file is not None:
            if not isinstance(file, str) or file not in self.files:
                raise self.refuse("unknown", self._not_found("file", file))
            self._read(file)
            return JSONResponse(
                {"success": True, "files": [self._file(file)], "sorts": [[], []], "total": 1}
            )
        status = body.get("status")
        if status not in (None, "in_progress", "done"):
            raise self.refuse(
                "input", _invalid("status", "enum", "status has to be either in_progress or done")
            )
        files = [self._file(f) for f in reversed(self.files)]
        if status is not None:
            files = [f for f in files if f["status"] == status]
        page, sorts = self._page(files, body, limit, "_id")
        return JSONResponse({"success": True, "files": page, "sorts": sorts, "total": len(files)})

    async def subscription(self, request: Request) -> Response:
        self._admit(request, None)
        body = await self._body(request)
        if "@" not in _text(body, "email"):
            raise self.refuse(
                "input", _invalid("email", "required", "the account's email is required")
            )
        credits = self.PLAN - self.charged if self.credits is None else self.credits
        return JSONResponse(
            {
                "success": True,
                "credits": credits,
                "quotas": {"daily": 0},  # legacy: Icypeas says to read credits
                "userId": USER,
                "subscription": {"plan": "growth", "status": "unpaid" if self.unpaid else "active"},
            }
        )

    def routes(self) -> list[BaseRoute]:
        def route(path: str, handler: Any, name: str, faults: bool = True) -> Route:
            async def endpoint(request: Request) -> Response:
                return await self.answer(request, name, lambda: handler(request), faults=faults)

            return Route(path, endpoint, methods=["POST"])

        return [
            route("/api/email-search", self.email_search, "email-search"),
            route("/api/bulk-search", self.bulk_search, "bulk-search"),
            route("/api/bulk-single-searchs/read", self.read_results, "read"),
            route("/api/search-files/read", self.read_files, "search-files"),
            route(
                "/api/a/actions/subscription-information",
                self.subscription,
                "subscription",
                faults=False,
            ),
        ]
