"""Ringing the workflows of runs that wait for an event just sent.

``pl.send_event`` writes the event to the store first (it is delivered from there, exactly
once), then rings here: every suspended run on Temporal whose waits include the key gets the
``playline.event`` signal, so its workflow starts the next attempt. Nothing is lost between the
two writes: a run that was still running when the event arrived was not found here, but its
attempt looks in the store for its awaited events after it ends (``_activity.py``), and an
event sent before the run reached its wait is found by the wait itself.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Sequence
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from ...store import RunRecord, Store
from ._connect import Endpoint
from ._messages import EVENT_SIGNAL

__all__ = ["ring", "ring_async", "waiting_on_temporal"]

_LOOK = 1000  # runs with an event waiting considered per ring


def waiting_on_temporal(store: Store, key: str) -> list[tuple[RunRecord, Endpoint]]:
    """Suspended root runs on Temporal that wait for ``key`` (sent, not yet delivered)."""
    # A wake time of 0 is never due, so this lists the runs whose awaited event is waiting.
    found = []
    for record in store.due_runs(now=0.0, limit=_LOOK):
        where = Endpoint.of(record.options)
        if where is not None and key in record.awaited_events:
            found.append((record, where))
    return found


async def ring_async(
    runs: Sequence[tuple[RunRecord, Endpoint]], key: str, client: Client | None = None
) -> list[str]:
    """Signal each run's workflow; returns the run ids rung. A workflow that has ended (or
    never started) is skipped: its run is resumed by whoever starts it again."""
    rung: list[str] = []
    clients: dict[tuple[str, str], Client] = {}
    for record, where in runs:
        target = (where.target, where.namespace)
        if client is not None:
            use = client
        elif target in clients:
            use = clients[target]
        else:
            use = clients[target] = await Client.connect(where.target, namespace=where.namespace)
        try:
            await use.get_workflow_handle(record.run_id).signal(EVENT_SIGNAL, key)
        except RPCError as exc:
            if exc.status is not RPCStatusCode.NOT_FOUND:
                raise
            continue
        rung.append(record.run_id)
    return rung


def ring(store: Store, key: str) -> list[str]:
    """Signal the workflows of the runs on Temporal that wait for the event ``key`` (sent,
    not yet delivered); returns the run ids signalled. ``pl.send_event`` calls it after
    recording the event. The signals go out on a loop of their own in a short-lived thread,
    so it works whether or not the caller runs an event loop."""
    runs = waiting_on_temporal(store, key)
    if not runs:
        return []
    box: dict[str, Any] = {}

    def signal() -> None:
        try:
            box["rung"] = asyncio.run(ring_async(runs, key))
        except BaseException as exc:
            box["error"] = exc
        finally:
            # The SDK's clients hold native objects: free them now, not at interpreter exit
            # (where the SDK's threads can no longer take the GIL and the process may crash).
            gc.collect()

    thread = threading.Thread(target=signal, name="playline-temporal-ring")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    rung: list[str] = box["rung"]
    return rung
