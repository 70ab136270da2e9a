"""``Deferred``: an awaitable whose coroutine is made when it is awaited, not before.

A resolver may return what ``ctx.waterfall(...)`` gives without awaiting it; the dataset awaits
it in the row's task. A run that stops first (a store that failed, a stop, a budget) drops the
rows not yet started, and a coroutine made for one of them would be garbage-collected never
awaited, with a ``RuntimeWarning`` per row. Made only when awaited, there is none to drop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, TypeVar

__all__ = ["Deferred"]

T = TypeVar("T")


class Deferred(Awaitable[T]):
    """``await Deferred(fn, *args)`` is ``await fn(*args)``; awaited once, as a coroutine is."""

    __slots__ = ("_args", "_fn")

    def __init__(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> None:
        self._fn: Callable[..., Coroutine[Any, Any, T]] | None = fn
        self._args = args

    def __await__(self) -> Generator[Any, None, T]:
        fn, self._fn = self._fn, None
        if fn is None:
            raise RuntimeError("cannot reuse an already awaited ctx.waterfall(...): call it again")
        return fn(*self._args).__await__()
