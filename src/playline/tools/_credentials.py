"""Credentials a Python tool reads outside its input: ``@pl.tool(..., secrets=[...])``.

A key passed in a tool's input is part of what the call asks: its receipt is keyed on a
digest of the key's value, so a rotated key makes every call a new one, bought again. A key
the tool declares (``@pl.tool("hunter.find", secrets=["HUNTER_KEY"])``) and reads during its
call (``pl.secret("HUNTER_KEY")``) is not in the input: the receipt carries the tool's
*account*, a digest of the declared secrets' names, as a ``pl.HttpTool``'s ``auth`` names its
account by its variable. Rotating the key's value keeps every receipt; the same tool declared
with another variable (another account) buys its own results.

The account is also what a provider's limits are kept by (``_declared.account_of``): a tool
that declares secrets calls a provider account, whose rate gate processes sharing a store
share, and whose quota and blocks are its tools' together.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from .._json import digest
from .._secrets import Secret, Secrets, check_secret_name
from ..errors import PlayDefinitionError

__all__ = ["account", "check_secret_names", "declared_by", "require", "secret"]

# the tool whose call is running in this task, and the secrets it declared
_calling: ContextVar[tuple[str, tuple[str, ...]] | None] = ContextVar(
    "playline_tool_secrets", default=None
)


def check_secret_names(tool: str, secrets: object) -> tuple[str, ...]:
    """``secrets=`` as ``@pl.tool`` takes it: a list of environment variable names."""
    if secrets is None:
        return ()
    if isinstance(secrets, str) or not isinstance(secrets, Sequence):
        raise PlayDefinitionError(
            f"@pl.tool({tool!r}, secrets={secrets!r}): give a list of the environment "
            "variables the tool reads its keys from, e.g. secrets=['HUNTER_KEY']."
        )
    names = tuple(secrets)
    for name in names:
        check_secret_name(name, f"@pl.tool({tool!r}, secrets=[...])", 'secrets=["HUNTER_KEY"]')
    return tuple(dict.fromkeys(names))


def account(secrets: Sequence[str]) -> str:
    """The account of a tool that reads these secrets: their names, never their values."""
    return digest("tool-secrets", *sorted(secrets))[:16]


def require(secrets: Sequence[str]) -> None:
    """Raise the ``PlayDefinitionError`` that says which variable to export, for the first
    declared secret that is not set: the run stops there, as for an ``HttpTool``'s key."""
    for name in secrets:
        Secrets().get(name)


@contextmanager
def declared_by(tool: str, secrets: tuple[str, ...]) -> Iterator[None]:
    """While ``tool``'s function runs, ``pl.secret`` reads the secrets it declared."""
    token = _calling.set((tool, secrets))
    try:
        yield
    finally:
        _calling.reset(token)


def secret(name: str) -> Secret:
    """The secret ``name`` inside the call of a tool that declares it
    (``@pl.tool(id, secrets=[name])``), read as ``ctx.secrets.get`` reads it:
    ``PLAYLINE_SECRET_<name>``, else ``<name>``. ``.reveal()`` gives the value for the
    provider's request. Its value is never part of a receipt: rotating it buys nothing again.
    """
    check_secret_name(name, "pl.secret(...)", 'pl.secret("HUNTER_KEY")')
    calling = _calling.get()
    if calling is None:
        raise PlayDefinitionError(
            f"pl.secret({name!r}) reads a key inside the call of a tool that declares it: "
            f"@pl.tool('vendor.name', secrets=[{name!r}]). In a play, use "
            f"ctx.secrets.get({name!r})."
        )
    tool, declared = calling
    if name not in declared:
        raise PlayDefinitionError(
            f"@pl.tool({tool!r}) reads the secret {name!r} but does not declare it: add it "
            f"to secrets=[...] (the declared names are the account its receipts are kept "
            "by)."
        )
    return Secrets().get(name)
