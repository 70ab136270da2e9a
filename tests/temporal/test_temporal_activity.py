"""The attempt activity without a server (Temporal's ActivityEnvironment): its clock is the
workflow's time, it heartbeats after batches, a worker shutdown makes it yield without
repeating a call, and trouble outside the play is raised the way Temporal should retry it."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.testing import ActivityEnvironment

import playline as pl
from playline._clock import SystemClock
from playline.backends._temporal._activity import AttemptActivity, AttemptSettings
from playline.backends._temporal._messages import (
    RUN_HELD,
    STORE_LOST,
    UNRUNNABLE,
    AttemptInput,
    AttemptResult,
)
from playline.store import RunRecord, RunStatus, Store, open_store
from playline.store import _io as store_io
from playline.store._protocol import ConnectionLost
from playline.store.sql import SQLiteStore
from playline.tools._gates import ToolGates

from temporalhelp import Gate, until

pytestmark = pytest.mark.anyio

WORKFLOW_NOW = 2_000_000_000.0  # 2033: far from this machine's clock


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    db = open_store(f"sqlite:///{tmp_path}/activity.db")
    yield db
    db.close()


def activity_for(store: Store, plays: list[pl.Play], tools: list[Any]) -> AttemptActivity:
    by_name = {p.name: p for p in plays}
    return AttemptActivity(
        store=store,
        resolve=lambda record: (by_name[record.play], tools),
        gates=ToolGates(SystemClock()),
        settings=AttemptSettings(stall_after=None),
        identity="test-worker",
    )


def environment(
    *, heartbeats: list[Any] | None = None, scheduled: float = 0.0
) -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info,
        heartbeat_timeout=timedelta(seconds=30),
        current_attempt_scheduled_time=datetime.fromtimestamp(scheduled, UTC),
    )
    if heartbeats is not None:
        env.on_heartbeat = lambda *details: heartbeats.extend(details)
    return env


async def submitted(store: Store, play: pl.Play, run_id: str, input: Any = None) -> RunRecord:
    record = RunRecord(run_id=run_id, play=play.name, status=RunStatus.RUNNING, input=input or {})
    assert store.create_run(record)
    return record


async def attempt(
    env: ActivityEnvironment,
    activity: AttemptActivity,
    run_id: str,
    n: int = 1,
    now: float = WORKFLOW_NOW,
) -> AttemptResult:
    result: AttemptResult = await env.run(
        activity.attempt, AttemptInput(run_id=run_id, attempt=n, now=now)
    )
    return result


@pl.play(name="temporal-t0-sleeper")
async def sleeper(ctx: pl.Context, input: Any) -> str:
    await ctx.sleep(3600)
    return "awake"


async def test_the_attempt_runs_on_the_workflows_time(store: Store) -> None:
    activity = activity_for(store, [sleeper], [])
    await submitted(store, sleeper, "t0-clock")
    slept = await attempt(environment(), activity, "t0-clock")
    assert slept.status == "suspended" and slept.stop is None and not slept.ready
    # The wake time is the workflow's now plus the sleep, not this machine's clock.
    assert slept.wake_at is not None
    assert WORKFLOW_NOW + 3600 <= slept.wake_at < WORKFLOW_NOW + 3600 + 60

    # A retried activity is scheduled after the workflow's now: the later time counts, so
    # the hour has passed and the sleep returns.
    later = environment(scheduled=WORKFLOW_NOW + 3600 + 1)
    assert (await attempt(later, activity, "t0-clock", 2)).status == "completed"
    assert store.get_run("t0-clock").output == "awake"  # type: ignore[union-attr]


@pl.tool("t0.double", batch=pl.Batch(max_size=10))
def double(inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"v": 2 * i["n"]} for i in inputs]


@pl.play(name="temporal-t0-rows")
async def rows(ctx: pl.Context, input: Any) -> Any:
    return await (
        ctx.dataset("nums", [{"n": n} for n in range(30)], key="n")
        .with_column("d", lambda row, ctx: ctx.tool("t0.double", {"n": row["n"]}))
        .run()
    )


async def test_it_heartbeats_after_each_batch_with_its_progress(store: Store) -> None:
    beats: list[dict[str, Any]] = []
    await submitted(store, rows, "t0-beats")
    result = await attempt(
        environment(heartbeats=beats), activity_for(store, [rows], [double]), "t0-beats"
    )
    assert result.status == "completed"
    assert {b["run_id"] for b in beats} == {"t0-beats"}
    batches = sorted({b["batches"] for b in beats})
    assert batches[-3:] == [1, 2, 3]  # one heartbeat after each of the 3 batches of 10
    assert max(b["rows"] for b in beats) == 30


@pl.play(name="temporal-t0-gated")
async def gated(ctx: pl.Context, input: Any) -> Any:
    return await (
        ctx.dataset("nums", [{"n": n} for n in range(20)], key="n")
        .with_column("v", lambda row, ctx: ctx.tool("t0.gated", {"n": row["n"]}))
        .run()
    )


async def test_a_worker_shutdown_yields_after_the_calls_in_flight(store: Store) -> None:
    gate = Gate()
    registry = pl.ToolRegistry()
    registry.tool("t0.gated", batch=pl.Batch(max_size=5), rate=pl.Rate(concurrency=1))(gate)
    activity = activity_for(store, [gated], [registry])
    await submitted(store, gated, "t0-drain")
    env = environment()
    running = asyncio.ensure_future(attempt(env, activity, "t0-drain"))
    await asyncio.wait_for(gate.entered.wait(), 30)
    env.worker_shutdown()  # what Temporal tells a worker's activities when it shuts down
    gate.release.set()
    yielded = await running
    assert yielded.status == "suspended" and yielded.stop == "yield"
    assert gate.inputs == [0, 1, 2, 3, 4]  # the batch in flight finished; no other started

    # The next attempt (on another worker) resumes: nothing already paid runs again.
    assert (await attempt(environment(), activity, "t0-drain", 2)).status == "completed"
    assert sorted(gate.inputs) == list(range(20))


async def test_a_cancel_while_it_drains_stops_the_attempt_at_once(store: Store) -> None:
    """The worker's grace period ran out: the attempt ends without waiting for its call in
    flight, which stays in doubt until it is recorded or sent again."""
    gate = Gate()
    registry = pl.ToolRegistry()
    registry.tool("t0.gated", batch=pl.Batch(max_size=5), rate=pl.Rate(concurrency=1))(gate)
    activity = activity_for(store, [gated], [registry])
    await submitted(store, gated, "t0-abort")
    env = environment()
    running = asyncio.ensure_future(attempt(env, activity, "t0-abort"))
    await asyncio.wait_for(gate.entered.wait(), 30)
    env.worker_shutdown()
    env.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    record = store.get_run("t0-abort")
    assert record is not None and (record.waiting or {}).get("stop") == "yield"
    assert store.receipt_stats()["t0.gated"]["running"] == 5  # in doubt

    gate.release.set()
    assert (await attempt(environment(), activity, "t0-abort", 2)).status == "completed"
    # Only the batch that was in doubt may have run twice.
    assert sorted(set(gate.inputs)) == list(range(20)) and len(gate.inputs) <= 25


async def test_a_cancelled_activity_stops_the_run_cleanly(store: Store) -> None:
    gate = Gate()
    registry = pl.ToolRegistry()
    registry.tool("t0.gated", batch=pl.Batch(max_size=5), rate=pl.Rate(concurrency=1))(gate)
    activity = activity_for(store, [gated], [registry])
    await submitted(store, gated, "t0-cancel")
    env = environment()
    running = asyncio.ensure_future(attempt(env, activity, "t0-cancel"))
    await asyncio.wait_for(gate.entered.wait(), 30)
    env.cancel()  # the workflow was cancelled: a person stopped the run
    gate.release.set()
    with pytest.raises(asyncio.CancelledError):
        await running
    record = store.get_run("t0-cancel")
    assert record is not None and record.status is RunStatus.SUSPENDED
    assert (record.waiting or {}).get("stop") == "stopped"
    assert gate.inputs == [0, 1, 2, 3, 4]


@pl.play(name="temporal-t0-waiter")
async def waiter(ctx: pl.Context, input: Any) -> Any:
    async def column(row: Any, ctx: pl.Context) -> Any:
        if row["n"] == 0:
            return await ctx.wait_for_event("t0-late")
        return await ctx.tool("t0.gated", {"n": row["n"]})

    return await ctx.dataset("nums", [{"n": 0}, {"n": 1}], key="n").with_column("v", column).run()


async def test_an_event_sent_while_the_attempt_ran_makes_it_ready(store: Store) -> None:
    """The event found the run still running, so nobody signalled its workflow: the attempt
    itself says the event is there, and the workflow goes on at once."""
    gate = Gate()
    registry = pl.ToolRegistry()
    registry.tool("t0.gated", batch=pl.Batch(max_size=5))(gate)
    activity = activity_for(store, [waiter], [registry])
    await submitted(store, waiter, "t0-ready")
    running = asyncio.ensure_future(attempt(environment(), activity, "t0-ready"))
    await asyncio.wait_for(gate.entered.wait(), 30)  # row 0 waits already (dispatch order)
    pl.send_event("t0-late", {"ok": True}, store=store)
    gate.release.set()
    result = await running
    assert result.status == "suspended" and result.events == ["t0-late"] and result.ready
    assert (await attempt(environment(), activity, "t0-ready", 2)).status == "completed"


async def test_a_run_held_by_a_live_attempt_is_retried_after_its_lease(store: Store) -> None:
    await submitted(store, sleeper, "t0-held")
    now = SystemClock().now()
    claim = store.claim_run("t0-held", holder="another-host/1/token", lease_until=now + 20, now=now)
    assert claim.record is not None
    with pytest.raises(ApplicationError) as raised:  # (leases are read on the attempt's clock)
        await attempt(environment(), activity_for(store, [sleeper], []), "t0-held", now=now)
    assert raised.value.type == RUN_HELD and not raised.value.non_retryable
    delay = raised.value.next_retry_delay  # not before the holder's lease runs out
    assert delay is not None and timedelta(seconds=19) <= delay <= timedelta(seconds=21)
    assert "another-host" in str(raised.value)


async def test_a_run_this_worker_cannot_run_fails_its_workflow_saying_why(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(ApplicationError) as missing:
        await attempt(environment(), activity_for(store, [], []), "t0-nowhere")
    assert missing.value.type == UNRUNNABLE and missing.value.non_retryable
    assert "--store" in str(missing.value)
    # the worker says it in one line; the SDK keeps its traceback to its debug level
    assert missing.value.category is ApplicationErrorCategory.BENIGN
    said = [r for r in caplog.records if r.name == "playline.worker"]
    assert [r.getMessage() for r in said] == [missing.value.message] and not said[0].exc_info

    await submitted(store, sleeper, "t0-unknown-play")
    with pytest.raises(ApplicationError) as unknown:
        await attempt(environment(), activity_for(store, [], []), "t0-unknown-play")
    assert unknown.value.type == UNRUNNABLE and "temporal-t0-sleeper" in str(unknown.value)
    failed = store.get_run("t0-unknown-play")  # not shown queued for good: failed, saying why
    assert failed is not None and failed.status is RunStatus.FAILED
    assert "cannot run t0-unknown-play" in (failed.error or "")


class _LosingStore(SQLiteStore):
    """A store whose rows cannot be written while ``lost``: its connection gone each time."""

    lost = False

    def save_rows(self, rows: Any) -> None:
        if self.lost:
            raise ConnectionLost("Could not save rows: the connection was lost (a test)")
        super().save_rows(rows)


@pl.play(name="temporal-t0-rows")
async def rows_play(ctx: pl.Context, input: Any) -> int:
    rows = [{"n": n} for n in range(3)]
    return len(await ctx.dataset("rows", rows, key="n").with_column("m", lambda r: 1).run())


async def test_a_store_lost_past_its_reconnects_is_retried_and_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trouble outside the play: the activity fails for Temporal to retry it (the workflow
    does not complete with the run failed), and the retry resumes the run."""
    monkeypatch.setattr(store_io, "RECONNECT_WITHIN", 0.2)  # the store's own retries, shortened
    store = _LosingStore(f"sqlite:///{tmp_path}/lost.db")
    try:
        activity = activity_for(store, [rows_play], [])
        await submitted(store, rows_play, "t0-lost")
        store.lost = True
        with pytest.raises(ApplicationError) as raised:
            await attempt(environment(), activity, "t0-lost")
        assert raised.value.type == STORE_LOST and not raised.value.non_retryable
        assert "connection was lost" in str(raised.value)

        store.lost = False
        again = await attempt(environment(), activity, "t0-lost")  # Temporal's retry
        assert again.status == "completed"
        done = store.get_run("t0-lost")
        assert done is not None and done.output == 3 and done.attempts == 2
        # numbered as `playline show` numbers them, the workflow's count beside
        logs = [e.preview or "" for e in store.read_events("t0-lost", kinds=["log"])]
        said = [line.split(" on ")[0] for line in logs if "on Temporal worker" in line]
        assert said == ["Attempt 1", "Attempt 2"]
        assert all("(workflow attempt 1, try " in line for line in logs if "Temporal" in line)
    finally:
        store.close()


async def test_until_gives_up_on_a_condition_that_never_holds() -> None:
    with pytest.raises(AssertionError, match="never"):
        await until(lambda: False, what="never", timeout=0.05)
