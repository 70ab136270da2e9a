"""Receipt keys: a tool call is identified by what it asks, never by who asks or when.

The key is a SHA-256 over (org, tool id, canonical normalised input, auth scope, tool
version). The caller's label is not part of it, and neither is the play: receipts are shared
across rows, runs and plays of one org, so nothing is paid twice. Nor is the time: a call
with ``stale_after=N`` has the same key, and takes a receipt older than N seconds as stale
(the call's ``fresh_since``), buying it again in its place. (Keys once held a clock-aligned
bucket, ``floor(now / N)``, so a 30-day refresh could come a day after the purchase; the
key's array keeps an empty string where the bucket was, so every other key is unchanged.)
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from .._json import digest, dumps, normalise_input
from ..errors import PlayDefinitionError

__all__ = [
    "KEY_VERSION",
    "auth_scope",
    "keyed_receipt",
    "receipt_key",
    "respelled",
    "validate_stale_after",
]

KEY_VERSION = "playline.receipt.v2"


def validate_stale_after(stale_after: Any) -> int | None:
    if stale_after is None:
        return None
    if isinstance(stale_after, bool) or not isinstance(stale_after, int) or stale_after < 1:
        raise PlayDefinitionError(
            f"stale_after={stale_after!r}: stale_after must be a positive whole number of "
            "seconds, e.g. stale_after=86400 to reuse results for a day."
        )
    return stale_after


def auth_scope(org: str, user: str, tool: str) -> str:
    """Whose account pays for a call: results bought by one account are not another's."""
    return digest("auth", org, user, tool)


def receipt_key(
    *,
    org: str,
    tool: str,
    input: Any,
    auth: str,
    version: str,
) -> str:
    """SHA-256 (hex) of the canonical JSON array
    ``[KEY_VERSION, org, tool, normalised input, auth, version, ""]`` (the empty string: where
    a staleness bucket was, see above)."""
    return keyed_receipt(
        org=org, tool=tool, keyed=normalise_input(input), auth=auth, version=version
    )


def keyed_receipt(*, org: str, tool: str, keyed: Any, auth: str, version: str) -> str:
    """``receipt_key`` of an input ``normalise_input`` made already (``keyed``)."""
    body = dumps(
        [KEY_VERSION, org, tool, keyed, auth, version, ""],
        what=f"The input of tool {tool}",
        advice="Pass plain dicts, lists, strings, numbers, booleans or None, nested fewer "
        "than 255 levels deep.",
    )
    return hashlib.sha256(body).hexdigest()


def respelled(written: Mapping[str, Any], keyed: Any) -> bool:
    """Whether an input as written is another spelling of the input it is keyed on: a text
    field that is not the text its key holds (another case or spacing, a URL for a domain,
    as the tool's ``normalize=`` compares them). Calls of two spellings that share a key
    are normalised twins: one purchase answers both."""
    if type(keyed) is not dict:
        return False
    return any(type(v) is str and keyed.get(name) != v for name, v in written.items())
