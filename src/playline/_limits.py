"""``pl.Limits``: the governance limits of a play (SEMANTICS.md 26)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from .errors import PlayDefinitionError

__all__ = ["Limits", "check_budgets", "is_amount"]


def is_amount(value: object, *, positive: bool = False) -> bool:
    """Whether ``value`` is a finite number (not a bool) >= 0, or > 0 with ``positive``: what
    a number of seconds or of credits must be (NaN and infinity are no amounts)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (value > 0 if positive else value >= 0)
    )


def check_budgets(max_credits: object, max_usd: object) -> None:
    """A run's budgets: ``max_credits`` (the providers' credits) and ``max_usd`` (dollars,
    what LLM calls cost), each a number >= 0 or None (no budget)."""
    for name, value, example in (("max_credits", max_credits, "500"), ("max_usd", max_usd, "5")):
        if value is not None and not is_amount(value):
            raise PlayDefinitionError(
                f"{name}={value!r} must be a number >= 0. Give e.g. {name}={example}, or None "
                "for no budget."
            )


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Governance limits of a play. ``None`` means unlimited.

    ``retries`` bounds the retries of each tool in a run (429s, transient errors): a tool
    that exhausts it fails its remaining calls, not the play.
    """

    depth: int | None = 6
    child_plays: int | None = 32
    tool_calls: int | None = None
    retries: int | None = 200
    descendants: int | None = 64
    children_per_parent: int | None = 16
    concurrent_child_plays: int | None = 16

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise PlayDefinitionError(
                    f"Limits({f.name}={value!r}) must be a whole number >= 0 or None."
                )
