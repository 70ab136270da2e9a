"""The Temporal fixtures: a workflow with one activity on the dev server, and a day-long
durable sleep skipped by the time-skipping test server.

Pattern: each async test runs on its own anyio (asyncio) loop and opens and closes its own
clients, workers and environments in it; the servers are subprocesses, so no loop outlives a
test. tests/conftest.py frees the SDK's native objects at session end (see
services.collect_native_garbage), which keeps the process from crashing at exit.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    import pytest
    from temporalio.client import Client
    from temporalio.testing import WorkflowEnvironment
    from temporalio.worker import Worker

    from services import TemporalBinaries, TemporalServer


@activity.defn
async def greet(name: str) -> str:
    return f"hello, {name}"


@workflow.defn
class Greeter:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(
            greet, name, start_to_close_timeout=timedelta(seconds=30)
        )


@workflow.defn
class SleepsADay:
    @workflow.run
    async def run(self) -> float:
        before = workflow.now()
        await workflow.sleep(timedelta(days=1))
        return (workflow.now() - before).total_seconds()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_the_binaries_are_in_the_venv(temporal_bin: TemporalBinaries) -> None:
    assert temporal_bin.temporal.name == "temporal"
    assert temporal_bin.test_server.name == "temporal-test-server"


@pytest.mark.anyio
async def test_dev_server_runs_a_workflow_with_an_activity(temporal_server: TemporalServer) -> None:
    client = await Client.connect(temporal_server.target, namespace=temporal_server.namespace)
    queue = f"selftest-{uuid.uuid4()}"  # per-test task queue: tests share the server
    async with Worker(client, task_queue=queue, workflows=[Greeter], activities=[greet]):
        result = await client.execute_workflow(
            Greeter.run, "temporal", id=f"greeter-{uuid.uuid4()}", task_queue=queue
        )
    assert result == "hello, temporal"


@pytest.mark.anyio
async def test_time_skipping_server_skips_a_day(temporal_time_skipping_path: Path) -> None:
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(temporal_time_skipping_path)
    )
    async with env, Worker(env.client, task_queue="sleepy", workflows=[SleepsADay]):
        slept = await env.client.execute_workflow(
            SleepsADay.run, id=f"sleeper-{uuid.uuid4()}", task_queue="sleepy"
        )
    # A day of workflow time went by inside the test's timeout (pytest-timeout: 120 s).
    assert slept >= timedelta(days=1).total_seconds()
