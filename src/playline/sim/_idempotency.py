"""Idempotency keys: work done once per key, answered again for free when the key comes back.

Real providers (Stripe, and the IETF ``Idempotency-Key`` draft) remember a key with the
answer of the request that first carried it. The simulator does the same, per *base* tool:
the ``Idempotency-Key`` header of a single call and the per-item ``idempotency_keys`` of a
bulk call share one memory, so an input first sent in a bulk batch and then alone (or the
reverse) with the same key is one request. A key is remembered as soon as its work is done,
even if the response then fails, so a client may re-send an in-doubt call safely.

While a request holds a key, another request with that key is refused (409,
``idempotency_in_progress``). A key reused for a different input is refused too (422,
``idempotency_key_reused``): answering it from another input's answer would hide the bug.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ._inputs import InvalidInput

MAX_KEY_LENGTH = 255


@dataclass(frozen=True, kw_only=True, slots=True)
class Done:
    """The first answer given for one key."""

    request: str
    """What was asked: the canonical JSON of one input, or of a whole bulk's items."""
    whole_bulk: bool
    """The key named a whole bulk request (a header key on a bulk call without item keys)."""
    status: str
    result: Any
    credits_milli: int
    request_id: str


def header_key(value: str | None) -> str | None:
    """The ``Idempotency-Key`` header's key, or ``None`` when absent or empty."""
    if not value:
        return None
    if len(value) > MAX_KEY_LENGTH:
        raise InvalidInput(
            f"the Idempotency-Key header is {len(value)} characters long; "
            f"send at most {MAX_KEY_LENGTH}"
        )
    return value


def item_keys(payload: dict[str, Any], n_items: int) -> list[str] | None:
    """The bulk payload's ``idempotency_keys`` (one per item), or ``None`` when absent."""
    keys = payload.get("idempotency_keys")
    if keys is None:
        return None
    if not isinstance(keys, list) or len(keys) != n_items:
        raise InvalidInput(
            "payload.idempotency_keys must be a list of strings aligned with payload.items "
            f"(one per item: {n_items}), or left out"
        )
    seen: dict[str, int] = {}
    for i, key in enumerate(keys):
        if not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH:
            raise InvalidInput(
                f"payload.idempotency_keys[{i}] must be a non-empty string of at most "
                f"{MAX_KEY_LENGTH} characters"
            )
        if key in seen:
            raise InvalidInput(
                f"payload.idempotency_keys[{i}] repeats idempotency_keys[{seen[key]}]; "
                "give each item its own key, or send the input once"
            )
        seen[key] = i
    return keys


class KeyMemory:
    """Keys done (with their first answer) and keys in progress, per base tool.

    Touched only from the server's event loop: checking a key and claiming it happen with no
    ``await`` between them, so two requests cannot both claim one key.
    """

    def __init__(self) -> None:
        self._done: dict[tuple[str, str], Done] = {}
        self._busy: set[tuple[str, str]] = set()

    def done(self, tool: str, key: str) -> Done | None:
        return self._done.get((tool, key))

    def busy(self, tool: str, keys: Iterable[str]) -> str | None:
        """The first of ``keys`` a request in progress holds, if any."""
        return next((k for k in keys if (tool, k) in self._busy), None)

    @contextmanager
    def claim(self, tool: str, keys: Iterable[str]) -> Iterator[None]:
        """Hold ``keys`` for the duration of a request's work."""
        held = {(tool, k) for k in keys}
        self._busy |= held
        try:
            yield
        finally:
            self._busy -= held

    def remember(self, tool: str, key: str, done: Done) -> None:
        self._done[(tool, key)] = done

    def clear(self) -> None:
        """Forget the keys done (those in progress stay held by their requests)."""
        self._done.clear()
