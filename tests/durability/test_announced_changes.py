"""On PostgreSQL, waiting is told, not polled: a run waiting for a call another worker holds
learns of its result when it is committed, and a worker learns of a sent event at once.

The waiting side runs on a clock that never lets time pass, so its polls never come: only the
store's announcement (LISTEN/NOTIFY) can move it on. A real timeout around each test makes a
missing announcement fail instead of hang.
"""

from __future__ import annotations

import asyncio
from typing import Any

import playline as pl
from playline.store import open_store

SAFETY_S = 30.0


class StoppedClock:
    """Wall time stands still and sleeps never end (only an announcement moves a wait on)."""

    def __init__(self) -> None:
        self._start = pl.SystemClock().now()

    def now(self) -> float:
        return self._start

    def monotonic(self) -> float:
        return 0.0

    async def sleep(self, seconds: float) -> None:
        await asyncio.Event().wait()


def test_a_run_waiting_for_a_call_another_worker_holds_is_told_of_its_result(
    postgres_url: str,
) -> None:
    registry = pl.ToolRegistry()
    entered, finish = asyncio.Event(), asyncio.Event()
    calls: list[str] = []

    @registry.tool("t.slow")
    async def slow(input: dict[str, Any]) -> dict[str, Any]:
        calls.append(input["x"])
        entered.set()
        await finish.wait()
        return {"x": input["x"]}

    @pl.play(name="announced-receipt")
    async def play(ctx: pl.Context, input: Any) -> str:
        return (await ctx.tool("t.slow", {"x": "same"})).execution.source

    async def both() -> tuple[pl.RunResult, pl.RunResult]:
        holder_store, waiter_store = open_store(postgres_url), open_store(postgres_url)
        holder = asyncio.ensure_future(pl.arun(play, store=holder_store, tools=[registry]))
        await entered.wait()  # the holder's call is out: its receipt is claimed
        waiter = asyncio.ensure_future(
            pl.arun(play, store=waiter_store, tools=[registry], clock=StoppedClock())
        )
        listener: Any = waiter_store.changes()
        assert await asyncio.to_thread(listener.listening.wait, SAFETY_S)  # it waits, told
        finish.set()
        return await holder, await waiter

    held, waited = asyncio.run(asyncio.wait_for(both(), SAFETY_S))

    assert (held.status, waited.status) == ("completed", "completed")
    assert (held.output, waited.output) == ("live", "cache")
    assert calls == ["same"]


def test_a_worker_is_told_of_a_sent_event(postgres_url: str) -> None:
    registry = pl.ToolRegistry()
    resumed = asyncio.Event()

    @registry.tool("t.resumed")
    def mark(input: dict[str, Any]) -> dict[str, Any]:
        resumed.set()
        return input

    @pl.play(name="announced-event")
    async def play(ctx: pl.Context, input: Any) -> Any:
        reply = await ctx.wait_for_event("reply")
        await ctx.tool("t.resumed", {"reply": reply})
        return reply

    async def go() -> list[pl.RunResult]:
        first = await pl.arun(play, store=postgres_url, tools=[registry])
        assert first.status == "suspended"
        worker = pl.Worker(store=postgres_url, tools=[registry], clock=StoppedClock())
        working = asyncio.ensure_future(worker.run())
        listener: Any = worker.store.changes()
        assert await asyncio.to_thread(listener.listening.wait, SAFETY_S)
        sender = open_store(postgres_url)  # another process, as far as the worker can tell
        assert await asyncio.to_thread(pl.send_event, "reply", {"ok": True}, store=sender)
        await resumed.wait()
        worker.stop()  # returns once the resumed attempt has ended
        return await working

    [resumed_run] = asyncio.run(asyncio.wait_for(go(), SAFETY_S))
    assert resumed_run.status == "completed" and resumed_run.output == {"ok": True}
