"""``pl.hook``: a webhook `playline serve` answers at ``POST /hooks/<name>``.

A hook either starts a play (``play=``: each delivery queues one run, the JSON body as its
input, for a worker to start) or sends an event to runs waiting in ``ctx.wait_for_event``
(``event=``: a key made from the body). It names the secret its sender signs with
(``Playline-Signature``, see ``_signing``), never holds it: the secret is read from the
environment when `playline serve` starts, as ``ctx.secrets`` reads secrets, so it stays out of
code and out of the store.

Hooks register by name as they are declared, like plays, so `playline serve hooks.py` finds
the ones a file declares. A file imported again (a worker loading the play it names) declares
its hooks again: that replaces them; the same name declared by another module is refused, as
a URL can only lead to one hook.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import re
import string
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._arity import check_args
from .._limits import is_amount
from .._play import Play, get_play
from .._run_id import HOOK_PREFIX
from .._secrets import SECRET_NAME, Secret, Secrets
from ..errors import PlayDefinitionError
from ._signing import MAKE_ONE, MIN_SECRET, TOLERANCE, weakness

__all__ = ["MIN_SECRET", "BadPayload", "Hook", "hook", "hooks_of", "registered_hooks"]

_MAKE_ONE = (
    f"{MAKE_ONE}, give it to the sender, and export it in the environment of `playline serve`."
)

EventKey = str | Callable[[Any], str]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_DELIVERY = re.compile(r"[A-Za-z0-9._:-]{1,100}")  # kept as it is in the run id, else hashed
_registry: dict[str, Hook] = {}


class BadPayload(Exception):
    """A delivery's body gives no event key (a field missing, the key function failing): the
    sender gets a 400 saying so."""


@dataclass(frozen=True, kw_only=True)
class Hook:
    """A declared webhook: what a signed ``POST /hooks/<name>`` does (see ``pl.hook``)."""

    name: str
    secret: str  # the secret's NAME, read from the environment when the server starts
    play: Play | None = None
    event: EventKey | None = field(default=None, repr=False)
    max_body: int = 1_000_000
    tolerance: float = TOLERANCE
    module: str | None = field(default=None, repr=False, compare=False)

    def read_secret(self) -> Secret:
        """The secret, from ``PLAYLINE_SECRET_<NAME>`` or ``<NAME>``; a PlayDefinitionError
        naming it (and the hook) when neither is set, or when the one set is empty or shorter
        than ``MIN_SECRET`` characters: anyone can sign with an empty key, and a short one
        can be guessed, so such a hook would start runs for anybody."""
        try:
            secret = Secrets().get(self.secret)
        except PlayDefinitionError:
            raise PlayDefinitionError(
                f"Hook {self.name!r} needs its signing secret {self.secret!r}, which is not "
                f"set: export PLAYLINE_SECRET_{self.secret} (or {self.secret}) in the "
                "environment of `playline serve`, with the value its sender signs with."
            ) from None
        prefixed = f"PLAYLINE_SECRET_{self.secret}"
        variable = prefixed if prefixed in os.environ else self.secret  # as Secrets reads it
        if why := weakness(secret.reveal()):
            raise PlayDefinitionError(
                f"Hook {self.name!r}: its signing secret {variable} {why}. {_MAKE_ONE}"
            )
        return secret

    def run_id(self, delivery: str) -> str:
        """The run a delivery queues: the same delivery is always the same run, so a sender
        retrying it starts nothing more."""
        if not _DELIVERY.fullmatch(delivery):
            delivery = "sha256-" + hashlib.sha256(delivery.encode()).hexdigest()[:32]
        return f"{HOOK_PREFIX}{self.name}:{delivery}"

    def event_key(self, payload: Any) -> str:
        """The event a delivery sends; ``BadPayload`` when the payload cannot give one."""
        key = self._key(payload)
        if "\x00" in key:  # a store cannot keep it (PostgreSQL's text refuses it)
            raise BadPayload(f"the event key {key!r} holds a NUL character")
        return key

    def _key(self, payload: Any) -> str:
        if isinstance(self.event, str):
            return _formatted(self.event, payload)
        assert self.event is not None, "event_key is for event hooks"
        try:
            key = self.event(payload)
        except Exception as exc:
            raise BadPayload(
                f"the hook's event function failed on this body ({type(exc).__name__}: {exc})"
            ) from None
        if not isinstance(key, str) or not key:
            raise BadPayload(
                f"the hook's event function returned {key!r}, not a non-empty event key"
            )
        return key

    def source(self) -> dict[str, str] | None:
        """Where the play's code is (``{"file", "function"}``), so that any worker, not only
        the server's own, can load it for a queued run; None when it has no file."""
        if self.play is None:
            return None
        fn = self.play.fn
        module = sys.modules.get(getattr(fn, "__module__", "") or "")
        file = getattr(module, "__file__", None)
        if module is None or not file:
            return None
        names = [n for n, v in vars(module).items() if v is self.play or v is fn]
        return {"file": str(file), "function": names[0] if names else fn.__name__}


def _formatted(template: str, payload: Any) -> str:
    if not isinstance(payload, Mapping):
        raise BadPayload(
            f"the event key {template!r} is made from the body's fields, but the body is a "
            f"JSON {type(payload).__name__}, not an object"
        )
    values: dict[str, Any] = {}
    for name in _fields(template):
        if name not in payload:
            raise BadPayload(f"the body has no {name!r} field for the event key {template!r}")
        value = payload[name]
        if value is None or isinstance(value, dict | list):  # no key, or its Python form
            kind = (
                "null" if value is None else "an object" if isinstance(value, dict) else "an array"
            )
            raise BadPayload(
                f"the body's {name!r} field is {kind}, not a text or a number, for the event "
                f"key {template!r}: make the key with a function (event=lambda body: ...)"
            )
        # a boolean as JSON writes it (true, not Python's True)
        values[name] = ("true" if value else "false") if isinstance(value, bool) else value
    return template.format_map(values)


def _fields(template: str) -> list[str]:
    try:
        return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        raise PlayDefinitionError(
            f"event={template!r} is not a valid template ({exc}); write e.g. 'signup:{{email}}' "
            "(literal braces doubled: '{{' and '}}')."
        ) from None


def _check_event(event: Any, name: str) -> None:
    if isinstance(event, str):
        fields = _fields(event)
        bad = [f for f in fields if not f.isidentifier()]
        if bad or not fields:
            raise PlayDefinitionError(
                f"pl.hook({name!r}, event={event!r}): the template must name top-level fields "
                "of the body, each as {field} (no positions, attributes or indexes), e.g. "
                "event='signup:{email}'; a key without fields would be sent once, ever."
            )
    elif callable(event):
        check_args(event, 1, f"pl.hook({name!r}) event=", "(payload) -> event key")
    else:
        raise PlayDefinitionError(
            f"pl.hook({name!r}, event={event!r}): give a template over the body's fields "
            "('signup:{email}') or a function (payload) -> event key."
        )


def _check_numbers(name: str, max_body: Any, tolerance: Any) -> None:
    if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:
        raise PlayDefinitionError(
            f"pl.hook({name!r}, max_body={max_body!r}): give the largest body accepted, in "
            "bytes, a whole number >= 1 (default 1_000_000); larger ones are answered 413."
        )
    if not is_amount(tolerance, positive=True):
        raise PlayDefinitionError(
            f"pl.hook({name!r}, tolerance={tolerance!r}): give the seconds a signed timestamp "
            f"may be away from this machine's clock, a number > 0 (default {TOLERANCE})."
        )


def _check(name: Any, play: Any, event: Any, secret: Any) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise PlayDefinitionError(
            f"pl.hook({name!r}): a hook's name is the last part of its URL (/hooks/<name>): "
            "letters, digits, '.', '_' or '-', starting with a letter or digit, at most 100."
        )
    if (play is None) == (event is None):
        raise PlayDefinitionError(
            f"pl.hook({name!r}) needs play= (the play each delivery starts) or event= (the "
            "event it sends to waiting runs): one of them, "
            + ("not neither." if play is None else "not both.")
        )
    if not isinstance(secret, str) or not SECRET_NAME.fullmatch(secret):
        raise PlayDefinitionError(
            f"pl.hook({name!r}, secret=...): give the NAME of the environment variable holding "
            "the signing secret, in capitals (e.g. secret='CRM_HOOK_SECRET', read from "
            "PLAYLINE_SECRET_CRM_HOOK_SECRET or CRM_HOOK_SECRET), never the secret itself."
        )


def hook(
    name: str,
    *,
    play: Play | Callable[..., Any] | None = None,
    event: EventKey | None = None,
    secret: str,
    max_body: int = 1_000_000,
    tolerance: float = TOLERANCE,
) -> Hook:
    """Declare the webhook ``POST /hooks/<name>`` that `playline serve FILE.py` answers.

    Give either ``play`` (a ``@pl.play``, or an async function ``(ctx, input)``): each
    delivery queues one run of it with the JSON body as input, started by a worker; or
    ``event``: the key of the event sent to runs waiting in ``ctx.wait_for_event``, a
    template over the body's top-level fields (``"signup:{email}"``) or a function
    ``(payload) -> key``; the body is the event's payload.

    ``secret`` is the NAME of the signing secret, read like ``ctx.secrets`` reads one
    (``PLAYLINE_SECRET_<NAME>``, else ``<NAME>``) when the server starts, which refuses to
    start without it, or with one that is empty or shorter than 16 characters. Requests carry
    (for a play) a ``Playline-Delivery`` id, the same delivery twice starting one run, and
    ``Playline-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<delivery id>\\n<body>">``
    with ``t`` at most ``tolerance`` seconds from now. Bodies over ``max_body`` bytes are
    refused with 413.
    """
    _check(name, play, event, secret)
    _check_numbers(name, max_body, tolerance)
    started: Play | None = None
    if play is not None:
        if not isinstance(play, Play) and not inspect.iscoroutinefunction(play):
            raise PlayDefinitionError(
                f"pl.hook({name!r}, play={play!r}): give a @pl.play or an async function "
                "(ctx, input)."
            )
        started = get_play(play)
    else:
        _check_event(event, name)
    module = sys._getframe(1).f_globals.get("__name__")
    known = _registry.get(name)
    if known is not None and known.module != module:
        raise PlayDefinitionError(
            f"A hook named {name!r} is declared in {known.module} already: its URL "
            f"/hooks/{name} can lead to one hook only. Give this one another name."
        )
    declared = Hook(
        name=name,
        secret=secret,
        play=started,
        event=event,
        max_body=max_body,
        tolerance=tolerance,
        module=module,
    )
    _registry[name] = declared
    return declared


def registered_hooks() -> dict[str, Hook]:
    return dict(_registry)


def hooks_of(module: str) -> list[Hook]:
    """The hooks the module named ``module`` declared (as `playline serve FILE.py` finds the
    ones a file declares)."""
    return [h for h in _registry.values() if h.module == module]
