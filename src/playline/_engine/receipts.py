"""Receipt keys: a tool call is identified by what it asks, never by who asks or when.

The key is a SHA-256 over (org, tool id, canonical normalised input, auth scope, tool
version, staleness bucket). The caller's label is not part of it, and neither is the play:
receipts are shared across rows, runs and plays of one org, so nothing is paid twice.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from .._json import digest, dumps, normalise_input
from ..errors import PlayDefinitionError

__all__ = ["KEY_VERSION", "auth_scope", "receipt_key", "stale_bucket", "validate_stale_after"]

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


def stale_bucket(stale_after: int | None, now: float) -> str:
    """``"N:floor(now / N)"``: calls in the same N-second bucket share a receipt."""
    if stale_after is None:
        return ""
    return f"{stale_after}:{math.floor(now / stale_after)}"


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
    bucket: str = "",
) -> str:
    """SHA-256 (hex) of the canonical JSON array
    ``[KEY_VERSION, org, tool, normalised input, auth, version, bucket]``."""
    body = dumps(
        [KEY_VERSION, org, tool, normalise_input(input), auth, version, bucket],
        what=f"The input of tool {tool}",
        advice="Pass plain dicts, lists, strings, numbers, booleans or None, nested fewer "
        "than 255 levels deep.",
    )
    return hashlib.sha256(body).hexdigest()
