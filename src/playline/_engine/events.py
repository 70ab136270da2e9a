"""Progress events: every cell, row, dataset and batch change, to listeners and the store.

An event gets its store-wide sequence number when it is emitted (numbers are reserved from the
store in blocks), so a listener sees the same ``seq`` a reader of the store will: a live view
can resume "from seq N" whichever way it first learned of N. Events reach the store in
batches, at most ``FLUSH_AFTER`` seconds after they happen (or every ``FLUSH_EVERY``), written
off the event loop. A listener that raises is reported in the log once and otherwise ignored:
watching a run never changes how it ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from .._clock import Clock
from .._json import dumps, without_numpy
from .._secrets import any_read, check_no_secret, redact, storable_text
from ..errors import PlaylineError, full_stop
from ..store import Event, Store, StoreIO

__all__ = ["EventLog", "Listener", "error_text", "preview"]

Listener = Callable[[Event], None]
FLUSH_EVERY = 2000
FLUSH_AFTER = 0.1  # seconds
BACKLOG = 4 * FLUSH_EVERY  # events that may wait for a write before a producer waits too
_FIRST_BLOCK, _MAX_BLOCK = 64, 8192


def error_text(error: BaseException | None) -> str | None:
    """An error as a run's record and its events tell it: its text, with any secret in it
    redacted, and the type of an error that is not Playline's in front."""
    if error is None:
        return None
    try:
        text = str(error) or type(error).__name__
    except Exception:  # an exception whose text cannot be made
        text = type(error).__name__
    text = redact(text)
    return text if isinstance(error, PlaylineError) else f"{type(error).__name__}: {text}"


def preview(value: Any, limit: int = 80) -> str | None:
    """A short text of a cell value for progress displays."""
    if value is None:
        return None
    data = without_numpy(getattr(value, "data", value))  # a ToolResult shows its data
    text = data if isinstance(data, str) else repr(data)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class EventLog:
    """Emits events to listeners at once and writes them to the store in timed batches."""

    def __init__(
        self, store: Store, run_id: str, clock: Clock, listeners: Sequence[Listener] = ()
    ) -> None:
        self._store = store
        self._io = StoreIO(store)
        self._run_id = run_id
        self._clock = clock
        self._listeners = list(listeners)
        self._broken: set[int] = set()  # listeners that raised (reported once)
        self._buffer: list[Event] = []
        self._next_seq = self._end_seq = 0
        self._block = _FIRST_BLOCK
        self._timer: asyncio.TimerHandle | None = None
        self._flushing: asyncio.Task[None] | None = None
        self._error: BaseException | None = None

    @property
    def run_id(self) -> str:
        return self._run_id

    def emit(self, kind: str, **fields: Any) -> Event:
        preview = fields.get("preview")
        check_no_secret(preview, "A log line or cell preview")
        if preview:
            fields["preview"] = storable_text(preview)  # what a store can keep as text
        if fields.get("error"):
            fields["error"] = redact(fields["error"])
        data = fields.get("data")
        if data and any_read():  # before any listener (a --json output) is given it
            dumps(data, what=f"A {kind} event")  # raises SecretLeakError naming it
        event = Event(kind=kind, run_id=self._run_id, at=self._clock.now(), **fields)
        event.seq = self._seq()
        self._buffer.append(event)
        for listener in self._listeners:
            try:
                listener(event)
            except Exception as exc:  # a display's bug must not change the run
                self._listener_failed(listener, exc)
        if len(self._buffer) >= FLUSH_EVERY:
            self._start_flush()
        elif self._timer is None:
            self._arm()
        return event

    def log(self, message: str, **data: Any) -> Event:
        return self.emit("log", preview=message, data=data or None)

    def _seq(self) -> int:
        if self._next_seq >= self._end_seq:
            # A small synchronous reservation, once per block (blocks grow up to _MAX_BLOCK).
            self._next_seq = self._store.reserve_seqs(self._block)
            self._end_seq = self._next_seq + self._block
            self._block = min(self._block * 2, _MAX_BLOCK)
        seq = self._next_seq
        self._next_seq += 1
        return seq

    def _listener_failed(self, listener: Listener, exc: Exception) -> None:
        if id(listener) in self._broken:
            return
        self._broken.add(id(listener))
        name = getattr(listener, "__qualname__", type(listener).__name__)
        self.log(
            f"A progress listener ({name}) raised {full_stop(f'{type(exc).__name__}: {exc}')} "
            "The run goes on; that listener's later errors are not reported."
        )

    # writing
    def _arm(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (an event emitted while closing): flush() writes it
        self._timer = loop.call_later(FLUSH_AFTER, self._start_flush)

    def _start_flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._write())

    async def _write(self, *, rest: bool = False) -> None:
        """Write the events buffered; go on while a full batch has gathered meanwhile (or,
        with ``rest``, anything). Fewer are left for the timer: events that trickle in during
        a write do not make a transaction each."""
        while self._buffer:
            batch, self._buffer = self._buffer, []
            try:
                await self._io(self._store.append_events, batch)
            except Exception as exc:  # surfaced by flush(): the attempt fails with it
                self._error = self._error or exc
                return
            if not rest and len(self._buffer) < FLUSH_EVERY:
                if self._buffer and self._timer is None:
                    self._arm()
                return

    async def keep_up(self) -> None:
        """For a producer that never waits otherwise: let the writer run, and wait for it when
        the events not yet written pass ``BACKLOG`` (memory stays bounded)."""
        flushing = self._flushing
        if len(self._buffer) >= BACKLOG and flushing is not None and not flushing.done():
            await asyncio.shield(flushing)
        else:
            await asyncio.sleep(0)

    async def flush(self) -> None:
        """Write everything emitted so far; raise the first write error, if any."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._flushing is not None:
            await asyncio.shield(self._flushing)
        await self._write(rest=True)
        if self._error is not None:
            error, self._error = self._error, None
            raise error
