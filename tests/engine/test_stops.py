"""A clean stop (``stop=``, a signal, the UI): no request goes out after it, the requests
already sent finish and are recorded, and what was not sent leaves no claim behind."""

from __future__ import annotations

import asyncio
from typing import Any

import playline as pl

from .helpers import call_tool, dataset_play, rows_of, run_play


def test_no_request_goes_out_once_the_run_is_stopped(registry, store):
    stop = asyncio.Event()
    sent: list[int] = []

    @registry.tool("t.one", rate=pl.Rate(concurrency=2))  # waves of one request
    def one(input: dict[str, Any]) -> dict[str, Any]:
        sent.append(input["x"])
        stop.set()  # asked while the first requests are out
        return {"x": input["x"]}

    play = dataset_play(rows_of(4), {"y": call_tool("t.one")})
    result = run_play(play, tools=[registry], store=store, stop=stop)

    assert result.status == "suspended"
    assert len(sent) == 2  # the two out when it was asked; none after
    statuses = [row.status for row in store.iter_rows(result.run_id, "rows")]
    assert statuses.count("completed") == 2


def test_a_request_not_sent_again_at_a_stop_leaves_no_claim_behind(registry, store, clock):
    """Throttled (429), a request waits to be sent again; stopped meanwhile, it lets go of its
    receipt: nothing is in doubt, and a resume buys the call as any other."""
    stop = asyncio.Event()
    sent: list[int] = []

    @registry.tool("t.busy", cost=1)
    def busy(input: dict[str, Any]) -> dict[str, Any]:
        sent.append(input["x"])
        if len(sent) == 1:
            stop.set()
            raise pl.ToolError("t.busy", "slow down", status=429, retry_after=5)
        return {"x": input["x"]}

    play = dataset_play(rows_of(1), {"y": call_tool("t.busy")})
    first = run_play(play, tools=[registry], store=store, stop=stop, clock=clock)

    assert first.status == "suspended"
    assert store.doubtful_receipts(first.run_id, now=clock.now()) == {}
    again = run_play(play, tools=[registry], store=store, run_id=first.run_id, clock=clock)
    assert again.status == "completed", again.error
    assert not again.output.errors
    assert (sent, again.stats.credits) == ([0, 0], 1)


def test_a_request_stopped_during_its_claim_is_not_sent(registry, store, clock):
    """The stop comes while the receipts of a wave are being claimed: the wave is not sent,
    its claims are let go (nothing in doubt), and a resume buys each call once."""
    stop = asyncio.Event()
    sent: list[int] = []

    @registry.tool("t.paid", cost=1)
    def paid(input: dict[str, Any]) -> dict[str, Any]:
        sent.append(input["x"])
        return {"x": input["x"]}

    write = store.write_receipts

    def write_receipts(**kwargs: Any) -> Any:
        if kwargs.get("claims") and not stop.is_set():
            loop.call_soon_threadsafe(stop.set)  # the store may run this in a thread
        return write(**kwargs)

    async def main() -> pl.RunResult:
        nonlocal loop
        loop = asyncio.get_running_loop()
        play = dataset_play(rows_of(3), {"y": call_tool("t.paid")})
        return await pl.arun(play, tools=[registry], store=store, stop=stop, clock=clock)

    loop: asyncio.AbstractEventLoop
    store.write_receipts = write_receipts  # type: ignore[method-assign]
    first = asyncio.run(main())
    store.write_receipts = write  # type: ignore[method-assign]

    assert first.status == "suspended"
    assert sent == []
    assert store.doubtful_receipts(first.run_id, now=clock.now()) == {}
    play = dataset_play(rows_of(3), {"y": call_tool("t.paid")})
    again = run_play(play, tools=[registry], store=store, run_id=first.run_id, clock=clock)
    assert again.status == "completed", again.error
    assert sorted(sent) == [0, 1, 2]


def test_a_stopped_dataset_counts_every_row_it_did_not_finish_as_pending(registry, store):
    """Rows read from the input and waiting for room in the window when the stop comes are
    pending too: the dataset's rows are those it stored and those a resume runs, so no display
    shows rows that were never stored."""
    stop = asyncio.Event()

    @registry.tool("t.one", rate=pl.Rate(concurrency=2))
    def one(input: dict[str, Any]) -> dict[str, Any]:
        stop.set()
        return {"x": input["x"]}

    play = dataset_play(rows_of(12), {"y": call_tool("t.one")})
    result = run_play(play, tools=[registry], store=store, stop=stop, row_window=4)

    assert result.status == "suspended"
    stored = store.count_rows(result.run_id, "rows")
    stats = result.stats
    assert stats.rows > stats.rows_executed  # rows were read that never started
    assert stats.rows == stored + stats.rows_pending
    again = run_play(play, tools=[registry], store=store, run_id=result.run_id)
    assert again.status == "completed", again.error
    assert again.stats.rows_reused == stored and again.stats.rows == 12
