"""Durable boundaries: steps, sleeps, fetches and event waits that replay on resume.

Each boundary has a key made of the run, the scope (the play, or one row of a dataset), the
kind, the caller's key and the call's ordinal among calls with that key in that scope. The
first attempt that reaches a boundary records it; later attempts replay it. A wait that is not
over raises ``Suspension``: at play level the run suspends; inside a column only that row
waits, and the run suspends once every other row is done.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from .._arity import check_args
from .._clock import Clock
from .._json import digest, dumps, loads
from .._limits import is_amount
from .._secrets import Secret, check_stored_name, reveal
from ..errors import EventTimeout, PlayDefinitionError, ToolError
from ..store import Boundary, Store, StoreIO
from .receipts import validate_stale_after
from .scope import current_row
from .suspension import Suspension

__all__ = ["MAX_EVENT_KEY", "Boundaries", "FetchResponse", "check_event_key"]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_METHODS = SAFE_METHODS | {"POST", "PUT", "PATCH", "DELETE"}
TIMED_OUT = "timed_out"


@dataclass(frozen=True, kw_only=True)
class FetchResponse:
    ok: bool
    status: int
    status_text: str
    url: str
    headers: dict[str, str]
    text: str
    json: Any


class Boundaries:
    """The boundaries of one attempt; ``ctx.step/sleep/fetch/wait_for_event`` land here."""

    def __init__(self, *, run_id: str, store: Store, clock: Clock, foreground_sleep: float) -> None:
        self._run_id = run_id
        self._store = store
        self._io = StoreIO(store)
        self._clock = clock
        self._foreground_sleep = foreground_sleep
        self._ordinals: dict[tuple[str, str, str], int] = {}

    def key(self, kind: str, name: str, *extra: str) -> str:
        """The boundary key of the next ``kind`` call named ``name`` in the current scope."""
        row = current_row.get()
        scope = f"row:{row.dataset}:{row.row_key}" if row else "play"
        slot = (scope, kind, name)
        ordinal = self._ordinals.get(slot, 0)
        self._ordinals[slot] = ordinal + 1
        return f"{kind}:" + digest(self._run_id, scope, kind, name, str(ordinal), *extra)[:40]

    def record(self, key: str, kind: str, status: str = "completed", **fields: Any) -> Boundary:
        return Boundary(
            key=key,
            run_id=self._run_id,
            kind=kind,
            status=status,
            updated_at=self._clock.now(),
            **fields,
        )

    async def get(self, key: str) -> Boundary | None:
        return await self._io(self._store.get_boundary, key)

    async def put(self, boundary: Boundary) -> None:
        await self._io(self._store.put_boundary, boundary)

    async def step(
        self, name: str, fn: Callable[[], Any], *, stale_after: int | None = None
    ) -> Any:
        _check_name("ctx.step", name)
        check_args(fn, 0, f"ctx.step({name!r}, fn): fn", "() (a lambda: or a function)")
        stale = validate_stale_after(stale_after)
        key = self.key("step", name)
        stored = await self.get(key)
        if (
            stored is not None
            and stored.status == "completed"
            and (stale is None or self._clock.now() - stored.updated_at <= stale)
        ):  # done, and (with stale_after) no older than that: replayed
            assert stored.output is not None
            return loads(stored.output)
        value = fn()
        if inspect.isawaitable(value):
            value = await value
        try:
            output = dumps(value, what=f"ctx.step({name!r})")
        except PlayDefinitionError as exc:
            raise PlayDefinitionError(
                f"ctx.step({name!r}) returned a value that cannot be checkpointed as JSON: {exc}"
            ) from None
        await self.put(self.record(key, "step", "completed", output=output))
        return loads(output)

    async def sleep(self, seconds: float) -> None:
        if not is_amount(seconds):
            raise PlayDefinitionError(f"ctx.sleep({seconds!r}): give a number of seconds >= 0.")
        _check_longest_wait(seconds, f"ctx.sleep({seconds!r})")
        key = self.key("sleep", "", str(round(seconds, 3)))
        clock = self._clock
        stored = await self.get(key)
        if stored is not None and stored.status == "completed":
            return
        if stored is None:
            stored = self.record(key, "sleep", "waiting", wake_at=clock.now() + seconds)
            await self.put(stored)
        assert stored.wake_at is not None
        remaining = stored.wake_at - clock.now()
        if remaining > self._foreground_sleep:
            raise Suspension(wake_at=stored.wake_at)
        if remaining > 0:
            await clock.sleep(remaining)
        await self.put(self.record(key, "sleep", "completed", wake_at=stored.wake_at))

    async def wait_for_event(self, name: str, *, timeout: float | None = None) -> Any:  # noqa: ASYNC109 - the API names it
        _check_name("ctx.wait_for_event", name)
        check_event_key(name, "ctx.wait_for_event")
        if timeout is not None and not is_amount(timeout, positive=True):
            raise PlayDefinitionError(
                f"ctx.wait_for_event({name!r}, timeout={timeout!r}): give seconds > 0 or None."
            )
        if timeout is not None:
            _check_longest_wait(timeout, f"ctx.wait_for_event({name!r}, timeout={timeout!r})")
        key = self.key("event", name)
        clock = self._clock
        stored = await self.get(key)
        if stored is not None and stored.status == "completed":
            assert stored.output is not None
            return loads(stored.output)
        if stored is not None and stored.status == TIMED_OUT:
            raise EventTimeout(name, timeout or 0.0)
        if stored is None:
            deadline = None if timeout is None else clock.now() + timeout
            stored = self.record(key, "event", "waiting", wake_at=deadline)
            await self.put(stored)
        payload = await self._io(self._store.deliver_event, name, stored)
        if payload is not None:
            return loads(payload)
        if stored.wake_at is not None and clock.now() >= stored.wake_at:
            await self.put(self.record(key, "event", TIMED_OUT, wake_at=stored.wake_at))
            raise EventTimeout(name, timeout or 0.0)
        raise Suspension(wake_at=stored.wake_at, events=[name])

    async def fetch(
        self,
        name: str,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str | Secret] | None = None,
        json: Any = None,
        data: Any = None,
    ) -> FetchResponse:
        _check_name("ctx.fetch", name)
        if not isinstance(method, str) or method.upper() not in _METHODS:
            raise PlayDefinitionError(
                f"ctx.fetch({name!r}, method={method!r}): one of {', '.join(sorted(_METHODS))}."
            )
        method = method.upper()
        if current_row.get() is not None:
            raise PlayDefinitionError(
                f"ctx.fetch({name!r}) must run outside a column; inside one, call a tool "
                "(ctx.tool) so the requests are batched, rate-limited and checkpointed."
            )
        headers = _headers(name, headers)
        if method not in SAFE_METHODS and not any(
            h.lower() in ("idempotency-key", "x-idempotency-key") for h in headers
        ):
            raise PlayDefinitionError(
                f"ctx.fetch({method} {url}) needs an Idempotency-Key header. A durable play can "
                "replay after waits and retries; add the header, or wrap the side effect in a tool."
            )
        body = dumps({"json": json, "data": data}, what=f"The body of ctx.fetch({name!r})")
        key = self.key("fetch", name, method, url, body.decode())
        stored = await self.get(key)
        if stored is None or stored.status != "completed" or stored.output is None:
            # a secret in a header goes to the server only: the key and the record hold none
            response = await _request(name, method, url, reveal(headers), json, data)
            record = {
                "ok": response.is_success,
                "status": response.status_code,
                "status_text": response.reason_phrase,
                "url": str(response.url),
                "headers": dict(response.headers),
                "text": response.text,
            }
            output = dumps(record, what=f"The response of ctx.fetch({name!r})")
            await self.put(self.record(key, "fetch", "completed", output=output))
        else:
            output = stored.output
        saved = loads(output)
        try:
            parsed = loads(saved["text"]) if saved["text"] else None
        except ValueError:
            parsed = None
        return FetchResponse(**saved, json=parsed)


def _headers(name: str, headers: Mapping[str, str | Secret] | None) -> dict[str, str | Secret]:
    """The request headers of ``ctx.fetch``, checked: names are text, values text or a
    ``Secret`` (an API key read with ``ctx.secrets.get``)."""
    checked = dict(headers or {})
    for header, value in checked.items():
        if not isinstance(header, str) or not isinstance(value, str | Secret):
            raise PlayDefinitionError(
                f"ctx.fetch({name!r}): the header {header!r} must be text with a text value or "
                f"a secret (ctx.secrets.get(...)), not {type(value).__name__}."
            )
    return checked


async def _request(
    name: str, method: str, url: str, headers: dict[str, str], json: Any, data: Any
) -> httpx.Response:
    try:
        async with httpx.AsyncClient(timeout=30.0) as client:
            return await client.request(method, url, headers=headers, json=json, data=data)
    except httpx.HTTPError as exc:
        raise ToolError(
            "ctx.fetch",
            f"{name}: {method} {url} failed: {type(exc).__name__}: {exc}",
            code="fetch_error",
        ) from None


MAX_EVENT_KEY = 1000  # characters: a key is stored, indexed, shown and typed by people


def check_event_key(key: str, what: str) -> None:
    check_stored_name(key, f"The key of {what}")  # a NUL no wait could ever take
    if len(key) > MAX_EVENT_KEY:
        raise PlayDefinitionError(
            f"{what}: the event key {key[:40]!r}... is {len(key):,} characters; give one of at "
            f"most {MAX_EVENT_KEY} (an id such as 'approve:42', not a document: put that in "
            "the payload)."
        )


def _check_name(what: str, name: Any) -> None:
    if not isinstance(name, str) or not name:
        raise PlayDefinitionError(f"{what} needs a non-empty key as its first argument.")
    check_stored_name(name, f"The key of {what}")  # keys are stored, shown and waited for


LONGEST_WAIT = 366 * 24 * 3600.0  # a year: past it, a wake time no display or worker can use


def _check_longest_wait(seconds: float, what: str) -> None:
    if seconds > LONGEST_WAIT:
        raise PlayDefinitionError(
            f"{what}: at most a year ({LONGEST_WAIT:,.0f} seconds). For a later run, "
            "schedule it (pl.schedule, `playline schedule add`)."
        )
