"""The worker and runs other processes hold or held, or that it cannot run: a run whose
process died is taken over once its lease has run out; a run another worker took since the
worker's look is left to it (never run twice, and the worker goes on with the others); a run
it cannot run is told as it is skipped."""

from __future__ import annotations

from typing import Any

import playline as pl
from playline.store import RunStatus, Store

from boundhelp import DAY, unique

ELSEWHERE = "another-host/1/token"  # a holder on another machine: alive while its lease runs


def _sleeper() -> pl.Play:
    @pl.play(name=unique("takeover"))
    async def sleeper(ctx: pl.Context, input: Any) -> Any:
        first = await ctx.step("first", lambda: "sent once")
        await ctx.sleep(DAY)
        return first

    return sleeper


def test_a_run_whose_process_died_is_taken_over_once_its_lease_runs_out(
    run: Any, worker: Any, store: Store, clock: pl.ManualClock
) -> None:
    play = _sleeper()
    first = run(play)
    clock.advance(DAY)
    # its next attempt, on another machine, dies mid-run: running, its lease out in 60 s
    now = clock.now()
    store.claim_run(first.run_id, holder=ELSEWHERE, lease_until=now + 60, now=now)
    assert worker() == []  # its holder may be alive: not the worker's

    clock.advance(61)
    (taken,) = worker()
    assert taken.run_id == first.run_id and taken.status == "completed", taken.error
    assert taken.output == "sent once"


def test_a_run_another_worker_took_since_the_look_is_left_to_it(
    run: Any, worker: Any, store: Store, clock: pl.ManualClock
) -> None:
    """Two due runs; while the worker resolves the first, another worker claims the
    second: it is left to that worker (it crashed the worker with RunHeld, or ran a run
    another had finished since)."""
    play = _sleeper()
    one, two = run(play), run(play)
    clock.advance(DAY)

    def resolve(record: Any) -> tuple[pl.Play, list[Any]]:
        if record.run_id == one.run_id:  # meanwhile, another worker takes the second
            now = clock.now()
            store.claim_run(two.run_id, holder=ELSEWHERE, lease_until=now + 60, now=now)
        return play, []

    (done,) = worker(resolve=resolve)
    assert done.run_id == one.run_id and done.status == "completed"
    taken = store.get_run(two.run_id)
    assert taken is not None and taken.status is RunStatus.RUNNING and taken.holder == ELSEWHERE


def test_a_run_the_worker_cannot_run_is_told_once_as_it_is_skipped(
    run: Any, store: Store, clock: pl.ManualClock
) -> None:
    """A long-running worker said what it skipped only when it exited."""
    import asyncio

    one = run(_sleeper())
    clock.advance(DAY)
    told: list[tuple[str, str]] = []

    def resolve(record: Any) -> Any:
        raise pl.PlayDefinitionError("its play file is gone")

    worker = pl.Worker(store=store, clock=clock, resolve=resolve, on_skip=lambda *s: told.append(s))
    for _ in range(2):  # two looks: told once
        assert asyncio.run(worker.run(burst=True)) == []
    assert told == [(one.run_id, "its play file is gone")]
