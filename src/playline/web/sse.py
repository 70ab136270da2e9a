"""Live streams: one server-sent event stream per tab, resumable by ``seq``.

``/api/stream/{run_id}?dataset=NAME`` follows a run through the store, so it shows a run in
this process, another process or another machine the same way. Each ``changes`` message
carries, for the events after the last one sent, each changed row's latest status and cells
(``_trace.changes_since``) and the other events (log lines, datasets, batches, the run); its
SSE ``id`` is the ``seq`` of the last event it covers. A browser that reconnects sends that
id as ``Last-Event-ID`` and gets exactly what came after it: no gap, nothing twice. When more
than ``GAP_LIMIT`` events came after it, a ``reload`` message tells the page to fetch its
window again and go on from the new id. ``summary`` messages (the run's counts and, with a
dataset, its chip counts) come at most every ``SUMMARY_EVERY`` seconds, only when something
changed and for ``SETTLE`` seconds after: a dataset writes its finished rows up to a second
after their events, so the rows a summary counts catch up with the events a little later
(the run page's progress bar counts them). ``/api/stream/runs`` sends the runs list when it
changes.

The UI's memory stays flat however many tabs follow a run:

- One *feed* per (run, dataset) reads the store and encodes each message once for all the
  streams that follow it; each stream queues at most ``MAX_QUEUED`` bytes of them. A stream
  that starts (or reconnects) behind its feed catches up with reads of its own, a message of
  at most ``PAGE`` events at a time, ``CATCH_UP_READS`` such reads at once in the app.
- A reader that falls behind (its queue would pass ``MAX_QUEUED``) loses its queue for a
  ``reload`` to the feed's newest ``seq``: its page fetches its window again and the stream
  goes on from there. A reader that takes nothing for ``SEND_TIMEOUT`` seconds is closed (a
  browser reconnects with ``Last-Event-ID`` when it reads again).
- At most ``UIConfig.max_streams`` streams are open at once, at most
  ``UIConfig.max_streams_per_client`` of them from one address (the tabs of a loopback
  browser share one). Past either the stream is refused, 503 or 429 with an ``error`` that
  says to close other tabs; the page shows it (an EventSource does not retry a refusal).
- ``after`` and ``Last-Event-ID`` must be seqs, whole numbers from 0 to 2^63 - 1; anything
  else is refused with 400. A ``Last-Event-ID`` the UI never sent is not taken as "now": the
  page would silently miss what happened between its window and the new start.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
import orjson
from sse_starlette import EventSourceResponse, ServerSentEvent
from sse_starlette.sse import SendTimeoutError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .._trace import LIVE_KINDS, SHOWN_FOR_RUNNING, Changes, changes_since, run_summary
from ..store import RunStatus, Store

__all__ = [
    "GAP_LIMIT",
    "MAX_QUEUED",
    "SETTLE",
    "SUMMARY_EVERY",
    "CountsCache",
    "Streams",
    "last_seq",
    "run_stream",
    "runs_stream",
]

log = logging.getLogger(__name__)

GAP_LIMIT = 10_000  # events behind when a stream starts; past it the page reloads its window
PAGE = 1500  # events per message while following: small messages keep the page's frames short
SUMMARY_EVERY = 0.25  # seconds, at most one summary per stream
SETTLE = 2.0  # seconds summaries go on after the last change (rows are written within 1 s)
POLL = 0.1  # seconds between reads of the store while a run is live (it flushes every 0.1 s)
IDLE_POLL = 1.0  # ... and while nothing is running
PING = 15  # seconds: a comment line that keeps proxies from closing a quiet stream
MAX_QUEUED = 2**20  # bytes of messages waiting for one reader; past them it reloads
SEND_TIMEOUT = 30  # seconds a reader may take nothing before its stream is closed
CATCH_UP_READS = 4  # streams reading on their own at once (a page of events each)
MAX_SEQ = 2**63 - 1  # seqs are signed 64-bit integers in the store


def last_seq(store: Store, run_id: str) -> int:
    """The seq a page read its data at: the stream goes on from it."""
    return store.last_seq(run_id, kinds=LIVE_KINDS)


def _json(value: Any) -> str:
    return orjson.dumps(value, default=str).decode()


class CountsCache:
    """Chip counts per dataset (rows by status, and the rows each filterable state keeps:
    ``row_counts(cells=False)``, no cell tallied), recomputed at most every 250 ms and never
    more than a fifth of the time (counting a large dataset's rows takes a while): a page
    opened on a huge run does not turn the store into a counting machine."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (run, dataset) -> (when counted, how long it took, the seq it saw, the counts)
        self._cache: dict[tuple[str, str], tuple[float, float, int, dict[str, Any]]] = {}

    def get(
        self, store: Store, run_id: str, dataset: str, *, seq: int, wait: bool = True
    ) -> dict[str, Any] | None:
        """The counts as of event ``seq``: counted again when the run changed since and the
        last count is old enough. With ``wait=False`` (a stream) that happens in the
        background and the last result (marked ``pending``, or None) comes now."""
        key = (run_id, dataset)
        cached = self._cache.get(key)
        if cached is not None:
            at, took, counted, doc = cached
            if counted >= seq or time.monotonic() - at < max(SUMMARY_EVERY, 5 * took):
                return doc
        if wait:
            return self._count(store, key, seq)
        if self._lock.acquire(blocking=False):  # one background count at a time
            self._lock.release()
            threading.Thread(target=self._count, args=(store, key, seq), daemon=True).start()
        return {**cached[3], "pending": True} if cached is not None else None

    def _count(self, store: Store, key: tuple[str, str], seq: int) -> dict[str, Any]:
        with self._lock:  # one count at a time; the others take the fresh result
            cached = self._cache.get(key)
            if cached is not None and cached[2] >= seq:
                return cached[3]
            start = time.monotonic()
            doc = store.row_counts(*key, cells=False).to_dict()  # chips: no cell tally
            took = time.monotonic() - start
            doc["took"] = round(took, 4)
            self._cache[key] = (time.monotonic(), took, seq, doc)
            return doc


def _start_seq(request: Request) -> int | None:
    """Where a stream starts: after ``Last-Event-ID`` (a reconnect), else after ``after``,
    else None (now). Anything but a seq is refused with 400."""
    header = request.headers.get("last-event-id")
    name, raw = (
        ("Last-Event-ID", header) if header else ("after", request.query_params.get("after"))
    )
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_SEQ:
        raise HTTPException(
            400,
            f"{name}={raw[:40]!r} is not a seq (a whole number from 0 to {MAX_SEQ}): pass the "
            "seq the page's window was read at, or reload the page.",
        )
    return value


@dataclass(eq=False)
class _Message:
    """A message encoded once for all the streams of its feed: ``changes`` cover the events
    after ``after`` up to ``seq``; a summary has neither."""

    body: bytes
    after: int | None = None
    seq: int | None = None


_END = _Message(b"")  # the run is gone (or its feed failed): its streams end


@dataclass
class _Behind:
    """The reader fell behind: it missed messages up to ``seq``."""

    seq: int


class _Subscriber:
    """One stream's queue of its feed's messages: at most ``MAX_QUEUED`` bytes (and one
    message however large). A message past that empties it for a ``_Behind``."""

    def __init__(self, joined: int | None) -> None:
        self.joined = joined  # the seq its feed's messages go on from
        self.queue: deque[_Message] = deque()
        self.queued = 0  # bytes
        self.behind: int | None = None  # the newest seq dropped, while behind
        self._wake = anyio.Event()

    def put(self, message: _Message) -> None:
        if message is _END:
            self.queue.append(message)
        elif self.behind is not None or (
            self.queue and self.queued + len(message.body) > MAX_QUEUED
        ):
            last = [m.seq for m in (*self.queue, message) if m.seq is not None]
            self.behind = max([self.behind or 0, *last])
            self.queue.clear()
            self.queued = 0
        else:
            self.queue.append(message)
            self.queued += len(message.body)
        self._wake.set()

    async def get(self) -> _Message | _Behind:
        while not self.queue and self.behind is None:
            self._wake = anyio.Event()
            await self._wake.wait()
        if self.behind is not None:
            behind, self.behind = _Behind(self.behind), None
            return behind
        message = self.queue.popleft()
        self.queued -= len(message.body)
        return message


class _Feed:
    """Reads a run's changes (of one dataset) for every stream that follows it, while one
    does, and encodes each message once."""

    def __init__(self, store: Store, counts: CountsCache, run_id: str, dataset: str | None) -> None:
        self.store, self.counts, self.run_id, self.dataset = store, counts, run_id, dataset
        self.subscribers: set[_Subscriber] = set()
        self.seq: int | None = None  # the last event read (None: not started)
        self.summary: _Message | None = None  # the newest, for the streams that join
        self.started = anyio.Event()

    def publish(self, message: _Message) -> None:
        if message.seq is not None:
            self.seq = message.seq
        elif message is not _END:
            self.summary = message
        for subscriber in self.subscribers:
            subscriber.put(message)

    async def run(self) -> None:
        try:
            await self._follow()
        except Exception:
            log.exception("following run %s failed; its pages reconnect", self.run_id)
        finally:
            self.started.set()
            self.publish(_END)

    async def _follow(self) -> None:
        self.seq = await anyio.to_thread.run_sync(last_seq, self.store, self.run_id)
        for subscriber in self.subscribers:
            subscriber.joined = self.seq
        self.started.set()
        sent_summary = changed = -math.inf
        dirty = True
        while self.subscribers:
            changes = await anyio.to_thread.run_sync(
                functools.partial(changes_since, dataset=self.dataset, limit=PAGE),
                self.store,
                self.run_id,
                self.seq,
            )
            if changes.count:
                self.publish(_changes(changes))
            dirty = dirty or changes.count > 0
            now = time.monotonic()
            if changes.count:
                changed = now
            settling = now - changed < SETTLE
            if (dirty or settling) and now - sent_summary >= SUMMARY_EVERY:
                summary = await anyio.to_thread.run_sync(
                    _summary, self.store, self.counts, self.run_id, self.dataset, self.seq
                )
                if summary is None:
                    return
                self.publish(_Message(_encode(summary, "summary")))
                # counts still being made: another summary follows with them
                sent_summary = now
                dirty = self.dataset is not None and (summary["counts"] or {"pending": True}).get(
                    "pending", False
                )
                live = summary["status"] == RunStatus.RUNNING.value
            else:
                live = True
            if changes.count < PAGE:  # caught up: wait for more
                await anyio.sleep(POLL if live else IDLE_POLL)


def _encode(data: Any, event: str, seq: int | None = None) -> bytes:
    return ServerSentEvent(
        data=_json(data), event=event, id=None if seq is None else str(seq)
    ).encode()


def _changes(changes: Changes) -> _Message:
    doc = {"after": changes.after, "seq": changes.seq, "rows": changes.rows,
           "events": changes.events}  # fmt: skip
    return _Message(_encode(doc, "changes", changes.seq), changes.after, changes.seq)


def _reload(after: int, seq: int) -> bytes:
    return _encode({"after": after, "seq": seq, "skipped": seq - after}, "reload", seq)


class Streams:
    """The streams open on one app: the caps on them, and a feed per (run, dataset)."""

    def __init__(
        self, store: Store, counts: CountsCache, *, max_streams: int, max_per_client: int
    ) -> None:
        self.store, self.counts = store, counts
        self.max_streams, self.max_per_client = max_streams, max_per_client
        self.open: dict[str, int] = {}  # client address -> its streams
        self.feeds: dict[tuple[str, str | None], _Feed] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._reads: anyio.CapacityLimiter | None = None

    def admit(self, request: Request) -> Callable[[], None]:
        """Count a stream of the request's client in, or refuse it: 503 when the app has
        ``max_streams`` open, 429 when the client has ``max_per_client``. Returns the call
        that counts it out."""
        client = request.client.host if request.client else ""
        if sum(self.open.values()) >= self.max_streams:
            raise HTTPException(
                503,
                f"The UI has {self.max_streams} live views open, the most it serves: close the "
                "Playline tabs you do not need (in any browser), then reload this page.",
            )
        if self.open.get(client, 0) >= self.max_per_client:
            raise HTTPException(
                429,
                f"This browser has {self.max_per_client} live views open on the UI, the most "
                "one client may: close the Playline tabs you do not need, then reload this page.",
            )
        self.open[client] = self.open.get(client, 0) + 1

        def close() -> None:
            self.open[client] -= 1
            if not self.open[client]:
                del self.open[client]

        return close

    def follow(self, run_id: str, dataset: str | None) -> tuple[_Feed, _Subscriber]:
        """A new stream's queue on the feed of (run, dataset), started when it is the first."""
        feed = self.feeds.get((run_id, dataset))
        if feed is None:
            feed = self.feeds[(run_id, dataset)] = _Feed(self.store, self.counts, run_id, dataset)
            task = asyncio.get_running_loop().create_task(self._run(feed))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        subscriber = _Subscriber(feed.seq)
        feed.subscribers.add(subscriber)
        return feed, subscriber

    def leave(self, feed: _Feed, subscriber: _Subscriber) -> None:
        """A stream ended; its feed stops after its next read when no stream follows it."""
        feed.subscribers.discard(subscriber)
        if not feed.subscribers and self.feeds.get((feed.run_id, feed.dataset)) is feed:
            del self.feeds[(feed.run_id, feed.dataset)]

    async def _run(self, feed: _Feed) -> None:
        await feed.run()
        if self.feeds.get((feed.run_id, feed.dataset)) is feed:
            del self.feeds[(feed.run_id, feed.dataset)]

    def queued(self) -> list[int]:
        """The bytes queued for each stream open: what slow readers make the UI hold."""
        return [s.queued for feed in self.feeds.values() for s in feed.subscribers]

    async def read(self, feed: _Feed, cursor: int, upto: int) -> AsyncIterator[tuple[bytes, int]]:
        """A stream's own read from ``cursor`` up to ``upto``, where its feed's messages go
        on: (message, its seq) of at most ``PAGE`` events each, or a reload past
        ``GAP_LIMIT`` (seqs number every event of the store: fewer lie between)."""
        if upto - cursor > GAP_LIMIT:
            yield _reload(cursor, upto), upto
            return
        if self._reads is None:
            self._reads = anyio.CapacityLimiter(CATCH_UP_READS)
        while cursor < upto:
            changes = await anyio.to_thread.run_sync(
                functools.partial(changes_since, dataset=feed.dataset, limit=PAGE, upto=upto),
                self.store,
                feed.run_id,
                cursor,
                limiter=self._reads,
            )
            if not changes.count:
                return
            cursor = changes.seq
            yield _changes(changes).body, cursor


class _StreamResponse(EventSourceResponse):
    """An event stream that counts itself out when it ends, however it ends; a reader that
    took nothing for ``SEND_TIMEOUT`` seconds ends it quietly."""

    def __init__(self, content: AsyncIterator[Any], close: Callable[[], None]) -> None:
        super().__init__(
            content, ping=PING, send_timeout=SEND_TIMEOUT, headers={"Cache-Control": "no-store"}
        )
        self._close = close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except SendTimeoutError:
            pass
        finally:
            self._close()


async def run_stream(request: Request) -> Response:
    streams: Streams = request.app.state.streams
    run_id: str = request.path_params["run_id"]
    dataset = request.query_params.get("dataset") or None
    start = _start_seq(request)
    close = streams.admit(request)
    feed, subscriber = streams.follow(run_id, dataset)

    def done() -> None:
        streams.leave(feed, subscriber)
        close()

    async def stream() -> AsyncIterator[bytes]:
        cursor = start
        if cursor is None:
            cursor = await anyio.to_thread.run_sync(last_seq, streams.store, run_id)
            yield _encode({"seq": cursor}, "hello", cursor)
        await feed.started.wait()
        if feed.summary is not None:
            yield feed.summary.body
        if subscriber.joined is not None:  # the feed's messages go on from it
            async for body, seq in streams.read(feed, cursor, subscriber.joined):
                yield body
                cursor = seq
        while True:
            message = await subscriber.get()
            if isinstance(message, _Behind):
                if message.seq > cursor:
                    yield _reload(cursor, message.seq)
                    cursor = message.seq
                if feed.summary is not None:
                    yield feed.summary.body
            elif message is _END:
                return
            elif message.seq is None or message.after is None:
                yield message.body  # a summary
            elif message.after == cursor:
                yield message.body
                cursor = message.seq
            elif message.seq > cursor:  # it starts before or after this stream's cursor
                async for body, seq in streams.read(feed, cursor, message.seq):
                    yield body
                    cursor = seq

    return _StreamResponse(stream(), done)


def _summary(
    store: Store, counts: CountsCache, run_id: str, dataset: str | None, seq: int
) -> dict[str, Any] | None:
    run = store.get_run(run_id)
    if run is None:
        return None
    doc = run_summary(store, run)
    if dataset is not None:
        doc["counts"] = counts.get(store, run_id, dataset, seq=seq, wait=False)
    return doc


async def runs_stream(request: Request) -> Response:
    streams: Streams = request.app.state.streams
    store = streams.store
    status = request.query_params.get("status") or None
    play = request.query_params.get("play") or None

    def read() -> bytes:
        now = time.time()
        runs = [
            run_summary(store, r, now=now)
            for r in store.list_runs(limit=100, play=play)
            if status is None or r.status.value == status or status in SHOWN_FOR_RUNNING
        ]
        if status is not None:
            runs = [r for r in runs if r["status"] == status]
        for r in runs:  # a running run's duration ticks: the page computes it
            r["duration"] = None if r["status"] == "running" else r["duration"]
        return orjson.dumps({"runs": runs}, default=str)

    async def stream() -> AsyncIterator[ServerSentEvent]:
        last = b""
        while True:
            doc = await anyio.to_thread.run_sync(read)
            if doc != last:
                yield ServerSentEvent(data=doc.decode(), event="runs")
                last = doc
            await anyio.sleep(IDLE_POLL)

    return _StreamResponse(stream(), streams.admit(request))
