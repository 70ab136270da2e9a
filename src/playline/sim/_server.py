"""The HTTP face of the simulator: the gateway API and the control plane, as a Starlette app.

Gateway (``Authorization: Bearer <token>`` on execute):

- ``POST /api/v2/integrations/{tool_id}/execute`` with ``{"payload": {...}}``
- ``GET /api/v2/integrations`` and ``GET /api/v2/integrations/{tool_id}`` (metadata)

Control plane (no auth, loopback test aid): ``GET /__ledger``, ``POST /__reset``,
``GET|POST /__faults``, ``GET /__world/people?limit=N&offset=M``, ``GET /__world/companies``.

An execute request goes: auth (401) -> tool (404) -> payload (400) -> rate bucket (429) ->
counted as a call -> down (503) -> latency -> injected failure (5xx) -> answer and charge.
Injected failures strike before the work for retry-safe tools and *after* it (the charge
stands) for tools that are not, which is why retrying those blindly pays twice.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ._catalog import ToolSpec
from ._faults import FaultError
from ._inputs import InvalidInput, canonical_json, parse_bulk, parse_single
from ._limits import retry_after_header
from ._providers import Answer, answer
from ._state import SimState

_JSON = "application/json"


def _reply(
    body: Any, rid: str, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    hdrs = {"x-request-id": rid}
    if headers:
        hdrs.update(headers)
    return Response(orjson.dumps(body), status_code=status, media_type=_JSON, headers=hdrs)


def _error(
    status: int,
    code: str,
    message: str,
    rid: str,
    *,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> Response:
    body = {"message": message, "code": code, "request_id": rid, **extra}
    return _reply(body, rid, status, headers)


_UNAUTHORIZED = "missing or wrong token; send 'Authorization: Bearer <token>'"


def _unknown_tool(tool_id: str, rid: str) -> Response:
    message = f"no tool {tool_id!r}; GET /api/v2/integrations lists them"
    return _error(404, "unknown_tool", message, rid)


def _ok(spec: ToolSpec, status: str, result: Any, credits_milli: int, rid: str) -> Response:
    metadata = {"tool": spec.id, "credits": credits_milli / 1000, "request_id": rid}
    return _reply({"status": status, "result": result, "_metadata": metadata}, rid)


def build_app(state: SimState) -> Starlette:
    """The Starlette app serving ``state``."""

    def charge(spec: ToolSpec, fields: dict[str, str], ans: Answer) -> int:
        if spec.cost.charge == "on_hit" and not ans.hit:
            return 0
        milli = spec.cost.milli
        state.ledger.charge(spec.base, canonical_json(fields), milli)
        return milli

    async def execute(request: Request) -> Response:
        rid = state.request_id()
        if request.headers.get("authorization") != state.authorization:
            return _error(401, "unauthorized", _UNAUTHORIZED, rid)
        tool_id = request.path_params["tool_id"]
        spec = state.catalog.get(tool_id)
        if spec is None:
            return _unknown_tool(tool_id, rid)
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("payload"), dict):
            return _error(400, "invalid_input", 'body must be JSON {"payload": {...}}', rid)
        payload = body["payload"]
        try:
            if spec.kind == "bulk":
                items = parse_bulk(spec, state.catalog[spec.base], payload)
            else:
                items = [parse_single(spec, payload)]
        except InvalidInput as exc:
            return _error(400, exc.code, str(exc), rid)

        idempotency = request.headers.get("idempotency-key")
        if idempotency and (tool_id, idempotency) in state.replies:
            # Like real providers: the same request with the same key is answered again
            # from the first answer, without doing (or charging) the work twice.
            state.ledger.replay(tool_id)
            return Response(
                state.replies[(tool_id, idempotency)],
                media_type=_JSON,
                headers={"x-request-id": rid, "idempotent-replayed": "true"},
            )

        wait = state.bucket(spec).take()
        if wait > 0.0:
            state.ledger.reject(tool_id)
            return _error(
                429,
                "rate_limited",
                f"{spec.bucket_id} allows {state.bucket(spec).per_second:g} requests/s; "
                "retry after the Retry-After seconds",
                rid,
                retry_after_ms=max(1, round(wait * 1000)),
                headers={"Retry-After": retry_after_header(wait)},
            )
        state.ledger.call(tool_id)
        if spec.kind == "bulk":
            state.ledger.bulk_items(tool_id, len(items))
        fault = state.faults.for_tool(tool_id)
        if fault.down:
            state.ledger.error(tool_id)
            return _error(503, "tool_down", f"{tool_id} is down; try again later", rid)
        failing = state.failure(spec, fault)

        delay = state.latency(fault, len(items) if spec.kind == "bulk" else 0)
        if delay:
            state.ledger.enter(tool_id)
            try:
                await asyncio.sleep(delay)
            finally:
                state.ledger.leave(tool_id)
        if failing is not None and spec.retry_safe:
            state.ledger.error(tool_id)
            return _error(failing, "transient_error", f"{tool_id} failed; safe to retry", rid)

        response = _work(spec, items, rid)
        if idempotency and response.status_code == 200 and failing is None:
            state.replies[(tool_id, idempotency)] = bytes(response.body)
        if failing is not None:
            state.ledger.error(tool_id)
            return _error(
                failing, "transient_error", f"{tool_id} failed after accepting the request", rid
            )
        return response

    def _work(spec: ToolSpec, items: list[dict[str, str]], rid: str) -> Response:
        if spec.kind == "poll":
            job = state.jobs.get(items[0]["job_id"])
            if job is None:
                return _error(404, "unknown_job", f"no job {items[0]['job_id']!r}", rid)
            done = job.poll()
            if done is None:
                return _ok(spec, "pending", {"job_id": job.id}, 0, rid)
            return _ok(spec, done.status, done.result, 0, rid)
        if spec.kind == "bulk":
            base = state.catalog[spec.base]
            answers = [answer(base.id, state.world, fields) for fields in items]
            milli = sum(charge(base, f, a) for f, a in zip(items, answers, strict=True))
            results = [a.result for a in answers]
            return _ok(spec, "completed", {"results": results}, milli, rid)
        ans = answer(spec.id, state.world, items[0])
        milli = charge(spec, items[0], ans)
        if spec.is_async:
            job = state.jobs.submit(spec.id, ans)
            return _ok(spec, "pending", {"job_id": job.id}, milli, rid)
        return _ok(spec, ans.status, ans.result, milli, rid)

    def _raw(body: bytes) -> Response:
        rid = state.request_id()
        return Response(body, media_type=_JSON, headers={"x-request-id": rid})

    async def list_tools(request: Request) -> Response:
        return _raw(state.catalog_json)

    async def get_tool(request: Request) -> Response:
        tool_id = request.path_params["tool_id"]
        meta = state.meta_json.get(tool_id)
        if meta is None:
            return _unknown_tool(tool_id, state.request_id())
        return _raw(meta)

    async def ledger(request: Request) -> Response:
        return _raw(orjson.dumps(state.ledger.snapshot()))

    async def reset(request: Request) -> Response:
        state.reset()
        return _raw(b'{"ok":true}')

    async def faults(request: Request) -> Response:
        if request.method == "POST":
            rid = state.request_id()
            try:
                doc = orjson.loads(await request.body())
                return _reply(state.update_faults(doc), rid)
            except orjson.JSONDecodeError:
                return _error(400, "invalid_input", "faults must be a JSON object", rid)
            except FaultError as exc:
                return _error(400 if exc.code == "invalid_input" else 404, exc.code, str(exc), rid)
        return _raw(orjson.dumps(state.faults.snapshot()))

    def _page(request: Request, rows: list[Any], name: str) -> Response:
        try:
            limit = int(request.query_params.get("limit", "100"))
            offset = int(request.query_params.get("offset", "0"))
        except ValueError:
            rid = state.request_id()
            return _error(400, "invalid_input", "limit and offset must be integers", rid)
        page = rows[max(0, offset) : max(0, offset) + max(0, limit)]
        body = {name: [row.public() for row in page], "total": len(rows)}
        return _raw(orjson.dumps(body))

    async def people(request: Request) -> Response:
        return _page(request, state.world.people, "people")

    async def companies(request: Request) -> Response:
        return _page(request, state.world.companies, "companies")

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        code = {404: "not_found", 405: "method_not_allowed"}.get(status, "internal_error")
        return _error(
            status, code, f"{request.method} {request.url.path}: {exc}", state.request_id()
        )

    routes = [
        Route("/api/v2/integrations/{tool_id}/execute", execute, methods=["POST"]),
        Route("/api/v2/integrations", list_tools, methods=["GET"]),
        Route("/api/v2/integrations/{tool_id}", get_tool, methods=["GET"]),
        Route("/__ledger", ledger, methods=["GET"]),
        Route("/__reset", reset, methods=["POST"]),
        Route("/__faults", faults, methods=["GET", "POST"]),
        Route("/__world/people", people, methods=["GET"]),
        Route("/__world/companies", companies, methods=["GET"]),
    ]
    return Starlette(
        routes=routes,
        exception_handlers={HTTPException: http_error, Exception: http_error},
    )
