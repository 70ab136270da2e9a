"""The HTTP face of the simulator: the gateway API and the control plane, as a Starlette app.

Gateway (``Authorization: Bearer <token>`` on execute):

- ``POST /api/v2/integrations/{tool_id}/execute`` with ``{"payload": {...}}``; a bulk
  operation takes ``{"payload": {"items": [...], "idempotency_keys": ["k1", ...]}}`` (keys
  optional, aligned with items). Any request may carry an ``Idempotency-Key`` header.
- ``GET /api/v2/integrations`` and ``GET /api/v2/integrations/{tool_id}`` (metadata, with the
  rate and idempotency in force: ``"idempotency": {"header": bool, "bulk_items": bool}``)

Control plane (no auth, loopback test aid):

- ``GET /__ledger``: ``calls``, ``rejected`` (429 rate limited), ``throttled`` (429
  throttled), ``conflicts`` (409 key in progress), ``errors``, ``items`` (bulk items sent),
  ``charges``, ``credits``, ``duplicate_charges``, ``replayed`` (whole requests answered
  from a header key), ``replayed_items`` (bulk items answered from their keys), ``inputs``,
  ``inflight`` (requests being worked on now), ``max_inflight``; per tool or operation id
  except charges and inputs (per base tool).
- ``POST /__reset``: forget ledger, buckets, jobs, keys and faults.
- ``GET|POST /__faults``: see ``_faults``.
- ``POST /__jobs/forget``: drop every async job (a provider restarted without persistence);
  answers ``{"ok": true, "forgotten": n}``. Polls of those jobs answer 404 ``unknown_job``;
  keys and the ledger stay.
- ``GET /__world/people?limit=N&offset=M``, ``GET /__world/companies``.

An execute request goes: auth (401) -> tool (404) -> payload and keys (400) -> a key in
progress (409) -> a key done: replay, or 422 if it was for another input -> rate bucket
(429 ``rate_limited``) -> throttle fault (429 ``throttled``) -> counted as a call -> down
(503) -> latency and ``hold`` -> injected failure (5xx) -> work, charge, remember keys ->
answer.
Injected failures strike before the work for retry-safe tools and *after* it (the charge
stands, and so do the keys) for tools that are not, which is why retrying those without a
key pays twice.

Keys (see ``_idempotency``) are remembered per base tool: the header key of a single call
(or of a bulk call without item keys: the whole request) and the item keys of a bulk call
share one memory. With item keys, a bulk call's header key is ignored; the items already
done are answered from their first answers, uncharged, the others worked, and
``_metadata.replayed_items`` lists the replayed indexes (``_metadata.credits`` is what this
request charged). A replayed whole request is the first answer again, with its
``_metadata`` and an ``idempotent-replayed: true`` header (also on a bulk call whose items
were all done). Polls ignore keys: they are reads.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ._catalog import ToolSpec
from ._doubles import mounts
from ._faults import FaultError
from ._idempotency import Done, header_key, item_keys
from ._inputs import Fields, InvalidInput, canonical_json, parse_bulk, parse_single
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


def _throttled(spec: ToolSpec, retry_after_ms: float | None, rid: str) -> Response:
    if retry_after_ms is None:
        # Real providers' 429s often name no cause and no wait: the client must pace itself.
        return _error(429, "throttled", "too many requests; try again later", rid)
    return _error(
        429,
        "throttled",
        f"{spec.id} is throttling requests; retry after the Retry-After seconds",
        rid,
        retry_after_ms=round(retry_after_ms),
        headers={"Retry-After": retry_after_header(retry_after_ms / 1000)},
    )


_UNAUTHORIZED = "missing or wrong token; send 'Authorization: Bearer <token>'"


def _unknown_tool(tool_id: str, rid: str) -> Response:
    message = f"no tool {tool_id!r}; GET /api/v2/integrations lists them"
    return _error(404, "unknown_tool", message, rid)


def _ok(
    spec: ToolSpec,
    status: str,
    result: Any,
    credits_milli: int,
    rid: str,
    *,
    first_rid: str | None = None,
    replayed: bool = False,
    **meta: Any,
) -> Response:
    metadata = {
        "tool": spec.id,
        "credits": credits_milli / 1000,
        "request_id": first_rid or rid,
        **meta,
    }
    headers = {"idempotent-replayed": "true"} if replayed else None
    return _reply({"status": status, "result": result, "_metadata": metadata}, rid, 200, headers)


def _asked(items: list[Fields], whole_bulk: bool) -> str:
    """What a key names: one input, or a whole bulk's items in order."""
    if whole_bulk:
        return orjson.dumps(items, option=orjson.OPT_SORT_KEYS).decode()
    return canonical_json(items[0])


def _reused(key: str, tool: str, rid: str) -> Response:
    message = (
        f"idempotency key {key!r} was first used for a different request to {tool}; "
        "send a new key with a new input"
    )
    return _error(422, "idempotency_key_reused", message, rid)


@dataclass(slots=True)
class _Keys:
    """The keys one execute request carries, as the tool honours them."""

    header: str | None
    items: list[str] | None

    @property
    def all(self) -> list[str]:
        return self.items if self.items is not None else [self.header] if self.header else []


def build_app(state: SimState) -> Starlette:
    """The Starlette app serving ``state``."""

    def charge(spec: ToolSpec, fields: dict[str, str], ans: Answer) -> int:
        if spec.cost.charge == "on_hit" and not ans.hit:
            return 0
        milli = spec.cost.milli
        state.ledger.charge(spec.base, canonical_json(fields), milli)
        return milli

    def keys_of(spec: ToolSpec, request: Request, payload: dict[str, Any], n: int) -> _Keys:
        header = header_key(request.headers.get("idempotency-key"))
        items = item_keys(payload, n) if spec.kind == "bulk" else None
        if spec.kind == "poll" or state.faults.for_tool(spec.id).no_idempotency:
            return _Keys(None, None)
        return _Keys(None if items is not None else header, items)

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
            keys = keys_of(spec, request, payload, len(items))
        except InvalidInput as exc:
            return _error(400, exc.code, str(exc), rid)

        busy = state.keys.busy(spec.base, keys.all)
        if busy is not None:
            state.ledger.conflict(tool_id)
            return _error(
                409,
                "idempotency_in_progress",
                f"a request with idempotency key {busy!r} is still being worked on; "
                "retry after the Retry-After seconds to get its answer",
                rid,
                retry_after_ms=1000,
                headers={"Retry-After": "1"},
            )
        replayed: dict[int, Done] = {}
        if keys.header is not None:
            done = state.keys.done(spec.base, keys.header)
            if done is not None:
                # Like real providers: the same request with the same key is answered again
                # from the first answer, without doing (or charging) the work twice.
                whole = spec.kind == "bulk"
                if done.whole_bulk != whole or done.request != _asked(items, whole):
                    return _reused(keys.header, spec.base, rid)
                state.ledger.replay(tool_id)
                return _ok(
                    spec,
                    done.status,
                    done.result,
                    done.credits_milli,
                    rid,
                    first_rid=done.request_id,
                    replayed=True,
                )
        elif keys.items is not None:
            for i, (key, fields) in enumerate(zip(keys.items, items, strict=True)):
                done = state.keys.done(spec.base, key)
                if done is None:
                    continue
                if done.whole_bulk or done.request != _asked([fields], False):
                    return _reused(key, spec.base, rid)
                replayed[i] = done
            if items and len(replayed) == len(items):
                state.ledger.replay_items(tool_id, len(items))
                results = [replayed[i].result for i in range(len(items))]
                return _ok(
                    spec,
                    "completed",
                    {"results": results},
                    0,
                    rid,
                    replayed=True,
                    replayed_items=list(range(len(items))),
                )

        fresh = [k for i, k in enumerate(keys.all) if i not in replayed]
        with state.keys.claim(spec.base, fresh):
            return await _worked(spec, items, keys, replayed, rid)

    async def _worked(
        spec: ToolSpec, items: list[Fields], keys: _Keys, replayed: dict[int, Done], rid: str
    ) -> Response:
        tool_id = spec.id
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
        fault = state.faults.for_tool(tool_id)
        if state.throttle(spec, fault):
            state.ledger.throttle(tool_id)
            return _throttled(spec, fault.throttle_retry_after_ms, rid)
        state.ledger.call(tool_id)
        if spec.kind == "bulk":
            state.ledger.bulk_items(tool_id, len(items))
        if fault.down:
            state.ledger.error(tool_id)
            return _error(503, "tool_down", f"{tool_id} is down; try again later", rid)
        failing = state.failure(spec, fault)

        delay = state.latency(fault, len(items) if spec.kind == "bulk" else 0)
        if delay or fault.hold:
            ledger = state.ledger  # a reset meanwhile starts a new one
            ledger.enter(tool_id)
            try:
                await asyncio.sleep(delay)
                await state.held(spec)
            finally:
                ledger.leave(tool_id)
        if failing is not None and spec.retry_safe:
            state.ledger.error(tool_id)
            return _error(failing, "transient_error", f"{tool_id} failed; safe to retry", rid)

        response = _work(spec, items, keys, replayed, rid)
        if failing is not None:
            # The work is done and charged, and its keys remembered: a client that re-sends
            # this in-doubt request with its key gets the real answer, not a second charge.
            state.ledger.error(tool_id)
            return _error(
                failing, "transient_error", f"{tool_id} failed after accepting the request", rid
            )
        return response

    def _work(
        spec: ToolSpec, items: list[Fields], keys: _Keys, replayed: dict[int, Done], rid: str
    ) -> Response:
        if spec.kind == "poll":
            job = state.jobs.get(items[0]["job_id"])
            if job is None:
                return _error(404, "unknown_job", f"no job {items[0]['job_id']!r}", rid)
            done = job.poll()
            if done is None:
                return _ok(spec, "pending", {"job_id": job.id}, 0, rid)
            return _ok(spec, done.status, done.result, 0, rid)
        if spec.kind == "bulk":
            return _work_bulk(spec, items, keys, replayed, rid)
        ans = answer(spec.id, state.world, items[0])
        milli = charge(spec, items[0], ans)
        status: str = ans.status
        result = ans.result
        if spec.is_async:
            job = state.jobs.submit(spec.id, ans)
            status, result = "pending", {"job_id": job.id}
        if keys.header is not None:
            state.keys.remember(
                spec.base,
                keys.header,
                Done(
                    request=_asked(items, False),
                    whole_bulk=False,
                    status=status,
                    result=result,
                    credits_milli=milli,
                    request_id=rid,
                ),
            )
        return _ok(spec, status, result, milli, rid)

    def _work_bulk(
        spec: ToolSpec, items: list[Fields], keys: _Keys, replayed: dict[int, Done], rid: str
    ) -> Response:
        base = state.catalog[spec.base]
        results: list[Any] = []
        total = 0
        for i, fields in enumerate(items):
            if i in replayed:
                results.append(replayed[i].result)
                continue
            ans = answer(base.id, state.world, fields)
            milli = charge(base, fields, ans)
            total += milli
            results.append(ans.result)
            if keys.items is not None:
                done = Done(
                    request=_asked([fields], False),
                    whole_bulk=False,
                    status=ans.status,
                    result=ans.result,
                    credits_milli=milli,
                    request_id=rid,
                )
                state.keys.remember(spec.base, keys.items[i], done)
        result = {"results": results}
        if keys.header is not None:
            whole = Done(
                request=_asked(items, True),
                whole_bulk=True,
                status="completed",
                result=result,
                credits_milli=total,
                request_id=rid,
            )
            state.keys.remember(spec.base, keys.header, whole)
        if keys.items is None:
            return _ok(spec, "completed", result, total, rid)
        if replayed:
            state.ledger.replay_items(spec.id, len(replayed))
        return _ok(spec, "completed", result, total, rid, replayed_items=sorted(replayed))

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

    async def forget_jobs(request: Request) -> Response:
        return _raw(orjson.dumps({"ok": True, "forgotten": state.forget_jobs()}))

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
        Route("/__jobs/forget", forget_jobs, methods=["POST"]),
        Route("/__faults", faults, methods=["GET", "POST"]),
        Route("/__world/people", people, methods=["GET"]),
        Route("/__world/companies", companies, methods=["GET"]),
        *mounts(state.doubles),
    ]
    return Starlette(
        routes=routes,
        exception_handlers={HTTPException: http_error, Exception: http_error},
    )
