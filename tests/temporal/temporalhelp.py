"""Helpers of the Temporal backend's tests: workers on unique task queues, histories, and
polling an observable condition (never a sleep to synchronise)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from playline.backends import temporal
from playline.store import Store


class Gate:
    """An async tool's door: the test sees the first request arrive and lets it finish."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.inputs: list[int] = []

    async def __call__(self, inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.inputs.extend(i["n"] for i in inputs)
        self.entered.set()
        await self.release.wait()
        return [{"n": i["n"]} for i in inputs]


def task_queue() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


@contextlib.asynccontextmanager
async def serving(
    client: Client,
    store: Store,
    *,
    plays: Iterable[Any] = (),
    tools: Iterable[Any] | None = None,
    queue: str | None = None,
    **settings: Any,
) -> AsyncIterator[temporal.TemporalWorker]:
    """An in-process worker on its own task queue (``worker.where.task_queue``)."""
    worker = temporal.TemporalWorker(
        client,
        store=store,
        plays=plays,
        tools=tools,
        task_queue=queue or task_queue(),
        settings=temporal.WorkerSettings(**settings),
    )
    async with worker:
        yield worker


async def until(condition: Callable[[], Any], *, what: str, timeout: float = 30.0) -> Any:
    """Poll ``condition`` until it is truthy (an observable state, not a wait for time)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def history(client: Client, run_id: str) -> list[HistoryEvent]:
    """The events of every run of the workflow (continue-as-new included), oldest first."""
    latest = await client.get_workflow_handle(run_id).describe()
    execution: str | None = latest.raw_description.workflow_execution_info.first_run_id
    events: list[HistoryEvent] = []
    while execution:
        handle = client.get_workflow_handle(run_id, run_id=execution)
        chunk = (await handle.fetch_history()).events
        events.extend(chunk)
        execution = None
        for event in chunk:
            if event.event_type == CONTINUED:
                attributes = event.workflow_execution_continued_as_new_event_attributes
                execution = attributes.new_execution_run_id
    return events


def of_type(events: list[HistoryEvent], kind: int) -> list[HistoryEvent]:
    return [e for e in events if e.event_type == kind]


STARTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
TIMER_STARTED = EventType.EVENT_TYPE_TIMER_STARTED
SIGNALED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
ACTIVITY_STARTED = EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
ACTIVITY_SCHEDULED = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
CONTINUED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
