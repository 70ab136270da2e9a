"""Canonical JSON and content digests: the encoding every key and stored value goes through."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from typing import Any

import orjson

from ._secrets import Secret, check_no_secret
from .errors import PlayDefinitionError

__all__ = ["canonical", "digest", "dumps", "loads", "normalise_input", "without_numpy"]

# NumPy scalars and arrays as the numbers and lists they hold (a pandas row holds them): a
# numpy.int64(3) is stored, and keys a receipt, as a 3 does.
_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY
_ORDERED = orjson.OPT_SERIALIZE_NUMPY
# Dict keys that are no text (1, 2.5, True, None, a date) are written as the JSON text of
# their value, unless two keys of one dict would become the same text: see _other_keys.
_NON_STR_KEYS = orjson.OPT_NON_STR_KEYS


def _refuse(value: Any) -> Any:
    if hasattr(type(value), "model_fields") and hasattr(value, "model_dump"):
        return value.model_dump(mode="json")  # a pydantic model (ctx.llm's): its JSON form
    if isinstance(value, dt.date):  # a subclass orjson does not take: pandas' Timestamp
        return None if value != value else value.isoformat()  # NaT is missing: null
    if type(value).__name__ == "NAType":  # pandas' NA: missing, as NaN is
        return None
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
    option = _ORDERED if ordered else _SORTED
    try:
        data = orjson.dumps(value, default=_refuse, option=option)
    except TypeError as exc:
        if isinstance(exc.__cause__, PlayDefinitionError):
            raise exc.__cause__ from None
        data = _other_keys(value, option, what, advice)  # a key that is no text, or no JSON
    check_no_secret(data, what)
    return data


def _other_keys(value: Any, option: int, what: str, advice: str) -> bytes:
    """``value`` has a dict key that is no text (or something that is no JSON at all): its
    keys are written as their JSON text, but two keys of one dict that become the same text
    (``1`` and ``"1"``) are refused, where JSON would keep one of the two values silently."""
    try:
        data = orjson.dumps(value, default=_refuse, option=option | _NON_STR_KEYS)
    except TypeError as exc:
        if isinstance(exc.__cause__, PlayDefinitionError):
            raise exc.__cause__ from None
        raise PlayDefinitionError(f"{what} is not JSON-serialisable ({exc}). {advice}") from None
    text = _repeated_key(data)
    if text is not None:
        pair = _keys_written(value, text)
        which = (
            f"its keys {pair[0]!r} and {pair[1]!r} are both {text!r}"
            if pair
            else f"two keys of one of its dicts are both {text!r}"
        )
        raise PlayDefinitionError(
            f"{what} cannot be stored as it is: {which} once written as JSON, whose keys are "
            "text, and only one of their values would be kept. Give each key its own text."
        )
    return data


def _repeated_key(data: bytes) -> str | None:
    """A key that an object of the JSON ``data`` holds twice, or None."""
    repeated: list[str] = []

    def check(pairs: list[tuple[str, Any]]) -> None:  # the values are not needed
        if repeated:
            return
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                repeated.append(key)
                return
            seen.add(key)

    json.loads(data, object_pairs_hook=check)
    return repeated[0] if repeated else None


def _keys_written(value: Any, text: str) -> tuple[Any, Any] | None:
    """Two keys of one dict in ``value`` written as the JSON text ``text``, for the error."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            found = [k for k in item if _key_text(k) == text]
            if len(found) > 1:
                return found[0], found[1]
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return None


def _key_text(key: Any) -> str | None:
    if isinstance(key, str):
        return key
    try:
        written: dict[str, Any] = orjson.loads(orjson.dumps({key: 0}, option=_NON_STR_KEYS))
    except TypeError:
        return None
    return next(iter(written))


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
        normal = {
            k if type(k) is str else str(k): (
                " ".join(v.split())
                if type(v) is str
                else v
                if type(v) in _EXACT
                else normalise_input(v)
            )
            for k, v in value.items()
            if v is not None
        }
        if len(normal) < len(value):  # null fields dropped, or keys that became one text
            _distinct_keys(value)
        return normal
    if kind in _EXACT:
        return value
    if kind is float:
        return _finite(value)
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


def _finite(number: float) -> float:
    """A float of a tool input: NaN and infinity are refused, as JSON has no such numbers
    (written as null, an input holding one would ask, and be answered, as one holding null)."""
    if number - number != 0.0:  # NaN or an infinity; one subtraction, where isfinite is a call
        raise PlayDefinitionError(
            f"it holds the number {number!r}, which JSON cannot hold (it would be sent as "
            "null): give None for a value that is missing, or a number."
        )
    return number


def _distinct_keys(value: dict[Any, Any]) -> None:
    """Refuse an input two of whose keys are one text (``1`` and ``"1"``): its receipt key
    would be that of an input holding only one of them, which asks something else."""
    seen: dict[str, Any] = {}
    for key, field in value.items():
        if field is None:
            continue
        text = key if type(key) is str else str(key)
        if text in seen:
            raise PlayDefinitionError(
                f"its keys {seen[text]!r} and {key!r} are both {text!r} as text, and a "
                "receipt would take it for an input holding only one of them. Give each key "
                "its own text."
            )
        seen[text] = key


_PLAIN = frozenset({int, float, bool, type(None)})
_EXACT = _PLAIN - {float}  # written as they are; a float is checked for NaN and infinity


def _numeric_numpy(value: Any) -> bool:
    """A NumPy number or boolean (a scalar or an array of them), found without importing
    NumPy: a play that never uses it pays nothing."""
    dtype = getattr(value, "dtype", None) if type(value).__module__ == "numpy" else None
    return getattr(dtype, "kind", None) in ("b", "i", "u", "f")


def _has_numpy(value: Any) -> bool:
    kind = type(value)
    if kind is str or kind in _PLAIN:
        return False
    if kind is not dict and _numeric_numpy(value):
        return True
    if kind is dict or isinstance(value, Mapping):  # a tool's input: once per call, kept lean
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
