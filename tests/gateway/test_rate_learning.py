"""Issue 10, "a random 429 collapses a learned rate": 429s that are not about our rate (a
provider throttling a share of requests whatever the pace) must not drag the tool's rate down
to its floor, and the rate must come back once they stop.

Time is virtual (``virtual_clock.VirtualClock``: concurrent waits overlap, as on a wall clock,
and nothing depends on the machine's speed); the simulator's own rate limits are lifted and
its published rate (sim.email.alpha: 20/s, concurrency 8) kept, so the gateway paces itself
as usual and every 429 is the ``throttle_rate`` fault's.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import playline as pl
from playline.sim import Simulator

from gwfaults import UNPUBLISHED
from gwhelp import people_play, tool_column, world_people
from virtual_clock import VirtualClock

CALLS = 60
TOOL = "sim.email.alpha"


def _play(name: str, people: list[dict[str, Any]]) -> pl.Play:
    return people_play(name, people, [("found", tool_column(TOOL), None)])


async def _timed(play: pl.Play, sim: Simulator, clock: VirtualClock) -> float:
    """Run ``play`` on ``clock``; returns the virtual seconds it took."""
    start = clock.elapsed
    result = await pl.arun(
        play,
        store="memory://",
        tools=[pl.Gateway(sim.url, token=sim.token)],
        clock=clock,
        stall_after=None,
    )
    assert result.status == "completed", result.error
    return clock.elapsed - start


def _baseline(sim: Simulator, people: list[dict[str, Any]]) -> float:
    """Virtual seconds of ``people`` without any 429 (a fresh gate)."""
    sim.reset()
    sim.faults(tools={TOOL: UNPUBLISHED})
    took = asyncio.run(_timed(_play("rate-baseline", people), sim, VirtualClock()))
    assert sim.ledger()["calls"] == {TOOL: len(people)}
    sim.reset()
    return took


def _throttle(sim: Simulator, share: float, retry_after_ms: float | None) -> None:
    fault: dict[str, Any] = {**UNPUBLISHED, "throttle_rate": share}
    if retry_after_ms is not None:
        fault["throttle_retry_after_ms"] = retry_after_ms
    sim.faults(tools={TOOL: fault})


def test_the_virtual_clock_lets_concurrent_waits_overlap() -> None:
    clock = VirtualClock()

    async def worker(i: int) -> None:
        await clock.sleep(1.0)  # all eight at once: one second, not eight
        await clock.sleep(0.5 * i)

    async def main() -> None:
        await asyncio.gather(*(worker(i) for i in range(8)))

    asyncio.run(main())
    assert clock.elapsed == pytest.approx(1.0 + 0.5 * 7)


def test_without_429s_the_tool_is_paced_at_its_published_rate(sim: Simulator) -> None:
    """The reference the other tests compare with: a burst of 18 (the published 20 less a
    tenth of a second of tokens, see gate_burst), then 0.95 x 20/s."""
    took = _baseline(sim, world_people(sim, CALLS))
    assert took == pytest.approx((CALLS - 18) / (0.95 * 20), rel=0.05)


def test_random_429s_with_retry_after_cost_at_most_3x_the_time(sim: Simulator) -> None:
    people = world_people(sim, CALLS)
    baseline = _baseline(sim, people)
    _throttle(sim, 0.3, retry_after_ms=1000)
    took = asyncio.run(_timed(_play("rate-random-429", people), sim, VirtualClock()))
    ledger = sim.ledger()
    assert ledger["throttled"][TOOL] >= CALLS // 5  # the fault did strike
    assert ledger["calls"] == {TOOL: CALLS} and ledger["duplicate_charges"] == 0
    assert took <= 3 * baseline, f"{took:.1f} s virtual against {baseline:.1f} s without 429s"


def test_half_429s_without_retry_after_never_sink_the_rate_and_it_recovers(
    sim: Simulator,
) -> None:
    people = world_people(sim, 2 * CALLS)
    stormy, calm = people[:CALLS], people[CALLS:]
    baseline = _baseline(sim, calm)

    async def both() -> tuple[float, float]:
        clock = VirtualClock()  # one clock on one loop: both runs share the tool's gate
        _throttle(sim, 0.5, retry_after_ms=None)
        during = await _timed(_play("rate-storm", stormy), sim, clock)
        sim.faults(tools={TOOL: {"throttle_rate": None}})  # the 429s stop
        after = await _timed(_play("rate-calm", calm), sim, clock)
        return during, after

    during, after = asyncio.run(both())
    ledger = sim.ledger()
    assert ledger["throttled"][TOOL] >= CALLS // 2  # the storm did strike
    assert ledger["duplicate_charges"] == 0
    # At the 0.2/s floor the storm's ~120 requests would take ~600 s (300x the baseline).
    assert during <= 10 * baseline, f"storm: {during:.1f} s virtual, baseline {baseline:.1f} s"
    # Recovered: the same number of clean calls as fast as on a fresh gate, give or take.
    assert after <= 2 * baseline, f"after: {after:.1f} s virtual, baseline {baseline:.1f} s"
