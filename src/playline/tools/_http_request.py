"""How a declared HTTP tool's call becomes a request: its account's ``Auth``, the templates
(``{field}`` taken from the input) of its URL, query and bodies, and the checks a declaration
passes before any call is made.

A URL's values are percent-quoted whole, so a row's value stays one path segment or one query
value (RFC 3986, 3.3 and 3.4: https://www.rfc-editor.org/rfc/rfc3986#section-3.3); header
names are tokens (RFC 9110, 5.6.2: https://www.rfc-editor.org/rfc/rfc9110#section-5.6.2).
"""

from __future__ import annotations

import functools
import re
import string
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from .._secrets import Secret, Secrets, check_secret_name
from ..errors import PlayDefinitionError
from ._http_send import _not_sent
from ._outcomes import Outcome
from ._spec import Rate
from ._tokens import TOKEN_HEADERS

__all__ = ["Auth"]

_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
_PLACE = "_place"  # in a bulk item template: the item's place in its request ("0", "1"...)
_FIELDS = string.Formatter()
RequestHook = Callable[[dict[str, Any]], Mapping[str, Any]]


@dataclass(frozen=True)
class Auth:
    """How a request proves its account, from a secret: an environment variable's name
    (read as ``ctx.secrets.get`` reads it) or a ``pl.Secret``. The key never enters an input,
    so rotating it keeps every receipt."""

    kind: Literal["bearer", "header", "query", "basic", "body"]
    secret: str | Secret
    name: str = ""  # the header or query parameter; basic: the user name

    @classmethod
    def bearer(cls, secret: str | Secret) -> Auth:
        """``Authorization: Bearer <secret>``."""
        return cls("bearer", secret)

    @classmethod
    def header(cls, name: str, secret: str | Secret) -> Auth:
        """A header of the provider's: ``X-Api-Key: <secret>``."""
        return cls("header", secret, name)

    @classmethod
    def query(cls, name: str, secret: str | Secret) -> Auth:
        """A query parameter: ``?api_key=<secret>``."""
        return cls("query", secret, name)

    @classmethod
    def body(cls, name: str, secret: str | Secret) -> Auth:
        """A field of the JSON body (ZeroBounce's batch: ``{"api_key": ...}``), or of the
        query for a request without one (its single ``GET /validate?api_key=``)."""
        return cls("body", secret, name)

    @classmethod
    def basic(cls, secret: str | Secret, user: str = "") -> Auth:
        """HTTP basic auth: the secret as the password (as the user when ``user`` is blank,
        which is how providers that use a key as the user name expect it)."""
        return cls("basic", secret, user)

    def __post_init__(self) -> None:
        if self.kind not in ("bearer", "header", "query", "basic", "body"):
            raise PlayDefinitionError(
                f"Auth kind {self.kind!r}: bearer, header, query, body or basic."
            )
        if not isinstance(self.secret, Secret) and not (
            isinstance(self.secret, str) and self.secret
        ):
            raise PlayDefinitionError(
                "pl.Auth needs the secret's environment variable name (e.g. 'HUNTER_API_KEY') "
                "or a pl.Secret."
            )
        if self.kind in ("header", "query", "body") and not (
            isinstance(self.name, str) and self.name
        ):
            raise PlayDefinitionError(
                f"pl.Auth.{self.kind}(name, secret) needs the {self.kind} name, e.g. 'X-Api-Key'."
            )
        if isinstance(self.secret, str):
            example = {
                "bearer": 'Auth.bearer("ACME_API_KEY")',
                "header": 'Auth.header("X-Api-Key", "ACME_API_KEY")',
                "query": 'Auth.query("api_key", "ACME_API_KEY")',
                "body": 'Auth.body("api_key", "ACME_API_KEY")',
                "basic": 'Auth.basic("ACME_API_KEY")',
            }[self.kind]
            check_secret_name(self.secret, f"pl.Auth.{self.kind}(secret=...)", example)

    @property
    def label(self) -> str:
        """What names the account, never the key: the variable's name."""
        return self.secret.name if isinstance(self.secret, Secret) else self.secret

    def value(self) -> str:
        secret = self.secret if isinstance(self.secret, Secret) else Secrets().get(self.secret)
        return secret.reveal()

    def apply(
        self, headers: dict[str, str], params: dict[str, Any], body: Any = None
    ) -> httpx.BasicAuth | None:
        """Put the secret where the provider reads it (``body``: the request's JSON object,
        if it has one); returns basic auth when it is that."""
        key = self.value()
        if self.kind == "bearer":
            headers["Authorization"] = f"Bearer {key}"
        elif self.kind == "header":
            headers[self.name] = key
        elif self.kind == "body" and isinstance(body, dict):
            body[self.name] = key
        elif self.kind in ("query", "body"):
            params[self.name] = key
        else:
            return httpx.BasicAuth(self.name or key, "" if not self.name else key)
        return None


def _checked(
    id: object, method: object, url: object, outcomes: object, parts: tuple[Any, ...]
) -> str:
    if not isinstance(id, str) or not id or " " in id:
        raise PlayDefinitionError(f"pl.HttpTool({id!r}, ...): the tool id, e.g. 'acme.find'.")
    if not isinstance(method, str) or method.upper() not in _METHODS:
        raise PlayDefinitionError(
            f"pl.HttpTool({id!r}, {method!r}, ...): the method is one of {sorted(_METHODS)}."
        )
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise PlayDefinitionError(
            f"pl.HttpTool({id!r}, {method!r}, {url!r}): the URL starts with http:// or "
            "https://, e.g. 'https://api.acme.com/v1/find?domain={domain}'."
        )
    try:
        fields = [(n, spec, conv) for _, n, spec, conv in _FIELDS.parse(url) if n is not None]
        bad = next((n for n, spec, conv in fields if not _plain_field(n) or spec or conv), None)
        if bad is not None:
            raise ValueError(f"{{{bad}...}} is not a field's name alone")
    except ValueError as exc:
        raise PlayDefinitionError(
            f"pl.HttpTool({id!r}, {method!r}, {url!r}): the URL template does not parse ({exc});"
            " write each field as {name}, and a literal brace as {{ or }}."
        ) from None
    if not isinstance(outcomes, Sequence) or not all(isinstance(o, Outcome) for o in outcomes):
        raise PlayDefinitionError(
            f"pl.HttpTool({id!r}, outcomes=...): a list of pl.Outcome rules, e.g. "
            '[pl.Outcome("not_found", status=404)].'
        )
    if any(o.outcome == "pending" and not o.job for o in outcomes):
        raise PlayDefinitionError(
            f'pl.HttpTool({id!r}, ...): pl.Outcome("pending") needs job=, the dotted path of '
            'the job id in the answer, e.g. pl.Outcome("pending", status=202, job="request_id").'
        )
    if parts[1] is not None and parts[2] is not None:
        raise PlayDefinitionError(
            f"pl.HttpTool({id!r}, ...): a request has a JSON body or a form, not both."
        )
    return method.upper()


def _token_checked(
    tool: str,
    rate: Rate | None,
    tokens: Any,
    tokens_used: Any,
    token_headers: Any,
) -> dict[str, tuple[tuple[str, str], ...]]:
    """``tokens=``, ``tokens_used=`` and ``token_headers=`` checked; returns the header names
    read for token limits (those declared, then the families recognised)."""
    for name, value in (("tokens", tokens), ("tokens_used", tokens_used)):
        if value is not None and not callable(value):
            raise PlayDefinitionError(
                f"pl.HttpTool({tool!r}, {name}=...) is a function: "
                + (
                    "input -> estimated tokens (an int, or (input, output))"
                    if name == "tokens"
                    else "answer -> the tokens it says were used, or None"
                )
            )
    if tokens is None and rate is not None and any(x is not None for x in rate.token_limits):
        raise PlayDefinitionError(
            f"pl.HttpTool({tool!r}) declares Rate(tokens_per_minute=...) without tokens=: "
            "give tokens=fn(input) -> its estimated tokens (an int, or (input, output) for "
            "output_tokens_per_minute), counted before a call goes out."
        )
    names = {kind: tuple(pairs) for kind, pairs in TOKEN_HEADERS.items()}
    if token_headers is None:
        return names
    if not isinstance(token_headers, Mapping) or not all(
        kind in names
        and isinstance(pairs, Sequence)
        and all(
            isinstance(pair, tuple | list)
            and len(pair) == 2
            and all(isinstance(h, str) and h for h in pair)
            for pair in pairs
        )
        for kind, pairs in token_headers.items()
    ):
        raise PlayDefinitionError(
            f"pl.HttpTool({tool!r}, token_headers={token_headers!r}) maps 'tokens' or "
            "'output' to (remaining header, reset header) pairs, e.g. "
            "{'tokens': [('x-tokens-left', 'x-tokens-reset')]}."
        )
    for kind, pairs in token_headers.items():
        names[kind] = (*((str(a), str(b)) for a, b in pairs), *names[kind])
    return names


_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # a header's name (RFC 9110, 5.6.2)


def _headers_checked(tool: str, headers: Any, idempotency: str | None) -> None:
    """``headers=`` and ``idempotency=`` checked at declaration: a name httpx would refuse
    or a value that is not text fails the call at send time, so refuse them here."""
    if idempotency is not None and not _TOKEN.fullmatch(idempotency):
        raise PlayDefinitionError(
            f"pl.HttpTool({tool!r}, idempotency={idempotency!r}): a header name (letters, "
            "digits and !#$%&'*+-.^_`|~, no spaces), e.g. 'Idempotency-Key'."
        )
    if headers is None:
        return
    if not isinstance(headers, Mapping):
        raise PlayDefinitionError(
            f"pl.HttpTool({tool!r}, headers={headers!r}): a dict of header name to text, e.g. "
            "{'X-Api-Version': '2'}."
        )
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise PlayDefinitionError(
                f"pl.HttpTool({tool!r}, headers=...): {name!r} is not a header name (letters, "
                "digits and !#$%&'*+-.^_`|~, no spaces), e.g. 'X-Api-Version'."
            )
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            raise PlayDefinitionError(
                f"pl.HttpTool({tool!r}, headers=...): the value of {name!r} is {value!r}; give "
                f"text on one line, e.g. {{{name!r}: {' '.join(str(value).split())!r}}}."
            )


def _check_types(tool: str, **given: tuple[Any, Any, str]) -> None:
    for name, (value, kind, example) in given.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
            raise PlayDefinitionError(
                f"pl.HttpTool({tool!r}, {name}={value!r}): give {example}, or leave it out."
            )


def _plain_field(name: str) -> bool:
    """A placeholder ``str.format_map`` reads as one key of the input: not empty or a
    position, no ``.attribute`` or ``[index]``."""
    return bool(name) and not name.isdigit() and not any(c in name for c in ".[]")


def _fields(template: str) -> list[str]:
    return [name for _, name, _, _ in _FIELDS.parse(template) if name]


def _fill(template: Any, input: Mapping[str, Any]) -> Any:
    """``template`` with ``{field}`` taken from ``input``; a key whose fields are all
    missing (or None) is left out, and ``"{field}"`` alone keeps the value's type."""
    if isinstance(template, Mapping):
        filled = {k: _fill(v, input) for k, v in template.items()}
        return {k: v for k, v in filled.items() if v is not _MISSING}
    if isinstance(template, list):
        return [v for v in (_fill(t, input) for t in template) if v is not _MISSING]
    if not isinstance(template, str):
        return template
    names = _fields(template)
    if not names:
        return template
    if all(input.get(n) is None for n in names):
        return _MISSING
    if template == "{" + names[0] + "}":
        return input[names[0]]
    return template.format_map({n: "" if input.get(n) is None else input[n] for n in names})


_MISSING: Any = object()


def _present(input: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in input.items() if v is not None}


def _url(tool: str, template: str, input: Mapping[str, Any]) -> str:
    """The URL with ``{field}`` replaced by the input's value, every character but letters,
    digits and ``-._~`` percent-quoted (``/`` too), so a value stays one path segment or one
    query value and cannot steer the request to another endpoint. A value that is missing,
    None or empty, or a path segment that is ``.`` or ``..``, would send the call to the
    wrong URL: the call fails before anything is sent (``invalid_input``)."""
    names, path = _placeholders(template)
    if not names:
        return template
    values = {}
    for name in names:
        value = input.get(name)
        text = "" if value is None else urllib.parse.quote(str(value), safe="")
        if not text:
            raise _not_sent(
                tool, f"the URL's {{{name}}} has no value ({value!r}); give the input {name!r}"
            )
        if name in path and text in (".", ".."):
            raise _not_sent(
                tool, f"the URL's path segment {{{name}}} is {text!r}, which would leave it"
            )
        values[name] = text
    return template.format_map(values)


def _bulk_url_checked(declared: str, url: str, *, own: bool) -> None:
    """A URL a bulk request goes to names no field: the request carries many inputs, and its
    URL could hold one input's value only (the field was sent empty: a wrong URL). Nothing
    else fills a URL's field (the key goes where ``auth=`` puts it, a constant is written
    as it is), so every field is refused. ``own``: the bulk form's own URL; else the tool's,
    which its bulk requests go to when the bulk form has none."""
    try:
        names = _fields(url)
    except ValueError as exc:
        raise PlayDefinitionError(
            f"{declared}: the URL does not parse ({exc}); write a literal brace as {{{{ or }}}}."
        ) from None
    if not names:
        return
    field, item = f"{{{names[0]}}}", f"item={{{names[0]!r}: '{{{names[0]}}}'}}"
    if own:
        raise PlayDefinitionError(
            f"{declared}: a bulk request carries many inputs, so its URL cannot hold one "
            f"input's {field}; send it in each item ({item}) or in body=, and write a "
            "constant into the URL as it is."
        )
    raise PlayDefinitionError(
        f"{declared}: its bulk requests go to this URL, which cannot hold one input's {field} "
        "when a request carries many; give the bulk form a URL of its own without fields "
        f"(pl.HttpBulk(url='https://...'): a lone input then goes to this one), or send "
        f"{field} in each item ({item})."
    )


@functools.lru_cache(maxsize=256)
def _placeholders(template: str) -> tuple[tuple[str, ...], frozenset[str]]:
    """A URL template's fields, and those in its path (before ``?``): parsed once a template,
    not once a call."""
    return tuple(_fields(template)), frozenset(_fields(template.split("?", 1)[0]))


def _set_path(body: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for part in parents:
        body = body.setdefault(part, {})
    body[last] = value
