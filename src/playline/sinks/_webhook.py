"""``pl.sinks.webhook``: a dataset's rows POSTed to a URL in signed chunks, each exactly once.

Each chunk is one durable ``ctx.fetch`` whose key names the sink's URL, the dataset and the
chunk's number: a resume replays the chunks whose answer was recorded (nothing is posted
again) and sends the others. A chunk whose request was out when the process died has no
answer on record, so it is sent again, with the same ``Idempotency-Key`` (and
``Playline-Delivery``) header: the receiver drops a key it has already processed. That
header is the run id and the chunk's key digested, so it is the same in every attempt of a
run, and differs between runs.

With ``secret=NAME`` the raw body and its ``Playline-Delivery`` id are signed as ``playline
serve`` checks a hook's requests (``Playline-Signature: t=<unix seconds>,v1=<HMAC-SHA256 hex>``,
see ``playline.triggers._signing``), the secret read as ``ctx.secrets.get(NAME)`` reads it.

A non-2xx answer fails the run naming the chunk (``SinkError``); the chunks before it stay
delivered. A resume sends that chunk again: the failed answer is on record, so the chunk is
fetched under a new key (``...:retry1``), with the same ``Idempotency-Key``.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from .._json import digest
from .._secrets import SECRET_NAME, Secret, shown
from ..errors import PlayDefinitionError, PlaylineError, ToolError
from ..triggers._signing import DELIVERY_HEADER, MAKE_ONE, SIGNATURE_HEADER, sign, weakness

if TYPE_CHECKING:
    from .._context import Context
    from .._dataset import Dataset

__all__ = ["SinkError", "WebhookSink", "webhook"]

_RESERVED = ("idempotency-key", DELIVERY_HEADER.lower(), SIGNATURE_HEADER.lower())


class SinkError(PlaylineError):
    """A sink could not deliver a chunk of rows: ``url``, ``dataset``, ``chunk`` (its number,
    from 0) and the HTTP ``status`` the receiver answered (None when it did not answer)."""

    def __init__(
        self, message: str, *, url: str, dataset: str, chunk: int, status: int | None = None
    ) -> None:
        self.url = url
        self.dataset = dataset
        self.chunk = chunk
        self.status = status
        super().__init__(message)


@dataclass(frozen=True, kw_only=True)
class WebhookSink:
    """Where ``send`` POSTs a dataset's rows: see ``pl.sinks.webhook``."""

    url: str
    secret: str | None = None
    chunk: int = 100
    headers: Mapping[str, str | Secret] = field(default_factory=dict)

    async def send(self, ctx: Context, dataset: Dataset) -> int:
        """POST the rows of ``dataset`` (a finished ``pl.Dataset``) in chunks; returns how many
        rows the chunks held (those a resume replayed included)."""
        from .._dataset import Dataset

        what = f"pl.sinks.webhook({self.url!r}).send"
        if not callable(getattr(ctx, "fetch", None)) or not hasattr(ctx, "secrets"):
            raise PlayDefinitionError(f"{what}(ctx, dataset): give the play's ctx first.")
        if not isinstance(dataset, Dataset):
            raise PlayDefinitionError(
                f"{what}(ctx, dataset): dataset must be a finished dataset (what "
                f"`await ctx.dataset(...).run()` returns), not {type(dataset).__name__}."
            )
        key = ctx.secrets.get(self.secret).reveal() if self.secret is not None else None
        if key is not None and (why := weakness(key)):  # its receiver would trust anybody
            raise PlayDefinitionError(
                f"{what}: the signing secret {self.secret} {why}. {MAKE_ONE}, and give it to "
                "the receiver too."
            )
        sent = 0
        for number, rows, last in _chunks(dataset, self.chunk):
            payload = {
                "run_id": ctx.run_id,
                "dataset": dataset.name,
                "chunk": number,
                "last": last,
                "rows": rows,
            }
            await self._deliver(ctx, dataset.name, number, len(rows), payload, key)
            sent += len(rows)
        return sent

    async def _deliver(
        self,
        ctx: Context,
        dataset: str,
        number: int,
        size: int,
        payload: dict[str, Any],
        key: str | None,
    ) -> None:
        """One chunk, as one durable fetch (again under a new key after a failed answer that
        an earlier attempt recorded)."""
        base = f"sink:{dataset}:{number}:{digest(self.url)[:12]}"
        idempotency = digest(ctx.run_id, base)[:40]
        # the exact bytes httpx sends for json=payload: what the signature covers
        body = httpx.Request("POST", self.url, json=payload).content
        mine = secrets.token_hex(8)  # tells this attempt's failed answers from earlier ones
        for retry in itertools.count():
            name = base if retry == 0 else f"{base}:retry{retry}"
            headers: dict[str, str | Secret] = {
                **self.headers,
                "Idempotency-Key": idempotency,
                DELIVERY_HEADER: idempotency,
            }
            if key is not None:
                headers[SIGNATURE_HEADER] = sign(
                    key, body, timestamp=time.time(), delivery=idempotency
                )
            try:
                response = await ctx.fetch(
                    name, self.url, method="POST", headers=headers, json=payload
                )
            except ToolError as exc:  # no answer: nothing recorded, a resume sends it again
                raise self._error(dataset, number, size, exc.provider_message, None) from None
            if response.ok:
                return
            # The answer is recorded: replayed by every later attempt. The first attempt to
            # see it fails the run; a resume tries the chunk again under the next key.
            if await ctx.step(f"{name}:failed", lambda: mine) == mine:
                answer = f"the receiver answered {response.status} {response.status_text}"
                text = response.text.strip()
                if text:
                    answer += f": {text[:200]}"
                raise self._error(dataset, number, size, answer, response.status)

    def _error(
        self, dataset: str, number: int, size: int, why: str, status: int | None
    ) -> SinkError:
        """The chunk ``number`` (of ``size`` rows) not delivered: which rows, and what next."""
        first = number * self.chunk + 1
        return SinkError(
            f"pl.sinks.webhook could not deliver chunk {number} of dataset {dataset!r} "
            f"(rows {first}-{first + size - 1}) to {self.url}: "
            f"{why}. The chunks before it were delivered; fix the receiver, then resume the "
            "run: it goes on from this chunk, with the same Idempotency-Key.",
            url=self.url,
            dataset=dataset,
            chunk=number,
            status=status,
        )


def _chunks(rows: Any, size: int) -> Iterator[tuple[int, list[dict[str, Any]], bool]]:
    """``(number, rows, last)`` for each chunk of ``size`` rows (no chunk for no rows)."""
    it = iter(rows)
    current = list(itertools.islice(it, size))
    for number in itertools.count():
        if not current:
            return
        following = list(itertools.islice(it, size))
        yield number, current, not following
        current = following


def webhook(
    url: str,
    *,
    secret: str | None = None,
    chunk: int = 100,
    headers: Mapping[str, str | Secret] | None = None,
) -> WebhookSink:
    """A sink that POSTs a dataset's rows to ``url`` as JSON, ``chunk`` rows per request:
    ``await pl.sinks.webhook(url, secret="CRM_SINK_SECRET").send(ctx, dataset)`` in a play,
    after the dataset ran.

    Each request's body is ``{"run_id", "dataset", "chunk" (from 0), "last", "rows"}``, with
    an ``Idempotency-Key`` (also sent as ``Playline-Delivery``) that names the run and the
    chunk: the receiver keeps the first request of each key and answers a repeat with 2xx
    without applying it again. Each chunk is a durable ``ctx.fetch``: a resume never posts a
    chunk whose answer was recorded; one whose request was out when the process died is sent
    again with the same key. ``secret``: the NAME of a secret (read as ``ctx.secrets.get``
    reads it) that signs each body (``Playline-Signature``, as ``playline serve`` checks).
    ``headers``: more request headers (a value may be a secret from ``ctx.secrets.get``).
    A non-2xx answer fails the run with ``pl.sinks.SinkError`` naming the chunk.
    """
    where = f"pl.sinks.webhook({url!r})"
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise PlayDefinitionError(
            f"{where}: give the receiver's http:// or https:// URL, e.g. "
            "'https://crm.example.com/hooks/leads'."
        )
    if secret is not None and (not isinstance(secret, str) or not SECRET_NAME.fullmatch(secret)):
        got = shown(secret) if isinstance(secret, str) else type(secret).__name__
        raise PlayDefinitionError(
            f"{where}: secret= is the NAME of a secret, in capitals (e.g. "
            "secret='CRM_SINK_SECRET', read from PLAYLINE_SECRET_CRM_SINK_SECRET or "
            f"CRM_SINK_SECRET), not its value ({got} is not such a name)."
        )
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise PlayDefinitionError(f"{where}: chunk={chunk!r}; give the rows per request, e.g. 100.")
    given = dict(headers or {})
    for name, value in given.items():
        if not isinstance(name, str) or not isinstance(value, str | Secret):
            raise PlayDefinitionError(
                f"{where}: the header {name!r} must be text with a text value or a secret "
                "(ctx.secrets.get(...))."
            )
        if name.lower() in _RESERVED:
            raise PlayDefinitionError(
                f"{where}: the header {name!r} is the sink's own (it sets it per chunk); "
                "leave it out."
            )
    return WebhookSink(url=url, secret=secret, chunk=chunk, headers=given)
