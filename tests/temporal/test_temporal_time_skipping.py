"""A play that sleeps a day and waits for an event, under Temporal's time-skipping test server:
the day passes on Temporal's clock (the attempt's clock is the workflow's), and the event is
delivered whether it was sent before the wait or after."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

import playline as pl
from playline.backends import temporal
from playline.store import RunStatus, Store, open_store

from temporalhelp import SIGNALED, TIMER_STARTED, history, of_type, serving, task_queue, until

pytestmark = pytest.mark.anyio

DAY = 86_400


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    db = open_store(f"sqlite:///{tmp_path}/days.db")
    yield db
    db.close()


@pl.play(name="temporal-t2-day-then-event")
async def day_then_event(ctx: pl.Context, input: Any) -> Any:
    await ctx.sleep(DAY)
    return await ctx.wait_for_event(input["key"])


async def test_a_day_long_sleep_then_an_event_sent_early(
    time_skipping: WorkflowEnvironment, store: Store
) -> None:
    key = f"early-{task_queue()}"
    client = time_skipping.client
    async with serving(client, store, stall_after=None) as worker:
        run_id = await temporal.start(
            day_then_event,
            {"key": key},
            temporal=client,
            store=store,
            task_queue=worker.where.task_queue,
        )
        # Sent while the run sleeps, long before it waits: kept in the store until the wait.
        assert pl.send_event(key, {"approved": True}, store=store) is True
        await until(
            lambda: (r := store.get_run(run_id)) is not None and r.wake_at is not None,
            what="the run asleep",
        )
        await time_skipping.sleep(timedelta(days=1, minutes=1))  # the timer fires at once
        ended = await client.get_workflow_handle(run_id).result()
    assert ended["status"] == "completed" and ended["attempts"] == 2
    record = store.get_run(run_id)
    assert record is not None and record.output == {"approved": True}
    # The attempts ran on the workflow's clock: a day went by between them.
    assert record.updated_at - record.created_at >= DAY
    events = await history(client, run_id)
    assert len(of_type(events, TIMER_STARTED)) == 1 and not of_type(events, SIGNALED)


async def test_a_day_long_sleep_then_an_event_sent_while_it_waits(
    time_skipping: WorkflowEnvironment, store: Store
) -> None:
    key = f"late-{task_queue()}"
    client = time_skipping.client
    async with serving(client, store, stall_after=None) as worker:
        run_id = await temporal.start(
            day_then_event,
            {"key": key},
            temporal=client,
            store=store,
            task_queue=worker.where.task_queue,
        )
        await until(
            lambda: (r := store.get_run(run_id)) is not None and r.wake_at is not None,
            what="the run asleep",
        )
        await time_skipping.sleep(timedelta(days=1, minutes=1))  # skip the day
        await until(
            lambda: (r := store.get_run(run_id)) is not None and r.awaited_events == [key],
            what="the run waiting for its event",
        )
        assert pl.send_event(key, "late", store=store) is True  # rings the workflow
        ended = await client.get_workflow_handle(run_id).result()
    assert ended["status"] == "completed" and ended["attempts"] == 3
    record = store.get_run(run_id)
    assert record is not None and record.status is RunStatus.COMPLETED
    assert record.output == "late"
    assert len(of_type(await history(client, run_id), SIGNALED)) == 1
