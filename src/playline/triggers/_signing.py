"""Signed HTTP bodies: how a webhook Playline receives proves its sender, and how one it sends
proves Playline.

The header is Stripe's shape: ``Playline-Signature: t=<unix seconds>,v1=<hex>``, where the hex
is HMAC-SHA256 of ``"<t>.<raw body>"`` under the shared secret. Signing the timestamp with the
body lets a receiver refuse a replay of an old request (``tolerance`` seconds, 5 minutes by
default) without keeping every request it saw. Several ``v1=`` values may be given (a secret
being rotated): one that matches is enough. Comparison is in constant time.

To sign a test request by hand::

    t=$(date +%s); body='{"email": "ada@example.com"}'
    sig=$(printf '%s.%s' "$t" "$body" | openssl dgst -sha256 -hmac "$SECRET" -hex | sed 's/^.* //')
    curl -H "Playline-Signature: t=$t,v1=$sig" -H 'Playline-Delivery: 1' -d "$body" URL
"""

from __future__ import annotations

import hashlib
import hmac

__all__ = ["DELIVERY_HEADER", "SIGNATURE_HEADER", "TOLERANCE", "BadSignature", "sign", "verify"]

SIGNATURE_HEADER = "Playline-Signature"
DELIVERY_HEADER = "Playline-Delivery"  # the sender's id of this delivery: a retry repeats it
TOLERANCE = 300  # seconds a signed timestamp may be away from the receiver's clock


class BadSignature(Exception):
    """The signature is missing, malformed, wrong, or its timestamp too old (the message says
    which, for the receiver's log; the sender gets a bare 401)."""


def _digest(secret: str | bytes, timestamp: int, body: bytes) -> str:
    key = secret.encode() if isinstance(secret, str) else secret
    return hmac.new(key, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign(secret: str | bytes, body: bytes, *, timestamp: float) -> str:
    """The ``Playline-Signature`` header value for ``body`` sent at ``timestamp``."""
    t = int(timestamp)
    return f"t={t},v1={_digest(secret, t, body)}"


def verify(
    secret: str | bytes,
    body: bytes,
    header: str | None,
    *,
    now: float,
    tolerance: float = TOLERANCE,
) -> int:
    """Check ``header`` against ``body``; returns its timestamp. Raises ``BadSignature``."""
    if not header:
        raise BadSignature(f"no {SIGNATURE_HEADER} header")
    timestamp: int | None = None
    given: list[str] = []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and value.isdigit():
            timestamp = int(value)
        elif name == "v1" and value:
            given.append(value)
    if timestamp is None or not given:
        raise BadSignature(f"{SIGNATURE_HEADER} must be 't=<unix seconds>,v1=<hex>'")
    if abs(now - timestamp) > tolerance:
        raise BadSignature(
            f"timestamp {timestamp} is {abs(now - timestamp):.0f} s from now (at most "
            f"{tolerance:g} s): an old request replayed, or a sender whose clock is wrong"
        )
    expected = _digest(secret, timestamp, body)
    if not any(hmac.compare_digest(expected, v) for v in given):
        raise BadSignature("the signature does not match the body under this hook's secret")
    return timestamp
