"""``@pl.play``: a play is an async function ``(ctx, input) -> result``, registered by name."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

from ._arity import check_args
from ._limits import Limits, check_budgets
from ._secrets import check_stored_name
from .errors import PlayDefinitionError

__all__ = ["Play", "get_play", "play", "registered_plays"]

PlayFn = Callable[..., Awaitable[Any]]
_registry: dict[str, Play] = {}


@dataclass(frozen=True)
class Play:
    fn: PlayFn = field(repr=False)
    name: str
    max_credits: float | None = None
    limits: Limits = field(default_factory=Limits)
    max_usd: float | None = None

    async def __call__(self, ctx: Any, input: Any = None) -> Any:
        return await self.fn(ctx, input)


def _limits(value: Limits | Mapping[str, int | None] | None) -> Limits:
    if value is None:
        return Limits()
    if isinstance(value, Limits):
        return value
    if isinstance(value, Mapping):
        try:
            return Limits(**value)
        except TypeError as exc:
            raise PlayDefinitionError(
                f"limits={dict(value)!r}: {exc}. Known limits: depth, child_plays, tool_calls, "
                "retries, descendants, children_per_parent, concurrent_child_plays."
            ) from None
    raise PlayDefinitionError("limits= must be a pl.Limits(...) or a dict of limits.")


def _make(
    fn: PlayFn, name: str | None, max_credits: float | None, limits: Any, max_usd: float | None
) -> Play:
    if not inspect.iscoroutinefunction(fn):
        raise PlayDefinitionError(
            f"@pl.play needs an async function: write `async def {getattr(fn, '__name__', 'play')}"
            "(ctx, input): ...`."
        )
    check_args(fn, 2, f"The play {getattr(fn, '__name__', '')}", "(ctx, input)")
    check_budgets(max_credits, max_usd)
    play_name = name or fn.__name__.replace("_", "-")
    if not isinstance(play_name, str) or not play_name.strip():
        raise PlayDefinitionError("A play needs a non-empty name.")
    check_stored_name(play_name, "The play name")
    result = Play(
        fn=fn, name=play_name, max_credits=max_credits, limits=_limits(limits), max_usd=max_usd
    )
    _registry[play_name] = result
    return result


@overload
def play(fn: PlayFn, /) -> Play: ...
@overload
def play(
    *,
    name: str | None = None,
    max_credits: float | None = None,
    limits: Limits | Mapping[str, int | None] | None = None,
    max_usd: float | None = None,
) -> Callable[[PlayFn], Play]: ...
def play(
    fn: PlayFn | None = None,
    /,
    *,
    name: str | None = None,
    max_credits: float | None = None,
    limits: Limits | Mapping[str, int | None] | None = None,
    max_usd: float | None = None,
) -> Play | Callable[[PlayFn], Play]:
    """Register an async function ``(ctx, input)`` as a play.

    ``name`` defaults to the function name with ``_`` turned into ``-``; ``max_credits`` (the
    providers' credits) and ``max_usd`` (dollars: LLM calls) stop a run before it spends
    more; ``limits`` overrides governance limits.
    """
    if fn is not None:
        return _make(fn, name, max_credits, limits, max_usd)
    return lambda f: _make(f, name, max_credits, limits, max_usd)


def get_play(ref: Play | PlayFn | str) -> Play:
    """The play for a ``Play``, a registered name, or a plain async function."""
    if isinstance(ref, Play):
        return ref
    if isinstance(ref, str):
        found = _registry.get(ref)
        if found is None:
            known = ", ".join(sorted(_registry)) or "none"
            raise PlayDefinitionError(
                f"No play named {ref!r} is registered (known: {known}). Decorate it with "
                "@pl.play and import its module first."
            )
        return found
    if callable(ref):
        return (
            Play(fn=ref, name=getattr(ref, "__name__", "play").replace("_", "-"))
            if (inspect.iscoroutinefunction(ref))
            else _make(ref, None, None, None, None)
        )
    raise PlayDefinitionError(f"{ref!r} is not a play; decorate an async function with @pl.play.")


def registered_plays() -> dict[str, Play]:
    return dict(_registry)
