"""Canonical JSON and content digests: the encoding every key and stored value goes through."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

from ._secrets import Secret, check_no_secret
from .errors import PlayDefinitionError

__all__ = ["canonical", "digest", "dumps", "loads", "normalise_input"]

_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
_ORDERED = orjson.OPT_NON_STR_KEYS


def _refuse(value: Any) -> Any:
    if isinstance(value, Secret):
        str(value)  # raises SecretLeakError, naming the secret, never showing it
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


_PLAIN_VALUES = "Return plain dicts, lists, strings, numbers, booleans or None."


def dumps(
    value: Any, *, what: str = "value", ordered: bool = False, advice: str = _PLAIN_VALUES
) -> bytes:
    """Serialise ``value`` as canonical JSON bytes (sorted keys, no whitespace); with
    ``ordered`` keys keep their order (rows keep their column order).

    Raises ``PlayDefinitionError`` naming ``what`` when the value is not JSON-serialisable,
    and ``SecretLeakError`` when it holds a secret (a ``Secret``, or a copy of its value).
    """
    try:
        data = orjson.dumps(value, default=_refuse, option=_ORDERED if ordered else _SORTED)
    except TypeError as exc:
        if isinstance(exc.__cause__, PlayDefinitionError):
            raise exc.__cause__ from None
        raise PlayDefinitionError(f"{what} is not JSON-serialisable ({exc}). {advice}") from None
    check_no_secret(data, what)
    return data


def canonical(value: Any, *, what: str = "value") -> str:
    return dumps(value, what=what).decode()


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def digest(*parts: str | bytes) -> str:
    """A hex SHA-256 over ``parts``, each length-prefixed so that boundaries cannot shift."""
    h = hashlib.sha256()
    for part in parts:
        raw = part.encode() if isinstance(part, str) else part
        h.update(len(raw).to_bytes(8, "big"))
        h.update(raw)
    return h.hexdigest()


def normalise_input(value: Any) -> Any:
    """The form of a tool input that its receipt key is computed from.

    Strings are stripped and inner runs of whitespace collapsed; keys whose value is None are
    dropped (a missing and a null field ask the provider the same thing). Case is kept: it is
    meaningful for some providers. A secret is replaced by its digest.
    """
    kind = type(value)
    if kind is str:
        return " ".join(value.split())
    if kind is dict:  # the common case, kept flat: this runs once per tool call
        return {
            k if type(k) is str else str(k): (
                " ".join(v.split())
                if type(v) is str
                else v
                if type(v) in _PLAIN
                else normalise_input(v)
            )
            for k, v in value.items()
            if v is not None
        }
    if kind in _PLAIN:
        return value
    if isinstance(value, Secret):  # keys see a digest of a secret, never the secret
        return {"$secret": digest("secret", value.reveal())}
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, Mapping):
        return normalise_input(dict(value))
    if isinstance(value, list | tuple):
        return [normalise_input(v) for v in value]
    return value


_PLAIN = frozenset({int, float, bool, type(None)})
