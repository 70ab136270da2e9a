"""What the LLM doubles answer: a pure function of the request (model, messages, every
parameter that changes an answer), so the same request gets the same answer and any other
gets another.

- plain text: one short line made of the last user message's words, its opener and order
  drawn from the request's digest, tagged with 6 hex digits of it;
- a JSON Schema: a value that validates against it (objects with every property, strings,
  enums and consts, numbers and integers within their bounds, booleans, arrays within their
  item counts, ``anyOf``/``oneOf``/``allOf``, nullable types, ``$ref`` into ``$defs``), each
  choice drawn from the digest and the value's path;
- ``spoiled``: what a model gets wrong and a client must ask again for: text that is not
  JSON (the JSON in a Markdown fence, or cut short), or JSON that does not validate (a
  required property missing, a value of the wrong type or outside its enum).

:func:`validate` checks a value against a schema (the keywords above, not ``pattern`` or
``format``); the doubles use it to make sure a spoiled answer is really wrong.
"""

from __future__ import annotations

import hashlib
import operator
import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

__all__ = ["digest", "line", "spoiled", "validate", "value"]

_OPENERS = ("In short:", "Summary:", "Answer:", "Most likely:", "Briefly:", "Noted:")
_STOP_WORDS = (
    "the a an and or of to in on for with from by at as is are was were be this that these "
    "those it its into about what which who whom whose how why when where please give write "
    "return answer tell me you your our their there one line short using only"
)
_STOP = frozenset(_STOP_WORDS.split())
_WORD = re.compile(r"[^\W\d_][\w'-]*")
_MAX_DEPTH = 8


def digest(*parts: Any) -> bytes:
    """A stable digest of JSON-able parts (dict keys sorted)."""
    return hashlib.sha256(orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)).digest()


def _unit(seed: bytes, path: str) -> float:
    """A number in [0, 1) drawn from ``seed`` for ``path``."""
    drawn = hashlib.sha256(seed + path.encode()).digest()
    return int.from_bytes(drawn[:8], "big") / 2**64


def _pick(seed: bytes, path: str, options: Sequence[Any]) -> Any:
    return options[int(_unit(seed, path) * len(options))]


def keywords(text: str) -> list[str]:
    """The text's words worth repeating, in order, once each."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text):
        if word.casefold() not in _STOP and len(word) > 2:
            seen.setdefault(word, None)
    return list(seen)


def line(seed: bytes, last_user: str) -> str:
    """One short line answering ``last_user``, drawn from ``seed``."""
    words = keywords(last_user)
    count = min(len(words), 3 + int(_unit(seed, "count") * 4))
    start = int(_unit(seed, "start") * max(1, len(words) - count + 1))
    chosen = words[start : start + count] or ["nothing", "asked"]
    return f"{_pick(seed, 'opener', _OPENERS)} {' '.join(chosen)} [{seed.hex()[:6]}]"


# -- values for a schema ---------------------------------------------------------------------


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    for _ in range(32):
        if not isinstance(ref, str) or not ref.startswith("#"):
            return schema
        target: Any = root
        for part in ref.lstrip("#").strip("/").split("/"):
            if part:
                target = target.get(part.replace("~1", "/").replace("~0", "~"), {})
        schema = target if isinstance(target, Mapping) else {}
        ref = schema.get("$ref")
    return schema


def _types(schema: Mapping[str, Any]) -> list[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    if "properties" in schema or "required" in schema:
        return ["object"]
    if "items" in schema:
        return ["array"]
    return []


def _merged(parts: Sequence[Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for part in parts:
        if not isinstance(part, Mapping):
            continue
        for key, item in part.items():
            if key == "properties" and isinstance(item, Mapping):
                merged.setdefault("properties", {}).update(item)
            elif key == "required" and isinstance(item, list):
                merged["required"] = [*merged.get("required", []), *item]
            else:
                merged.setdefault(key, item)
    return merged


def value(
    schema: Mapping[str, Any],
    seed: bytes,
    words: Sequence[str],
    *,
    root: Mapping[str, Any] | None = None,
    path: str = "$",
    depth: int = 0,
) -> Any:
    """A value valid against ``schema``, drawn from ``seed`` (``words``: the prompt's)."""
    root = schema if root is None else root
    schema = _resolve(schema, root)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return _pick(seed, path, schema["enum"])
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            branches = schema[key]
            if key == "oneOf":  # exactly one must match: the first branch nothing else takes
                branches = branches[:1]
            chosen = _pick(seed, f"{path}|{key}", branches)
            rest = {k: v for k, v in schema.items() if k != key}
            return value(_merged([chosen, rest]), seed, words, root=root, path=path, depth=depth)
    if isinstance(schema.get("allOf"), list):
        parts = [_resolve(p, root) for p in schema["allOf"] if isinstance(p, Mapping)]
        rest = {k: v for k, v in schema.items() if k != "allOf"}
        return value(_merged([rest, *parts]), seed, words, root=root, path=path, depth=depth)
    types = _types(schema)
    concrete = [t for t in types if t != "null"]
    if not concrete:
        return None if "null" in types else _text(seed, path, words, schema)
    if "null" in types and depth >= _MAX_DEPTH:
        return None
    kind = concrete[0]
    if kind == "object":
        properties = schema.get("properties") or {}
        return {
            name: value(sub, seed, words, root=root, path=f"{path}.{name}", depth=depth + 1)
            for name, sub in properties.items()
            if isinstance(sub, Mapping)
        }
    if kind == "array":
        low = int(schema.get("minItems", 0 if depth >= _MAX_DEPTH // 2 else 1))
        high = int(schema.get("maxItems", low + 2))
        length = low + int(_unit(seed, f"{path}#") * (max(low, high) - low + 1))
        items = schema.get("items") if isinstance(schema.get("items"), Mapping) else {}
        assert isinstance(items, Mapping)
        return [
            value(items, seed, words, root=root, path=f"{path}[{i}]", depth=depth + 1)
            for i in range(length)
        ]
    if kind in ("integer", "number"):
        return _number(seed, path, schema, integer=kind == "integer")
    if kind == "boolean":
        return _unit(seed, path) < 0.5
    return _text(seed, path, words, schema)


def _number(seed: bytes, path: str, schema: Mapping[str, Any], *, integer: bool) -> float | int:
    low = float(schema.get("minimum", schema.get("exclusiveMinimum", 0)))
    high = float(schema.get("maximum", schema.get("exclusiveMaximum", max(low, 0) + 100)))
    step = 1 if integer else 0.01
    if "exclusiveMinimum" in schema and "minimum" not in schema:
        low += step
    if "exclusiveMaximum" in schema and "maximum" not in schema:
        high -= step
    high = max(low, high)
    if integer:
        low, high = int(-(-low // 1)), int(high // 1)
        return low + int(_unit(seed, path) * (max(low, high) - low + 1))
    drawn = round(low + _unit(seed, path) * (high - low), 2)
    return min(max(drawn, low), high)


def _text(seed: bytes, path: str, words: Sequence[str], schema: Mapping[str, Any]) -> str:
    pool = list(words) or ["sim"]
    count = 1 + int(_unit(seed, f"{path}~") * min(3, len(pool)))
    start = int(_unit(seed, f"{path}^") * max(1, len(pool) - count + 1))
    text = " ".join(pool[start : start + count])
    fmt = schema.get("format")
    slug = re.sub(r"[^a-z0-9]+", "-", text.casefold()).strip("-") or "sim"
    if fmt == "email":
        text = f"{slug}@example.com"
    elif fmt in ("uri", "url"):
        text = f"https://example.com/{slug}"
    elif fmt == "date":
        text = f"2024-{1 + int(_unit(seed, path) * 12):02d}-{1 + int(_unit(seed, path) * 28):02d}"
    elif fmt == "date-time":
        text = f"2024-01-{1 + int(_unit(seed, path) * 28):02d}T12:00:00Z"
    low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
    text = text.ljust(low, "x")
    return text[: int(high)] if isinstance(high, int) else text


# -- validation ----------------------------------------------------------------------------

_PY_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
}


def _is(kind: str, item: Any) -> bool:
    if kind == "integer":
        return (isinstance(item, int) and not isinstance(item, bool)) or (
            isinstance(item, float) and item.is_integer()
        )
    if kind == "number":
        return isinstance(item, int | float) and not isinstance(item, bool)
    return isinstance(item, _PY_TYPES.get(kind, (object,)))


def validate(
    schema: Mapping[str, Any], item: Any, *, root: Mapping[str, Any] | None = None, path: str = "$"
) -> list[str]:
    """What is wrong with ``item`` against ``schema``: one message per fault, [] when valid."""
    root = schema if root is None else root
    schema = _resolve(schema, root)
    errors: list[str] = []
    types = _types(schema)
    if types and not any(_is(kind, item) for kind in types):
        return [f"{path}: {orjson.dumps(item).decode()[:40]} is not of type {'/'.join(types)}"]
    if "const" in schema and item != schema["const"]:
        errors.append(f"{path}: should be {schema['const']!r}")
    if isinstance(schema.get("enum"), list) and item not in schema["enum"]:
        errors.append(f"{path}: {item!r} is not one of {schema['enum']!r}")
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            passing = sum(not validate(s, item, root=root, path=path) for s in schema[key])
            if passing == 0 or (key == "oneOf" and passing > 1):
                errors.append(f"{path}: matches {passing} of the {key} schemas")
    for sub in schema.get("allOf", []) if isinstance(schema.get("allOf"), list) else []:
        errors += validate(sub, item, root=root, path=path)
    if isinstance(item, dict):
        properties = schema.get("properties") or {}
        errors += [
            f"{path}: '{name}' is a required property"
            for name in schema.get("required", [])
            if name not in item
        ]
        for name, sub in item.items():
            if name in properties:
                errors += validate(properties[name], sub, root=root, path=f"{path}.{name}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{path}: additional property '{name}' is not allowed")
    if isinstance(item, list):
        if len(item) < schema.get("minItems", 0):
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(item) > schema["maxItems"]:
            errors.append(f"{path}: more than {schema['maxItems']} items")
        if isinstance(schema.get("items"), Mapping):
            for index, sub in enumerate(item):
                errors += validate(schema["items"], sub, root=root, path=f"{path}[{index}]")
    if isinstance(item, str):
        if len(item) < schema.get("minLength", 0):
            errors.append(f"{path}: shorter than {schema['minLength']}")
        if "maxLength" in schema and len(item) > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']}")
    if _is("number", item):
        for key, bad in (
            ("minimum", operator.lt),
            ("maximum", operator.gt),
            ("exclusiveMinimum", operator.le),
            ("exclusiveMaximum", operator.ge),
        ):
            if _is("number", schema.get(key)) and bad(item, schema[key]):
                errors.append(f"{path}: {item} breaks {key} {schema[key]}")
    return errors


# -- wrong answers ---------------------------------------------------------------------------


def spoiled_value(schema: Mapping[str, Any], good: Any, seed: bytes) -> Any:
    """A JSON value like ``good`` that does not validate against ``schema`` (``good`` itself
    when the schema accepts anything)."""
    schema = _resolve(schema, schema)
    if isinstance(good, dict):
        required = [name for name in schema.get("required", []) if name in good]
        if required:  # the commonest fault: a required property left out
            name = _pick(seed, "drop", required)
            return {k: v for k, v in good.items() if k != name}
        properties = schema.get("properties") or {}
        for name, sub in properties.items():
            if name in good and isinstance(sub, Mapping):
                wrong = _wrong(sub, schema)
                if wrong is not _NOTHING:
                    return {**good, name: wrong}
        return good
    wrong = _wrong(schema, schema)
    return good if wrong is _NOTHING else wrong


_NOTHING: Any = object()


def _wrong(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Any:
    """A value ``schema`` refuses, or ``_NOTHING``."""
    candidates: tuple[Any, ...] = ("not one of the choices", 42, None, [], {"unexpected": True})
    for candidate in candidates:
        if validate(schema, candidate, root=root):
            return candidate
    return _NOTHING


def spoiled(schema: Mapping[str, Any], good: Any, seed: bytes) -> str:
    """The text of a wrong answer to a schema request: not JSON, or JSON that does not
    validate, as drawn from ``seed``."""
    text = orjson.dumps(good).decode()
    kind = _pick(seed, "spoil", ("fenced", "cut", "invalid"))
    if kind == "fenced" or not isinstance(good, dict | list):
        return f"Here is the JSON you asked for:\n```json\n{text}\n```"
    if kind == "cut" or spoiled_value(schema, good, seed) == good:
        return text[: max(1, len(text) * 2 // 3)]
    return orjson.dumps(spoiled_value(schema, good, seed)).decode()
