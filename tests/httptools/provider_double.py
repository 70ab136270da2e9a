"""A provider on loopback for the HTTP tool tests: a Starlette app whose endpoints answer as
real providers' documentation says they do (``../shared/reference/providers.md``), and that
counts what it was asked.

- ``GET /v1/find?first_name=&domain=`` (the key in ``X-Api-Key``, as a bearer token or as
  the ``api_key`` query parameter): a person the double knows
  is ``200 {"data": {"email": ...}}``, anyone else ``404`` (People Data Labs' not found);
  with ``charge`` set, ``x-call-credits-spent`` says what it cost (0 for a 404, as PDL's);
  with ``window`` set, it allows that many requests per span of the clock's time, says what
  is left in ``RateLimit-Remaining``/``RateLimit-Reset`` and answers 429 past it;
  a first name of ``nomatch`` is ``200 {"error": true, "error_code": "NO_MATCH"}`` (Prospeo).
- ``POST /v1/bulk`` ``{"requests": [{"params": {...}}]}``: a list of per-item answers, each
  with its own ``status`` (PDL's bulk person enrichment).
- ``POST /v1/jobs`` (an async job, as Dropcontact's): ``202 {"request_id": ...}``; ``GET
  /v1/jobs/{id}``: ``{"status": "IN_PROGRESS"}`` for ``polls_pending`` polls, then done;
  ``410`` for a job in ``expired`` (its result no longer kept, as Apollo's after 30 days).
- ``POST /v1/bulkjobs`` ``{"items": [...]}``: one job for many people (Dropcontact's batch):
  ``202 {"request_id": ...}``; ``GET /v1/bulkjobs/{id}``: pending as a single job is, then
  ``{"status": "DONE", "data": [...]}``, one entry per item (null: not found); ``503`` while
  ``polls_down``. With ``results_apart``, a done poll says only ``DONE``: a single job's
  result is at ``/v1/jobs/{id}/result``, a bulk job's at ``/v1/bulkjobs/{id}/download`` (CSV).

``script(status, body, headers)`` queues an answer served before the normal ones, to the
next request of any endpoint: how a test makes the provider rate limit, block, run out of
quota or fail.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

KEY = "k-double-1234567890abcdef"  # the account's API key (long: the leak checks catch it)
PEOPLE = {
    ("ann", "acme.com"): "ann@acme.com",
    ("bob", "acme.com"): "bob@acme.com",
    ("cy", "initech.com"): "cy@initech.com",
}


@dataclass
class Scripted:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    text: str | None = None


class Double:
    """The provider's state: what it was asked, what it charged, what it is told to answer."""

    def __init__(self) -> None:
        self.url = ""  # where it is served
        self.lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.found: Counter[str] = Counter()  # answers with a result: what a provider bills
        self.asked: list[dict[str, Any]] = []  # each request's query or body, and its auth
        self.scripted: deque[Scripted] = deque()
        self.polls_pending = 2
        self.poll_wait: float | None = None  # seconds a pending poll answer asks to wait
        self.jobs: dict[str, dict[str, Any]] = {}
        # job id -> the input it answers for instead (a restarted provider that numbered
        # its jobs from 1 again)
        self.misroute: dict[str, dict[str, Any]] = {}
        self.expired: set[str] = set()  # jobs whose result is no longer kept: polls get 410
        self.polls_down = False  # polls answer 503 (the job stays the provider's)
        self.results_apart = False  # a done poll says only DONE: results are fetched apart
        self.charge: float | None = None  # reported in x-call-credits-spent per found person
        self.clock: Any = None  # a run's clock: each request is stamped with its time
        # (requests, seconds): /v1/find allows that many per window of the clock's time,
        # says what is left in RateLimit-Remaining / RateLimit-Reset, and answers 429 past it
        self.window: tuple[int, float] | None = None
        self.window_sends: deque[float] = deque()
        self.throttled = 0
        self.stamps: list[float] = []
        self.app = Starlette(
            routes=[
                Route("/v1/find", self.find, methods=["GET"]),
                Route("/v1/bulk", self.bulk, methods=["POST"]),
                Route("/v1/jobs", self.submit, methods=["POST"]),
                Route("/v1/jobs/{job}", self.poll, methods=["GET"]),
                Route("/v1/bulkjobs", self.submit_bulk, methods=["POST"]),
                Route("/v1/bulkjobs/{job}", self.poll_bulk, methods=["GET"]),
                Route("/v1/jobs/{job}/result", self.result, methods=["GET"]),
                Route("/v1/bulkjobs/{job}/download", self.download, methods=["GET"]),
            ]
        )

    def script(
        self, status: int, body: Any = None, headers: dict[str, str] | None = None, **kw: Any
    ) -> None:
        """The next request (of any endpoint) gets this answer."""
        with self.lock:
            self.scripted.append(Scripted(status, body, headers or {}, **kw))

    def _note(self, route: str, request: Request, asked: Any) -> Response | None:
        with self.lock:
            self.calls[route] += 1
            auth = (
                request.headers.get("x-api-key")
                or request.headers.get("authorization")
                or request.query_params.get("api_key")
            )
            self.asked.append({"route": route, "asked": asked, "auth": auth})
            if self.clock is not None:
                self.stamps.append(self.clock.now())
            scripted = self.scripted.popleft() if self.scripted else None
        if auth not in (KEY, f"Bearer {KEY}"):
            return JSONResponse({"error": "invalid api key"}, status_code=401)
        if scripted is None:
            return None
        if scripted.text is not None:
            return Response(scripted.text, scripted.status, headers=scripted.headers)
        return JSONResponse(scripted.body, scripted.status, headers=scripted.headers)

    def _person(self, params: Any) -> tuple[int, dict[str, Any]]:
        first = str(params.get("first_name", "")).lower()
        if first == "nomatch":
            return 200, {"error": True, "error_code": "NO_MATCH"}
        email = PEOPLE.get((first, str(params.get("domain", "")).lower()))
        if email is None:
            return 404, {"status": 404, "error": {"type": "not_found"}}
        status = "CATCH_ALL" if email.endswith("@initech.com") else "VALID"  # a catch-all domain
        with self.lock:
            self.found[email] += 1
        return 200, {
            "status": 200,
            "data": {"email": email, "first_name": first, "email_status": status},
        }

    def _windowed(self, count: int = 1) -> tuple[dict[str, str], Response | None]:
        """The window's headers for a request that counts ``count`` (a bulk request counted
        per record, as Prospeo's), or its 429 when the window has no room for it."""
        if self.window is None:
            return {}, None
        limit, seconds = self.window
        now = self.clock.now()
        with self.lock:
            while self.window_sends and self.window_sends[0] <= now - seconds:
                self.window_sends.popleft()
            if len(self.window_sends) + count > limit:
                self.throttled += 1
                wait = self.window_sends[0] + seconds - now
                return {}, JSONResponse(
                    {"error": "rate limited"}, 429, {"Retry-After": f"{wait:.3f}"}
                )
            self.window_sends.extend([now] * count)
            reset = self.window_sends[0] + seconds - now
            left = limit - len(self.window_sends)
        return {"RateLimit-Remaining": str(left), "RateLimit-Reset": f"{reset:.3f}"}, None

    async def find(self, request: Request) -> Response:
        params = dict(request.query_params)
        refused = self._note("find", request, params)
        if refused is not None:
            return refused
        window, throttled = self._windowed()
        if throttled is not None:
            return throttled
        status, body = self._person(params)
        headers = {"x-request-id": f"req-{self.calls['find']}", **window}
        if self.charge is not None:  # People Data Labs' header: what this call cost
            headers["x-call-credits-spent"] = str(self.charge if status == 200 else 0)
        return JSONResponse(body, status, headers=headers)

    async def bulk(self, request: Request) -> Response:
        body = await request.json()
        refused = self._note("bulk", request, body)
        if refused is not None:
            return refused
        _, throttled = self._windowed(len(body.get("requests", [])))  # counted per record
        if throttled is not None:
            return throttled
        answers = []
        for item in body.get("requests", []):
            status, answer = self._person(item.get("params", {}))
            answers.append(answer | {"status": status})
        return JSONResponse(answers)

    async def submit(self, request: Request) -> Response:
        return await self._accept("submit", request, "job", lambda body: {"input": body})

    async def submit_bulk(self, request: Request) -> Response:
        return await self._accept("submit_bulk", request, "bulk", lambda b: {"inputs": b["items"]})

    async def _accept(self, route: str, request: Request, prefix: str, kept: Any) -> Response:
        """A job submitted: ``202 {"request_id": ...}``, its body kept as ``kept`` says."""
        body = await request.json()
        refused = self._note(route, request, body)
        if refused is not None:
            return refused
        with self.lock:
            job = f"{prefix}-{len(self.jobs) + 1}"
            self.jobs[job] = {**kept(body), "polls": 0}
        return JSONResponse({"request_id": job, "success": True}, 202)

    def _polled(self, route: str, request: Request) -> tuple[str, dict[str, Any], Response | None]:
        """The job a poll asks for, counted, or the answer that refuses the poll (a wrong
        key, an unknown job, an expired result, polls down)."""
        job_id = request.path_params["job"]
        refused = self._note(route, request, job_id)
        job = self.jobs.get(job_id, {})
        if refused is None and not job:
            refused = JSONResponse({"error": "unknown request_id"}, 404)
        elif refused is None and job_id in self.expired:
            refused = JSONResponse({"error": "result expired"}, 410)
        elif refused is None and self.polls_down:
            refused = JSONResponse({"error": "busy"}, 503)
        if refused is None:
            job["polls"] += 1
        return job_id, job, refused

    async def poll_bulk(self, request: Request) -> Response:
        _, job, refused = self._polled("poll_bulk", request)
        if refused is not None:
            return refused
        if job["polls"] <= self.polls_pending:
            return JSONResponse({"status": "IN_PROGRESS"})
        if self.results_apart:
            return JSONResponse({"status": "DONE"})
        data = [self._person(item)[1].get("data") for item in job["inputs"]]
        return JSONResponse({"status": "DONE", "data": data})

    async def download(self, request: Request) -> Response:
        """A finished bulk job's results as a CSV file (NeverBounce's download): one row
        per submitted item, in order; an empty email where nothing was found."""
        job = self.jobs[request.path_params["job"]]
        self._note("download", request, request.path_params["job"])
        lines = ["first_name,email"]
        for item in job["inputs"]:
            found = self._person(item)[1].get("data") or {}
            lines.append(f"{item['first_name']},{found.get('email', '')}")
        return Response("\n".join(lines) + "\n", media_type="text/csv")

    async def result(self, request: Request) -> Response:
        job = self.jobs[request.path_params["job"]]
        self._note("result", request, request.path_params["job"])
        _, answer = self._person(job["input"])
        return JSONResponse({"data": answer.get("data")})

    async def poll(self, request: Request) -> Response:
        job_id, job, refused = self._polled("poll", request)
        if refused is not None:
            return refused
        if job["polls"] <= self.polls_pending:
            wait = {} if self.poll_wait is None else {"retry_after_seconds": self.poll_wait}
            return JSONResponse({"status": "IN_PROGRESS", **wait})
        if self.results_apart:
            return JSONResponse({"status": "DONE"})
        _, answer = self._person(self.misroute.get(job_id, job["input"]))
        return JSONResponse({"status": "DONE", "data": answer.get("data")})
