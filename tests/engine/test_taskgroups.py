"""The tasks of an attempt (``_engine/taskgroups.py``)."""

from __future__ import annotations

import asyncio
import gc
import warnings

import pytest

from playline._engine.taskgroups import TaskSet


@pytest.mark.anyio
async def test_work_started_after_the_set_closed_is_dropped_and_never_warns() -> None:
    tasks = TaskSet()
    ran: list[str] = []

    async def work(name: str) -> None:
        ran.append(name)

    tasks.spawn(work("before"))
    await tasks.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tasks.spawn(work("after")) is None  # a late timer's pass, the attempt over
        await asyncio.sleep(0)
        gc.collect()
    assert ran == []  # cancelled before it ran, and the late one never started
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
