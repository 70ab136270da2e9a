"""Where a PostgreSQL store lives: its URL, the options Playline reads from it, and what a
failed connection says."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ...errors import StoreError
from .._urls import display_url

__all__ = ["DEFAULT_POOL_SIZE", "DEFAULT_POOL_TIMEOUT", "Target", "connect_error", "parse_url"]

DEFAULT_POOL_SIZE = 4
DEFAULT_POOL_TIMEOUT = 30.0
# libpq waits forever for a host that drops packets; a store should say so within seconds.
DEFAULT_CONNECT_TIMEOUT = 10
_SCHEMES = ("postgresql", "postgres")
_USAGE = "Use 'postgresql://user[:password]@host[:port]/database'"


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed store URL: what libpq gets, what messages show (no password), the pool."""

    conninfo: str
    display: str
    pool_size: int = DEFAULT_POOL_SIZE
    pool_timeout: float = DEFAULT_POOL_TIMEOUT
    connect_kwargs: dict[str, Any] = field(default_factory=dict)


def parse_url(url: str) -> Target:
    """Split Playline's own options (``pool_size``, ``pool_timeout``) off a ``postgresql://``
    URL; every other query parameter (``sslmode``, ``options``, ...) goes to libpq."""
    display = display_url(url)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:  # without " as 'VALUE'": a mistyped URL's port may be a password
        why = str(exc).split(" as ")[0]
        raise StoreError(f"Invalid PostgreSQL store URL {display!r} ({why}). {_USAGE}.") from None
    if parts.scheme not in _SCHEMES:
        raise StoreError(f"Invalid PostgreSQL store URL {display!r}. {_USAGE}.")
    pool_size, pool_timeout, rest = DEFAULT_POOL_SIZE, DEFAULT_POOL_TIMEOUT, []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name == "pool_size":
            pool_size = _number(value, name, display, whole=True, least=1)
        elif name == "pool_timeout":
            pool_timeout = _number(value, name, display, whole=False, least=0.001)
        else:
            rest.append((name, value))
    conninfo = urlunsplit(parts._replace(query=urlencode(rest)))
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(conninfo)
    except Exception as exc:  # psycopg.ProgrammingError: libpq could not parse it
        why = _shown(_first_line(exc), url, display)
        raise StoreError(f"Invalid PostgreSQL store URL {display!r} ({why}). {_USAGE}.") from None
    connect_kwargs: dict[str, Any] = {}
    if "connect_timeout" not in params:
        connect_kwargs["connect_timeout"] = DEFAULT_CONNECT_TIMEOUT
    return Target(conninfo, display, pool_size, pool_timeout, connect_kwargs)


def _shown(reason: str, url: str, shown: str) -> str:
    """libpq's complaint about ``url`` with what it quotes from it hidden unless ``shown`` (the
    URL as messages show it) holds it or it names a query parameter: a password with a stray
    "%" comes back whole in 'invalid percent-encoded token: "..."'."""
    names = {name for name, _ in parse_qsl(urlsplit(url).query, keep_blank_values=True)}

    def hide(quoted: re.Match[str]) -> str:
        text = quoted.group(1)
        return quoted.group(0) if text in names or text in shown else '"..."'

    return re.sub(r'"([^"]*)"', hide, reason)


def _number(value: str, name: str, display: str, *, whole: bool, least: float) -> Any:
    try:
        number = int(value) if whole else float(value)
    except ValueError:
        number = None
    if number is None or not number >= least:
        kind = "a whole number >= 1" if whole else "a number of seconds > 0"
        raise StoreError(f"{name}={value!r} in the store URL {display!r} must be {kind}.")
    return number


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0].strip()


def _reason(exc: BaseException) -> str:
    """libpq's reason, without its "connection to server at ... failed:" preamble."""
    reason = _first_line(exc)
    reason = reason.rsplit(" failed: ", 1)[-1]
    return re.sub(r"^(FATAL|ERROR):\s+", "", reason)


_CREDENTIALS = (
    "password authentication failed",
    "authentication failed",
    "no password supplied",
    "password is required",
    "no pg_hba.conf entry",
)


def connect_error(target: Target, exc: BaseException) -> StoreError:
    """What a failed connection to the store's server means, and what to do about it."""
    reason = _reason(exc)
    if any(s in reason for s in _CREDENTIALS) or re.match(r'role ".*" does not exist', reason):
        return StoreError(
            f"PostgreSQL refused the login of the store {target.display} ({reason}). Check the "
            "user and password in the store URL (or PGPASSWORD, ~/.pgpass) and that the "
            "server's pg_hba.conf lets that user in."
        )
    if re.match(r'database ".*" does not exist', reason):
        return StoreError(
            f"The database of the store {target.display} does not exist ({reason}). Create it "
            "(createdb NAME, or CREATE DATABASE NAME), or fix the database in the store URL."
        )
    if re.search(r"invalid \S+ value|invalid connection option", reason):  # libpq's words
        return StoreError(
            f"The store URL {target.display} has an option PostgreSQL cannot take ({reason}): "
            "fix it (sslmode=disable|allow|prefer|require|verify-ca|verify-full, ...)."
        )
    return StoreError(
        f"Cannot reach the PostgreSQL server of the store {target.display} ({reason}). Start "
        "the server, or fix the host and port in the store URL (PLAYLINE_STORE or store=...)."
    )
