"""A run's waterfall tallies count each row once, as its stored cell last has it: after a
resume, a ``retry_failed`` resume, or an attempt that died before recording its stats, the
run's tallies (``RunStats.waterfalls``, ``playline show``, the store's history that
``order="cheapest"`` learns from) are what one clean run of the same rows would show."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import playline as pl
from playline._engine.history import step_history
from playline._trace import trace_of
from playline.store import RunStatus, open_store

from .helpers import batch_tool, fresh_store, run
from .test_waterfall import rows, three_steps

# what one clean run of rows(12) through three_steps() tallies, per step:
# (attempts, hits, credits); a finds the even xs, b the multiples of 3, c every x
CLEAN = {"a": (12, 6, 6.0), "b": (6, 2, 2.0), "c": (4, 4, 8.0)}


def _steps(tally: dict[str, Any]) -> dict[str, tuple[int, int, float]]:
    steps = tally["steps"]
    steps = steps.values() if isinstance(steps, dict) else steps
    return {s["id"]: (s["attempts"], s["hits"], s["credits"]) for s in steps}


def _play(spec: pl.Waterfall, later: Any, n: int = 12) -> pl.Play:
    @pl.play(name=f"tallies-{spec.id}")
    async def play(ctx: pl.Context, input: Any) -> Any:
        ds = await (
            ctx.dataset("rows", rows(n), key="x")
            .with_column("value", lambda row, ctx: ctx.waterfall(spec, {"x": row["x"]}))
            .with_column("later", later)
            .run()
        )
        return {"stats": {k: v.to_dict() for k, v in ctx.waterfall_stats().items()}, "n": len(ds)}

    return play


def _resumed_after_later_failures(
    spec: pl.Waterfall, registry: pl.ToolRegistry
) -> tuple[pl.RunResult, pl.RunResult, str]:
    """A run whose rows x % 4 == 0 fail in a column after the waterfall, and the resume
    that runs them again once that column passes; and the store."""
    ready: list[bool] = []

    def later(row: Any) -> int:
        if row["x"] % 4 == 0 and not ready:
            raise RuntimeError("not yet")
        return int(row["x"])

    store, clock = fresh_store(), pl.ManualClock()
    first = run(_play(spec, later), tools=[registry], store=store, clock=clock)
    ready.append(True)
    clock.advance(1.0)
    again = run(_play(spec, later), tools=[registry], store=store, clock=clock, run_id=first.run_id)
    return first, again, store


def _assert_once_per_row(store: str, run_id: str, stats: Any, expected: dict[str, Any]) -> None:
    """The run's stats, its step trace (``playline show``) and the store's history all count
    each row once."""
    tally = stats.waterfalls["three"]
    assert (tally["rows"], tally["satisfied"]) == (12, 12)
    assert _steps(tally) == expected
    shown = trace_of(open_store(store), run_id).waterfalls["three"]
    assert (shown["rows"], shown["satisfied"]) == (12, 12)
    assert _steps(shown) == expected
    history, runs = step_history(open_store(store).list_runs())
    assert runs["three"] == 1
    assert {sid: (s.attempts, s.hits, s.credits) for sid, s in history["three"].items()} == expected


def test_a_run_whose_rows_failed_after_the_waterfall_and_resumed_counts_each_row_once(registry):
    """Rows failed by a later column run again on resume, from their first column: their
    waterfall's steps are answered from the receipts the first attempt bought. Each row
    counts once, and the steps the run paid for count at what they cost."""
    calls: dict[str, list[list[int]]] = {}
    spec = three_steps(registry, calls)

    first, again, store = _resumed_after_later_failures(spec, registry)

    assert first.stats.rows_failed == 3
    assert first.stats.waterfalls["three"]["rows"] == 12

    assert again.status == "completed", again.error
    assert again.stats.rows_executed == 3 and again.stats.tool_calls_live == 0
    _assert_once_per_row(store, again.run_id, again.stats, CLEAN)
    cached = {s["id"]: s["cached"] for s in again.stats.waterfalls["three"]["steps"]}
    assert cached == {"a": 0, "b": 0, "c": 0}  # the receipts were this run's own purchases
    # what the play read: the rows it reused as stored, and those it ran again
    inside = again.output["stats"]["three"]
    assert (inside["rows"], inside["satisfied"]) == (12, 12)
    assert {s["id"]: s["attempts"] for s in inside["steps"]} == {"a": 12, "b": 6, "c": 4}


def test_a_code_step_s_calls_of_two_tools_bought_before_a_resume_count_at_what_they_cost(
    registry,
):
    """A code step finds, then checks what it found (two tools, as the shipped waterfalls
    verify a catch-all address). Rows a later column failed run again on resume, both calls
    answered by the receipts the first attempt bought: the step counts both charges."""

    @registry.tool("t.find", cost=pl.Cost(1))
    def find(input: dict[str, Any]) -> Any:
        return {"email": f"e{input['x']}"}

    @registry.tool("t.check", cost=pl.Cost(1))
    def check(input: dict[str, Any]) -> Any:
        return {"status": "valid"}

    async def found_and_checked(input: Any, ctx: pl.Context) -> Any:
        email = (await ctx.tool("t.find", dict(input))).get("email")
        return email if (await ctx.tool("t.check", {"email": email})).get("status") else None

    spec = pl.Waterfall(
        "three",
        output="email",
        steps=[pl.CodeStep("checked", found_and_checked, tools=["t.find", "t.check"])],
    )

    _, again, store = _resumed_after_later_failures(spec, registry)

    assert again.status == "completed", again.error
    assert again.stats.rows_executed == 3 and again.stats.tool_calls_live == 0
    assert again.stats.credits == 24
    _assert_once_per_row(store, again.run_id, again.stats, {"checked": (12, 12, 24.0)})


def test_a_run_stopped_by_its_budget_and_resumed_counts_each_row_once(registry):
    """A budget stops the run with rows part way through their waterfall (its first step
    paid, the next refused): those rows are left pending, and the resume runs them again."""
    sent: dict[str, list[int]] = {"t.first": [], "t.second": []}

    @registry.tool("t.first", cost=pl.Cost(1))
    def first_tool(input: dict[str, Any]) -> Any:
        sent["t.first"].append(input["x"])
        return {"email": f"f{input['x']}"} if input["x"] % 2 == 0 else None

    @registry.tool("t.second", cost=pl.Cost(1))
    def second_tool(input: dict[str, Any]) -> Any:
        sent["t.second"].append(input["x"])
        return {"email": f"s{input['x']}"}

    spec = pl.Waterfall(
        "three",
        output="email",
        steps=[pl.ToolStep("first", "t.first"), pl.ToolStep("second", "t.second")],
    )
    store, clock = fresh_store(), pl.ManualClock()
    play = _play(spec, lambda row: row["x"])
    stopped = run(play, tools=[registry], store=store, clock=clock, max_credits=10)
    assert isinstance(stopped.exception, pl.BudgetExceeded)
    assert stopped.stats.rows_pending > 0
    clock.advance(1.0)
    again = run(play, tools=[registry], store=store, clock=clock, run_id=stopped.run_id,
                max_credits=100)  # fmt: skip

    assert again.status == "completed", again.error
    assert sorted(sent["t.first"]) == list(range(12))  # each call bought once
    assert sorted(sent["t.second"]) == list(range(1, 12, 2))
    _assert_once_per_row(
        store, again.run_id, again.stats, {"first": (12, 6, 12.0), "second": (6, 6, 6.0)}
    )
    assert again.stats.waterfalls["three"]["credits"] == again.stats.credits == 18


def test_a_retry_failed_resume_counts_each_row_once(registry, tmp_path: Path):
    """A step fails for some rows and no other step finds their value: the cells fail. A
    ``retry_failed`` resume runs them again from that cell; each row counts once, with the
    step that failed counted as it went the second time."""
    down = tmp_path / "down"
    down.touch()
    calls: dict[str, list[list[int]]] = {"t.a": []}
    batch_tool(registry, "t.a", lambda x: {"email": f"a{x}"} if x % 2 == 0 else None,
               calls["t.a"], cost=pl.Cost(1, charge="on_hit"))  # fmt: skip

    @registry.tool("t.b", cost=pl.Cost(2))
    def flaky(input: dict[str, Any]) -> Any:
        if down.exists() and input["x"] % 3 == 0:
            raise RuntimeError("provider hiccup")
        return {"email": f"b{input['x']}"}

    spec = pl.Waterfall(
        "three", output="email", steps=[pl.ToolStep("a", "t.a"), pl.ToolStep("b", "t.b")]
    )
    store, clock = fresh_store(), pl.ManualClock()
    play = _play(spec, lambda row: row["x"])
    first = run(play, tools=[registry], store=store, clock=clock)
    assert first.stats.rows_failed == 2  # 3 and 9: a finds nothing, b fails
    failed = {s["id"]: s["failed"] for s in first.output["stats"]["three"]["steps"]}
    assert failed == {"a": 0, "b": 2}
    down.unlink()
    clock.advance(1.0)
    again = run(play, tools=[registry], store=store, clock=clock, run_id=first.run_id,
                retry_failed=True)  # fmt: skip

    assert again.status == "completed", again.error
    assert again.stats.rows_executed == 2
    _assert_once_per_row(store, again.run_id, again.stats, {"a": (12, 6, 6.0), "b": (6, 6, 12.0)})
    steps = {s["id"]: s for s in again.stats.waterfalls["three"]["steps"]}
    assert steps["b"]["failed"] == 0 and steps["b"]["not_found"] == 0


class _Killed(BaseException):
    """The process dying mid-run, as under ``kill -9``: the attempt never records its end
    (its stats, its waterfall tallies)."""


def test_rows_an_attempt_stored_before_it_died_count_once_the_run_resumes(registry, tmp_path):
    """The dying attempt never wrote its stats; the resume reuses the rows it stored and
    runs the others: the run's tallies count every row once all the same."""
    calls: dict[str, list[list[int]]] = {}
    spec = three_steps(registry, calls)
    flag = tmp_path / "die"
    flag.touch()

    store, clock = fresh_store(), pl.ManualClock()
    db = open_store(store)  # a named memory store: every run of the test gets this object
    end_attempt = db.end_attempt

    def dies_before_its_end(*args: Any, **kwargs: Any) -> None:
        db.end_attempt = end_attempt
        raise _Killed

    def later(row: Any) -> int:
        if row["x"] == 11 and flag.exists():  # the attempt stops here, and dies at its end
            flag.unlink()
            db.end_attempt = dies_before_its_end
            raise SystemExit(1)
        return int(row["x"])

    play = _play(spec, later)
    with pytest.raises(_Killed):
        run(play, tools=[registry], store=store, clock=clock, run_id="died")
    record = open_store(store).get_run("died")
    assert record is not None and record.status is RunStatus.RUNNING and not record.stats
    stored = list(open_store(store).iter_rows("died", "rows"))
    assert 0 < len(stored) < 12  # some rows were stored before it died
    clock.advance(1.0)
    again = run(play, tools=[registry], store=store, clock=clock, run_id="died")

    assert again.status == "completed", again.error
    assert again.stats.rows_reused == len(stored)
    _assert_once_per_row(store, "died", again.stats, CLEAN)


def test_a_waterfall_outside_a_dataset_counts_once_per_run(registry):
    """Every attempt runs the play from its start, so a resume runs a waterfall called outside
    a dataset again (from receipts): the run counts it as its latest attempt did, once."""
    calls: dict[str, list[list[int]]] = {}
    spec = three_steps(registry, calls)

    @pl.play(name="direct-then-sleep")
    async def play(ctx: pl.Context, input: Any) -> Any:
        found = [await ctx.waterfall(spec, {"x": x}) for x in (1, 3)]
        await ctx.sleep(3600)
        return found

    store, clock = fresh_store(), pl.ManualClock()
    first = run(play, tools=[registry], store=store, clock=clock)
    assert first.status == "suspended"
    assert first.stats.waterfalls["three"]["rows"] == 2
    clock.advance(3601)
    again = run(play, tools=[registry], store=store, clock=clock, run_id=first.run_id)

    assert again.status == "completed", again.error
    assert again.output == ["c1@x.io", "b3@x.io"]
    tally = again.stats.waterfalls["three"]
    assert (tally["rows"], tally["satisfied"]) == (2, 2)
    assert {sid: attempts for sid, (attempts, _, _) in _steps(tally).items()} == {
        "a": 2, "b": 2, "c": 1
    }  # fmt: skip
    shown = trace_of(open_store(store), again.run_id).waterfalls["three"]
    assert (shown["rows"], shown["satisfied"]) == (2, 2)


def test_two_waterfalls_in_one_column_are_both_counted_and_kept_in_its_cell(registry):
    """A column whose resolver runs two waterfalls keeps both provenances in its cell: the
    run's tallies and ``playline show`` count each, after the run and after a resume that
    reuses the rows as stored."""
    calls: dict[str, list[list[int]]] = {}
    first = three_steps(registry, calls)
    second = pl.Waterfall("again", output="email", steps=[pl.ToolStep("c", "t.c")])

    async def both(row: Any, ctx: pl.Context) -> Any:
        one = await ctx.waterfall(first, {"x": row["x"]})
        two = await ctx.waterfall(second, {"x": row["x"]})
        return {"first": one, "second": two}

    @pl.play(name="tallies-two")
    async def play(ctx: pl.Context, input: Any) -> Any:
        return len(await ctx.dataset("rows", rows(12), key="x").with_column("both", both).run())

    store = fresh_store()
    done = run(play, tools=[registry], store=store)
    assert done.status == "completed", done.error
    resumed = run(play, tools=[registry], store=store, run_id=done.run_id)
    assert resumed.stats.rows_reused == 12
    for result in (done, resumed):
        tallies = result.stats.waterfalls
        assert (tallies["three"]["rows"], tallies["again"]["rows"]) == (12, 12)
        assert _steps(tallies["three"]) == CLEAN
        assert _steps(tallies["again"]) == {"c": (12, 12, 16.0)}  # 4 bought by "three"
    shown = trace_of(open_store(store), done.run_id).waterfalls
    assert (shown["three"]["rows"], shown["again"]["rows"]) == (12, 12)
    (row, *_) = open_store(store).iter_rows(done.run_id, "rows")
    meta = row.cells["both"]
    assert [p["id"] for p in meta["waterfalls"]] == ["three", "again"]
    assert meta["waterfall"]["id"] == "again"  # the last, as before: what the drawer shows
