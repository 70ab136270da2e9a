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
changed. ``/api/stream/runs`` sends the runs list when it changes.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.to_thread
import orjson
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response

from .._trace import LIVE_KINDS, SHOWN_FOR_RUNNING, changes_since, run_summary
from ..store import RunStatus, Store

__all__ = ["GAP_LIMIT", "SUMMARY_EVERY", "CountsCache", "last_seq", "run_stream", "runs_stream"]

GAP_LIMIT = 10_000  # events behind when a stream starts; past it the page reloads its window
PAGE = 1500  # events per message while following: small messages keep the page's frames short
SUMMARY_EVERY = 0.25  # seconds, at most one summary per stream
POLL = 0.1  # seconds between reads of the store while a run is live (it flushes every 0.1 s)
IDLE_POLL = 1.0  # ... and while nothing is running
PING = 15  # seconds: a comment line that keeps proxies from closing a quiet stream


def last_seq(store: Store, run_id: str) -> int:
    """The seq a page read its data at: the stream goes on from it."""
    return store.last_seq(run_id, kinds=LIVE_KINDS)


def _json(value: Any) -> str:
    return orjson.dumps(value, default=str).decode()


class CountsCache:
    """Chip counts per dataset, recomputed at most every 250 ms and never more than a fifth of
    the time (counting a large dataset's cells takes a while): a page opened on a huge run
    does not turn the store into a counting machine."""

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
            doc = store.row_counts(*key).to_dict()
            took = time.monotonic() - start
            doc["took"] = round(took, 4)
            self._cache[key] = (time.monotonic(), took, seq, doc)
            return doc


def _start_seq(request: Request) -> int | None:
    raw = request.headers.get("last-event-id") or request.query_params.get("after")
    if raw is None or raw == "":
        return None
    try:
        return max(0, int(raw))
    except ValueError:
        return None


async def run_stream(request: Request) -> Response:
    cfg = request.app.state.cfg
    counts: CountsCache = request.app.state.counts
    run_id: str = request.path_params["run_id"]
    dataset = request.query_params.get("dataset") or None
    store: Store = cfg.store
    start = _start_seq(request)

    async def stream() -> AsyncIterator[ServerSentEvent]:
        if start is None:
            cursor = await anyio.to_thread.run_sync(last_seq, store, run_id)
            yield ServerSentEvent(data=_json({"seq": cursor}), event="hello", id=str(cursor))
        else:
            cursor = start
        sent_summary = -math.inf
        dirty = True
        catching_up = True  # the first read decides whether the page must reload instead
        while True:
            changes = await anyio.to_thread.run_sync(
                functools.partial(
                    changes_since,
                    dataset=dataset,
                    limit=GAP_LIMIT if catching_up else PAGE,
                    gap=catching_up,
                ),
                store,
                run_id,
                cursor,
            )
            catching_up = False
            if changes.gap:
                yield ServerSentEvent(
                    data=_json({"after": cursor, "seq": changes.seq, "skipped": changes.count}),
                    event="reload",
                    id=str(changes.seq),
                )
            elif changes.count:
                yield ServerSentEvent(
                    data=_json(
                        {
                            "after": cursor,
                            "seq": changes.seq,
                            "rows": changes.rows,
                            "events": changes.events,
                        }
                    ),
                    event="changes",
                    id=str(changes.seq),
                )
            dirty = dirty or changes.count > 0
            cursor = changes.seq
            now = time.monotonic()
            if dirty and now - sent_summary >= SUMMARY_EVERY:
                summary = await anyio.to_thread.run_sync(
                    _summary, store, counts, run_id, dataset, cursor
                )
                if summary is None:
                    return
                yield ServerSentEvent(data=_json(summary), event="summary")
                # counts still being made: another summary follows with them
                sent_summary = now
                dirty = dataset is not None and (summary["counts"] or {"pending": True}).get(
                    "pending", False
                )
                live = summary["status"] == RunStatus.RUNNING.value
            else:
                live = True
            if not changes.gap and changes.count < PAGE:  # caught up: wait for more
                await anyio.sleep(POLL if live else IDLE_POLL)

    return EventSourceResponse(stream(), ping=PING, headers={"Cache-Control": "no-store"})


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
    cfg = request.app.state.cfg
    store: Store = cfg.store
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

    return EventSourceResponse(stream(), ping=PING, headers={"Cache-Control": "no-store"})
