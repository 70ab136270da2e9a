"""Inputs normalised before they are keyed (``normalize=`` on any tool).

CRM exports hold the same person as ``Maya, Baker, verpaxhealth.com`` and ``MAYA , baker,
https://www.VerpaxHealth.com/``; receipts are keyed on the input, so without this each
variant is bought again. A tool declares how its inputs compare, field by field:

- ``"email"``: trimmed, case-folded;
- ``"domain"``: a URL or an email reduced to its host, case-folded, without ``www.`` or a
  trailing dot (``https://www.Acme.com/about`` -> ``acme.com``);
- ``"name"``: trimmed, inner whitespace collapsed, case-folded;
- ``"text"``: trimmed, inner whitespace collapsed (case kept);

every text in Unicode NFC first (an ``é`` typed as ``e`` and an accent is the ``é`` of the
other export). Or a function ``input -> input`` does it all. The normalised input is both the
receipt's key and what the provider is sent: a tool's receipts never hide a difference its
provider would see.
"""

from __future__ import annotations

import unicodedata
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import PlayDefinitionError

__all__ = ["KINDS", "Normalize"]


def _text(value: str) -> str:
    return " ".join(value.split())


def _name(value: str) -> str:
    return _text(value).casefold()


def _email(value: str) -> str:
    return value.strip().casefold()


def _domain(value: str) -> str:
    text = value.strip().casefold()
    if "@" in text and "/" not in text:  # an email address: its domain
        text = text.rsplit("@", 1)[1]
    if "//" not in text:
        text = "//" + text
    host = urllib.parse.urlsplit(text).hostname or ""
    host = host.rstrip(".")
    return host[4:] if host.startswith("www.") else host


KINDS: dict[str, Callable[[str], str]] = {
    "email": _email,
    "domain": _domain,
    "name": _name,
    "text": _text,
}


class Normalize:
    """How a tool's inputs compare: per field, one of ``KINDS``, or a function of the input."""

    def __init__(self, tool: str, declared: Mapping[str, str] | Callable[..., Any]) -> None:
        self.tool = tool
        self.fields: dict[str, Callable[[str], str]] = {}
        self.function: Callable[..., Any] | None = None
        if callable(declared) and not isinstance(declared, Mapping):
            self.function = declared
            self.described: dict[str, str] | str = getattr(declared, "__name__", "a function")
            return
        if not isinstance(declared, Mapping) or not all(
            isinstance(k, str) and v in KINDS for k, v in declared.items()
        ):
            raise PlayDefinitionError(
                f"{tool}: normalize={declared!r} maps input fields to one of "
                f"{', '.join(KINDS)}, e.g. normalize={{'email': 'email', 'domain': 'domain'}}, "
                "or is a function input -> input."
            )
        self.fields = {field: KINDS[kind] for field, kind in declared.items()}
        self.described = dict(declared)

    def __call__(self, input: dict[str, Any]) -> dict[str, Any]:
        if self.function is not None:
            return self._by_function(input)
        out = input
        for field, kind in self.fields.items():
            value = input.get(field)
            if isinstance(value, str):
                if out is input:
                    out = dict(input)
                out[field] = kind(unicodedata.normalize("NFC", value))
        return out

    def _by_function(self, input: dict[str, Any]) -> dict[str, Any]:
        assert self.function is not None
        try:
            out = self.function(dict(input))
        except Exception as exc:
            raise PlayDefinitionError(
                f"{self.tool}: its normalize function failed on an input "
                f"({type(exc).__name__}: {exc})."
            ) from exc
        if not isinstance(out, Mapping):
            raise PlayDefinitionError(
                f"{self.tool}: its normalize function returned {type(out).__name__}; return "
                "the input as a dict."
            )
        return dict(out)
