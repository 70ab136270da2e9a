"""Task groups report errors as groups; plays should see the error that happened."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from .errors import PlaylineError

__all__ = ["first_error", "unwrapped"]


def first_error(error: BaseException) -> BaseException:
    """The most telling leaf of an exception group: a Playline error if there is one."""
    if not isinstance(error, BaseExceptionGroup):
        return error
    leaves = [first_error(e) for e in error.exceptions]
    return next((e for e in leaves if isinstance(e, PlaylineError)), leaves[0])


@asynccontextmanager
async def unwrapped() -> AsyncIterator[None]:
    """Re-raise an exception group coming out of the block as its most telling error."""
    try:
        yield
    except BaseExceptionGroup as group:
        raise first_error(group) from None
