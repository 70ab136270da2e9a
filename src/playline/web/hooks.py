"""`playline serve`'s app: signed webhooks that queue runs or send events.

Routes::

    POST /hooks/{name}   a delivery: 202 {"run_id", "duplicate"} or {"event", "duplicate"}
    GET  /healthz        200 {"status": "ok", "hooks": <how many>}

Neither route names the hooks to a sender nobody has checked yet: an unknown hook is a bare
404 (this server's log lists the hooks it serves), and health says how many it serves.

A delivery is checked in this order, and a refused one writes nothing: an unknown hook 404;
a body over the hook's ``max_body`` 413 (its Content-Length first, then counted as it is read,
so a body that lies about its length or comes in chunks is cut off too); a missing, wrong or
old signature 401 (the reason is logged here, the sender only learns "invalid signature");
a body that is not JSON 400; a play hook's delivery without a ``Playline-Delivery`` id 400.
The signature covers the delivery id (``triggers._signing``), so a signed request replayed
with another id is refused 401, and one replayed as it was is the duplicate of its delivery.
Then a play hook queues its run (``queue_run``; the run id comes from the hook and the
delivery, so a retried delivery is a duplicate) and an event hook sends its event; both answer
202 at once. No play code runs here: a worker starts the queued run. Store calls run in a
thread, so a slow store never holds up the other requests.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import playline as pl

from .._clock import Clock, SystemClock
from ..errors import PlayDefinitionError, PlaylineError
from ..store import Store
from ..triggers import DELIVERY_HEADER, SIGNATURE_HEADER, BadSignature, queue_run, verify
from ..triggers._hooks import BadPayload, Hook

__all__ = ["HooksConfig", "create_hooks_app", "serve_hooks"]

log = logging.getLogger("playline.hooks")


@dataclass(frozen=True)
class _Served:
    hook: Hook
    secret: str = field(repr=False)
    source: dict[str, str] | None


@dataclass
class HooksConfig:
    """What `playline serve` answers: these hooks, queueing into (or sending events through)
    ``store``, checking timestamps against ``clock``."""

    store: Store
    hooks: Sequence[Hook]
    clock: Clock = field(default_factory=SystemClock)


def create_hooks_app(config: HooksConfig) -> Starlette:
    """The app; reads every hook's secret first, so a missing one stops it from being made
    (a PlayDefinitionError naming the secret and its hook)."""
    served: dict[str, _Served] = {}
    for hook in config.hooks:
        if hook.name in served:
            raise PlayDefinitionError(
                f"Two hooks are named {hook.name!r}: /hooks/{hook.name} can lead to one only."
            )
        secret = hook.read_secret().reveal()
        served[hook.name] = _Served(hook=hook, secret=secret, source=hook.source())

    async def receive(request: Request) -> Response:
        name = request.path_params["name"]
        found = served.get(name)
        if found is None:  # the sender is not known yet: it learns no other hook's name
            client = request.client.host if request.client else "?"
            known = ", ".join(sorted(served)) or "none"
            log.warning("no hook named %r (a request from %s); hooks: %s", name, client, known)
            return _error(404, "No such hook.")
        return await _deliver(config, found, request)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "hooks": len(served)})

    return Starlette(
        routes=[
            Route("/hooks/{name}", receive, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
        ]
    )


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status)


def _refused(hook: Hook, request: Request, why: str) -> None:
    client = request.client.host if request.client else "?"
    log.warning("hook %s: refused a request from %s: %s", hook.name, client, why)


async def _deliver(config: HooksConfig, served: _Served, request: Request) -> Response:
    hook = served.hook
    body = await _body(request, hook.max_body)
    if isinstance(body, Response):
        _refused(hook, request, f"answered {body.status_code} ({bytes(body.body).decode()})")
        return body
    sent_as = request.headers.get(DELIVERY_HEADER) or ""
    try:
        verify(
            served.secret,
            body,
            request.headers.get(SIGNATURE_HEADER),
            delivery=sent_as,
            now=config.clock.now(),
            tolerance=hook.tolerance,
        )
    except BadSignature as exc:
        _refused(hook, request, str(exc))
        return _error(401, "invalid signature")
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        _refused(hook, request, f"the body is not JSON ({exc})")
        return _error(400, f"The body is not JSON ({exc}); send a JSON document.")
    delivery = sent_as.strip()
    if hook.play is not None:
        if not delivery:
            _refused(hook, request, f"no {DELIVERY_HEADER} header")
            return _error(
                400,
                f"No {DELIVERY_HEADER} header: give each delivery an id (the same on a retry), "
                "so that it starts one run however often it is sent.",
            )
        return await _queue(config, served, payload, delivery)
    return await _send(config, hook, payload, delivery)


async def _body(request: Request, limit: int) -> bytes | Response:
    """The raw body, or the response refusing it: over ``limit`` bytes it is not read on."""
    too_large = _error(413, f"The body is over this hook's limit of {limit} bytes.")
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            return _error(400, f"Content-Length {declared!r} is not a number of bytes.")
        if int(declared) > limit:
            return too_large
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                return too_large
            chunks.append(chunk)
    except ClientDisconnect:
        return _error(400, "The body was cut short: the sender disconnected.")
    return b"".join(chunks)


def _shown(delivery: str) -> str:
    """A delivery id as the log shows it: as its sender wrote it in UTF-8 (HTTP hands a
    header over as Latin-1), and at most 80 characters."""
    try:
        text = delivery.encode("latin-1").decode("utf-8")
    except UnicodeError:
        text = delivery
    return text if len(text) <= 80 else f"{text[:77]}..."


async def _queue(config: HooksConfig, served: _Served, payload: Any, delivery: str) -> Response:
    hook = served.hook
    assert hook.play is not None
    if not isinstance(payload, dict):  # a play's input is an object, as on the command line
        log.warning(
            "hook %s: delivery %s not queued: its body is %s, not a JSON object",
            hook.name, _shown(delivery), type(payload).__name__,
        )  # fmt: skip
        return _error(
            400,
            "The body must be a JSON object (it becomes the play's input), not a "
            f"{_JSON_KIND.get(type(payload), type(payload).__name__)}.",
        )
    run_id = hook.run_id(delivery)

    def queue() -> bool:
        return queue_run(
            config.store,
            run_id=run_id,
            play=hook.play.name if hook.play else "",
            input=payload,
            origin={"kind": "hook", "name": hook.name, "delivery": delivery},
            source=served.source,
            clock=config.clock,
        )

    try:
        fresh = await anyio.to_thread.run_sync(queue)
    except PlayDefinitionError as exc:  # a body the store cannot keep
        log.warning("hook %s: delivery %s not queued: %s", hook.name, _shown(delivery), exc)
        return _error(400, f"The body cannot be a run's input: {exc}")
    log.info(
        "hook %s: delivery %s %s run %s",
        hook.name,
        _shown(delivery),
        "queued" if fresh else "was queued before as",
        run_id,
    )
    return JSONResponse({"run_id": run_id, "duplicate": not fresh}, status_code=202)


_JSON_KIND = {
    list: "list",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


async def _send(config: HooksConfig, hook: Hook, payload: Any, delivery: str) -> Response:
    def send() -> tuple[str, bool]:
        key = hook.event_key(payload)
        return key, pl.send_event(key, payload, store=config.store)

    shown = _shown(delivery or "-")
    try:
        key, fresh = await anyio.to_thread.run_sync(send)
    except BadPayload as exc:
        log.warning("hook %s: delivery %s sent no event: %s", hook.name, shown, exc)
        return _error(400, f"No event key in this body: {exc}.")
    except PlayDefinitionError as exc:
        log.warning("hook %s: delivery %s sent no event: %s", hook.name, shown, exc)
        return _error(400, f"The body cannot be an event's payload: {exc}")
    except PlaylineError as exc:  # recorded, but a Temporal run waiting for it was not told
        log.warning("hook %s: %s", hook.name, exc)
        return _error(503, str(exc))
    log.info("hook %s: event %s %s", hook.name, key, "sent" if fresh else "was sent before")
    return JSONResponse({"event": key, "duplicate": not fresh}, status_code=202)


def serve_hooks(app: Starlette, sock: socket.socket) -> None:
    """Serve ``app`` on ``sock`` until Ctrl-C or SIGTERM (uvicorn, as `playline ui`), then
    return: both end a server normally (uvicorn shuts down, then raises the signal it caught
    again; here a SIGTERM, like a SIGINT, is a KeyboardInterrupt, caught)."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main else None
    try:
        _server(app).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _server(app: Starlette) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        loop="asyncio",
        http="h11",
        lifespan="off",
        access_log=False,
        log_level="warning",
        timeout_graceful_shutdown=2,
    )
    return uvicorn.Server(config)
