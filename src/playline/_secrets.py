"""Secrets: values a play may use but that never reach the store, a log, an event or a file.

``ctx.secrets.get("HUNTER_KEY")`` reads ``PLAYLINE_SECRET_HUNTER_KEY`` (else ``HUNTER_KEY``) and
returns a ``Secret``: a value of its own type that refuses ``str()``, formatting, JSON encoding
and pickling. A tool input may hold one (``ctx.tool("x", {"api_key": key})``): the receipt key
sees only a digest, and the transport reveals it to the tool or the provider and nowhere else;
``key.reveal()`` gives the string where a play needs it explicitly.

Copies made of the revealed string are caught by value. Everything Playline is about to store,
print or emit (rows and row keys, dataset names, event keys, results, logs, events, errors,
exports) is checked for every secret read in this process; the checks cost nothing until a
secret has been read. The forms a secret is caught in:

- the secret as it is, in any case of its ASCII letters;
- a secret of 16 characters or more, also in derived forms: any piece of half its length or
  more (at least 10 characters) of it, of its upper-cased or of its lower-cased form (so
  ``s[:-1]`` and ``s.upper()`` are caught, also where upper-casing changes the length, as
  for ``ß``), and the base64 (standard or URL-safe, also inside a longer encoded text), hex
  and URL-quoted encodings of the whole;
- each of those as it appears escaped inside JSON (quotes, backslashes and control
  characters escaped), which is how values are stored, and escaped twice, or by ``repr``
  and then JSON (a tool that returns ``json.dumps(s)`` or ``repr(s)``).

Secrets shorter than 4 characters are not checked: they would be found by accident.

Values that hold a secret are refused (``SecretLeakError``, which never shows the secret): a
cell fails, a row whose key holds one fails under a digest of its key, a name or key of the
play fails the run, which still ends with a storable record. Error messages have the secret
replaced by ``[secret NAME]``.

What is not protected: a play file is code running with the user's rights; it can reveal a
secret and send it anywhere, or transform it beyond these forms (encrypt it, split it in
pieces shorter than half). The checks stop accidents, not a play written to leak.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import threading
import urllib.parse
from typing import Any, NoReturn

from .errors import PlayDefinitionError, SecretLeakError

__all__ = [
    "Secret",
    "Secrets",
    "check_no_secret",
    "check_secret_name",
    "leaks",
    "redact",
    "reveal",
]

DERIVED_FROM = 16  # characters: secrets at least this long are also caught in derived forms
MIN_PIECE = 10  # characters: the shortest piece of a secret that counts as the secret
_MIN_LENGTH = 4  # shorter values would match by accident
_SMALL = 4096  # bytes: up to this, one pattern finds the forms; past it, a scan per form


class Secret:
    """A secret's value: usable in tool inputs and request headers, refused everywhere else.

    ``str(secret)``, ``f"{secret}"``, JSON encoding and pickling raise ``SecretLeakError``;
    ``repr`` shows only its name; ``reveal()`` returns the value (it is yours to keep safe).
    """

    __slots__ = ("_value", "name")

    def __init__(self, name: str, value: str) -> None:
        self.name = name
        self._value = value
        _registry.add(name, value)

    def reveal(self) -> str:
        return self._value

    def __len__(self) -> int:
        return len(self._value)

    def __repr__(self) -> str:
        return f"Secret({self.name!r})"

    def __str__(self) -> str:
        self._refuse("turned into text (str())")

    def __format__(self, spec: str) -> str:
        self._refuse("formatted into text (f-string or format())")

    def __reduce__(self) -> NoReturn:
        self._refuse("pickled")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Secret):
            return self._value == other._value
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("playline.secret", self._value))

    def _refuse(self, what: str) -> NoReturn:
        raise SecretLeakError(
            f"Secret {self.name!r} cannot be {what}: secrets are never stored, logged or "
            "emitted. Pass it in a tool input (ctx.tool(..., {'api_key': secret})) or use "
            "secret.reveal() where you need the value yourself."
        )


def reveal(value: Any) -> Any:
    """``value`` with every ``Secret`` inside it (in dicts and lists) revealed: what a
    transport hands to the tool or the provider."""
    if isinstance(value, Secret):
        return value.reveal()
    if isinstance(value, dict):
        return {k: reveal(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [reveal(v) for v in value]
    return value


class _Registry:
    """Every secret read in this process, and the needles that find any of their forms."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: dict[str, str] = {}  # value -> name
        self._needles: tuple[bytes, ...] = ()  # every form, UTF-8, ASCII letters lower-cased
        self._small: re.Pattern[bytes] | None = None  # the same as one pattern
        self._text: re.Pattern[str] | None = None  # for redacting messages

    def __bool__(self) -> bool:
        return bool(self._names)

    def add(self, name: str, value: str) -> None:
        if len(value) < _MIN_LENGTH or value in self._names:
            return
        with self._lock:
            self._names[value] = name
            forms = sorted({f for v in self._names for f in _forms(v)}, key=len, reverse=True)
            needles = sorted({_utf8(f).lower() for f in forms}, key=len, reverse=True)
            self._needles = tuple(needles)
            self._small = re.compile(b"|".join(re.escape(n) for n in needles))
            self._text = re.compile("|".join(re.escape(f) for f in forms), re.IGNORECASE)

    def search(self, data: str | bytes) -> bool:
        low = (data if isinstance(data, bytes) else _utf8(data)).lower()
        if len(low) < _SMALL:  # one pattern is quicker on short values,
            return self._small is not None and self._small.search(low) is not None
        return any(needle in low for needle in self._needles)  # a scan per form on long ones

    def redact(self, text: str) -> str:
        if self._text is None:
            return text
        names = self._names

        def name_of(match: re.Match[str]) -> str:
            found = match.group(0)
            name = next((n for v, n in names.items() if found.lower() in v.lower()), None)
            return f"[secret {name}]" if name else "[secret]"

        return self._text.sub(name_of, text)


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # an environment may hold undecodable bytes


def _forms(value: str) -> set[str]:
    """The forms of ``value`` that count as the secret itself (see the module docstring)."""
    forms = {value}
    if len(value) >= DERIVED_FROM:
        piece = max(MIN_PIECE, len(value) // 2)
        # Pieces of each letter case: upper() and lower() may change a text's length (ß, İ),
        # so matching without case alone would miss them.
        for text in {value, value.upper(), value.lower()}:
            forms.update(text[i : i + piece] for i in range(len(text) - piece + 1))
        raw = value.encode()
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            for skip in range(3):  # base64 of a longer text holds the secret at 3 alignments
                encoded = encode(raw[skip:]).decode().rstrip("=")
                forms.add(encoded[2:-2] if len(encoded) > 8 else encoded)
        forms.add(binascii.hexlify(raw).decode())
        forms.add(urllib.parse.quote(value, safe=""))
    # A value may hold the secret escaped already (a tool returning json.dumps(s) or repr(s)),
    # and stored values are JSON, which escapes quotes, backslashes and control characters
    # once more. Escaping goes character by character, so an escaped piece is a piece of the
    # escaped text.
    once = {_escaped(f) for f in forms} | {_ascii(f) for f in forms} | {_repr(f) for f in forms}
    forms |= once | {_escaped(f) for f in once}
    return {f for f in forms if len(f) >= _MIN_LENGTH}


def _escaped(text: str) -> str:
    # json's escapes are orjson's, and json also takes the surrogates an environment may hold
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _ascii(text: str) -> str:
    """``text`` as ``json.dumps`` writes it by default: every character past ASCII escaped
    (``pässwört`` is ``p\\u00e4ssw\\u00f6rt``)."""
    return json.dumps(text)[1:-1]


def _repr(text: str) -> str:
    """``text`` as Python's ``repr`` writes it, without the quotes around it."""
    return repr(text)[1:-1]


_registry = _Registry()
# The secrets read, by value: empty until one is. The hot paths (every stored value and key)
# test this dict, not the registry, so that a play with no secret costs them nothing.
_read = _registry._names


def any_read() -> bool:
    """Whether this process has read a secret: until it has, nothing needs checking."""
    return bool(_read)


def leaks(data: str | bytes | None) -> bool:
    """Whether ``data`` holds a secret read in this process (in any form it is caught in)."""
    return bool(_read) and bool(data) and _registry.search(data)  # type: ignore[arg-type]


def check_no_secret(data: str | bytes | None, what: str) -> None:
    """Raise ``SecretLeakError`` if ``data`` holds a secret read by this process."""
    if _read and data and _registry.search(data):
        raise SecretLeakError(
            f"{what} contains a secret read with ctx.secrets. Secrets are never stored, logged "
            "or emitted: pass them only in tool inputs or request headers, and keep them out of "
            "results, cell values, row keys, names, log lines and the play's output."
        )


def check_stored_name(name: str, what: str) -> None:
    """Refuse a name or key that is stored as it is written (a dataset, column or play name,
    a step's key) when it holds a secret, or a NUL character, which PostgreSQL's text
    refuses."""
    check_no_secret(name, what)
    if "\x00" in name:
        raise PlayDefinitionError(
            f"{what} {name!r} holds a NUL character (U+0000), which a store cannot keep in a "
            "name; remove it."
        )
    if not name.isascii() and storable_text(name) != name:
        raise PlayDefinitionError(
            f"{what} {name!r} holds a lone UTF-16 surrogate (half of a character, as a "
            "broken decode leaves), which no store can keep as text; decode it again or "
            "remove it."
        )


def storable_text(text: str) -> str:
    """``text`` without what no store keeps as text: NUL characters (PostgreSQL refuses them)
    and lone UTF-16 surrogates (not UTF-8: written as ``\\udXXX``)."""
    text = text.replace("\x00", "")
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def redact(text: str) -> str:
    """``text`` (an error message) with every secret replaced by ``[secret NAME]``, as it may
    be stored or shown (``storable_text``)."""
    text = storable_text(text)
    return _registry.redact(text) if _read and text else text


# a secret's name, as declarations take it: capitals, so that a key pasted where its
# variable's name belongs (Auth.bearer("sk_live_...")) is told apart and refused before the
# run, rather than met as "Secret 'sk_live_...' is not set", a message that is stored
SECRET_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


def shown(value: str) -> str:
    """What an error may show of a value that may be a key: its first 4 characters."""
    return repr(value[:4] + "…" if len(value) > 4 else value)


def check_secret_name(value: object, where: str, example: str) -> str:
    """``value`` when it is a secret's name (an environment variable's, in capitals); else a
    ``PlayDefinitionError`` that shows at most its first 4 characters (it may be the key)."""
    if isinstance(value, str) and SECRET_NAME.fullmatch(value):
        return value
    given = shown(value) if isinstance(value, str) else f"a value of type {type(value).__name__}"
    raise PlayDefinitionError(
        f"{where}: {given} is not the name of an environment variable. Give the NAME of the "
        f"variable that holds the key, in capitals (e.g. {example}, read from "
        "PLAYLINE_SECRET_<NAME>, else <NAME>), never the key itself."
    )


class Secrets:
    """``ctx.secrets``: read secrets from the environment."""

    def __getitem__(self, name: object) -> NoReturn:
        # not a mapping (nothing to list, no KeyError): one way to read a secret, .get
        named = isinstance(name, str) and SECRET_NAME.fullmatch(name)
        given = repr(name) if named else "'ACME_API_KEY'"  # else maybe the key: not shown
        raise PlayDefinitionError(
            f"ctx.secrets[{given}]: read a secret with ctx.secrets.get({given}) (in a tool: "
            f"pl.secret({given})); ctx.secrets is not a mapping."
        )

    def get(self, name: str) -> Secret:
        if not isinstance(name, str) or not name:
            raise PlayDefinitionError("ctx.secrets.get needs a secret name, e.g. 'HUNTER_KEY'.")
        value = os.environ.get(f"PLAYLINE_SECRET_{name}", os.environ.get(name))
        if value is None and not SECRET_NAME.fullmatch(name):
            # maybe the key itself, given where its name belongs: the message is stored
            raise PlayDefinitionError(
                f"Secret {shown(name)} is not set. Give the NAME of the environment variable "
                "that holds the key (e.g. ctx.secrets.get('ACME_API_KEY')), never the key "
                "itself, and export it (PLAYLINE_SECRET_<NAME>, or <NAME>) in the environment "
                "of the process that runs the play."
            )
        if value is None:
            raise PlayDefinitionError(
                f"Secret {name!r} is not set. Export PLAYLINE_SECRET_{name} (or {name}) in the "
                "environment of the process that runs the play."
            )
        # without the spaces and line ends a copy or `export K=$(cat file)` leaves around it:
        # sent as they are, a key with a newline is an illegal header
        return Secret(name, value.strip())
