"""The workflow of one run: attempts in a loop, and the waits between them as Temporal's.

This is all the deterministic code there is: no play code, no store, no I/O. Each attempt is
one activity (``_activity.py``) that runs the play from its start against the store and
returns how it ended as a value. A suspended attempt says what it waits for, and the workflow
waits for it durably: a wake time becomes a Temporal timer, an event becomes a signal (the
event itself is in the store first; the signal only rings the doorbell). A worker shutting
down ends its attempt with ``yield``, and the next attempt starts at once on another worker.

Changing this file changes the workflow's commands, which running workflows replay: keep it
small and stable (a change needs ``workflow.patched`` or a new worker build). Play code can
change freely: it runs in activities.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey

with workflow.unsafe.imports_passed_through():
    from ._messages import (
        ACTIVITY,
        EVENT_SIGNAL,
        UNRUNNABLE,
        WORKFLOW,
        AttemptInput,
        AttemptResult,
        NewRun,
        RunEnded,
        RunInput,
    )

# A failed attempt *activity* (the store unreachable, the run held by a live attempt, a worker
# killed) is retried for as long as it takes, backing off to a minute; a play's own errors are
# not activity failures: they come back as a ``failed`` result and end the run.
_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=0,
    non_retryable_error_types=[UNRUNNABLE],
)
# Set by Temporal on the workflows a Schedule starts: the time the fire was for.
_FIRE = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")


@workflow.defn(name=WORKFLOW)
class PlayRun:
    def __init__(self) -> None:
        self._rang: set[str] = set()

    @workflow.signal(name=EVENT_SIGNAL)
    def event(self, key: str) -> None:
        """An event the run may wait for was sent (and recorded in the store before)."""
        self._rang.add(key)

    @workflow.run
    async def run(self, run: RunInput) -> RunEnded:
        attempt = run.attempts
        self._rang.update(run.rang)
        run_id = run.run_id or workflow.info().workflow_id
        new_run = _fired(run.new_run)
        while True:
            if workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(
                    RunInput(
                        run_id=run_id,  # recorded by the first attempt: no new_run
                        heartbeat_timeout=run.heartbeat_timeout,
                        attempt_timeout=run.attempt_timeout,
                        attempts=attempt,
                        rang=sorted(self._rang),
                        max_credits=run.max_credits,
                        max_usd=run.max_usd,
                    )
                )
            attempt += 1
            self._rang.clear()  # the attempt reads every event sent so far from the store
            result = await workflow.execute_activity(
                ACTIVITY,
                AttemptInput(
                    run_id=run_id,
                    attempt=attempt,
                    now=workflow.now().timestamp(),
                    max_credits=run.max_credits,
                    max_usd=run.max_usd,
                    # Only the first attempt may have to record the run: once it returned,
                    # the run is in the store.
                    new_run=new_run if attempt == run.attempts + 1 else None,
                ),
                result_type=AttemptResult,
                start_to_close_timeout=timedelta(seconds=run.attempt_timeout),
                heartbeat_timeout=timedelta(seconds=run.heartbeat_timeout),
                retry_policy=_RETRY,
            )
            if result.status != "suspended" or result.stop not in (None, "yield"):
                return RunEnded(
                    run_id=run_id,
                    status=result.status,
                    error=result.error,
                    stop=result.stop,
                    attempts=attempt,
                )
            if result.stop == "yield" or result.ready:
                continue  # a worker shut down, or what the run waits for is already there
            if not await self._wait(result):
                return RunEnded(
                    run_id=run_id,
                    status="suspended",
                    error="The run suspended without a wake time or an event to wait for.",
                    attempts=attempt,
                )

    async def _wait(self, result: AttemptResult) -> bool:
        """Wait until the wake time or until an awaited event rings; False if neither."""
        awaited = set(result.events)
        timeout: float | None = None
        if result.wake_at is not None:
            timeout = result.wake_at - workflow.now().timestamp()
            if timeout <= 0:
                return True
        elif not awaited:
            return False
        # At the wake time the next attempt goes on (or times the event wait out).
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(lambda: bool(self._rang & awaited), timeout=timeout)
        return True


def _fired(new_run: NewRun | None) -> NewRun | None:
    """``new_run`` with the time it fired for (the Schedule's search attribute; the start
    time for a workflow started another way) and the time Temporal started the workflow."""
    if new_run is None:
        return None
    info = workflow.info()
    started = info.workflow_start_time.timestamp()
    fire = info.typed_search_attributes.get(_FIRE)
    return new_run.fired(fire=started if fire is None else fire.timestamp(), started=started)
