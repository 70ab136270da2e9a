"""Remote tools over HTTP: the gateway protocol (SIMULATOR.md), client side.

``Gateway(url, token)`` lists its tools from ``GET /api/v2/integrations`` and calls them with
``POST /api/v2/integrations/{id}/execute``. Bulk operations and async jobs (submit, then
poll) are handled here; rate pacing and retries are the engine's (``_calls.py``), driven by
the ``ToolError`` this raises (``status``, ``retry_after``, ``retryable``).

The token is sent as a bearer token and is never part of a receipt: the gateway's account
(its tools' ``auth_scope``) is a digest of where it is (host, port, path) and of the
``account`` name it is given, so a rotated token keeps every receipt. The tool list may be
public (the simulator's is), so ``check()`` asks whether the token is taken: an execute of a
tool no gateway serves, which the gateway refuses with 401/403 before it looks the tool up
(SIMULATOR.md: auth, then tool), and which nothing can charge.
"""

from __future__ import annotations

import asyncio
import math
import urllib.parse
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from .._json import digest
from .._secrets import Secret, redact, reveal
from ..errors import GatewayError, PlayDefinitionError, ToolError
from ._http_send import request_or_raise
from ._normalize import Normalize
from ._outcomes import parse_retry_after
from ._spec import Batch, Cost, JobState, Rate, ToolSpec, normalise_lists, normalise_outputs

__all__ = ["Gateway"]

_PREFIX = "/api/v2/integrations"
_PROBE = "playline.access-check"  # no gateway serves it: an execute of it is only refused
BULK_SECONDS_PER_ITEM = 1.0


def _token(token: str | Secret) -> str:
    """The token as it is sent, without the spaces and line end a copy or ``export
    T=$(cat file)`` leaves around it (as a secret read from the environment loses them).
    One with a control character inside is refused, without showing it: sent, it would be
    an illegal header, and the error that says so would print the token."""
    value = token.reveal() if isinstance(token, Secret) else token
    stripped = value.strip()
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in stripped):
        raise PlayDefinitionError(
            "pl.Gateway(token=...): the token holds a control character (a line end or a tab "
            "inside it), which no header can carry; give the token alone, on one line "
            "(--gateway-token, PLAYLINE_GATEWAY_TOKEN or pl.Gateway(url, token=...))."
        )
    if isinstance(token, Secret):
        return stripped
    # a plain token is a secret as well: a provider echoing it must not get it stored
    return Secret("gateway token", stripped).reveal()


def _seconds(name: str, value: object, example: str) -> float:
    """``timeout`` or ``poll_interval``: a finite number of seconds above 0, checked here
    rather than met later as an error inside httpx or a poll loop that never waits."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise PlayDefinitionError(
            f"pl.Gateway({name}={value!r}): give a number of seconds above 0, e.g. {example}."
        )
    return float(value)


class Gateway:
    """A source of remote tools. ``token`` is sent as a bearer token; ``account`` names the
    gateway account its calls are bought for, when one gateway serves several (receipts are
    kept per gateway and account, never per token: rotating the token buys nothing again)."""

    def __init__(
        self,
        url: str,
        token: str | Secret = "",
        *,
        account: str | None = None,
        timeout: float = 30.0,
        poll_interval: float = 0.05,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise GatewayError(
                f"Gateway URL {url!r} must start with http:// or https://, e.g. "
                "pl.Gateway('http://127.0.0.1:8765', token='dev')."
            )
        self.url = url.rstrip("/")
        self._headers = {"Accept": "application/json"}
        if not isinstance(token, Secret | str):
            raise GatewayError(
                f"pl.Gateway(token=...) is a text or a pl.Secret, not {type(token).__name__}."
            )
        if account is not None and not (isinstance(account, str) and account):
            raise GatewayError(
                f"pl.Gateway(account={account!r}): name the account with a text, e.g. "
                "account='team-b', or leave it out."
            )
        secret = _token(token)
        self.has_token = bool(secret)
        if secret:
            self._headers["Authorization"] = f"Bearer {secret}"
        self._timeout = _seconds("timeout", timeout, "timeout=30.0")
        self.poll_interval = _seconds("poll_interval", poll_interval, "poll_interval=0.05")
        self._account = digest("gateway", _where(self.url), account or "")[:16]
        self._specs: list[ToolSpec] | None = None
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        return f"Gateway({self.url!r})"

    def bulk_timeout(self, items: int) -> float:
        """A bulk request's timeout: the single one plus time per item, so a slow provider
        working through a big batch is waited for instead of asked (and paid) again."""
        return self._timeout + BULK_SECONDS_PER_ITEM * items

    # listing
    def specs(self) -> list[ToolSpec]:
        if self._specs is None:
            self._specs = [self._spec(meta) for meta in self._fetch_metadata()]
        return self._specs

    def check(self) -> None:
        """Raise ``GatewayError`` when the gateway cannot be reached or refuses the token
        (401/403): every call of its tools would fail the same way. Nothing is charged: the
        request executes a tool no gateway serves, which a gateway that checks tokens refuses
        before it looks the tool up. A gateway that answers it otherwise (404) took the token.
        """
        try:
            response = httpx.post(
                f"{self.url}{_PREFIX}/{_PROBE}/execute",
                json={"payload": {}},
                headers=self._headers,
                timeout=self._timeout,
            )
        except httpx.HTTPError as exc:
            raise GatewayError(
                redact(
                    f"Cannot reach the gateway at {self.url} ({type(exc).__name__}: {exc}). "
                    "Start it (`playline sim` for the simulator) or fix --gateway / "
                    "PLAYLINE_GATEWAY_URL."
                )
            ) from None
        if response.status_code not in (401, 403):
            return
        try:
            body = response.json()
        except ValueError:
            body = None
        said = body.get("message") if isinstance(body, dict) else None
        words = " ".join(str(said or response.text[:200] or response.reason_phrase).split())
        which = "the token it was given" if self.has_token else "calls without a token"
        raise GatewayError(
            redact(
                f"The gateway at {self.url} refuses {which} ({response.status_code}: {words})."
                " Give its token with --gateway-token or PLAYLINE_GATEWAY_TOKEN "
                "(pl.Gateway(url, token=...) in Python; the simulator's is 'dev')."
            )
        )

    def _fetch_metadata(self) -> list[dict[str, Any]]:
        try:
            response = httpx.get(self.url + _PREFIX, headers=self._headers, timeout=self._timeout)
        except httpx.HTTPError as exc:
            raise GatewayError(
                redact(
                    f"Cannot reach the gateway at {self.url} ({type(exc).__name__}: {exc}). "
                    "Start it (`playline sim` for the simulator) or fix --gateway / "
                    "PLAYLINE_GATEWAY_URL."
                )
            ) from None
        if response.status_code != 200:
            hint = (
                "Check the token (--gateway-token or PLAYLINE_GATEWAY_TOKEN; the simulator's "
                "is 'dev')."
                if response.status_code in (401, 403)
                else f"Check the URL: the tool list is served at {self.url}{_PREFIX}."
                if response.status_code == 404
                else "Check that the gateway is healthy."
            )
            raise GatewayError(
                redact(
                    f"The gateway at {self.url} answered {response.status_code} to its tool "
                    f"list: {' '.join(response.text[:200].split())}. {hint}"
                )
            )
        try:
            tools = response.json()["tools"]
        except (ValueError, KeyError, TypeError):
            tools = None
        if not isinstance(tools, list):
            raise GatewayError(
                f'The gateway at {self.url} sent a tool list that is not {{"tools": [...]}} JSON.'
            )
        return [
            t
            for t in tools
            if isinstance(t, dict) and "id" in t and "bulk_of" not in t and "poll_of" not in t
        ]

    def _spec(self, meta: Mapping[str, Any]) -> ToolSpec:
        """The tool ``meta`` describes; a description Playline cannot use is the gateway's
        error, naming the tool, not one of the play's."""
        try:
            return self._parse(meta)
        except (PlayDefinitionError, TypeError, ValueError, KeyError, AttributeError) as exc:
            raise GatewayError(
                f"The gateway at {self.url} describes tool {meta.get('id')!r} in a way Playline "
                f"cannot use ({type(exc).__name__}: {exc}). Fix the tool's metadata at the "
                "gateway (its rate, cost, batch, outputs and lists)."
            ) from None

    def _parse(self, meta: Mapping[str, Any]) -> ToolSpec:
        rate = meta.get("rate") or {}
        cost = meta.get("cost") or {}
        batch = meta.get("batch")
        poll = (meta.get("async") or {}).get("poll")
        idempotency = meta.get("idempotency") or {}
        declared = meta.get("input")
        inputs: Mapping[str, Any] = declared if isinstance(declared, Mapping) else {}
        item_keys = bool(idempotency.get("bulk_items"))
        # A call in doubt may be re-sent only if every way it goes out carries its key.
        honoured = bool(idempotency.get("header")) and (batch is None or item_keys)
        transport = _GatewayTransport(
            self, bulk=batch["operation"] if batch else None, poll=poll, item_keys=item_keys
        )
        return ToolSpec(
            id=str(meta["id"]),
            transport=transport,
            jobs=transport if poll else None,
            rate=Rate(
                per_second=rate.get("per_second"),
                burst=rate.get("burst"),
                concurrency=meta.get("concurrency"),
            ),
            cost=Cost(
                float(cost.get("credits", 0)),
                cost.get("charge", "per_call"),
                cost.get("unit", "credits"),
            ),
            batch=Batch(max_size=int(batch["max_size"])) if batch else None,
            outputs=normalise_outputs(meta.get("outputs")),
            lists=normalise_lists(meta.get("lists")),
            version=str(meta.get("version", "1")),
            retry_safe=bool(meta.get("retry_safe", False)),
            in_doubt="resend" if honoured else "fail",
            auth_scope=self._account,
            description=str(meta.get("description", "")),
            required=_names(inputs.get("required")),
            optional=_names(inputs.get("optional")),
            coverage=_share(meta.get("coverage")),
            normalize=Normalize(str(meta["id"]), inputs["normalize"])
            if inputs.get("normalize")
            else None,
        )

    # calling
    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = httpx.AsyncClient(
                base_url=self.url,
                headers=self._headers,
                timeout=self._timeout,
                limits=httpx.Limits(max_connections=100, max_keepalive_connections=100),
            )
            self._clients[loop] = client
        return client

    async def execute(
        self,
        spec: ToolSpec,
        tool: str,
        payload: Any,
        key: str | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - httpx's per-request timeout
    ) -> tuple[str, Any]:
        """One request; returns (status, result) or raises ``ToolError``. ``key`` is sent as
        the request's Idempotency-Key.

        The error's ``code`` tells whether the request may have reached the provider:
        ``connection_error`` (it did not: refused, or no connection in time) or ``timeout`` /
        ``protocol_error`` (it may have: no answer in time, or the connection broke).
        """
        response = await request_or_raise(
            self._client(),
            spec.id,
            "POST",
            f"{self.url}{_PREFIX}/{tool}/execute",
            json={"payload": reveal(payload)},  # the provider gets the secrets it is sent
            headers={"Idempotency-Key": key} if key else None,
            timeout=timeout or self._timeout,
        )
        try:
            body = response.json()
        except ValueError:
            body = None
        request_id = response.headers.get("x-request-id")
        if response.status_code != 200 or not isinstance(body, dict):
            info = body if isinstance(body, dict) else {}
            status = response.status_code
            raise ToolError(
                spec.id,
                str(info.get("message") or response.text[:200] or response.reason_phrase)
                if status != 200
                else "the gateway's answer was not JSON",
                status=status,
                code=info.get("code") or ("bad_response" if status == 200 else None),
                request_id=info.get("request_id") or request_id,
                retryable=status == 429 or (status >= 500 and spec.retry_safe),
                retry_after=_retry_after(response, info) if status in (409, 429) else None,
            )
        return str(body.get("status", "completed")), body.get("result")


_ANSWERED = ("completed", "no_result")  # an answer's statuses; "pending" is a job's


def _where(url: str) -> str:
    """Where a gateway is, as its account names it: host, port and path, without a user or
    password the URL may carry (a rotated password is the same account)."""
    parts = urllib.parse.urlsplit(url)
    host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return f"{parts.scheme}://{host}{parts.path}"


def _names(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _share(value: Any) -> float | None:
    """A published coverage: a share from 0 to 1, else unknown."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value)
    return None


def _retry_after(response: httpx.Response, body: Mapping[str, Any]) -> float | None:
    """How long the provider asked to wait: ``retry_after_ms`` in the body (precise), else the
    ``Retry-After`` header (whole seconds or a date); None when it named no wait at all."""
    millis = body.get("retry_after_ms")
    if isinstance(millis, int | float) and not isinstance(millis, bool) and millis >= 0:
        return float(millis) / 1000
    header = response.headers.get("retry-after")
    return parse_retry_after(header) if header else None


class _GatewayTransport:
    """Calls one gateway tool: single, bulk (``items``), or async (submit, then poll).

    A bulk request carries each item's idempotency key (``idempotency_keys``) where the
    provider honours them: an item re-sent after a crash, in whatever batch, is recognised.
    """

    def __init__(
        self, gateway: Gateway, *, bulk: str | None, poll: str | None, item_keys: bool = False
    ) -> None:
        self.gateway = gateway  # whose token a plan checks (``_access.py``)
        self._gateway = gateway
        self._bulk = bulk
        self._poll = poll
        self._item_keys = item_keys
        self.poll_interval = gateway.poll_interval
        self.inline = False

    async def call(
        self, spec: ToolSpec, inputs: Sequence[Mapping[str, Any]], keys: Sequence[str] = ()
    ) -> list[Any]:
        if self._bulk is not None and len(inputs) > 1:
            payload: dict[str, Any] = {"items": [dict(i) for i in inputs]}
            bulk_key = None
            if keys and self._item_keys:
                payload["idempotency_keys"] = list(keys)
            elif keys:  # the same items in the same order, repeated, are the same request
                bulk_key = digest("bulk", *keys)
            _, answer = await self._gateway.execute(
                spec,
                self._bulk,
                payload,
                bulk_key,
                timeout=self._gateway.bulk_timeout(len(inputs)),
            )
            results = answer.get("results") if isinstance(answer, dict) else None
            if not isinstance(results, list) or len(results) != len(inputs):
                raise ToolError(
                    spec.id,
                    f"bulk answer did not hold {len(inputs)} aligned results",
                    code="misaligned_batch",
                )
            return results
        results = []
        for index, item in enumerate(inputs):
            state = await self.submit(spec, item, keys[index] if keys else None)
            while not state.done:
                await asyncio.sleep(self.poll_interval)
                state = await self.poll(spec, state.job, item)
            results.append(state.result)
        return results

    async def submit(
        self, spec: ToolSpec, input: Mapping[str, Any], key: str | None = None
    ) -> JobState:
        return self._state(spec, *await self._gateway.execute(spec, spec.id, dict(input), key))

    async def poll(self, spec: ToolSpec, job: Any, input: Mapping[str, Any]) -> JobState:
        if self._poll is None:
            raise ToolError(spec.id, "the gateway gave no poll operation", code="no_poll")
        return self._state(spec, *await self._gateway.execute(spec, self._poll, {"job_id": job}))

    def _state(self, spec: ToolSpec, status: str, result: Any) -> JobState:
        if status in _ANSWERED:
            return JobState(done=True, result=result if status == "completed" else None)
        if status != "pending":  # a failure the gateway did not send as one: never "not found"
            raise ToolError(
                spec.id,
                f"the gateway answered status {status!r} (expected completed, no_result or "
                f"pending): {str(result)[:200]}",
                code="bad_response",
            )
        job = result.get("job_id") if isinstance(result, dict) else None
        if not job or self._poll is None:
            raise ToolError(spec.id, "answered pending without a job to poll", code="bad_job")
        return JobState(done=False, job=job)
