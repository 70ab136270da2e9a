"""Rate limits, concurrency caps and governance (SEMANTICS 24, 26)."""

from __future__ import annotations

import asyncio

import pytest

import playline as pl
from playline._engine.receipts import auth_scope, receipt_key
from playline.store import Claim, Completion

from .helpers import (
    Gauge,
    LivelockGuardClock,
    call_tool,
    dataset_play,
    rows_of,
    run_dataset,
    run_play,
    yield_a_few_times,
)

OTHER = "another-host/4242/worker"  # a worker on another machine: only its lease counts


def gauged_tool(registry, tool_id: str, gauge: Gauge, **options):
    """An async tool that stays busy for a few scheduler turns while ``gauge`` counts it."""

    @registry.tool(tool_id, **options)
    async def busy(input):
        with gauge:
            await yield_a_few_times()
        return {"x": input["x"]}


# --- rates and concurrency --------------------------------------------------------------


def test_a_rate_of_20_per_second_holds(registry):
    clock = LivelockGuardClock()
    times: list[float] = []

    @registry.tool("t.paced", rate=pl.Rate(per_second=20, burst=1, concurrency=1))
    def paced(input):
        times.append(clock.now())
        return {"x": input["x"]}

    result = run_dataset(rows_of(60), {"out": call_tool("t.paced")}, tools=[registry], clock=clock)

    assert result.status == "completed", result.error
    assert len(times) == 60
    # every window of (just under, for float rounding) one second holds at most 20 calls
    assert max(sum(t <= u < t + 1 - 1e-6 for u in times) for t in times) <= 20
    assert times[-1] - times[0] >= 2.9


def test_a_concurrency_cap_is_never_exceeded(registry):
    gauge = Gauge()
    gauged_tool(registry, "t.busy", gauge, rate=pl.Rate(concurrency=2))

    result = run_dataset(rows_of(10), {"out": call_tool("t.busy")}, tools=[registry])

    assert result.status == "completed"
    assert gauge.peak == 2


def test_a_tools_cap_is_shared_by_every_dataset_of_a_run(registry):
    gauge = Gauge()
    gauged_tool(registry, "t.busy", gauge, rate=pl.Rate(concurrency=2))

    async def play(ctx, input):
        first = ctx.dataset("first", rows_of(5)).with_column("o", call_tool("t.busy"))
        second = ctx.dataset("second", rows_of(5)).with_column("o", call_tool("t.busy"))
        await asyncio.gather(first.run(), second.run())

    result = run_play(play, tools=[registry])

    assert result.status == "completed", result.error
    assert gauge.peak == 2


def test_a_tools_cap_is_shared_by_concurrent_runs_of_the_process(registry, clock):
    gauge = Gauge()
    gauged_tool(registry, "t.busy", gauge, rate=pl.Rate(concurrency=2))
    play = dataset_play(rows_of(5), {"o": call_tool("t.busy")})

    async def both():
        options = {"tools": [registry], "clock": clock}
        return await asyncio.gather(pl.arun(play, **options), pl.arun(play, **options))

    results = asyncio.run(both())

    assert [r.status for r in results] == ["completed", "completed"]
    assert gauge.peak == 2


def test_the_shared_gates_work_across_consecutive_runs(registry, clock):
    gauge = Gauge()
    gauged_tool(registry, "t.busy", gauge, rate=pl.Rate(concurrency=1))
    play = dataset_play(rows_of(3), {"o": call_tool("t.busy")})

    statuses = [run_play(play, tools=[registry], clock=clock).status for _ in range(2)]

    assert statuses == ["completed", "completed"]


# --- governance -------------------------------------------------------------------------


def test_the_governance_defaults():
    assert pl.Limits() == pl.Limits(
        depth=6,
        child_plays=32,
        tool_calls=None,
        retries=200,
        descendants=64,
        children_per_parent=16,
        concurrent_child_plays=16,
    )


def limited_play(calls: int):
    @pl.play(name="limited", limits={"tool_calls": 5})
    async def limited(ctx, input):
        return await ctx.dataset("rows", rows_of(calls)).with_column("o", call_tool("t.free")).run()

    return limited


@pytest.fixture
def free_tool(registry):
    calls: list[int] = []

    @registry.tool("t.free")
    def free(input):
        calls.append(input["x"])
        return {"x": input["x"]}

    return calls


def test_a_tool_call_budget_stops_the_run_naming_the_counter(registry, free_tool):
    result = run_play(limited_play(10), tools=[registry])

    assert result.status == "failed"
    error = result.exception
    assert isinstance(error, pl.GovernanceError)
    assert (error.counter, error.limit) == ("tool_calls", 5)
    assert "Tool-call budget exceeded (6/5)" in result.error
    assert len(free_tool) <= 5


def test_calls_within_the_budget_run(registry, free_tool):
    result = run_play(limited_play(5), tools=[registry])

    assert result.status == "completed"
    assert sorted(free_tool) == [0, 1, 2, 3, 4]


def test_the_budget_counts_direct_calls_too(registry, free_tool):
    @pl.play(limits=pl.Limits(tool_calls=2))
    async def direct(ctx, input):
        for x in range(3):
            await ctx.tool("t.free", {"x": x})

    result = run_play(direct, tools=[registry])

    assert isinstance(result.exception, pl.GovernanceError)
    assert free_tool == [0, 1]


@pytest.mark.parametrize("limits", [{"bogus": 1}, {"tool_calls": -1}, {"depth": 1.5}, "many"])
def test_bad_limits_are_refused_when_the_play_is_defined(limits):
    with pytest.raises(pl.PlayDefinitionError):

        @pl.play(limits=limits)
        async def play(ctx, input):
            return None


def test_a_tool_out_of_retries_fails_its_calls_and_a_resume_retries_them_afresh(registry, tmp_path):
    """Retries are counted per tool and per attempt: a provider that keeps throttling fails
    the calls left once its retries are used up (the play goes on), and a resume, later,
    may retry them again (other counters go on from where the run left them)."""
    throttled = [3]  # 429s still to answer

    @registry.tool("t.busy")
    def busy(input):
        if throttled[0]:
            throttled[0] -= 1
            raise pl.ToolError("t.busy", "slow down", status=429, retry_after=0.01)
        return {"x": input["x"]}

    @pl.play(name="throttled", limits=pl.Limits(retries=2))
    async def play(ctx, input):
        return (
            await ctx.dataset("rows", rows_of(1), key="x")
            .with_column("y", call_tool("t.busy"))
            .run()
        )

    store = f"sqlite:///{tmp_path}/r.db"
    first = run_play(play, tools=[registry], store=store)
    assert first.status == "failed"  # its one row failed
    (error,) = first.output.errors
    assert error.code == "retry_budget" and "raise limits" in error.message
    throttled[0] = 2  # still busy at the resume: two more retries needed, within the limit
    again = run_play(play, tools=[registry], store=store, run_id=first.run_id)
    assert again.status == "completed", again.error


def test_a_call_in_doubt_is_sent_again_with_its_key_within_the_budget(registry, tmp_path):
    """A local tool's call that timed out is in doubt, its worst case counted; sent again
    with its key (in_doubt="resend": its provider recognises the key) it is not paid twice,
    so its doubt becomes its reservation: a budget that fits it once lets it through."""
    timing_out = [True]

    @registry.tool("t.slow", cost=1, in_doubt="resend")
    def slow(input):
        if input["x"] == 2 and timing_out[0]:
            raise pl.ToolError("t.slow", "no answer", code="timeout")
        return {"x": input["x"]}

    @pl.play(name="slow-budget", max_credits=3)
    async def play(ctx, input):
        return (
            await ctx.dataset("rows", rows_of(3), key="x")
            .with_column("y", call_tool("t.slow"))
            .run()
        )

    store = f"sqlite:///{tmp_path}/d.db"
    first = run_play(play, tools=[registry], store=store)
    (error,) = first.output.errors
    assert error.code == "in_doubt" and first.stats.credits == 2
    timing_out[0] = False
    again = run_play(play, tools=[registry], store=store, run_id=first.run_id)
    assert again.status == "completed", again.error
    assert again.stats.credits == 3


def test_a_call_in_doubt_bought_again_no_longer_counts_as_in_doubt(registry, store):
    """Bought again (``retry_in_doubt``), a call in doubt counts what the new purchase costs,
    not its doubt as well: a budget that fits it and the next column's call lets both through."""
    timing_out = [True]

    @registry.tool("t.slow", cost=1, in_doubt="fail")
    def slow(input):
        if timing_out[0]:
            raise pl.ToolError("t.slow", "no answer", code="timeout")
        return {"x": input["x"]}

    @registry.tool("t.next", cost=1)
    def after(input):
        return {"x": input["x"]}

    async def both(row, ctx):
        first = await ctx.tool("t.slow", {"x": row["x"]})
        return (await ctx.tool("t.next", {"x": first.data["x"]})).data

    play = pl.play(name="doubt-budget", max_credits=2)(dataset_play(rows_of(1), {"y": both}))
    first = run_play(play, tools=[registry], store=store)
    (error,) = first.output.errors
    assert error.code == "in_doubt"
    timing_out[0] = False
    again = run_play(play, tools=[registry], store=store, run_id=first.run_id, retry_in_doubt=True)
    assert again.status == "completed", again.error
    assert not again.output.errors
    assert again.stats.credits == 2


def test_a_call_failed_in_doubt_keeps_its_worst_case_against_the_budget(registry, store):
    """A 5xx of a tool whose 5xx may strike after the work: the call may have been charged,
    so the budget counts it, and lets through only what fits beside it."""
    sent = []

    @registry.tool("t.flaky", cost=1, in_doubt="fail")
    def flaky(input):
        sent.append(input["x"])
        if len(sent) == 1:
            raise pl.ToolError("t.flaky", "internal error", status=503)
        return {"x": input["x"]}

    play = pl.play(name="flaky-budget", max_credits=2)(
        dataset_play(rows_of(3), {"y": call_tool("t.flaky")})
    )
    result = run_play(play, tools=[registry], store=store)

    assert len(sent) == 2  # one in doubt, one charged: the budget of 2 holds no third
    assert result.stats.credits == 1
    assert isinstance(result.exception, pl.BudgetExceeded)
    assert "1 spent, 0 in flight, 1 in doubt" in (result.error or "")


@pytest.mark.timeout(30)  # a reservation never given back leaves the budget waiting for it
@pytest.mark.parametrize(("budget", "rows"), [(2, 3), (1, 2)], ids=["room-left", "all-of-it"])
def test_a_call_answered_at_its_claim_gives_its_reservation_back(registry, store, budget, rows):
    """Another worker records a call between its lookup and its claim: the claim answers it
    from that receipt, and what was reserved for it goes back to the budget. With the
    budget all reserved for it, the calls deferred behind it go on once it is given back
    (they waited for a settlement that had come already, for ever)."""
    sent = []

    @registry.tool("t.paid", cost=1)
    def paid(input):
        sent.append(input["x"])
        return {"x": input["x"]}

    first = receipt_key(
        org="local", tool="t.paid", input={"x": 0}, auth=auth_scope("local", "local", "t.paid"),
        version="1",
    )  # fmt: skip
    theirs = b'{"cost":0.0,"data":{"x":0},"source":"live","status":"completed","tool":"t.paid"}'
    write = store.write_receipts

    def write_receipts(**kwargs):  # the other worker is quicker to claim the first call
        if any(claim.key == first for claim in kwargs.get("claims", ())):
            now = kwargs["now"]
            claim = Claim(key=first, tool="t.paid", run_id="other-run")
            write(claims=[claim], owner=OTHER, now=now, lease_until=now + 60)
            write(completions=[Completion(first, theirs)], owner=OTHER, now=now)
        return write(**kwargs)

    store.write_receipts = write_receipts
    play = pl.play(name="answered-budget", max_credits=budget)(
        dataset_play(rows_of(rows), {"y": call_tool("t.paid")})
    )
    result = run_play(play, tools=[registry], store=store)

    assert result.status == "completed", result.error
    assert sorted(sent) == list(range(1, rows)) and result.stats.credits == budget
    assert result.stats.tool_calls_cached == 1


@pytest.mark.parametrize("cost", [1, 0], ids=["paid", "free"])
def test_a_local_tools_call_in_doubt_runs_again_on_resume_only_when_it_is_free(
    registry, tmp_path, cost
):
    """A call in doubt (a timeout here, a kill alike) may have paid the provider a paid local
    tool wraps: a resume fails it again rather than run it twice, until the user retries it
    (retry_in_doubt). A free tool's call runs again, at once (in_doubt="resend")."""
    calls: list[int] = []

    @registry.tool("t.maybe_paid", cost=cost)
    def maybe_paid(input):
        calls.append(input["x"])
        if len(calls) == 1:
            raise pl.ToolError("t.maybe_paid", "no answer", code="timeout")
        return {"x": input["x"]}

    play = dataset_play(rows_of(1), {"y": call_tool("t.maybe_paid")}, key="x")
    store = f"sqlite:///{tmp_path}/d.db"
    first = run_play(play, tools=[registry], store=store)
    again = run_play(play, tools=[registry], store=store, run_id=first.run_id)

    if cost:
        assert first.output.errors[0].code == "in_doubt"
        assert again.output.errors[0].code == "in_doubt" and calls == [0]
        retried = run_play(
            play, tools=[registry], store=store, run_id=first.run_id, retry_in_doubt=True
        )
        assert retried.status == "completed" and calls == [0, 0]
    else:
        assert first.status == again.status == "completed" and calls == [0, 0]


def test_a_local_tools_default_concurrency_is_wider_only_for_a_free_function_run_again(registry):
    """A free ``def`` run again after a kill runs on the event loop one call at a time: its
    wider default only puts more calls in one claim and one write. The others keep 64."""

    def sync(input):
        return input

    async def asynchronous(input):
        return input

    registry.tool("t.free")(sync)
    registry.tool("t.free_async")(asynchronous)
    registry.tool("t.paid", cost=1)(sync)
    registry.tool("t.kept", in_doubt="fail")(sync)
    registry.tool("t.set", rate=pl.Rate(concurrency=3))(sync)
    assert {spec.id: spec.rate.concurrency for spec in registry.specs()} == {
        "t.free": 2048,
        "t.free_async": 64,
        "t.paid": 64,
        "t.kept": 64,
        "t.set": 3,
    }
