"""Schedules as Temporal Schedules, on the dev server.

Temporal's time-skipping test server does not implement Schedules (CreateSchedule answers
UNIMPLEMENTED; sdk-java#1954: "no plans"), so fires come from the Schedule's own backfill and
trigger calls, which start past or present fires at once: no test waits for a cron time.
Each fire is a workflow whose first attempt records the run (run id = workflow id) in the
worker's store.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from temporalio.client import Client, ScheduleBackfill, ScheduleHandle
from temporalio.testing import WorkflowEnvironment

import playline as pl
from playline.backends import temporal
from playline.backends._temporal._messages import WORKFLOW, NewRun, RunInput
from playline.backends._temporal._schedules import (
    aadd_schedule,
    adelete_schedule,
    alist_schedules,
    apause_schedule,
    schedule_id,
)
from playline.store import RunStatus, Store, open_store
from services import TemporalServer, free_port

from temporalhelp import serving, task_queue, until

pytestmark = pytest.mark.anyio

RAN: Counter[str] = Counter()  # the play's executions, by the input's "key"
JAN_1 = datetime(2024, 1, 1, tzinfo=UTC)


@pl.play(name="temporal-scheduled-echo")
async def echo(ctx: pl.Context, input: Any) -> Any:
    RAN[input["key"]] += 1
    return {"got": input}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    db = open_store(f"sqlite:///{tmp_path}/schedules.db")
    yield db
    db.close()


@pytest.fixture
def name() -> str:
    return f"weekly-{task_queue()}"


@pytest.fixture
async def cleanup(temporal_client: Client) -> AsyncIterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        await temporal_client.get_schedule_handle(schedule_id(name)).delete()


async def add(
    client: Client,
    store: Store,
    name: str,
    queue: str,
    cleanup: list[str],
    *,
    catch_up: str = "all",
    cron: str = "0 9 * * MON",
) -> ScheduleHandle:
    await aadd_schedule(
        temporal=client,
        namespace=None,
        task_queue=queue,
        store_url=store.url,
        name=name,
        play=echo.name,
        source=None,
        input={"key": name, "segment": "new leads"},
        cron=cron,
        timezone="Europe/Paris",
        catch_up=catch_up,
        cwd="/srv/plays",
    )
    cleanup.append(name)
    return client.get_schedule_handle(schedule_id(name))


def completed(store: Store, count: int) -> list[Any] | None:
    runs = store.list_runs(play=echo.name)
    done = [r for r in runs if r.status is RunStatus.COMPLETED]
    return done if len(done) >= count else None


async def test_each_fire_becomes_a_run_that_completes_with_the_schedules_input(
    temporal_client: Client, store: Store, name: str, cleanup: list[str]
) -> None:
    async with serving(temporal_client, store, plays=[echo]) as worker:
        queue = worker.where.task_queue
        handle = await add(temporal_client, store, name, queue, cleanup)
        # The three Monday 9:00 (Paris) fires of January 2024's first three weeks, at once.
        await handle.backfill(ScheduleBackfill(start_at=JAN_1, end_at=JAN_1 + timedelta(days=21)))
        # (A trigger sent while the Schedule still handles the backfill was seen to drop it.)
        await settled(handle, 3)
        await handle.trigger()  # and one now
        runs = await until(lambda: completed(store, 4), what="four scheduled runs completed")
    assert len(store.list_runs(play=echo.name)) == 4 and RAN[name] == 4
    fires = {r.run_id: r for r in runs}
    for day in (1, 8, 15):  # 9:00 in Paris is 8:00 UTC in January
        fire = datetime(2024, 1, day, 8, tzinfo=UTC)
        run = fires[f"sched-{name}-{fire:%Y-%m-%dT%H:%M:%SZ}"]
        assert run.input == {"key": name, "segment": "new leads"}
        assert run.output == {"got": run.input}
        iso = f"{fire:%Y-%m-%dT%H:%M:%SZ}"
        assert run.options["origin"] == {"kind": "schedule", "name": name, "fire": iso}
        assert run.options["temporal"]["task_queue"] == queue
        assert run.options["cwd"] == "/srv/plays"
    listed = await _listed(temporal_client, name)
    assert listed["cron"] == "0 9 * * MON" and listed["timezone"] == "Europe/Paris"
    assert listed["play"] == echo.name and listed["paused"] is False
    assert listed["input"] == {"key": name, "segment": "new leads"}
    assert listed["catch_up"] == "all" and listed["task_queue"] == queue
    paris = [datetime.fromtimestamp(t, ZoneInfo("Europe/Paris")) for t in listed["next_fires"]]
    assert paris and all((t.weekday(), t.hour, t.minute) == (0, 9, 0) for t in paris)
    assert {r["run_id"] for r in listed["recent_runs"]} == set(fires)


async def settled(handle: ScheduleHandle, fires: int) -> None:
    """Until the Schedule has handled ``fires`` fires (started or skipped their workflows)."""
    while True:
        info = (await handle.describe()).info
        if info.num_actions + info.num_actions_skipped_overlap >= fires:
            return
        await asyncio.sleep(0.05)


async def _listed(client: Client, name: str) -> dict[str, Any]:
    """The schedule as `list` shows it (Temporal lists from visibility: it may lag a bit)."""
    while True:
        for found in await alist_schedules(temporal=client, namespace=None):
            if found["name"] == name:
                return found
        await asyncio.sleep(0.05)


@pytest.mark.parametrize(("catch_up", "runs"), [("all", 3), ("one", 1)])
async def test_fires_during_a_worker_outage_catch_up_as_told(
    temporal_client: Client,
    store: Store,
    name: str,
    cleanup: list[str],
    catch_up: str,
    runs: int,
) -> None:
    queue = task_queue()
    handle = await add(temporal_client, store, name, queue, cleanup, catch_up=catch_up)
    # Three fires while no worker serves the queue: Temporal starts each on time ("all"), or
    # skips the later ones while the first one waits ("one").
    await handle.backfill(ScheduleBackfill(start_at=JAN_1, end_at=JAN_1 + timedelta(days=21)))
    await settled(handle, 3)
    assert store.list_runs(play=echo.name) == []  # no worker: nothing recorded yet
    async with serving(temporal_client, store, plays=[echo], queue=queue):
        await until(lambda: completed(store, runs), what=f"{runs} runs caught up")
        info = (await handle.describe()).info
        await asyncio.gather(
            *(
                temporal_client.get_workflow_handle(a.workflow_id).result()
                for a in info.running_actions
            )
        )
    assert len(store.list_runs(play=echo.name)) == runs and RAN[name] == runs
    if catch_up == "one":  # the earliest missed fire's run
        assert store.list_runs()[0].run_id == f"sched-{name}-2024-01-01T08:00:00Z"


async def test_a_late_fire_of_a_skip_schedule_records_no_run(
    temporal_client: Client, store: Store, name: str
) -> None:
    """catch-up skip: a fire no worker took within ``late_after`` of its start is skipped
    (a minute on a real schedule; 0 s here, so that any wait for a worker is too long)."""
    queue = task_queue()
    new_run = NewRun(
        play=echo.name,
        input=f'{{"key":"{name}"}}',
        origin={"kind": "schedule", "name": name},
        late_after=0.0,
    )
    run_id = f"{name}-2024-01-01T08:00:00Z"
    handle = await temporal_client.start_workflow(
        WORKFLOW, RunInput(new_run=new_run), id=run_id, task_queue=queue
    )
    async with serving(temporal_client, store, plays=[echo], queue=queue):
        ended = await handle.result()
    assert ended["status"] == "skipped" and "catch-up skip" in ended["error"]
    assert store.get_run(run_id) is None and RAN[name] == 0


async def test_a_fire_started_twice_is_one_run(
    temporal_client: Client, store: Store, name: str, cleanup: list[str]
) -> None:
    async with serving(temporal_client, store, plays=[echo]) as worker:
        queue = worker.where.task_queue
        handle = await add(temporal_client, store, name, queue, cleanup)
        week = ScheduleBackfill(start_at=JAN_1, end_at=JAN_1 + timedelta(days=2))
        await handle.backfill(week)
        (run,) = await until(lambda: completed(store, 1), what="the fire's run")
        await temporal_client.get_workflow_handle(run.run_id).result()
        # The fire started again, by hand with the Schedule's own input (Temporal's scheduler
        # was seen to refuse a used fire id itself: a second backfill of the week started
        # nothing): its first attempt finds the run ended and ends with it.
        description = await handle.describe()
        action = description.schedule.action
        args = temporal_client.data_converter.payload_converter.from_payloads(
            list(action.args), [RunInput]
        )
        again = await temporal_client.start_workflow(
            WORKFLOW, args[0], id=run.run_id, task_queue=queue
        )
        ended = await again.result()
    assert ended["status"] == "completed" and ended["run_id"] == run.run_id
    assert [r.run_id for r in store.list_runs(play=echo.name)] == [run.run_id]
    record = store.get_run(run.run_id)
    assert record is not None and record.attempts == 1 and RAN[name] == 1


async def test_pause_resume_update_and_delete(
    temporal_client: Client, store: Store, name: str
) -> None:
    queue = task_queue()
    await add(temporal_client, store, name, queue, [])
    await apause_schedule(name, True, temporal=temporal_client, namespace=None)
    assert (await _listed(temporal_client, name))["paused"] is True
    # Adding it again updates it, and keeps it paused.
    await add(temporal_client, store, name, queue, [], cron="30 7 * * *", catch_up="one")
    handle = temporal_client.get_schedule_handle(schedule_id(name))
    description = await handle.describe()
    assert description.schedule.state.paused is True
    paris = [t.astimezone(ZoneInfo("Europe/Paris")) for t in description.info.next_action_times]
    assert paris and all((t.hour, t.minute) == (7, 30) for t in paris)
    await apause_schedule(name, False, temporal=temporal_client, namespace=None)
    assert (await handle.describe()).schedule.state.paused is False
    await adelete_schedule(name, temporal=temporal_client, namespace=None)
    with pytest.raises(pl.PlaylineError, match=f"No schedule '{name}'.*schedule list"):
        await adelete_schedule(name, temporal=temporal_client, namespace=None)
    with pytest.raises(pl.PlaylineError, match="No schedule"):
        await apause_schedule(name, True, temporal=temporal_client, namespace=None)


async def test_the_sync_functions_and_their_errors(
    temporal_server: TemporalServer, store: Store, name: str
) -> None:
    """The synchronous API (run from a thread here: the tests' loop is running)."""
    target = temporal_server.target
    kwargs: dict[str, Any] = dict(
        temporal=target, namespace=None, task_queue=task_queue(), store_url=store.url,
        name=name, play=echo.name, source={"file": "/srv/plays/leads.py", "function": "echo"},
        input=None, cron="0 9 * * MON", timezone="UTC", catch_up="skip", cwd="/srv/plays",
    )  # fmt: skip
    await asyncio.to_thread(temporal.add_schedule, **kwargs)
    try:
        while not [
            s
            for s in await asyncio.to_thread(
                temporal.list_schedules, temporal=target, namespace=None
            )
            if s["name"] == name
        ]:
            await asyncio.sleep(0.05)
        await asyncio.to_thread(
            temporal.pause_schedule, name, True, temporal=target, namespace=None
        )
    finally:
        await asyncio.to_thread(temporal.delete_schedule, name, temporal=target, namespace=None)
    with pytest.raises(pl.PlayDefinitionError, match="inside a running event loop"):
        temporal.list_schedules(temporal=target, namespace=None)
    for change, message in [
        ({"catch_up": "some"}, "catch_up='some': give one of all, one, skip"),
        ({"timezone": "Mars/Olympus"}, "Unknown timezone 'Mars/Olympus'"),
        ({"name": "no spaces"}, "Schedule name 'no spaces'"),
        ({"cron": "61 9 * * MON"}, "Temporal refused schedule .*cron expression"),
        ({"source": {"file": "x.py"}}, "give the play's file and function"),
        ({"input": {"tags": {"a", "b"}}}, "The schedule's input"),
    ]:
        with pytest.raises(pl.PlayDefinitionError, match=message):
            await asyncio.to_thread(temporal.add_schedule, **{**kwargs, **change})
    down = f"127.0.0.1:{free_port()}"
    with pytest.raises(pl.PlaylineError, match=f"Cannot reach the Temporal server at {down}"):
        await asyncio.to_thread(temporal.list_schedules, temporal=down, namespace=None)


async def test_the_time_skipping_server_has_no_schedules(
    time_skipping: WorkflowEnvironment, store: Store, name: str
) -> None:
    """Why these tests use the dev server: the time-skipping server cannot hold a Schedule."""
    with pytest.raises(pl.PlaylineError, match="does not implement Schedules"):
        await aadd_schedule(
            temporal=time_skipping.client, namespace=None, task_queue=None,
            store_url=store.url, name=name, play=echo.name, source=None, input=None,
            cron="0 9 * * MON", timezone="UTC", catch_up="all", cwd=".",
        )  # fmt: skip
