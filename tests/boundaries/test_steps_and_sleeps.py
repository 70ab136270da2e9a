"""SEMANTICS 28-29: ctx.step checkpoints, ctx.sleep suspends and resumes when due."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import playline as pl

from boundhelp import DAY, unique


def test_a_step_with_side_effects_runs_once_across_three_resumes(run, worker, store):
    effects: list[str] = []

    @pl.play(name=unique("charge"))
    async def charge(ctx: pl.Context, input: Any) -> Any:
        receipt = await ctx.step("charge", lambda: effects.append("charged") or {"id": 7})
        for key in ("first", "second", "third"):
            await ctx.wait_for_event(f"{ctx.run_id}:{key}")
        return receipt

    first = run(charge)
    assert first.status == "suspended"
    for key in ("first", "second", "third"):
        pl.send_event(f"{first.run_id}:{key}", True, store=store)
        (attempt,) = worker()
    assert attempt.status == "completed"
    assert attempt.output == {"id": 7}
    assert effects == ["charged"]


def test_the_nth_step_with_one_key_has_its_own_boundary_and_replays(run, worker, store):
    calls: list[int] = []

    @pl.play(name=unique("twice"))
    async def twice(ctx: pl.Context, input: Any) -> Any:
        a = await ctx.step("s", lambda: calls.append(1) or len(calls))
        b = await ctx.step("s", lambda: calls.append(1) or len(calls))
        await ctx.wait_for_event(f"{ctx.run_id}:go")
        return [a, b]

    first = run(twice)
    pl.send_event(f"{first.run_id}:go", store=store)
    (resumed,) = worker()
    assert resumed.output == [1, 2]
    assert calls == [1, 1]  # not called again on the replay


def test_an_async_step_function_is_awaited(run):
    async def fetch_value() -> int:
        return 41

    @pl.play(name=unique("async-step"))
    async def play(ctx: pl.Context, input: Any) -> Any:
        return await ctx.step("v", fetch_value) + 1

    assert run(play).output == 42


@pytest.mark.parametrize("value", [object(), {1, 2}, b"bytes"], ids=["object", "set", "bytes"])
def test_a_step_output_that_is_not_json_is_a_clear_error(run, value):
    @pl.play(name=unique("bad-step"))
    async def play(ctx: pl.Context, input: Any) -> Any:
        return await ctx.step("s", lambda: value)

    result = run(play)
    assert result.status == "failed"
    assert isinstance(result.exception, pl.PlayDefinitionError)
    assert "cannot be checkpointed as JSON" in result.error


def test_a_play_that_sleeps_a_day_resumes_after_the_clock_moves(run, worker, clock):
    @pl.play(name=unique("sleeper"))
    async def sleeper(ctx: pl.Context, input: Any) -> Any:
        before = await ctx.step("before", lambda: "outreach 1")
        await ctx.sleep(DAY)
        return [before, "outreach 2"]

    start = clock.now()
    first = run(sleeper)
    assert first.status == "suspended"
    assert first.waiting == {"wake_at": start + DAY, "events": []}
    assert worker() == []  # not due yet

    clock.advance(DAY)
    (resumed,) = worker()
    assert resumed.status == "completed"
    assert resumed.output == ["outreach 1", "outreach 2"]
    assert worker() == []  # nothing left to do


def test_a_short_sleep_is_waited_out_in_the_foreground(run, clock):
    @pl.play(name=unique("nap"))
    async def nap(ctx: pl.Context, input: Any) -> Any:
        await ctx.sleep(2)
        return "awake"

    start = clock.now()
    result = run(nap)
    assert (result.status, result.output) == ("completed", "awake")
    assert clock.now() >= start + 2


@pytest.mark.parametrize("seconds", [-1, float("nan"), float("inf"), "5", True])
def test_a_bad_sleep_is_a_clear_error(run, seconds):
    @pl.play(name=unique("bad-sleep"))
    async def play(ctx: pl.Context, input: Any) -> Any:
        await ctx.sleep(seconds)

    result = run(play)
    assert isinstance(result.exception, pl.PlayDefinitionError), result.error
    assert "number of seconds >= 0" in result.error


@pytest.mark.parametrize("seconds", [1e12, 366 * DAY + 1])
def test_a_sleep_past_a_year_is_refused_saying_to_schedule_a_run(run, seconds):
    """A wake time of year 33715 suspended the run for good and made `playline show` fail."""

    @pl.play(name=unique("long-sleep"))
    async def play(ctx: pl.Context, input: Any) -> Any:
        await ctx.sleep(seconds)

    result = run(play)
    assert isinstance(result.exception, pl.PlayDefinitionError), result.error
    assert "at most a year" in (result.error or "") and "schedule" in (result.error or "")


PLAY = """
import sys
import playline as pl

@pl.play(name="durable-sleeper")
async def sleeper(ctx, input):
    await ctx.step("journal", lambda: open(sys.argv[2], "a").write("step\\n") and 1)
    await ctx.sleep(86_400)
    return "done"

if __name__ == "__main__":
    result = pl.run(sleeper, store=sys.argv[1], run_id="r1", tools=[])
    print(result.status)
"""


def test_a_suspended_run_survives_its_process_and_resumes_in_another(
    tmp_path: Path, durable_store_url: str
):
    script = tmp_path / "sleeper.py"
    script.write_text(textwrap.dedent(PLAY))
    journal = tmp_path / "journal.txt"
    store = durable_store_url
    out = subprocess.run(
        [sys.executable, str(script), store, str(journal)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "suspended"

    resume = textwrap.dedent(f"""
        import asyncio, sys, time
        sys.argv = ["x", {store!r}, {str(journal)!r}]
        sys.path.insert(0, {str(tmp_path)!r})
        import playline as pl
        import sleeper
        clock = pl.ManualClock(start=time.time() + 2 * 86_400)
        results = asyncio.run(pl.Worker(store={store!r}, clock=clock, tools=[]).run(burst=True))
        print([(r.run_id, r.status, r.output) for r in results])
    """)
    out = subprocess.run([sys.executable, "-c", resume], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[('r1', 'completed', 'done')]"
    assert journal.read_text() == "step\n"  # the step ran in the first process only


def test_a_step_with_stale_after_runs_again_once_its_result_is_older(run, worker, store, clock):
    ran: list[float] = []

    @pl.play(name=unique("stale-step"))
    async def checks(ctx: pl.Context, input: Any) -> Any:
        first = await ctx.step("quote", lambda: ran.append(clock.now()) or len(ran), stale_after=60)
        await ctx.wait_for_event(f"{ctx.run_id}:go")
        return first

    started = run(checks)
    clock.advance(59)  # a minute's bucket would turn at 60: the result is still 59 s old
    pl.send_event(f"{started.run_id}:go", True, store=store)
    (replayed,) = worker()
    assert replayed.output == 1 and len(ran) == 1

    clock.advance(2)  # 61 s after the step ran: run again, its new result replaces it
    later = run(checks, run_id=started.run_id)
    assert later.output == 2 and len(ran) == 2
