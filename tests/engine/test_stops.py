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
