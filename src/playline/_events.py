"""Progress events: every cell, row, dataset and batch change, to listeners and the store."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ._clock import Clock
from ._secrets import check_no_secret
from .store import Event, Store

__all__ = ["EventLog", "Listener", "preview"]

Listener = Callable[[Event], None]
_FLUSH_EVERY = 2000


def preview(value: Any, limit: int = 80) -> str | None:
    """A short text of a cell value for progress displays."""
    if value is None:
        return None
    data = getattr(value, "data", value)  # a ToolResult shows its data
    text = data if isinstance(data, str) else repr(data)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class EventLog:
    """Emits events to listeners at once and writes them to the store in batches."""

    def __init__(
        self, store: Store, run_id: str, clock: Clock, listeners: Sequence[Listener] = ()
    ) -> None:
        self._store = store
        self._run_id = run_id
        self._clock = clock
        self._listeners = list(listeners)
        self._buffer: list[Event] = []

    def emit(self, kind: str, **fields: Any) -> None:
        check_no_secret(fields.get("preview"), "A log line or cell preview")
        check_no_secret(fields.get("error"), "An error message")
        event = Event(kind=kind, run_id=self._run_id, at=self._clock.now(), **fields)
        self._buffer.append(event)
        for listener in self._listeners:
            listener(event)
        if len(self._buffer) >= _FLUSH_EVERY:
            self.flush()

    def log(self, message: str, **data: Any) -> None:
        self.emit("log", preview=message, data=data or None)

    def flush(self) -> None:
        if self._buffer:
            batch, self._buffer = self._buffer, []
            self._store.append_events(batch)
