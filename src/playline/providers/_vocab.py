"""One vocabulary across providers (``docs/guide/providers.md``).

Inputs: ``first_name``, ``last_name``, ``full_name``, ``domain``, ``company``,
``linkedin_url``, ``email``. An email finder answers ``{"email", "confidence", "status"}``,
a verifier ``{"email", "status", "disposable", "role"}``; ``status`` is one of
``valid``, ``catch_all``, ``unknown`` and ``invalid``; ``confidence`` is 0-100 (None when the
provider gives none). Every result keeps the provider's own answer under ``raw``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["INPUTS", "STATUSES", "email_result", "status_of", "verification"]

INPUTS = ("first_name", "last_name", "full_name", "domain", "company", "linkedin_url", "email")
STATUSES = ("valid", "catch_all", "unknown", "invalid")


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
