"""Governance: what a run (and its tree of child plays) may spend, counted against its limits.

Counters survive a resume (a play does not escape its limits by resuming): an attempt starts
from the counts its run recorded last time. Retries excepted: they guard an attempt against a
provider that keeps failing or throttling, and a resume, later, may find it well again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

from .._limits import Limits
from .._play import Play
from ..errors import GovernanceError

__all__ = ["Governor", "Lineage", "RetryBudgetExceeded"]

_LABELS = {
    "tool_calls": "Tool-call budget",
    "retries": "Retry budget",
    "child_plays": "Child play-call budget",
    "descendants": "Descendant play budget",
    "children_per_parent": "Child plays per parent",
}


class RetryBudgetExceeded(GovernanceError):
    """One tool used up its retries in this run: its remaining calls fail, the play goes on."""

    def __init__(self, tool: str, used: int, limit: int) -> None:
        self.tool = tool
        super().__init__(
            f"Retry budget of tool {tool} exceeded ({used}/{limit}): it keeps failing or "
            "rate-limiting. Its remaining calls fail; raise limits={'retries': ...} on "
            "@pl.play if this is expected.",
            counter="retries",
            limit=limit,
        )


class Governor:
    """Counts what a run spends against its ``Limits``; a counter past its limit raises.

    ``retries`` are counted per tool (``retries:<tool>``).
    """

    def __init__(self, limits: Limits, counts: Mapping[str, int] | None = None) -> None:
        self.limits = limits
        self.counts: dict[str, int] = {
            name: n for name, n in (counts or {}).items() if not name.startswith("retries:")
        }

    def spend(self, counter: str, n: int = 1) -> None:
        total = self.counts.get(counter, 0) + n
        self.counts[counter] = total
        limit: int | None = getattr(self.limits, counter)
        if limit is not None and total > limit:
            raise GovernanceError(
                f"{_LABELS.get(counter, counter)} exceeded ({total}/{limit}). Raise "
                f"limits={{'{counter}': ...}} on @pl.play if this is expected.",
                counter=counter,
                limit=limit,
            )

    def retry(self, tool: str) -> None:
        """Count a retry of ``tool``; raises ``RetryBudgetExceeded`` past the limit."""
        name = f"retries:{tool}"
        total = self.counts.get(name, 0) + 1
        self.counts[name] = total
        limit = self.limits.retries
        if limit is not None and total > limit:
            raise RetryBudgetExceeded(tool, total, limit)


@dataclass(frozen=True, kw_only=True)
class Lineage:
    """Where a run sits in its tree of plays: the chain of play names from the root, the
    counters the whole tree shares, and the cap on child plays running at once."""

    chain: tuple[str, ...]
    tree: Governor
    concurrent: asyncio.Semaphore

    @classmethod
    def root(cls, play: Play, counts: Mapping[str, int] | None = None) -> Lineage:
        limit = play.limits.concurrent_child_plays
        return cls(
            chain=(play.name,),
            tree=Governor(play.limits, counts),
            concurrent=asyncio.Semaphore(limit if limit is not None else 1_000_000),
        )

    def child(self, play: Play) -> Lineage:
        return Lineage(chain=(*self.chain, play.name), tree=self.tree, concurrent=self.concurrent)
