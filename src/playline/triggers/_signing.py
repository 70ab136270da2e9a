r"""Signed HTTP bodies: how a webhook Playline receives proves its sender, and how one it sends
proves Playline.

The header is Stripe's shape, ``Playline-Signature: t=<unix seconds>,v1=<hex>``
(https://docs.stripe.com/webhooks#verify-manually), but what is signed covers the delivery id
too, as Standard Webhooks signs its ``webhook-id``
(https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md):
the hex is HMAC-SHA256, under the shared secret, of the bytes::

    <t>.<Playline-Delivery header as sent, empty when none is><newline><raw body>

Signing the timestamp lets a receiver refuse a replay of an old request (``tolerance``
seconds, 5 minutes by default) without keeping every request it saw; signing the delivery id
means a request replayed within those minutes cannot pass for another delivery (a new run): a
receiver that keeps one run per delivery id answers it as the duplicate it is. The newline
ends the delivery id unambiguously (an HTTP header cannot hold one), so no part of the body
can be moved into the id or back. Several ``v1=`` values may be given (a secret being
rotated): one that matches is enough. Comparison is in constant time.

To sign a test request by hand::

    t=$(date +%s); d=1; body='{"email": "ada@example.com"}'
    sig=$(printf '%s.%s\n%s' "$t" "$d" "$body" | openssl dgst -sha256 -hmac "$SECRET" -hex)
    sig=${sig##* }  # the hex digest: the last word of openssl's line
    curl -H "Playline-Signature: t=$t,v1=$sig" -H "Playline-Delivery: $d" -d "$body" URL
"""

from __future__ import annotations

import hashlib
import hmac

__all__ = [
    "DELIVERY_HEADER",
    "MAKE_ONE",
    "MIN_SECRET",
    "SIGNATURE_HEADER",
    "TOLERANCE",
    "BadSignature",
    "sign",
    "verify",
    "weakness",
]

SIGNATURE_HEADER = "Playline-Signature"
DELIVERY_HEADER = "Playline-Delivery"  # the sender's id of this delivery: a retry repeats it
TOLERANCE = 300  # seconds a signed timestamp may be away from the receiver's clock
MIN_SECRET = 16  # characters a signing secret has at least
MAKE_ONE = 'Make one with `python -c "import secrets; print(secrets.token_hex(32))"`'


def weakness(secret: str) -> str | None:
    """Why ``secret`` cannot sign, in words that follow its name (``is set but empty: ...``),
    or None: anyone can sign with an empty key, and a short one can be guessed."""
    if not secret.strip():
        return "is set but empty: anyone could sign with an empty key"
    if len(secret) < MIN_SECRET:
        return (
            f"is {len(secret)} character(s) long; give at least {MIN_SECRET}, or it can be guessed"
        )
    return None


class BadSignature(Exception):
    """The signature is missing, malformed, wrong, or its timestamp too old (the message says
    which, for the receiver's log; the sender gets a bare 401)."""


def _key(secret: str | bytes) -> bytes:
    return secret.encode() if isinstance(secret, str) else secret


def _digest(secret: str | bytes, timestamp: int, delivery: bytes, body: bytes) -> str:
    signed = f"{timestamp}.".encode() + delivery + b"\n" + body
    return hmac.new(_key(secret), signed, hashlib.sha256).hexdigest()


def _wire(delivery: str) -> bytes | None:
    """The header value's bytes as sent (HTTP header values are Latin-1, which is how a
    server decodes them; spaces and tabs around it are not part of the value); None when it cannot
    be a header value."""
    if "\n" in delivery or "\r" in delivery:
        return None
    try:
        return delivery.strip(" \t").encode("latin-1")
    except UnicodeEncodeError:
        return None


def sign(secret: str | bytes, body: bytes, *, timestamp: float, delivery: str) -> str:
    """The ``Playline-Signature`` header value for ``body`` sent at ``timestamp`` as the
    delivery ``delivery`` (the ``Playline-Delivery`` header's value; ``""`` when none)."""
    wire = _wire(delivery) if isinstance(delivery, str) else None
    if wire is None:
        raise ValueError(
            f"delivery={delivery!r}: give the {DELIVERY_HEADER} header's value, one line of "
            "Latin-1 text ('' when none is sent)"
        )
    t = int(timestamp)
    return f"t={t},v1={_digest(secret, t, wire, body)}"


def verify(
    secret: str | bytes,
    body: bytes,
    header: str | None,
    *,
    delivery: str,
    now: float,
    tolerance: float = TOLERANCE,
) -> int:
    """Check ``header`` against ``body`` sent as ``delivery`` (the ``Playline-Delivery``
    header's value, ``""`` when none); returns its timestamp. Raises ``BadSignature``."""
    if not header:
        raise BadSignature(f"no {SIGNATURE_HEADER} header")
    wire = _wire(delivery)
    if wire is None:
        raise BadSignature(f"the {DELIVERY_HEADER} id {delivery!r} is no header value")
    timestamp: int | None = None
    given: list[str] = []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and value.isascii() and value.isdigit():
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
    expected = _digest(secret, timestamp, wire, body)
    if any(hmac.compare_digest(expected, v) for v in given):
        return timestamp
    if _unsigned_delivery(secret, timestamp, body, given):
        raise BadSignature(
            f"the signature covers the body but not the {DELIVERY_HEADER} id {delivery!r}: "
            f'the sender signs the old way; sign "<t>.<delivery id>\\n<raw body>" instead'
        )
    raise BadSignature(
        f"the signature does not match the body and the {DELIVERY_HEADER} id {delivery!r} "
        "under this hook's secret"
    )


def _unsigned_delivery(secret: str | bytes, timestamp: int, body: bytes, given: list[str]) -> bool:
    """Whether ``given`` signs ``"<t>.<body>"`` (before the delivery id was signed): the
    receiver's log then tells its operator how to fix the sender."""
    old = hmac.new(_key(secret), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(old, v) for v in given)
