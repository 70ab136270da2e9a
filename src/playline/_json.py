"""Canonical JSON and content digests: the encoding every key and stored value goes through."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

from ._secrets import Secret, check_no_secret
from .errors import PlayDefinitionError

__all__ = ["canonical", "digest", "dumps", "loads", "normalise_input", "without_numpy"]

# NumPy scalars and arrays as the numbers and lists they hold (a pandas row holds them): a
# numpy.int64(3) is stored, and keys a receipt, as a 3 does.
_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
_ORDERED = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


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
    if _numeric_numpy(value):  # what ctx.tool sends: the Python number (or list) it holds
        return normalise_input(value.tolist())
    return value


_PLAIN = frozenset({int, float, bool, type(None)})


def _numeric_numpy(value: Any) -> bool:
    """A NumPy number or boolean (a scalar or an array of them), found without importing
    NumPy: a play that never uses it pays nothing."""
    dtype = getattr(value, "dtype", None) if type(value).__module__ == "numpy" else None
    return getattr(dtype, "kind", None) in ("b", "i", "u", "f")


def _has_numpy(value: Any) -> bool:
    kind = type(value)
    if kind is str or kind in _PLAIN:
        return False
    if _numeric_numpy(value):
        return True
    if isinstance(value, Mapping):  # a tool's input: checked once per call, kept lean
        for k, v in value.items():
            if type(k) is not str and _numeric_numpy(k):
                return True
            if type(v) is not str and type(v) not in _PLAIN and _has_numpy(v):
                return True
        return False
    if isinstance(value, list | tuple):
        return any(_has_numpy(v) for v in value)
    return False


def _as_python(value: Any) -> Any:
    if _numeric_numpy(value):
        return value.tolist()  # a scalar's Python number, an array's (nested) list
    if isinstance(value, Mapping):
        return {_as_python(k): _as_python(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_as_python(v) for v in value]
    return value


def without_numpy(value: Any) -> Any:
    """``value`` with the NumPy numbers and booleans in it (scalars and arrays, in dicts,
    lists and tuples, keys too) as the Python ones they hold: what a tool is sent, as a
    pandas row holds ``numpy.int64`` and ``numpy.bool_``. Without any, ``value`` itself."""
    return _as_python(value) if _has_numpy(value) else value
