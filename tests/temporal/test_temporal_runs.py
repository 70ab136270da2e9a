"""Runs on the Temporal dev server with an in-process worker: a workflow per run, durable
timers, events that ring through signals (and are not lost when sent early), child plays,
start-or-attach, continue-as-new, stopping, and histories that replay deterministically."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.worker import Replayer
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

import playline as pl
from playline.backends import temporal
from playline.backends._temporal._workflow import PlayRun
from playline.errors import PlayDefinitionError, PlaylineError
from playline.store import RunStatus, Store, open_store

from temporalhelp import (
    ACTIVITY_SCHEDULED,
    CONTINUED,
    SIGNALED,
    STARTED,
    TIMER_STARTED,
    Gate,
    history,
    of_type,
    serving,
    task_queue,
    until,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    db = open_store(f"sqlite:///{tmp_path}/runs.db")
    yield db
    db.close()


@pl.tool("t1.double", batch=pl.Batch(max_size=10))
def double(inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"v": 2 * i["n"]} for i in inputs]


@pl.play(name="temporal-t1-rows")
async def rows(ctx: pl.Context, input: Any) -> Any:
    return await (
        ctx.dataset("nums", [{"n": n} for n in range(input.get("rows", 30))], key="n")
        .with_column("d", lambda row, ctx: ctx.tool("t1.double", {"n": row["n"]}))
        .run()
    )


@pl.play(name="temporal-t1-sleeps")
async def sleeps(ctx: pl.Context, input: Any) -> str:
    await ctx.sleep(input["seconds"])
    return "awake"


@pl.play(name="temporal-t1-waits")
async def waits(ctx: pl.Context, input: Any) -> Any:
    return await ctx.wait_for_event(input["key"])


@pl.play(name="temporal-t1-many-events")
async def many_events(ctx: pl.Context, input: Any) -> int:
    for i in range(input["count"]):
        await ctx.wait_for_event(f"{input['key']}-{i}")
    return input["count"]


@pl.play(name="temporal-t1-child")
async def child(ctx: pl.Context, input: Any) -> Any:
    await ctx.sleep(1)
    return {"approved": await ctx.wait_for_event(input["key"])}


@pl.play(name="temporal-t1-parent")
async def parent(ctx: pl.Context, input: Any) -> Any:
    return {"child": await ctx.run_play("approval", child, input)}


def workflow_runner() -> SandboxedWorkflowRunner:
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("playline")
    )


async def test_a_run_is_a_workflow_of_attempts_and_its_history_replays(
    temporal_client: Client, store: Store
) -> None:
    async with serving(temporal_client, store, stall_after=None) as worker:
        result = await temporal.arun(
            rows,
            {"rows": 30},
            temporal=temporal_client,
            store=store,
            task_queue=worker.where.task_queue,
        )
    assert result.status == "completed", result.error
    assert [row["d"]["v"] for row in result.output] == [2 * n for n in range(30)]
    assert result.stats.rows == 30 and result.stats.tool_calls_live == 30
    logs = [e.preview or "" for e in store.read_events(result.run_id, kinds=["log"])]
    assert any(worker.identity in line for line in logs)  # which worker ran the attempt

    events = await history(temporal_client, result.run_id)
    assert len(of_type(events, ACTIVITY_SCHEDULED)) == 1  # one attempt, no rows in history
    handle = temporal_client.get_workflow_handle(result.run_id)
    replayer = Replayer(workflows=[PlayRun], workflow_runner=workflow_runner())
    await replayer.replay_workflow(await handle.fetch_history())  # deterministic


async def test_a_long_sleep_is_a_durable_timer(temporal_client: Client, store: Store) -> None:
    async with serving(temporal_client, store, foreground_sleep=0, stall_after=None) as worker:
        slept = await temporal.arun(
            sleeps,
            {"seconds": 1.5},
            temporal=temporal_client,
            store=store,
            task_queue=worker.where.task_queue,
        )
        # follow() returns once the run waits durably; its workflow goes on by itself.
        assert slept.status == "suspended" and slept.waiting
        assert slept.waiting["wake_at"] is not None
        ended = await temporal_client.get_workflow_handle(slept.run_id).result()
    assert ended["status"] == "completed" and ended["attempts"] == 2
    assert store.get_run(slept.run_id).output == "awake"  # type: ignore[union-attr]
    assert len(of_type(await history(temporal_client, slept.run_id), TIMER_STARTED)) == 1


async def test_an_event_wakes_the_run_through_a_signal(
    temporal_client: Client, store: Store
) -> None:
    key = f"approve-{task_queue()}"
    async with serving(temporal_client, store, stall_after=None) as worker:
        waiting = await temporal.arun(
            waits,
            {"key": key},
            temporal=temporal_client,
            store=store,
            task_queue=worker.where.task_queue,
        )
        assert waiting.status == "suspended" and waiting.waiting == {
            "wake_at": None,
            "events": [key],
        }
        # The event reaches the store without a signal (as if the ring were lost): the run is
        # due, yet the embedded worker leaves it to its workflow ...
        assert store.send_event(key, b'{"by": "ada"}', now=0.0)
        local = pl.Worker(store=store)
        assert await local.run(burst=True) == []
        assert "Temporal" in local.skipped[waiting.run_id]
        # ... and sending the event again rings the workflow (the first payload stands).
        assert pl.send_event(key, {"by": "alan"}, store=store) is False
        ended = await temporal_client.get_workflow_handle(waiting.run_id).result()
    assert ended["status"] == "completed"
    assert store.get_run(waiting.run_id).output == {"by": "ada"}  # type: ignore[union-attr]
    assert len(of_type(await history(temporal_client, waiting.run_id), SIGNALED)) == 1


async def test_an_event_sent_before_the_run_is_not_lost(
    temporal_client: Client, store: Store
) -> None:
    key = f"early-{task_queue()}"
    assert pl.send_event(key, "early bird", store=store) is True  # no run waits for it yet
    async with serving(temporal_client, store, stall_after=None) as worker:
        result = await temporal.arun(
            waits,
            {"key": key},
            temporal=temporal_client,
            store=store,
            task_queue=worker.where.task_queue,
        )
    assert result.status == "completed" and result.output == "early bird"


async def test_a_child_play_sleeps_and_waits_inside_its_parents_attempts(
    temporal_client: Client, store: Store
) -> None:
    key = f"child-{task_queue()}"
    async with serving(temporal_client, store, foreground_sleep=0, stall_after=None) as worker:
        run_id = await temporal.start(
            parent,
            {"key": key},
            temporal=temporal_client,
            store=store,
            task_queue=worker.where.task_queue,
        )
        # The child's timer, then its event wait, are the parent run's own waits.
        await until(
            lambda: key in (store.get_run(run_id) or _none).awaited_events,
            what="the parent waiting for its child's event",
        )
        pl.send_event(key, "yes", store=store)
        ended = await temporal_client.get_workflow_handle(run_id).result()
    assert ended["status"] == "completed"
    assert store.get_run(run_id).output == {"child": {"approved": "yes"}}  # type: ignore[union-attr]
    (kid,) = store.child_runs(run_id)
    assert kid.status is RunStatus.COMPLETED and kid.parent_run_id == run_id
    events = await history(temporal_client, run_id)
    assert len(of_type(events, TIMER_STARTED)) == 1 and len(of_type(events, SIGNALED)) == 1


async def test_submitting_twice_is_one_run(temporal_client: Client, store: Store) -> None:
    key = f"twice-{task_queue()}"
    async with serving(temporal_client, store, stall_after=None) as worker:
        queue = worker.where.task_queue
        options: dict[str, Any] = {"temporal": temporal_client, "store": store, "task_queue": queue}
        first = await temporal.start(waits, {"key": key}, **options)
        again = await temporal.start(waits, {"key": key}, run_id=first, **options)
        assert again == first
        description = await temporal_client.get_workflow_handle(first).describe()
        assert (
            description.raw_description.workflow_execution_info.first_run_id == description.run_id
        )
        with pytest.raises(PlayDefinitionError, match="runs on Temporal at"):
            await temporal.start(waits, run_id=first, **{**options, "task_queue": "elsewhere"})
        pl.send_event(key, 1, store=store)
        assert (await temporal_client.get_workflow_handle(first).result())["status"] == "completed"
    assert len(of_type(await history(temporal_client, first), STARTED)) == 1  # one workflow


async def test_a_run_started_without_temporal_is_not_taken_over(
    temporal_client: Client, store: Store
) -> None:
    local = await pl.arun(rows, {"rows": 3}, store=store)
    with pytest.raises(PlayDefinitionError, match="started without Temporal"):
        await temporal.start(rows, run_id=local.run_id, temporal=temporal_client, store=store)


async def test_long_histories_continue_as_new(temporal_client: Client, store: Store) -> None:
    """The dev server suggests continuing as new after 200 history events (tests/services.py):
    30 event waits, each an attempt and a signal, make more than that."""
    key, count = f"many-{task_queue()}", 30
    async with serving(temporal_client, store, stall_after=None) as worker:
        run_id = await temporal.start(
            many_events,
            {"key": key, "count": count},
            temporal=temporal_client,
            store=store,
            task_queue=worker.where.task_queue,
        )
        for i in range(count):
            await until(
                lambda i=i: (store.get_run(run_id) or _none).awaited_events == [f"{key}-{i}"],
                what=f"the run waiting for event {i}",
            )
            pl.send_event(f"{key}-{i}", i, store=store)
        ended = await temporal_client.get_workflow_handle(run_id).result()
    assert ended["status"] == "completed" and ended["attempts"] == count + 1
    assert store.get_run(run_id).output == count  # type: ignore[union-attr]
    assert of_type(await history(temporal_client, run_id), CONTINUED)


@pl.play(name="temporal-t1-gated")
async def gated(ctx: pl.Context, input: Any) -> Any:
    return await (
        ctx.dataset("nums", [{"n": n} for n in range(20)], key="n")
        .with_column("v", lambda row, ctx: ctx.tool("t1.gated", {"n": row["n"]}))
        .run()
    )


async def test_a_stopped_run_ends_its_workflow_and_resumes_when_submitted_again(
    temporal_client: Client, store: Store
) -> None:
    gate = Gate()
    registry = pl.ToolRegistry()
    registry.tool("t1.gated", batch=pl.Batch(max_size=5), rate=pl.Rate(concurrency=1))(gate)
    stop = asyncio.Event()
    # A short lease: the attempt's supervisor renews it (and reads stop requests) every 0.1 s.
    async with serving(
        temporal_client, store, tools=[registry], stall_after=None, lease=0.3
    ) as worker:
        options: dict[str, Any] = {
            "temporal": temporal_client,
            "store": store,
            "task_queue": worker.where.task_queue,
        }
        run_id = await temporal.start(gated, **options)
        following = asyncio.ensure_future(
            temporal.follow(run_id, temporal=temporal_client, store=store, stop=stop)
        )
        await asyncio.wait_for(gate.entered.wait(), 30)
        stop.set()  # Ctrl-C under `playline run --temporal`
        seen = await until(
            lambda: (r := store.get_run(run_id)) is not None and r.stop_requested and r,
            what="the stop request",
        )
        # Two renewals after it: the first read the request and stopped the attempt's drain.
        for lease in (seen.lease_until, None):
            lease = lease or store.get_run(run_id).lease_until  # type: ignore[union-attr]
            await until(
                lambda lease=lease: store.get_run(run_id).lease_until != lease,  # type: ignore[union-attr]
                what="the lease renewed",
            )
        gate.release.set()  # the batch in flight finishes and is recorded; no other starts
        stopped = await following
        assert stopped.status == "suspended" and stopped.waiting
        assert stopped.waiting["stop"] == "stopped"
        assert gate.inputs == [0, 1, 2, 3, 4]  # the batch in flight, and no other
        ended = await temporal_client.get_workflow_handle(run_id).result()
        assert ended["stop"] == "stopped"

        again = await temporal.arun(gated, run_id=run_id, **options)
    assert again.status == "completed" and again.stats.rows == 20
    assert gate.inputs[:5] == [0, 1, 2, 3, 4] and sorted(gate.inputs) == list(range(20))


@pl.play(name="temporal-t1-paid")
async def paid_play(ctx: pl.Context, input: Any) -> Any:
    return await (
        ctx.dataset("nums", [{"n": n} for n in range(6)], key="n")
        .with_column("v", lambda row, ctx: ctx.tool("t1.paid", {"n": row["n"]}))
        .run()
    )


async def test_a_budget_raised_on_resubmit_replaces_the_runs_and_stands(
    temporal_client: Client, store: Store
) -> None:
    registry = pl.ToolRegistry()
    registry.tool("t1.paid", batch=pl.Batch(max_size=10), cost=pl.Cost(1))(
        lambda inputs: [{"n": i["n"]} for i in inputs]
    )
    async with serving(temporal_client, store, tools=[registry], stall_after=None) as worker:
        options: dict[str, Any] = {
            "temporal": temporal_client,
            "store": store,
            "task_queue": worker.where.task_queue,
        }
        first = await temporal.arun(paid_play, max_credits=2, **options)
        assert first.status == "failed" and "Budget of 2 credits" in (first.error or "")
        raised = await temporal.arun(paid_play, run_id=first.run_id, max_credits=4, **options)
        assert "Budget of 4 credits" in (raised.error or ""), raised.error
        again = await temporal.arun(paid_play, run_id=first.run_id, **options)  # no budget given
        assert "Budget of 4 credits" in (again.error or ""), again.error
        done = await temporal.arun(paid_play, run_id=first.run_id, max_credits=10, **options)
    assert done.status == "completed" and done.stats.credits == 6


async def test_a_play_no_worker_can_load_fails_the_run_saying_why(
    temporal_client: Client, store: Store
) -> None:
    def resolve(record: Any) -> Any:
        raise PlaylineError(f"no play file for {record.play} on this worker")

    worker = temporal.TemporalWorker(
        temporal_client,
        store=store,
        resolve=resolve,
        task_queue=task_queue(),
        settings=temporal.WorkerSettings(stall_after=None),
    )
    async with worker:
        result = await temporal.arun(
            rows,
            temporal=temporal_client,
            store=store,
            task_queue=worker.where.task_queue,
        )
    assert result.status == "failed"
    assert result.error is not None and "no play file for temporal-t1-rows" in result.error


class _None:
    awaited_events: list[str] = []  # noqa: RUF012 - a stand-in for a run not yet stored
    status = None
    stop_requested = False


_none: Any = _None()
