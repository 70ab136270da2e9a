"""Incremental datasets and fresh cells (issue 40): ``mode="net_new"``, ``stale_after``,
``recompute``, ``recompute_on_error`` and ``row.previous``, over runs of one play on the test's
store, under a manual clock."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

import playline as pl

from .helpers import run_play

DAY = 86_400.0


class Lookup:
    """A tool that answers ``{"v": n * 10}`` (None for the numbers in ``missing``, a failure
    for those in ``failing``) and counts what it was sent."""

    def __init__(self, registry: pl.ToolRegistry) -> None:
        self.sent: list[int] = []
        self.missing: set[int] = set()
        self.failing: set[int] = set()

        @registry.tool("t.lookup")
        async def lookup(input: dict[str, Any]) -> dict[str, Any] | None:
            n = input["n"]
            self.sent.append(n)
            if n in self.failing:
                raise pl.ToolError("t.lookup", f"{n} failed", status=503)
            return None if n in self.missing else {"v": n * 10}

        self.tool = lookup

    def take(self) -> list[int]:
        sent, self.sent = sorted(self.sent), []
        return sent


def leads_play(**column: Any) -> pl.Play:
    """``leads`` over ``input["n"]`` rows keyed by ``n`` (or ``input["keys"]``), in
    ``input["mode"]``, a column ``v`` calling the lookup with ``column``'s options, and a
    column ``before`` reading ``row.previous("v")``."""

    async def play(ctx: pl.Context, input: Any) -> dict[str, Any]:
        keys = input.get("keys", list(range(input.get("n", 0))))
        ds = await (
            ctx.dataset("leads", [{"n": n} for n in keys], key="n", mode=input.get("mode", "all"))
            .with_column("v", lambda row: ctx.tool("t.lookup", {"n": row["n"]}), **column)
            .with_column("before", lambda row: row.previous("v"))
            .run()
        )
        return {"stats": ds.stats.to_dict(), "rows": {r["n"]: r for r in ds}}

    return pl.play(name="fresh-leads")(play)


@pytest.fixture
def lookup(registry: pl.ToolRegistry) -> Lookup:
    return Lookup(registry)


def test_net_new_runs_only_the_rows_no_earlier_run_completed(lookup, clock):
    play = leads_play(recompute_on_error=True)
    first = run_play(play, {"n": 5}, tools=[lookup.tool], clock=clock)
    assert first.status == "completed", first.error
    assert lookup.take() == [0, 1, 2, 3, 4]

    second = run_play(play, {"n": 8, "mode": "net_new"}, tools=[lookup.tool], clock=clock)

    assert second.status == "completed", second.error
    assert lookup.take() == [5, 6, 7]
    stats = second.output["stats"]
    assert (stats["rows"], stats["rows_seen"]) == (3, 5)
    assert sorted(second.output["rows"]) == [5, 6, 7]  # the seen rows are not this run's


def test_net_new_runs_again_a_row_whose_earlier_run_failed_it(lookup, clock):
    play = leads_play(recompute_on_error=True)
    lookup.failing = {1}
    run_play(play, {"n": 3}, tools=[lookup.tool], clock=clock)
    lookup.take()
    lookup.failing = set()

    again = run_play(play, {"n": 3, "mode": "net_new"}, tools=[lookup.tool], clock=clock)

    assert again.status == "completed", again.error
    assert lookup.take() == [1]
    assert again.output["stats"]["rows_seen"] == 2


def test_net_new_sees_only_runs_of_the_same_play_and_dataset(lookup, clock):
    play = leads_play(recompute_on_error=True)
    other = pl.play(name="another-play")(play.fn)
    run_play(other, {"n": 3}, tools=[lookup.tool], clock=clock)
    lookup.take()

    result = run_play(play, {"n": 3, "mode": "net_new"}, tools=[lookup.tool], clock=clock)

    assert result.output["stats"]["rows_seen"] == 0
    assert result.output["stats"]["rows"] == 3


def test_a_resumed_net_new_run_keeps_its_own_rows(lookup, clock, store):
    play = leads_play(recompute_on_error=True)
    run_play(play, {"n": 2}, tools=[lookup.tool], clock=clock)
    lookup.failing = {3}
    first = run_play(play, {"n": 4, "mode": "net_new"}, tools=[lookup.tool], clock=clock)
    assert first.output["stats"]["rows_failed"] == 1
    lookup.take()
    lookup.failing = set()

    resumed = run_play(play, run_id=first.run_id, tools=[lookup.tool], clock=clock)

    assert resumed.status == "completed", resumed.error
    assert lookup.take() == [3]  # row 2 is this run's (reused), 0 and 1 the earlier run's
    stats = resumed.output["stats"]
    assert (stats["rows_seen"], stats["rows_reused"], stats["rows_executed"]) == (2, 1, 1)


def test_stale_after_keeps_cells_younger_than_the_limit_and_recomputes_older_ones(lookup, clock):
    play = leads_play(stale_after=dt.timedelta(days=90))
    run_play(play, {"keys": [0, 1]}, tools=[lookup.tool], clock=clock)  # day 0
    clock.advance(60 * DAY)
    run_play(play, {"keys": [0, 1, 2]}, tools=[lookup.tool], clock=clock)  # day 60: 2 is new
    assert lookup.take() == [0, 1, 2]

    clock.advance(40 * DAY)  # day 100: 0 and 1 are 100 days old (kept at 60), 2 is 40
    result = run_play(play, {"keys": [0, 1, 2]}, tools=[lookup.tool], clock=clock)

    assert result.status == "completed", result.error
    assert lookup.take() == [0, 1]  # their receipts are 100 days old: bought again
    stats = result.output["stats"]
    assert (stats["cells_kept"], stats["cells_recomputed"]) == (1, 2)
    assert result.output["rows"][2]["v"] == {"v": 20}


def test_a_kept_cell_is_as_old_as_when_it_was_computed(lookup, clock, store):
    play = leads_play(stale_after=90 * DAY)
    run_play(play, {"n": 1}, tools=[lookup.tool], clock=clock)
    clock.advance(50 * DAY)
    kept = run_play(play, {"n": 1}, tools=[lookup.tool], clock=clock)
    (record,) = store.iter_rows(kept.run_id, "leads")
    assert record.cells["v"]["status"] == "cached"
    assert record.cells["v"]["updated_at"] == pytest.approx(clock.now() - 50 * DAY)
    assert "cost" not in record.cells["v"]
    lookup.take()

    clock.advance(50 * DAY)  # 100 days after it was computed, 50 after it was kept
    run_play(play, {"n": 1}, tools=[lookup.tool], clock=clock)

    assert lookup.take() == [0]


def test_stale_after_reuses_receipts_younger_than_the_limit(lookup, clock):
    """A cell computed again buys only the receipts older than the limit: a call another
    play made 10 days ago is answered by its receipt."""
    other = pl.play(name="other-play")(leads_play(recompute_on_error=True).fn)
    run_play(other, {"n": 1}, tools=[lookup.tool], clock=clock)
    lookup.take()
    clock.advance(10 * DAY)

    result = run_play(leads_play(stale_after=30 * DAY), {"n": 1}, tools=[lookup.tool], clock=clock)

    assert result.status == "completed", result.error
    assert lookup.take() == []
    assert result.output["rows"][0]["v"] == {"v": 0}


def test_recompute_decides_from_the_previous_cell_and_buys_its_calls_again(lookup, clock):
    given: list[pl.PreviousCell] = []

    def recompute(previous: pl.PreviousCell) -> bool:
        given.append(previous)
        return previous.value is None

    play = leads_play(recompute=recompute)
    lookup.missing = {1}
    run_play(play, {"n": 3}, tools=[lookup.tool], clock=clock)
    assert lookup.take() == [0, 1, 2]
    lookup.missing = set()
    clock.advance(DAY)

    result = run_play(play, {"n": 3}, tools=[lookup.tool], clock=clock)

    assert lookup.take() == [1]  # its not-found receipt is bought again, not answered
    assert result.output["rows"][1]["v"] == {"v": 10}
    assert result.output["rows"][1]["before"] is None
    assert result.output["rows"][0]["before"] == {"v": 0}
    assert [p.status for p in given] == ["completed", "not_found", "completed"]
    assert given[0].age == pytest.approx(DAY)


def test_failed_cells_are_kept_failed_unless_recompute_on_error(lookup, clock, registry):
    lookup.failing = {1}
    keeping = leads_play(stale_after=90 * DAY)
    run_play(keeping, {"n": 2}, tools=[lookup.tool], clock=clock)
    lookup.take()
    lookup.failing = set()

    kept = run_play(keeping, {"n": 2}, tools=[lookup.tool], clock=clock)
    assert lookup.take() == []
    assert kept.status == "completed_with_errors"
    assert kept.output["stats"]["rows_failed"] == 1

    retried = run_play(
        leads_play(stale_after=90 * DAY, recompute_on_error=True),
        {"n": 2},
        tools=[lookup.tool],
        clock=clock,
    )
    assert retried.status == "completed", retried.error
    assert lookup.take() == [1]


def test_row_previous_needs_a_column_that_says_when_to_recompute(lookup, clock):
    result = run_play(leads_play(), {"n": 1}, tools=[lookup.tool], clock=clock)

    assert result.status == "failed"
    assert "row.previous('v')" in result.error
    assert "stale_after=, recompute= or recompute_on_error=True" in result.error


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"stale_after": 0}, "stale_after=0 must be a positive timedelta"),
        ({"stale_after": -dt.timedelta(days=1)}, "must be a positive timedelta"),
        ({"stale_after": "90d"}, "must be a positive timedelta"),
        ({"stale_after": True}, "must be a positive timedelta"),
        ({"recompute": "yes"}, "recompute= must be fn(previous)"),
        ({"recompute_on_error": 1}, "recompute_on_error is True or False"),
    ],
)
def test_bad_freshness_options_are_refused(lookup, clock, options, message):
    result = run_play(leads_play(**options), {"n": 1}, tools=[lookup.tool], clock=clock)

    assert result.status == "failed"
    assert message in result.error


def test_a_bad_mode_is_refused(lookup, clock):
    result = run_play(leads_play(), {"n": 1, "mode": "new"}, tools=[lookup.tool], clock=clock)

    assert result.status == "failed"
    assert "mode='new'" in result.error and "'net_new'" in result.error


def test_plan_counts_what_net_new_and_stale_after_will_run(lookup, clock, default_store):
    play = leads_play(stale_after=90 * DAY)
    run_play(play, {"n": 4}, tools=[lookup.tool], clock=clock)
    lookup.take()

    estimate = pl.plan(play, {"n": 6, "mode": "net_new"}, tools=[lookup.tool])

    assert lookup.take() == []  # a plan sends nothing
    assert estimate.rows == 2
    assert estimate.calls == 2
    assert any("4 rows left out as seen" in note for note in estimate.notes)
