"""Secrets: values a play may use but that never reach the store, a log or an event.

``ctx.secrets.get("HUNTER_KEY")`` reads ``PLAYLINE_SECRET_HUNTER_KEY`` (else ``HUNTER_KEY``)
from the environment. Every secret value read in this process is remembered, and whatever
Playline is about to write (JSON for the store, log lines, event text) is checked for it:
finding one raises ``SecretLeakError`` instead of writing. The check is by value, so a secret
copied into an f-string is caught too.
"""

from __future__ import annotations

import os

from .errors import PlayDefinitionError, SecretLeakError

__all__ = ["Secret", "Secrets", "check_no_secret"]

_MIN_LENGTH = 4  # shorter values would match by accident
_values: set[str] = set()
_encoded: set[bytes] = set()


class Secret(str):
    """A secret's value: usable as a string, shown as ``Secret('***')``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Secret('***')"


def _remember(value: str) -> None:
    if len(value) >= _MIN_LENGTH:
        _values.add(value)
        _encoded.add(value.encode())


def check_no_secret(data: str | bytes | None, what: str) -> None:
    """Raise ``SecretLeakError`` if ``data`` holds a secret value read by this process."""
    if not _values or not data:
        return
    found = (
        any(v in data for v in _encoded)
        if isinstance(data, bytes)
        else any(v in data for v in _values)
    )
    if found:
        raise SecretLeakError(
            f"{what} contains a secret read with ctx.secrets. Secrets are never stored, logged "
            "or emitted: pass them only in tool inputs or request headers, and keep them out of "
            "results, cell values, log lines and the play's output."
        )


class Secrets:
    """``ctx.secrets``: read secrets from the environment."""

    def get(self, name: str) -> Secret:
        if not isinstance(name, str) or not name:
            raise PlayDefinitionError("ctx.secrets.get needs a secret name, e.g. 'HUNTER_KEY'.")
        value = os.environ.get(f"PLAYLINE_SECRET_{name}", os.environ.get(name))
        if value is None:
            raise PlayDefinitionError(
                f"Secret {name!r} is not set. Export PLAYLINE_SECRET_{name} (or {name}) in the "
                "environment of the process that runs the play."
            )
        _remember(value)
        return Secret(value)
