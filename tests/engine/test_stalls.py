"""An attempt that stops moving says so once in its log (``No progress for N s`` and what it
waits for); rows that keep ending are progress, though they make no call."""

from __future__ import annotations

import asyncio
from typing import Any

import playline as pl
from playline.store import Event


def _stalls(events: list[Event]) -> list[str]:
    return [
        e.preview or "" for e in events if e.kind == "log" and "No progress" in (e.preview or "")
    ]


def test_a_run_that_stops_moving_says_what_it_waits_for(tmp_path) -> None:
    """Its one row waits for something only the stall report brings (the listener): the
    report comes, once, and the run then completes."""
    seen: list[Event] = []
    freed = asyncio.Event()

    def listen(event: Event) -> None:
        seen.append(event)
        if _stalls([event]):
            freed.set()

    async def wait(row: Any) -> str:
        await freed.wait()
        return "freed"

    @pl.play(name="stalls")
    async def play(ctx: pl.Context, input: Any) -> Any:
        return await ctx.dataset("rows", [{"n": 1}], key="n").with_column("w", wait).run()

    result = pl.run(play, store=f"sqlite:///{tmp_path}/s.db", stall_after=1.0, listeners=[listen])

    assert result.status == "completed", result.error
    (said,) = _stalls(seen)
    assert said.startswith("No progress for ")  # 1 s or so: the check runs every second
    assert said.endswith(" s. 1 rows active, 0 waiting on calls, 0 calls in flight.")


def test_rows_that_keep_ending_without_calls_are_progress(tmp_path) -> None:
    """A slow pure column (no tool call settles): rows end one after another, so no stall is
    reported (it was, every minute, while rows were stored)."""
    seen: list[Event] = []

    async def slow(row: Any) -> int:
        await asyncio.sleep(0.1)  # slow work, not a wait for something to happen
        return int(row["n"])

    @pl.play(name="slow-pure")
    async def play(ctx: pl.Context, input: Any) -> Any:
        rows = [{"n": n} for n in range(30)]
        return await ctx.dataset("rows", rows, key="n").with_column("s", slow).run()

    result = pl.run(
        play,
        store=f"sqlite:///{tmp_path}/s.db",
        stall_after=1.0,
        row_window=1,
        listeners=[seen.append],
    )

    assert result.status == "completed", result.error
    assert _stalls(seen) == []
