"""One vocabulary across providers (``docs/guide/providers.md``).

Inputs: ``first_name``, ``last_name``, ``full_name``, ``domain``, ``company``,
``linkedin_url``, ``email``. An email finder answers ``{"email", "confidence", "status"}``,
a verifier ``{"email", "status", "disposable", "role"}``; ``status`` is one of
``valid``, ``catch_all``, ``unknown`` and ``invalid``; ``confidence`` is 0-100 (None when the
provider gives none). Every result keeps the provider's own answer under ``raw``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

from ..tools._normalize import KINDS

__all__ = [
    "COMPARED",
    "INPUTS",
    "STATUSES",
    "compared",
    "email_result",
    "findable",
    "status_of",
    "verification",
]

INPUTS = ("first_name", "last_name", "full_name", "domain", "company", "linkedin_url", "email")
STATUSES = ("valid", "catch_all", "unknown", "invalid")
# how each input compares (``normalize=`` kinds): names in any case and spacing, a domain in
# any URL form, an email in any case
COMPARED = {
    "first_name": "name",
    "last_name": "name",
    "full_name": "name",
    "company": "name",
    "domain": "domain",
    "email": "email",
    "linkedin_url": "text",
}


def compared(input: Mapping[str, Any]) -> dict[str, Any]:
    """``input`` with its vocabulary fields as the providers compare them (``COMPARED``),
    blank ones dropped."""
    out = dict(input)
    for name, kind in COMPARED.items():
        if isinstance(out.get(name), str):
            out[name] = KINDS[kind](unicodedata.normalize("NFC", out[name])) or None
    return {k: v for k, v in out.items() if v is not None}


def findable(out: Mapping[str, Any], provider: str, given: Mapping[str, Any]) -> None:
    """Refuse (``ValueError``: the cell fails, unsent) an input by which ``provider`` cannot
    find a person: it needs ``linkedin_url`` or ``email``, or a name with a domain or company."""
    named = ("first_name" in out and "last_name" in out) or "full_name" in out
    anchored = "linkedin_url" in out or "email" in out
    if not anchored and not (named and ("domain" in out or "company" in out)):
        raise ValueError(
            f"{provider} needs linkedin_url or email, or first_name and last_name (or "
            f"full_name) with domain or company; the input has {sorted(given) or 'nothing'}"
        )


def status_of(word: Any, table: Mapping[str, str], default: str = "unknown") -> str:
    """The provider's word for an address (any case) in our vocabulary, by its ``table``."""
    if not isinstance(word, str):
        return default
    return table.get(word.strip().casefold(), default)


def _confidence(value: Any, scale: float = 1.0) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return round(max(0.0, min(100.0, float(value) * scale)), 2)


def email_result(
    raw: Any,
    email: Any,
    status: str,
    confidence: Any = None,
    *,
    scale: float = 1.0,
    **more: Any,
) -> dict[str, Any] | None:
    """An email finder's result; None when there is no address (not found). ``scale``
    turns the provider's confidence into 0-100 (0.97 with ``scale=100``)."""
    if not isinstance(email, str) or "@" not in email:
        return None
    assert status in STATUSES, status
    return {
        "email": email.strip(),
        "confidence": _confidence(confidence, scale),
        "status": status,
        **more,
        "raw": raw,
    }


def verification(
    raw: Any, email: Any, status: str, *, disposable: Any = None, role: Any = None, **more: Any
) -> dict[str, Any] | None:
    """A verifier's result; None without an address."""
    if not isinstance(email, str) or not email.strip():
        return None
    assert status in STATUSES, status
    return {
        "email": email.strip(),
        "status": status,
        "disposable": disposable if isinstance(disposable, bool) else None,
        "role": role if isinstance(role, bool) else None,
        **more,
        "raw": raw,
    }
