"""``Suspension``: an attempt (or one row of it) cannot go on now, and says until when.

A leaf: every engine part raises it, none depends on another to do so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["Suspension"]


class Suspension(BaseException):
    """A run or row must wait: until ``wake_at`` (seconds since the epoch), for ``events``,
    or, with ``stop``, until someone resumes it (``"stopped"``: a person or a signal stopped
    it; ``"yield"``: its worker is shutting down, so another may continue at once).

    A BaseException, so a play's ``except Exception`` does not swallow it.
    """

    def __init__(
        self, *, wake_at: float | None = None, events: Sequence[str] = (), stop: str | None = None
    ) -> None:
        self.wake_at = wake_at
        self.events = tuple(events)
        self.stop = stop
        super().__init__(self.describe())

    @classmethod
    def merge(cls, waits: Sequence[Suspension]) -> Suspension:
        times = [w.wake_at for w in waits if w.wake_at is not None]
        events = dict.fromkeys(e for w in waits for e in w.events)
        stop = next((w.stop for w in waits if w.stop), None)
        return cls(wake_at=min(times) if times else None, events=list(events), stop=stop)

    def waiting(self) -> dict[str, Any]:
        waiting: dict[str, Any] = {"wake_at": self.wake_at, "events": list(self.events)}
        if self.stop:
            waiting["stop"] = self.stop
        return waiting

    def describe(self) -> str:
        if self.stop:
            return f"stopped ({self.stop})"
        parts = []
        if self.events:
            parts.append(f"events {', '.join(self.events)}")
        if self.wake_at is not None:
            parts.append(f"until {self.wake_at:.0f}")
        return "waiting for " + " or ".join(parts) if parts else "waiting"
