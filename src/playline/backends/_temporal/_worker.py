"""A worker process: the run workflow and the attempt activity on one task queue, until it is
shut down, and then a shutdown that costs nothing.

Shutting down (``shutdown()``, or SIGTERM under ``playline worker``) first stops polling, so
no new attempt comes here; Temporal then tells each running attempt, whose drain stops it
from starting new paid calls, lets the calls in flight finish and be recorded, and ends it
``yield``. Its workflow starts the next attempt at once on another worker, which resumes from
the receipts: nothing is paid twice. Attempts get ``drain_timeout`` seconds to settle before
they are cancelled.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from ..._clock import SystemClock
from ..._engine.drain import YIELD
from ..._play import Play, PlayFn, get_play
from ...errors import PlayDefinitionError
from ...store import Store, open_store
from ...tools._gates import ToolGates
from ._activity import AttemptActivity, AttemptSettings, Ended, Resolve
from ._connect import Endpoint, connect, endpoint
from ._workflow import PlayRun

__all__ = ["TemporalWorker", "WorkerSettings"]

# The workflow module imports nothing but its messages (a test keeps it so); Playline's own
# modules pass through the sandbox instead of being re-imported into it, which would import
# the whole package (store, HTTP client) into every workflow's sandbox.
_RUNNER = SandboxedWorkflowRunner(
    restrictions=SandboxRestrictions.default.with_passthrough_modules("playline")
)


_STICKY_TIMEOUT = timedelta(seconds=2)


@dataclass(frozen=True, kw_only=True)
class WorkerSettings(AttemptSettings):
    """How a worker runs attempts: how many at once, and how long a shutdown waits for the
    calls in flight to settle; plus the engine's knobs (``AttemptSettings``)."""

    concurrency: int = 10
    drain_timeout: float = 60.0


class TemporalWorker:
    """Serves runs on Temporal: ``async with TemporalWorker(...):`` (which closes at its end
    the store the worker opened from a URL) or ``await worker.run()``.

    ``plays``: the plays this worker runs, found by name; other runs' plays come from the
    play registry, or from ``resolve(record) -> (play, tools)`` when given (the command line
    loads the play file a run was submitted from). ``tools`` as for ``pl.run``.
    """

    def __init__(
        self,
        temporal: str | Client,
        *,
        store: str | Store | None = None,
        plays: Iterable[Play | PlayFn] = (),
        tools: Iterable[Any] | None = None,
        resolve: Resolve | None = None,
        namespace: str | None = None,
        task_queue: str | None = None,
        settings: WorkerSettings | None = None,
        on_attempt: Callable[[Ended], None] | None = None,
    ) -> None:
        self.settings = settings or WorkerSettings()
        if self.settings.concurrency < 1:
            raise PlayDefinitionError("A worker's concurrency must be at least 1.")
        self.where: Endpoint = endpoint(temporal, namespace=namespace, task_queue=task_queue)
        self.store = open_store(store)
        self._opened = self.store is not store  # from a URL: closed as the worker ends
        self.identity = f"{os.getpid()}@{socket.gethostname()}"
        self._temporal = temporal
        by_name = {p.name: p for p in map(get_play, plays)}
        listed = list(tools) if tools is not None else None
        self._resolve: Resolve = resolve or (
            lambda record: (by_name.get(record.play) or get_play(record.play), listed)
        )
        self._on_attempt = on_attempt
        self._activity: AttemptActivity | None = None
        self._worker: Worker | None = None
        self._serving: asyncio.Task[None] | None = None

    @property
    def running(self) -> int:
        """Attempts in progress in this worker."""
        return 0 if self._activity is None else self._activity.running

    async def start(self) -> None:
        """Connect and start serving in the background (``shutdown()`` ends it)."""
        if self._worker is not None:
            raise PlayDefinitionError("This worker was started already; make a new one.")
        client = await connect(self._temporal, self.where)
        # One rate limit per tool for all its attempts; on a store other processes use too (a
        # file, a server), the one every worker and process on it shares (stores.md).
        clock = SystemClock()
        gates = ToolGates(clock)
        if self.store.shared:
            gates = ToolGates(clock, store=self.store, local=gates)
        self._activity = AttemptActivity(
            store=self.store,
            resolve=self._resolve,
            gates=gates,
            settings=self.settings,
            identity=self.identity,
            on_end=self._on_attempt,
        )
        self._worker = Worker(
            client,
            task_queue=self.where.task_queue,
            workflows=[PlayRun],
            activities=[self._activity.attempt],
            workflow_runner=_RUNNER,
            identity=self.identity,
            max_concurrent_activities=self.settings.concurrency,
            graceful_shutdown_timeout=timedelta(seconds=self.settings.drain_timeout),
            # Fresh progress in the details even under a long heartbeat timeout.
            max_heartbeat_throttle_interval=timedelta(seconds=5),
            # A run's next workflow task goes to the worker that ran its last one (which
            # keeps the workflow cached); if that worker died, the task waits this long before
            # any worker may take it (10 s by default: measured as 10 s added to a failover).
            # The workflow is tiny, so another worker replays its history at little cost.
            sticky_queue_schedule_to_start_timeout=_STICKY_TIMEOUT,
        )
        self._serving = asyncio.get_running_loop().create_task(self._worker.run())

    async def run(self) -> None:
        """Serve until ``shutdown()``."""
        if self._serving is None:
            await self.start()
        assert self._serving is not None
        await self._serving

    async def shutdown(self) -> None:
        """Stop polling, let every attempt in progress yield (its calls in flight finish and
        are recorded), then return. Safe to call more than once."""
        if self._worker is None or self._serving is None:
            return
        stopping = asyncio.ensure_future(self._worker.shutdown())
        await asyncio.wait({stopping, self._serving}, return_when=asyncio.FIRST_COMPLETED)
        await stopping
        await asyncio.gather(self._serving, return_exceptions=True)

    def drain(self) -> None:
        """Make every attempt in progress yield now, without shutting the worker down."""
        if self._activity is not None:
            self._activity.drain(YIELD)

    def abort(self) -> None:
        """Stop every attempt in progress at once (a second SIGTERM): calls in flight stay
        in doubt, and the attempts' workflows retry them on another worker."""
        if self._activity is not None:
            self._activity.abort()

    async def __aenter__(self) -> TemporalWorker:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()
        if self._opened:
            self.store.close()
