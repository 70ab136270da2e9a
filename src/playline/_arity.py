"""How many arguments a user's function takes: ``fn(x)`` or ``fn(x, ctx)``."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .errors import PlayDefinitionError

__all__ = ["check_args", "takes_ctx"]


def check_args(fn: Callable[..., Any], count: int, what: str, form: str) -> None:
    """Refuse ``fn`` if it cannot be called with ``count`` positional arguments (``form``
    shows them, e.g. ``"(ctx, input)"``), where it is defined rather than where it runs."""
    if not callable(fn):
        raise PlayDefinitionError(f"{what} must be a function {form}, not {fn!r}.")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: it will tell when called
        return
    try:
        signature.bind(*([None] * count))
    except TypeError as exc:
        raise PlayDefinitionError(f"{what} must take {form}: {exc}.") from None


def takes_ctx(fn: Callable[..., Any], what: str, names: str, *, unknown: bool = False) -> bool:
    """Whether ``fn`` wants a second argument (the context).

    ``names`` describes the accepted forms for the error, e.g. ``"(row) or (row, ctx)"``;
    ``unknown`` is the answer for callables without a signature (builtins).
    """
    if not callable(fn):
        raise PlayDefinitionError(f"{what} must be a function {names}, not {fn!r}.")
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return unknown
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if any(p.kind is p.VAR_POSITIONAL for p in params) or len(positional) >= 2 > len(required):
        return True
    if len(required) in (1, 2):
        return len(required) == 2
    raise PlayDefinitionError(f"{what} must take {names}; it takes {len(required)} arguments.")
