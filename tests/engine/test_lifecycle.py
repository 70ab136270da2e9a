"""A tool call's life (``_engine/lifecycle.py``): the diagram in docs/architecture.md draws
the table of moves, each move of the table happens in some run below, no other move
happens, and only ``CallExecutor.settle`` resolves a call."""

from __future__ import annotations

import ast
import asyncio
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import playline as pl
from playline._engine import lifecycle
from playline._engine.lifecycle import NEXT, CallState, move, observing
from playline._engine.receipts import auth_scope, receipt_key
from playline.errors import StoreError
from playline.store import Claim, Completion, Store, open_store
from playline.tools import Cost, ToolSpec

from .helpers import call_tool, dataset_play, rows_of, run_play
from .test_lifecycle_edges import Jobs, job_tool

S = CallState
Move = tuple[CallState, CallState]
ROOT = Path(__file__).resolve().parents[2]
OTHER = "another-host/4242/worker"  # a worker on another machine: only its lease counts

WALKED: set[Move] = set()  # the moves the runs below make, each checked by its test


def walks(*moves: Move) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The test's run makes these moves (checked by the ``moves`` fixture)."""

    def mark(test: Callable[..., Any]) -> Callable[..., Any]:
        WALKED.update(moves)
        test.walks = frozenset(moves)  # type: ignore[attr-defined]
        return test

    return mark


@pytest.fixture(autouse=True)
def moves(request: pytest.FixtureRequest) -> Iterator[set[Move]]:
    """Every move made during the test; at its end, the moves it declares were all made."""
    seen: set[Move] = set()
    with observing(lambda was, to: seen.add((was, to))):
        yield seen
    expected = getattr(request.function, "walks", frozenset())
    missing = sorted(f"{a.value} -> {b.value}" for a, b in expected - seen)
    assert not missing, f"moves the run did not make: {missing}"


def _key(tool: str, input: dict[str, Any]) -> str:
    return receipt_key(
        org="local", tool=tool, input=input, auth=auth_scope("local", "local", tool), version="1"
    )


def _answer(input: dict[str, Any]) -> dict[str, Any]:
    return {"v": input["x"]}


def _theirs(tool: str) -> bytes:
    return (
        f'{{"cost":0.0,"data":{{"v":"theirs"}},"source":"live","status":"completed",'
        f'"tool":"{tool}"}}'
    ).encode()


def _claim_as_other(store: Store, tool: str, input: dict[str, Any], *, now: float, lease: float):
    key = _key(tool, input)
    store.claim_receipts(
        [Claim(key=key, tool=tool, run_id="other-run", resend=True)],
        owner=OTHER,
        lease_until=now + lease,
        now=now,
    )
    return key


# the table and its drawing


def _drawn_moves() -> set[tuple[str, str]]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    diagram = re.search(r"```mermaid\n(stateDiagram-v2\n.*?)```", text, re.S)
    assert diagram is not None, "docs/architecture.md has no state diagram"
    pairs = re.findall(r"^\s*(\S+) --> (\S+)\s*$", diagram.group(1), re.M)
    return {(a.replace("_", " "), b.replace("_", " ")) for a, b in pairs if "[*]" not in (a, b)}


def _table_moves() -> set[Move]:
    return {(was, to) for was, nexts in NEXT.items() for to in nexts}


def test_the_diagram_draws_the_table() -> None:
    assert _drawn_moves() == {(a.value, b.value) for a, b in _table_moves()}


def test_every_move_of_the_table_is_walked_by_a_test() -> None:
    assert {f"{a.value} -> {b.value}" for a, b in _table_moves() - WALKED} == set()


def test_a_move_the_table_does_not_allow_is_a_bug() -> None:
    class Call:
        state = S.QUEUED

    call = Call()
    with pytest.raises(AssertionError, match="from queued to sent"):
        move(call, S.SENT)
    move(call, S.LOOKED_UP)
    move(call, S.CLAIMED)
    with pytest.raises(AssertionError, match="from claimed to settled"):
        move(call, S.SETTLED)  # only an end settles


def test_only_settle_resolves_a_call() -> None:
    """A second path that resolves a call's future (or moves it to settled) would bypass the
    one place that keeps followers, stats and cells in step."""
    resolving = {"set_result", "set_exception", "cancel"}
    found: set[str] = set()
    for path in sorted(Path(lifecycle.__file__).parent.glob("*.py")):  # the code imported
        for function in ast.walk(ast.parse(path.read_text())):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if not isinstance(node, ast.Call):
                    continue
                called = node.func
                if (
                    isinstance(called, ast.Attribute)
                    and called.attr in resolving
                    and isinstance(called.value, ast.Attribute)
                    and called.value.attr == "future"
                ):
                    found.add(f"{path.name}:{function.name} resolves")
                if any(isinstance(a, ast.Name) and a.id == "SETTLED" for a in node.args) or (
                    isinstance(called, ast.Name) and called.id == "settled"
                ):
                    found.add(f"{path.name}:{function.name} settles")
    assert found == {
        "calls.py:settle resolves",
        "calls.py:_resolve_error resolves",  # settle's, for a call that ends with an error
        "calls.py:settle settles",
    }


# the main line, answered, shared


@walks(
    (S.QUEUED, S.LOOKED_UP),
    (S.LOOKED_UP, S.CLAIMED),
    (S.CLAIMED, S.SENT),
    (S.SENT, S.RECORDED),
    (S.RECORDED, S.SETTLED),
    (S.QUEUED, S.SHARED),
    (S.SHARED, S.SETTLED),
)
def test_a_call_is_sent_once_and_an_identical_one_shares_it(registry, store) -> None:
    registry.tool("t.answer")(_answer)

    @pl.play(name="twice")
    async def play(ctx: pl.Context, input: Any) -> Any:
        first, second = await asyncio.gather(
            ctx.tool("t.answer", {"x": 1}), ctx.tool("t.answer", {"x": 1})
        )
        return [first.data, second.data]

    result = run_play(play, tools=[registry], store=store)
    assert result.output == [{"v": 1}, {"v": 1}]


@walks((S.QUEUED, S.ANSWERED), (S.ANSWERED, S.SETTLED))
def test_a_call_a_receipt_answers_is_not_sent(registry, store) -> None:
    sent: list[Any] = []

    @registry.tool("t.answer")
    def answer(input: dict[str, Any]) -> dict[str, Any]:
        sent.append(input)
        return _answer(input)

    @pl.play(name="once")
    async def play(ctx: pl.Context, input: Any) -> Any:
        return (await ctx.tool("t.answer", {"x": 1})).data

    run_play(play, tools=[registry], store=store)
    assert run_play(play, tools=[registry], store=store).output == {"v": 1}
    assert sent == [{"x": 1}]


@walks((S.QUEUED, S.LOOKED_UP), (S.LOOKED_UP, S.SHARED), (S.SHARED, S.SETTLED))
def test_rows_of_a_group_with_the_same_call_buy_it_once(registry, store) -> None:
    """A row group's calls are looked up together before they queue (datasets.py); those no
    receipt answers queue looked up, and an identical one shares the first."""
    sent: list[Any] = []

    @registry.tool("t.answer")
    def answer(input: dict[str, Any]) -> dict[str, Any]:
        sent.append(input)
        return _answer(input)

    def ask(row: Any, ctx: pl.Context) -> Any:  # its call is its cell (no await)
        return ctx.tool("t.answer", {"x": row["x"]})

    play = dataset_play([{"id": 1, "x": 1}, {"id": 2, "x": 1}], {"y": ask}, key="id")
    result = run_play(play, tools=[registry], store=store)
    assert [row["y"] for row in result.output] == [{"v": 1}, {"v": 1}]
    assert sent == [{"x": 1}]


@walks((S.LOOKED_UP, S.ANSWERED))
def test_a_receipt_recorded_after_the_lookup_answers_the_claim(registry, store, clock) -> None:
    """Once the lookups find nothing (a first run), later calls skip them: their claim finds
    a receipt another worker recorded meanwhile."""
    registry.tool("t.answer")(_answer)

    @pl.play(name="meanwhile")
    async def play(ctx: pl.Context, input: Any) -> Any:
        await ctx.tool("t.answer", {"x": 1})
        key = _claim_as_other(store, "t.answer", {"x": 2}, now=clock.now(), lease=60)
        store.complete_receipts(
            [Completion(key, _theirs("t.answer"))], owner=OTHER, now=clock.now()
        )
        return (await ctx.tool("t.answer", {"x": 2})).data

    assert run_play(play, tools=[registry], store=store, clock=clock).output == {"v": "theirs"}


@walks((S.LOOKED_UP, S.PLANNED), (S.PLANNED, S.SETTLED))
def test_a_plan_counts_a_call_instead_of_sending_it(registry, store) -> None:
    sent: list[Any] = []

    @registry.tool("t.answer", cost=Cost(2))
    def answer(input: dict[str, Any]) -> dict[str, Any]:
        sent.append(input)
        return _answer(input)

    play = dataset_play(rows_of(3), {"y": call_tool("t.answer")})
    estimate = pl.plan(play, store=store, tools=[registry])
    assert sent == []
    assert estimate.calls == 3


# receipts other workers hold


class _Hook(pl.ManualClock):
    """A ManualClock that calls ``hook`` at each sleep once ``armed``."""

    def __init__(self) -> None:
        super().__init__()
        self.hook: Callable[[], None] | None = None

    async def sleep(self, seconds: float) -> None:
        if self.hook is not None:
            hook, self.hook = self.hook, None
            hook()
        await super().sleep(seconds)


def _ask(tool: str) -> pl.Play:
    @pl.play(name=f"ask-{tool}")
    async def play(ctx: pl.Context, input: Any) -> Any:
        return (await ctx.tool(tool, {"x": 1})).data

    return play


@walks((S.LOOKED_UP, S.HELD), (S.HELD, S.ANSWERED))
def test_a_held_call_gets_the_result_its_holder_records(registry, store) -> None:
    registry.tool("t.answer")(_answer)
    clock = _Hook()
    key = _claim_as_other(store, "t.answer", {"x": 1}, now=clock.now(), lease=3600)
    clock.hook = lambda: store.complete_receipts(
        [Completion(key, _theirs("t.answer"))], owner=OTHER, now=clock.now()
    )
    result = run_play(_ask("t.answer"), tools=[registry], store=store, clock=clock)
    assert result.output == {"v": "theirs"}


@walks((S.HELD, S.LOOKED_UP))
def test_a_held_call_whose_holder_dies_is_taken_over(registry, store, clock) -> None:
    registry.tool("t.answer")(_answer)
    _claim_as_other(store, "t.answer", {"x": 1}, now=clock.now(), lease=5)
    result = run_play(_ask("t.answer"), tools=[registry], store=store, clock=clock)
    assert result.output == {"v": 1}


@walks((S.HELD, S.FAILED), (S.FAILED, S.SETTLED))
def test_a_call_held_past_the_receipt_wait_fails(registry, store, clock) -> None:
    registry.tool("t.answer")(_answer)
    _claim_as_other(store, "t.answer", {"x": 1}, now=clock.now(), lease=10**6)
    result = run_play(_ask("t.answer"), tools=[registry], store=store, clock=clock)
    assert result.status == "failed"


@walks((S.HELD, S.STOPPED), (S.STOPPED, S.SETTLED))
def test_a_held_call_stops_with_the_attempt(registry, store) -> None:
    registry.tool("t.answer")(_answer)
    clock = _Hook()
    stop = asyncio.Event()
    _claim_as_other(store, "t.answer", {"x": 1}, now=clock.now(), lease=10**6)
    clock.hook = stop.set
    result = run_play(_ask("t.answer"), tools=[registry], store=store, clock=clock, stop=stop)
    assert result.status == "suspended"


@walks((S.LOOKED_UP, S.IN_DOUBT), (S.IN_DOUBT, S.SETTLED))
def test_a_call_whose_receipt_is_in_doubt_fails_unless_the_tool_knows_repeats(
    registry, store, clock
) -> None:
    registry.tool("t.answer", in_doubt="fail")(_answer)
    _claim_as_other(store, "t.answer", {"x": 1}, now=clock.now() - 100, lease=1)  # it died
    result = run_play(_ask("t.answer"), tools=[registry], store=store, clock=clock)
    assert result.status == "failed"
    assert "in doubt" in (result.error or "")


# sending


@walks((S.SENT, S.CLAIMED))
def test_a_429_sends_the_request_again(registry, store) -> None:
    sends: list[Any] = []

    @registry.tool("t.busy")
    def busy(input: dict[str, Any]) -> dict[str, Any]:
        sends.append(input)
        if len(sends) == 1:
            raise pl.ToolError("t.busy", "slow down", status=429, retry_after=1)
        return _answer(input)

    assert run_play(_ask("t.busy"), tools=[registry], store=store).output == {"v": 1}
    assert len(sends) == 2


@walks((S.SENT, S.FAILED))
def test_a_refused_request_fails_its_call(registry, store) -> None:
    @registry.tool("t.refuse")
    def refuse(input: dict[str, Any]) -> dict[str, Any]:
        raise pl.ToolError("t.refuse", "bad input", status=400)

    assert run_play(_ask("t.refuse"), tools=[registry], store=store).status == "failed"


@walks((S.SENT, S.IN_DOUBT))
def test_a_request_with_no_answer_is_in_doubt(registry, store) -> None:
    @registry.tool("t.slow", in_doubt="fail")
    def slow(input: dict[str, Any]) -> dict[str, Any]:
        raise pl.ToolError("t.slow", "no answer in time", code="timeout")

    result = run_play(_ask("t.slow"), tools=[registry], store=store)
    assert result.status == "failed"
    assert "in doubt" in (result.error or "")


@walks((S.SENT, S.ANSWERED))
def test_a_result_another_worker_recorded_first_wins(registry, store, clock) -> None:
    @registry.tool("t.late")
    def late(input: dict[str, Any]) -> dict[str, Any]:
        later = clock.now() + 3600
        key = _claim_as_other(store, "t.late", input, now=later, lease=60)
        store.complete_receipts([Completion(key, _theirs("t.late"))], owner=OTHER, now=later)
        return {"v": "ours"}

    result = run_play(_ask("t.late"), tools=[registry], store=store, clock=clock)
    assert result.output == {"v": "theirs"}


@walks((S.LOOKED_UP, S.FAILED), (S.CLAIMED, S.FAILED))
def test_a_tool_that_keeps_failing_opens_its_breaker(registry, store) -> None:
    """Requests failing with 5xx are retried (claimed) until the breaker opens: then the
    retries and the calls still waiting in the lane fail at once."""

    @registry.tool("t.down", retry_safe=True, rate=pl.Rate(concurrency=2))
    def down(input: dict[str, Any]) -> dict[str, Any]:
        raise pl.ToolError("t.down", "unavailable", status=503)

    play = dataset_play(rows_of(12), {"y": call_tool("t.down")})
    result = run_play(play, tools=[registry], store=store)
    assert any(cause.startswith("circuit_open") for cause in result.stats.errors)


@walks((S.QUEUED, S.FAILED))
def test_a_store_that_fails_the_lookup_fails_the_calls(registry, store) -> None:
    registry.tool("t.answer")(_answer)

    def find_answers(keys: Any) -> Any:
        raise StoreError("the store is unreachable")

    store.find_answers = find_answers  # type: ignore[method-assign]
    result = run_play(_ask("t.answer"), tools=[registry], store=store)
    assert result.status == "failed"
    assert "unreachable" in (result.error or "")


# async jobs


@walks((S.SENT, S.PENDING_JOB), (S.PENDING_JOB, S.RECORDED))
def test_an_async_job_is_polled_to_its_end(registry, store) -> None:
    jobs = Jobs(credits=1)
    registry.add(job_tool(jobs))
    assert run_play(_ask("t.job"), tools=[registry], store=store).output == {"x": 1}


@walks((S.PENDING_JOB, S.IN_DOUBT))
def test_a_job_whose_polls_fail_is_in_doubt(registry, store) -> None:
    jobs = Jobs(credits=1)
    jobs.poll_error = pl.ToolError("t.job", "the job failed", status=400)
    registry.add(job_tool(jobs))
    result = run_play(_ask("t.job"), tools=[registry], store=store)
    assert result.status == "failed"
    assert store.doubtful_receipts(result.run_id, now=float("inf"))


@walks((S.PENDING_JOB, S.FAILED))
def test_a_job_whose_result_cannot_be_kept_fails(registry, store) -> None:
    jobs = Jobs(credits=1)
    registry.add(job_tool(jobs))
    result = run_play(_ask("t.job"), tools=[registry], store=store, cell_limit=2)
    assert result.status == "failed"


@walks((S.PENDING_JOB, S.ANSWERED))
def test_a_job_another_worker_recorded_first_is_theirs(registry, store, clock) -> None:
    jobs = Jobs(credits=1)
    poll = jobs.poll

    async def poll_after_the_other(spec: ToolSpec, job: Any, input: Any) -> Any:
        later = clock.now() + 3600
        key = _claim_as_other(store, "t.job", {"x": 1}, now=later, lease=60)
        store.complete_receipts([Completion(key, _theirs("t.job"))], owner=OTHER, now=later)
        jobs.poll = poll  # type: ignore[method-assign]
        return await poll(spec, job, input)

    jobs.poll = poll_after_the_other  # type: ignore[method-assign]
    registry.add(job_tool(jobs))
    result = run_play(_ask("t.job"), tools=[registry], store=store, clock=clock)
    assert result.output == {"v": "theirs"}


@walks((S.PENDING_JOB, S.STOPPED))
def test_a_job_running_past_a_stops_grace_stops(registry, store) -> None:
    stop = asyncio.Event()
    jobs = Jobs(credits=1, done_after=10**9)
    jobs.on_submit = stop.set
    registry.add(job_tool(jobs))
    result = run_play(_ask("t.job"), tools=[registry], store=store, stop=stop)
    assert result.status == "suspended"


# stops


@walks((S.LOOKED_UP, S.STOPPED))
def test_calls_not_sent_stop_with_the_attempt(registry, store) -> None:
    stop = asyncio.Event()

    @registry.tool("t.answer", rate=pl.Rate(per_second=1, concurrency=1))
    def answer(input: dict[str, Any]) -> dict[str, Any]:
        stop.set()
        return _answer(input)

    play = dataset_play(rows_of(5), {"y": call_tool("t.answer")})
    assert run_play(play, tools=[registry], store=store, stop=stop).status == "suspended"


@walks((S.CLAIMED, S.STOPPED))
def test_a_retry_waiting_out_its_pause_stops_with_the_attempt(registry, store) -> None:
    stop = asyncio.Event()

    @registry.tool("t.busy")
    def busy(input: dict[str, Any]) -> dict[str, Any]:
        stop.set()
        raise pl.ToolError("t.busy", "slow down", status=429, retry_after=60)

    assert run_play(_ask("t.busy"), tools=[registry], store=store, stop=stop).status == (
        "suspended"
    )


@walks((S.SENT, S.STOPPED))
def test_a_call_in_flight_stops_when_the_run_is_cancelled(registry, store) -> None:
    """A cancel (the caller's task, Ctrl-C in a notebook) ends the attempt at once."""
    entered: dict[str, asyncio.Event] = {}

    @registry.tool("t.block")
    async def block(input: dict[str, Any]) -> dict[str, Any]:
        entered["sent"].set()
        await asyncio.Event().wait()
        raise AssertionError("never answered")

    async def main() -> None:
        entered["sent"] = asyncio.Event()
        run = asyncio.ensure_future(
            pl.arun(_ask("t.block"), store=store, tools=[registry], clock=pl.ManualClock())
        )
        await entered["sent"].wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(main())


@walks((S.QUEUED, S.STOPPED))
def test_a_call_being_looked_up_stops_when_the_run_is_cancelled(registry, tmp_path) -> None:
    """A store read runs in a thread (SQLite): the cancel does not wait for it."""
    registry.tool("t.answer")(_answer)
    store = open_store(f"sqlite:///{tmp_path}/playline.db")
    release = threading.Event()
    find_answers = store.find_answers

    async def main() -> None:
        loop = asyncio.get_running_loop()
        looking = asyncio.Event()

        def slow_find_answers(keys: Any) -> Any:
            loop.call_soon_threadsafe(looking.set)
            release.wait(timeout=60)
            return find_answers(keys)

        store.find_answers = slow_find_answers  # type: ignore[method-assign]
        run = asyncio.ensure_future(
            pl.arun(_ask("t.answer"), store=store, tools=[registry], clock=pl.ManualClock())
        )
        await looking.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    try:
        asyncio.run(main())
    finally:
        release.set()
        store.close()
