"""How a store URL is shown to a person: without the credentials it may carry."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode

__all__ = ["display_url"]

# Playline's own URL options: numbers, never secret. Every other query parameter goes to libpq,
# where ``password=``, ``sslpassword=`` or ``options=...`` may hold one.
_OWN_OPTIONS = ("busy_timeout", "pool_size", "pool_timeout")
# Hosts with optional ports, as libpq reads them: "db", "db:5432", "[::1]:5432", "a:1,b:2".
_HOSTS = re.compile(r"(?:\[[^\]]*\]|[^:\[\],]*)(?::\d*)?(?:,(?:\[[^\]]*\]|[^:\[\],]*)(?::\d*)?)*")


def display_url(url: str) -> str:
    """The store URL ``url`` as Playline shows it wherever a person may read it (messages, the
    UI's pages and JSON, logs, the start line of a command, a command line it shows): without
    the password of its user and without query parameters other than Playline's own.

    ``postgresql://rw:PW@db:5432/leads?sslmode=require&pool_size=8`` shows as
    ``postgresql://rw@db:5432/leads?pool_size=8``. It is for showing only: open the store from
    the URL itself. A URL that does not parse (a password with an unescaped ``/`` or ``?``)
    shows no part of its password either.
    """
    scheme, slashes, rest = url.partition("://")
    if not slashes:
        scheme, rest = "", url
    user = ""
    if slashes and not rest.startswith("/"):
        # libpq reads the user and password up to the last "@" before the first "/" (so a
        # password may hold "?" or "#"); one that holds a "/" ends before the query.
        userinfo = (
            rest.partition("/")[0].rpartition("@")[0] or rest.partition("?")[0].rpartition("@")[0]
        )
        if userinfo or rest.startswith("@"):
            rest = rest[len(userinfo) + 1 :]
        user = re.split(r"[:/?#]", userinfo)[0]
    place, _, query = rest.partition("#")[0].partition("?")
    hosts, slash, path = place.partition("/")
    if slashes and not _HOSTS.fullmatch(hosts):  # "user:secret" without its "@...": no port
        hosts = hosts.partition(":")[0]
    own = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k in _OWN_OPTIONS]
    shown = f"{scheme}{slashes}{user + '@' if user else ''}{hosts}{slash}{path}"
    return f"{shown}?{urlencode(own)}" if own else shown
