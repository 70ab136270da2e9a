"""The Temporal backend's tests: one event loop for all of them (the time-skipping server's
native client crashed processes that ran it on several loops), real servers from
tests/services.py, and a unique task queue per test (tests share the dev server)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from services import TemporalServer


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
async def temporal_client(temporal_server: TemporalServer) -> AsyncIterator[Client]:
    """A client of the session's dev server (on the session's one loop)."""
    yield await Client.connect(temporal_server.target, namespace=temporal_server.namespace)


@pytest.fixture(scope="session")
async def time_skipping(temporal_time_skipping_path: Path) -> AsyncIterator[WorkflowEnvironment]:
    """The time-skipping test server: timers pass at once while a result is awaited."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(temporal_time_skipping_path)
    )
    async with env:
        yield env
