"""Payload validation and normalisation: the simulated providers match on content, not spelling.

Real providers forgive case and stray whitespace (and a runtime is expected to dedupe on the
same normal form), so every lookup and every ledger key goes through these functions. The
ledger key of an input is the sorted-key JSON of its normalised required fields; fields a tool
does not take are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from ._catalog import ToolSpec


def normalize_text(value: str) -> str:
    """Collapse runs of whitespace and case-fold: ``"  Ada  LOVELACE "`` -> ``"ada lovelace"``."""
    return " ".join(value.split()).casefold()


def normalize_domain(value: str) -> str:
    """Reduce a URL or host to a bare domain: ``"https://www.Acme.com/about"`` -> ``"acme.com"``."""
    host = value.strip().casefold()
    for scheme in ("https://", "http://"):
        if host.startswith(scheme):
            host = host[len(scheme) :]
            break
    host = host.split("/", 1)[0].rstrip(".")
    if host.startswith("www."):
        host = host[4:]
    return host


def normalize_email(value: str) -> str:
    """Trim and case-fold an address (local parts are case-insensitive in practice)."""
    return value.strip().casefold()


def _keep(value: str) -> str:
    return value.strip()


NORMALIZERS = {
    "first_name": normalize_text,
    "last_name": normalize_text,
    "domain": normalize_domain,
    "email": normalize_email,
    "job_id": _keep,
}


def canonical_json(fields: Mapping[str, str]) -> str:
    """The ledger key of an input: sorted-key compact JSON of the normalised fields."""
    return orjson.dumps(dict(fields), option=orjson.OPT_SORT_KEYS).decode()


class InvalidInput(ValueError):
    """A payload the tool cannot take; ``code`` is ``invalid_input`` or ``batch_too_large``."""

    def __init__(self, message: str, code: str = "invalid_input") -> None:
        super().__init__(message)
        self.code = code


Fields = dict[str, str]


def _fields(spec: ToolSpec, payload: Any, where: str) -> Fields:
    if not isinstance(payload, dict):
        raise InvalidInput(f"{where} must be a JSON object with {', '.join(spec.required)}")
    fields: Fields = {}
    for name in spec.required:
        value = payload.get(name)
        normal = NORMALIZERS[name](value) if isinstance(value, str) else ""
        if not normal:
            raise InvalidInput(
                f"{where}.{name} is required as a non-empty string "
                f"({spec.id} takes {', '.join(spec.required)})"
            )
        fields[name] = normal
    return fields


def parse_single(spec: ToolSpec, payload: Any) -> Fields:
    """The normalised fields of a single-item payload (a tool or a poll)."""
    return _fields(spec, payload, "payload")


def parse_bulk(spec: ToolSpec, base: ToolSpec, payload: Any) -> list[Fields]:
    """The normalised fields of every item of a bulk payload ``{"items": [...]}``."""
    items = payload.get("items") if isinstance(payload, dict) else None
    if not isinstance(items, list):
        raise InvalidInput(f"payload.items is required: a list of {base.id} inputs")
    assert spec.batch_max is not None
    if len(items) > spec.batch_max:
        raise InvalidInput(
            f"{spec.id} takes at most {spec.batch_max} items, got {len(items)}; split the batch",
            "batch_too_large",
        )
    return [_fields(base, item, f"payload.items[{i}]") for i, item in enumerate(items)]
