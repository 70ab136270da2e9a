"""Durable boundaries: steps, sleeps, fetches and event waits that replay on resume.

Each boundary has a key made of the run, the scope (the play, or one row of a dataset), the
kind, the caller's key and the call's ordinal among calls with that key in that scope. The
first attempt that reaches a boundary records it; later attempts replay it. A wait that is not
over raises ``Suspension``: at play level the run suspends; inside a column only that row
waits, and the run suspends once every other row is done.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from ._json import digest, dumps, loads
from ._receipts import stale_bucket, validate_stale_after
from ._scope import current_row
from .errors import EventTimeout, PlayDefinitionError, ToolError
from .store import Boundary

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["Boundaries", "FetchResponse", "Suspension"]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
TIMED_OUT = "timed_out"


class Suspension(BaseException):
    """A run or row must wait: until ``wake_at`` (seconds since the epoch), or for events.

    A BaseException, so a play's ``except Exception`` does not swallow it.
    """

    def __init__(self, *, wake_at: float | None = None, events: Sequence[str] = ()) -> None:
        self.wake_at = wake_at
        self.events = tuple(events)
        super().__init__(self.describe())

    @classmethod
    def merge(cls, waits: Sequence[Suspension]) -> Suspension:
        times = [w.wake_at for w in waits if w.wake_at is not None]
        events = dict.fromkeys(e for w in waits for e in w.events)
        return cls(wake_at=min(times) if times else None, events=list(events))

    def waiting(self) -> dict[str, Any]:
        return {"wake_at": self.wake_at, "events": list(self.events)}

    def describe(self) -> str:
        parts = []
        if self.events:
            parts.append(f"events {', '.join(self.events)}")
        if self.wake_at is not None:
            parts.append(f"until {self.wake_at:.0f}")
        return "waiting for " + " or ".join(parts) if parts else "waiting"


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

    def __init__(self, runtime: Runtime, *, foreground_sleep: float) -> None:
        self._rt = runtime
        self._foreground_sleep = foreground_sleep
        self._ordinals: dict[tuple[str, str, str], int] = {}

    def key(self, kind: str, name: str, *extra: str) -> str:
        """The boundary key of the next ``kind`` call named ``name`` in the current scope."""
        row = current_row.get()
        scope = f"row:{row.dataset}:{row.row_key}" if row else "play"
        slot = (scope, kind, name)
        ordinal = self._ordinals.get(slot, 0)
        self._ordinals[slot] = ordinal + 1
        return f"{kind}:" + digest(self._rt.run_id, scope, kind, name, str(ordinal), *extra)[:40]

    def record(self, key: str, kind: str, status: str = "completed", **fields: Any) -> Boundary:
        return Boundary(
            key=key,
            run_id=self._rt.run_id,
            kind=kind,
            status=status,
            updated_at=self._rt.clock.now(),
            **fields,
        )

    async def step(
        self, name: str, fn: Callable[[], Any], *, stale_after: int | None = None
    ) -> Any:
        _check_name("ctx.step", name)
        if not callable(fn):
            raise PlayDefinitionError(f"ctx.step({name!r}, fn): fn must be a function.")
        stale = validate_stale_after(stale_after)
        key = self.key("step", name, stale_bucket(stale, self._rt.clock.now()))
        stored = self._rt.store.get_boundary(key)
        if stored is not None and stored.status == "completed":
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
        self._rt.store.put_boundary(self.record(key, "step", "completed", output=output))
        return loads(output)

    async def sleep(self, seconds: float) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise PlayDefinitionError(f"ctx.sleep({seconds!r}): give a number of seconds >= 0.")
        key = self.key("sleep", "", str(round(seconds, 3)))
        store, clock = self._rt.store, self._rt.clock
        stored = store.get_boundary(key)
        if stored is not None and stored.status == "completed":
            return
        if stored is None:
            stored = self.record(key, "sleep", "waiting", wake_at=clock.now() + seconds)
            store.put_boundary(stored)
        assert stored.wake_at is not None
        remaining = stored.wake_at - clock.now()
        if remaining > self._foreground_sleep:
            raise Suspension(wake_at=stored.wake_at)
        if remaining > 0:
            await clock.sleep(remaining)
        store.put_boundary(self.record(key, "sleep", "completed", wake_at=stored.wake_at))

    async def wait_for_event(self, name: str, *, timeout: float | None = None) -> Any:  # noqa: ASYNC109 - the API names it
        _check_name("ctx.wait_for_event", name)
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            raise PlayDefinitionError(
                f"ctx.wait_for_event({name!r}, timeout={timeout!r}): give seconds > 0 or None."
            )
        key = self.key("event", name)
        store, clock = self._rt.store, self._rt.clock
        stored = store.get_boundary(key)
        if stored is not None and stored.status == "completed":
            assert stored.output is not None
            return loads(stored.output)
        if stored is not None and stored.status == TIMED_OUT:
            raise EventTimeout(name, timeout or 0.0)
        if stored is None:
            deadline = None if timeout is None else clock.now() + timeout
            stored = self.record(key, "event", "waiting", wake_at=deadline)
            store.put_boundary(stored)
        payload = store.deliver_event(name, stored)
        if payload is not None:
            return loads(payload)
        if stored.wake_at is not None and clock.now() >= stored.wake_at:
            store.put_boundary(self.record(key, "event", TIMED_OUT, wake_at=stored.wake_at))
            raise EventTimeout(name, timeout or 0.0)
        raise Suspension(wake_at=stored.wake_at, events=[name])

    async def fetch(
        self,
        name: str,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        json: Any = None,
        data: Any = None,
    ) -> FetchResponse:
        _check_name("ctx.fetch", name)
        method = method.upper()
        if current_row.get() is not None:
            raise PlayDefinitionError(
                f"ctx.fetch({name!r}) must run outside a column; inside one, call a tool "
                "(ctx.tool) so the requests are batched, rate-limited and checkpointed."
            )
        headers = dict(headers or {})
        if method not in SAFE_METHODS and not any(
            h.lower() in ("idempotency-key", "x-idempotency-key") for h in headers
        ):
            raise PlayDefinitionError(
                f"ctx.fetch({method} {url}) needs an Idempotency-Key header. A durable play can "
                "replay after waits and retries; add the header, or wrap the side effect in a tool."
            )
        body = dumps({"json": json, "data": data}, what=f"The body of ctx.fetch({name!r})")
        key = self.key("fetch", name, method, url, body.decode())
        stored = self._rt.store.get_boundary(key)
        if stored is None or stored.status != "completed" or stored.output is None:
            response = await _request(name, method, url, headers, json, data)
            record = {
                "ok": response.is_success,
                "status": response.status_code,
                "status_text": response.reason_phrase,
                "url": str(response.url),
                "headers": dict(response.headers),
                "text": response.text,
            }
            output = dumps(record, what=f"The response of ctx.fetch({name!r})")
            self._rt.store.put_boundary(self.record(key, "fetch", "completed", output=output))
        else:
            output = stored.output
        saved = loads(output)
        try:
            parsed = loads(saved["text"]) if saved["text"] else None
        except ValueError:
            parsed = None
        return FetchResponse(**saved, json=parsed)


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


def _check_name(what: str, name: Any) -> None:
    if not isinstance(name, str) or not name:
        raise PlayDefinitionError(f"{what} needs a non-empty key as its first argument.")
