"""Running plays on Temporal: workers on many machines, durable timers, signals, no lost work.

Needs the ``temporal`` extra (``pip install 'playline[temporal]'``) and a store every worker
reaches (PostgreSQL). One workflow per run (its id is the run id), one activity per attempt;
the attempt is the engine's own (receipts, boundaries, leases), so nothing about a play
changes::

    from playline.backends import temporal

    # on each worker machine
    await temporal.TemporalWorker("temporal:7233", store=URL, plays=[enrich]).run()

    # anywhere
    result = await temporal.arun(enrich, {"file": "leads.csv"}, temporal="temporal:7233",
                                 store=URL)

A long ``ctx.sleep`` is a Temporal timer, ``ctx.wait_for_event`` waits for a signal that
``pl.send_event`` rings after recording the event in the store, and a worker shutting down
hands its runs over without paying twice. Child plays run inside their parent's attempt, as
embedded: they share its budget, its limits and its drain.

A schedule is a Temporal Schedule (``add_schedule``, ``list_schedules``, ``pause_schedule``,
``delete_schedule``): Temporal starts a run workflow at each fire, and its first attempt
records the run in the worker's store.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Mapping, Sequence
from typing import Any

try:
    from temporalio.client import Client
except ImportError as exc:  # pragma: no cover - the extra is installed in development
    raise ImportError(
        f"playline.backends.temporal needs the Temporal SDK ({exc}). Install it with "
        "pip install 'playline[temporal]'."
    ) from None

from .._engine.events import Listener
from .._play import Play, PlayFn
from .._runner import RunResult
from ..errors import PlayDefinitionError
from ..store import Store
from ._temporal._activity import Ended
from ._temporal._doorbell import ring
from ._temporal._schedules import add_schedule, delete_schedule, list_schedules, pause_schedule
from ._temporal._submit import follow, start
from ._temporal._worker import TemporalWorker, WorkerSettings

__all__ = [
    "Ended",
    "TemporalWorker",
    "WorkerSettings",
    "add_schedule",
    "arun",
    "delete_schedule",
    "follow",
    "list_schedules",
    "pause_schedule",
    "ring",
    "run",
    "start",
]


async def arun(
    play: Play | PlayFn | str,
    input: Any = None,
    *,
    temporal: str | Client,
    store: str | Store | None = None,
    run_id: str | None = None,
    namespace: str | None = None,
    task_queue: str | None = None,
    max_credits: float | None = None,
    max_usd: float | None = None,
    listeners: Sequence[Listener] = (),
    stop: asyncio.Event | None = None,
    source: Mapping[str, Any] | None = None,
) -> RunResult:
    """``pl.arun`` on Temporal: submit the run (``start``), then ``follow`` it until its
    workflow ends or it waits durably (then ``status == "suspended"`` and the workflow
    resumes it without you). Workers must be serving the task queue."""
    run_id = await start(
        play,
        input,
        temporal=temporal,
        store=store,
        run_id=run_id,
        namespace=namespace,
        task_queue=task_queue,
        max_credits=max_credits,
        max_usd=max_usd,
        source=source,
    )
    return await follow(
        run_id,
        temporal=temporal,
        store=store,
        namespace=namespace,
        listeners=listeners,
        stop=stop,
    )


def run(play: Play | PlayFn | str, input: Any = None, **options: Any) -> RunResult:
    """``arun`` for code that is not async."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        try:
            return asyncio.run(arun(play, input, **options))
        finally:
            # The SDK's clients hold native objects: free them while the interpreter is whole
            # (left to interpreter exit, the SDK's threads can crash the process).
            gc.collect()
    raise PlayDefinitionError(
        "temporal.run() was called inside a running event loop; use `await temporal.arun(...)`."
    )
