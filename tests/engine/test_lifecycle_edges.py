"""The edges of a call's life (issue 37): where a reliability test found the account of a run
wrong, or its stop late.

- Workers racing for one call spend one rate token: a call that another worker holds, or
  answered meanwhile, gives its token back (four processes on the same people took 4x one).
- A budget stop is reported at once, not after every queued call has passed its rate gate.
- A clean stop polls the async jobs already submitted to their end (within a grace period),
  so the ledger holds what the provider charged.
- Every call whose charge is uncertain is counted in doubt: jobs whose polls all fail, a
  request that timed out and was never answered, an answer the store failed to record.

The providers here are doubles with a ledger of their own (``charged``), so each test can
hold Playline's account to the provider's: what the run's ledger holds, plus the worst case of
the calls it counts in doubt, equals what the provider charged.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest

import playline as pl
from playline.errors import StoreError
from playline.store import Store, open_store
from playline.tools import Cost, JobState, Rate, ToolSpec

from .helpers import call_tool, dataset_play, rows_of, run_play, yield_a_few_times

NEEDS_PATCH = "needs calls.py patch (issue 37): "


class Jobs:
    """A provider of async jobs: a submit is charged (once per idempotency key; an on-hit
    tool's only for the inputs ``hit`` finds), a job is done at its ``done_after``-th poll,
    and ``poll_error`` (if set) answers every poll instead."""

    poll_interval = 0.01

    def __init__(
        self,
        *,
        credits: float,
        hit: Callable[[Mapping[str, Any]], bool] | None = None,
        done_after: int = 2,
    ) -> None:
        self.cost = Cost(credits, charge="per_call" if hit is None else "on_hit")
        self.hit = hit or (lambda input: True)
        self.done_after = done_after
        self.poll_error: pl.ToolError | None = None
        self.on_submit: Callable[[], None] | None = None
        self.charged: dict[str, float] = {}  # idempotency key -> credits
        self.submits = 0
        self._jobs: dict[int, tuple[Any, int]] = {}  # job -> (result, polls)
        self._ids = itertools.count(1)

    @property
    def total(self) -> float:
        return sum(self.charged.values())

    async def submit(
        self, spec: ToolSpec, input: Mapping[str, Any], key: str | None = None
    ) -> JobState:
        self.submits += 1
        job = next(self._ids)
        found = self.hit(input)
        self.charged[key or str(job)] = self.cost.charged(found)
        self._jobs[job] = ({"x": input["x"]} if found else None, 0)
        if self.on_submit is not None:
            self.on_submit()
        return JobState(done=False, job=job)

    async def poll(self, spec: ToolSpec, job: Any, input: Any) -> JobState:
        if self.poll_error is not None:
            raise self.poll_error
        result, polls = self._jobs[job]
        self._jobs[job] = (result, polls + 1)
        if polls + 1 >= self.done_after:
            return JobState(done=True, result=result)
        return JobState(done=False, job=job)


class _NoSend:
    """The transport of a tool that is only submitted and polled."""

    inline = False

    async def call(
        self, spec: ToolSpec, inputs: Sequence[Mapping[str, Any]], keys: Sequence[str] = ()
    ) -> list[Any]:
        raise AssertionError("an async tool's calls are submitted, not sent")


def job_tool(jobs: Jobs, *, tool: str = "t.job", **spec: Any) -> ToolSpec:
    return ToolSpec(id=tool, transport=_NoSend(), jobs=jobs, cost=jobs.cost, **spec)


def doubtful(store: Store, result: pl.RunResult, clock: pl.ManualClock) -> dict[str, str]:
    """The run's calls in doubt as ``playline show`` counts them (key -> tool)."""
    return store.doubtful_receipts(result.run_id, now=clock.now())


def recorded(store: Store, result: pl.RunResult) -> float:
    """The credits the run's ledger holds in the store."""
    return sum(entry.credits for entry in store.read_ledger(result.run_id))


# 1. Workers racing for one call spend one rate token


def test_a_call_answered_at_its_claim_gives_its_rate_token_back(
    registry: pl.ToolRegistry, durable_store_url: str
) -> None:
    """Another worker answered the calls between this run's lookup and its claims (processes
    running the same play on the same rows race like this for every call). No request went
    out, so the shared bucket (kept in the store) is as full as before the run."""
    rows = 6

    @registry.tool("t.rated", rate=Rate(per_second=0.1, burst=10))
    def rated(input: dict[str, Any]) -> dict[str, Any]:
        return {"x": input["x"]}

    store = open_store(durable_store_url)
    clock = pl.ManualClock()
    play = dataset_play(rows_of(rows), {"y": call_tool("t.rated")})
    first = run_play(play, tools=[registry], store=store, clock=clock)
    assert first.status == "completed" and first.stats.tool_calls_live == rows
    clock.advance(1000)  # the bucket fills up again

    store.find_answers = lambda keys: {}  # type: ignore[method-assign]  # answered after it
    second = run_play(play, tools=[registry], store=store, clock=clock)

    assert second.status == "completed", second.error
    assert (second.stats.tool_calls_live, second.stats.tool_requests) == (0, 0)
    [gate] = [g for g in store.read_gates(now=clock.now()) if g.key.startswith("t.rated@")]
    assert gate.available(clock.now()) == pytest.approx(gate.burst)


# 2. A budget stop is reported at once


def test_a_budget_stop_is_reported_without_waiting_for_the_queued_calls_gates(
    registry: pl.ToolRegistry, store: Store, clock: pl.ManualClock
) -> None:
    """A 1/s async tool, a budget of two calls and 20 rows queued: once the budget is spent,
    the stop comes after the requests already sent, not after 18 more seconds of rate waits
    for calls that are never sent."""
    jobs = Jobs(credits=1, done_after=1)
    sent: list[float] = []
    jobs.on_submit = lambda: sent.append(clock.now())
    registry.add(job_tool(jobs, rate=Rate(per_second=1)))

    play = dataset_play(rows_of(20), {"y": call_tool("t.job")})
    result = run_play(play, tools=[registry], store=store, clock=clock, max_credits=2)

    assert result.status == "failed" and isinstance(result.exception, pl.BudgetExceeded)
    assert jobs.submits == 2 and recorded(store, result) == jobs.total == 2
    # the time the clock moved after the last request: at most the rate wait of the claim
    # that finds the budget spent (the bound: 2 s), not one for each call queued
    assert clock.now() - sent[-1] <= 2.0


# 3. A clean stop polls the jobs already submitted


def test_a_stop_polls_the_submitted_jobs_to_their_end(
    registry: pl.ToolRegistry, store: Store, clock: pl.ManualClock
) -> None:
    """Stopped (a signal, ``stop=``) once every job is submitted: the jobs are polled to
    their end and recorded, so the ledger equals the provider's charges at the stop (an
    on-hit tool: only a finished job says what it cost), and nothing is in doubt."""
    rows = 6
    stopped = asyncio.Event()
    # jobs that take a while: the stop comes long before the last one is done
    jobs = Jobs(credits=5, hit=lambda input: input["x"] % 2 == 0, done_after=1000)
    jobs.poll_interval = 0.001
    jobs.on_submit = lambda: stopped.set() if jobs.submits == rows else None
    registry.add(job_tool(jobs))

    play = dataset_play(rows_of(rows), {"y": call_tool("t.job")})
    result = run_play(play, tools=[registry], store=store, clock=clock, stop=stopped)

    assert result.status == "suspended"
    assert jobs.submits == rows
    assert recorded(store, result) == jobs.total == 15
    assert doubtful(store, result, clock) == {}
    again = run_play(play, tools=[registry], store=store, clock=clock, run_id=result.run_id)
    assert again.status == "completed", again.error
    assert jobs.submits == rows and recorded(store, again) == jobs.total


@pytest.mark.timeout(60)  # the bug this guards against is a hang: a stop waiting forever
def test_a_job_still_running_after_the_stops_grace_is_left_in_doubt_for_the_resume(
    registry: pl.ToolRegistry, store: Store, clock: pl.ManualClock
) -> None:
    """A job that does not finish while the stop waits is left on its receipt: the run's
    account counts it in doubt, and the resume polls it instead of paying again."""
    rows = 3
    stopped = asyncio.Event()
    jobs = Jobs(credits=5, done_after=10**9)
    jobs.poll_interval = 1.0
    jobs.on_submit = lambda: stopped.set() if jobs.submits == rows else None
    registry.add(job_tool(jobs))

    play = dataset_play(rows_of(rows), {"y": call_tool("t.job")})
    result = run_play(play, tools=[registry], store=store, clock=clock, stop=stopped)

    assert result.status == "suspended"
    in_doubt_now = doubtful(store, result, clock)
    assert len(in_doubt_now) == rows
    assert recorded(store, result) + 5 * len(in_doubt_now) == jobs.total == 15
    jobs.done_after = 1
    again = run_play(play, tools=[registry], store=store, clock=clock, run_id=result.run_id)
    assert again.status == "completed", again.error
    assert jobs.submits == rows and recorded(store, again) == jobs.total


# 4. Every call whose charge is uncertain is counted in doubt


@pytest.mark.parametrize("in_doubt", ["resend", "fail"])
def test_jobs_whose_polls_all_answer_429_are_in_doubt_and_polled_on_resume(
    registry: pl.ToolRegistry, store: Store, clock: pl.ManualClock, in_doubt: str
) -> None:
    """Every poll is throttled: the jobs were submitted (and charged), so their calls are in
    doubt, not failed as if nothing was paid. A resume polls the same jobs (a poll is free,
    whether or not the provider recognises a repeated submit)."""
    rows = 4
    jobs = Jobs(credits=5)
    jobs.poll_error = pl.ToolError("t.job", "slow down", status=429, retry_after=1)
    registry.add(job_tool(jobs, in_doubt=in_doubt))

    play = dataset_play(rows_of(rows), {"y": call_tool("t.job")})
    result = run_play(play, tools=[registry], store=store, clock=clock)

    assert result.status == "failed"
    in_doubt_now = doubtful(store, result, clock)
    assert len(in_doubt_now) == rows
    assert recorded(store, result) + 5 * len(in_doubt_now) == jobs.total == 20
    assert result.stats.credits_in_doubt == 20
    jobs.poll_error = None
    again = run_play(play, tools=[registry], store=store, clock=clock, run_id=result.run_id)
    assert again.status == "completed", again.error
    assert jobs.submits == rows  # polled, not bought again
    assert recorded(store, again) == jobs.total


class SlowProvider:
    """A provider that honours idempotency keys and is slower than the client's timeout:
    the first request with a key is worked and charged, but its answer comes too late
    (``timeout``); a repeat finds the key still in progress (409)."""

    inline = False

    def __init__(self, credits: float) -> None:
        self.credits = credits
        self.charged: dict[str, float] = {}

    async def call(
        self, spec: ToolSpec, inputs: Sequence[Mapping[str, Any]], keys: Sequence[str] = ()
    ) -> list[Any]:
        if all(key in self.charged for key in keys):
            raise pl.ToolError(
                spec.id, "still working on it", status=409, code="idempotency_in_progress"
            )
        for key in keys:
            self.charged.setdefault(key, self.credits)
        raise pl.ToolError(spec.id, "no answer within 30s (it may still be working)",
                           code="timeout")  # fmt: skip


def test_requests_that_timed_out_then_found_their_key_in_progress_are_in_doubt(
    registry: pl.ToolRegistry, store: Store, clock: pl.ManualClock
) -> None:
    """A slow verifier: each request times out (charged, unanswered), its repeats find the
    key still in progress until the tool's retries run out. The last error (a 409) says
    nothing was charged by that send; the first may have been: the calls are in doubt."""
    provider = SlowProvider(credits=0.5)
    registry.add(ToolSpec(id="t.verify", transport=provider, cost=Cost(0.5), in_doubt="resend"))

    @pl.play(name="slow-verify", limits={"retries": 6})
    async def play(ctx: pl.Context, input: Any) -> Any:
        return await ctx.dataset("rows", rows_of(3)).with_column("y", call_tool("t.verify")).run()

    result = run_play(play, tools=[registry], store=store, clock=clock)

    assert result.status == "failed"
    in_doubt_now = doubtful(store, result, clock)
    assert len(provider.charged) == 3
    assert recorded(store, result) + 0.5 * len(in_doubt_now) == sum(provider.charged.values())
    assert result.stats.credits_in_doubt == 0.5 * len(in_doubt_now)


@contextlib.contextmanager
def _results_not_written(store: Store) -> Iterator[None]:
    """A full disk after the provider answered: claims are written, results are not."""
    write = store.write_receipts

    def full_disk(**parts: Any) -> Any:
        if parts.get("completions"):
            raise StoreError("database or disk is full")
        return write(**parts)

    store.write_receipts = full_disk  # type: ignore[method-assign]
    try:
        yield
    finally:
        store.write_receipts = write  # type: ignore[method-assign]


@pytest.mark.parametrize("inline", [True, False])
def test_answers_the_store_failed_to_record_are_in_doubt(
    registry: pl.ToolRegistry, store: Store, clock: pl.ManualClock, inline: bool
) -> None:
    """A full disk after the provider answered: the answers are lost, their charges are not.
    Their calls are in doubt in the store (``playline show``), and the run's budget counted
    their worst case: the ledger plus the calls in doubt is what the provider charged."""
    charged: list[int] = []

    def work(input: dict[str, Any]) -> dict[str, Any]:
        charged.append(input["x"])
        return {"x": input["x"]}

    async def work_async(input: dict[str, Any]) -> dict[str, Any]:
        return work(input)

    registry.tool("t.paid", cost=2)(work if inline else work_async)
    play = dataset_play(rows_of(5), {"y": call_tool("t.paid")})
    with _results_not_written(store):
        result = run_play(play, tools=[registry], store=store, clock=clock)

    assert result.status == "failed" and "disk is full" in (result.error or "")
    in_doubt_now = doubtful(store, result, clock)
    assert charged and len(in_doubt_now) == len(charged)
    assert recorded(store, result) + 2 * len(in_doubt_now) == 2 * len(charged)


def test_the_run_counts_the_answers_it_failed_to_record_in_doubt(
    registry: pl.ToolRegistry, store: Store, clock: pl.ManualClock
) -> None:
    """The run's own account (its stats, its budget) says what ``playline show`` will: the
    calls answered and not recorded may have been charged."""

    @registry.tool("t.paid", cost=2)
    def paid(input: dict[str, Any]) -> dict[str, Any]:
        return {"x": input["x"]}

    play = dataset_play(rows_of(5), {"y": call_tool("t.paid")})
    with _results_not_written(store):
        result = run_play(play, tools=[registry], store=store, clock=clock)

    assert result.status == "failed"
    assert result.stats.credits == 0 and result.stats.credits_in_doubt == 2 * 5


def test_a_resume_counts_the_dollars_in_doubt_of_calls_priced_by_their_input(
    registry: pl.ToolRegistry, store: Store, clock: pl.ManualClock
) -> None:
    """An LLM call's worst case is a function of its input (its prompt, its max_tokens): a
    resume that meets such calls in doubt counts them as it meets them (it said $0 in doubt
    after a kill with LLM calls out, while the run that lost them counted them)."""

    @registry.tool("t.llm", cost=Cost(0, unit="usd", worst=lambda input: input["x"] / 1000))
    def llm(input: dict[str, Any]) -> dict[str, Any]:
        return {"x": input["x"]}

    play = dataset_play(rows_of(5), {"y": call_tool("t.llm")})
    with _results_not_written(store):
        first = run_play(play, tools=[registry], store=store, clock=clock)
    worst = sum(range(5)) / 1000
    assert first.stats.usd_in_doubt == pytest.approx(worst)

    again = run_play(play, tools=[registry], store=store, clock=clock, run_id=first.run_id)

    assert len(doubtful(store, again, clock)) == 5  # not bought again unasked
    assert again.stats.usd_in_doubt == pytest.approx(worst)


@pytest.mark.timeout(60)  # the bug this guards against is a hang
def test_a_retry_holding_the_last_of_the_budget_is_sent_while_others_wait_for_it(
    registry: pl.ToolRegistry, store: Store
) -> None:
    """A throttled request keeps its reservation while it waits out the 429; the calls
    behind it wait for the budget, and the retry, coming back, goes first: nothing hangs."""
    sent: list[int] = []

    @registry.tool("t.busy", cost=1, rate=Rate(concurrency=2))
    def busy(input: dict[str, Any]) -> dict[str, Any]:
        sent.append(input["x"])
        if sent == [0]:
            raise pl.ToolError("t.busy", "slow down", status=429, retry_after=1)
        return {"x": input["x"]}

    class Patient(pl.ManualClock):
        """The retry's pause lasts long enough (in turns of the loop) for the calls behind
        it to be waiting for the budget it holds."""

        async def sleep(self, seconds: float) -> None:
            if seconds >= 1:
                await yield_a_few_times(200)
            await super().sleep(seconds)

    play = dataset_play(rows_of(4), {"y": call_tool("t.busy")})
    result = run_play(play, tools=[registry], store=store, clock=Patient(), max_credits=2)

    assert isinstance(result.exception, pl.BudgetExceeded)
    assert sorted(set(sent)) == [0, 1] and sent.count(0) == 2
    assert recorded(store, result) == 2
