"""Schedules (ScheduleStore): kept whole, listed by name, due by time, moved on by
compare-and-set so that of two workers that fired one time only one advances it."""

from __future__ import annotations

import math
import threading
from dataclasses import replace

import pytest

from playline.errors import PlaylineError
from playline.store import ScheduleRecord, Store, open_store

from storehelp import NOW

WEEKLY = ScheduleRecord(
    name="weekly",
    play="enrich",
    cron="0 9 * * MON",
    timezone="Europe/Paris",
    source={"file": "/plays/enrich.py", "function": "enrich"},
    input={"file": "leads.csv", "limit": 10, "tags": ["a", "é"]},
    catch_up="all",
    next_fire=NOW + 100,
    cwd="/data",
    created_at=NOW,
    updated_at=NOW,
)


def test_a_schedule_is_kept_whole_and_listed_by_name(store: Store) -> None:
    bare = ScheduleRecord(name="a-daily", play="p", cron="0 0 * * *", next_fire=NOW)
    assert store.save_schedule(WEEKLY, replace=False)
    assert store.save_schedule(bare, replace=False)
    assert store.get_schedule("weekly") == WEEKLY
    assert store.get_schedule("a-daily") == bare  # no source, no input, no cwd
    assert store.get_schedule("nope") is None
    assert [s.name for s in store.list_schedules()] == ["a-daily", "weekly"]


def test_a_name_taken_is_refused_unless_replaced(store: Store) -> None:
    assert store.save_schedule(WEEKLY, replace=False)
    other = replace(WEEKLY, cron="0 10 * * *", input={"x": 1}, source=None)
    assert not store.save_schedule(other, replace=False)
    assert store.get_schedule("weekly") == WEEKLY
    assert store.save_schedule(other, replace=True)
    assert store.get_schedule("weekly") == other


def test_what_a_store_returns_is_a_snapshot(store: Store) -> None:
    given = replace(WEEKLY, input={"file": "leads.csv"})
    store.save_schedule(given, replace=False)
    given.input["file"] = "changed.csv"  # the caller's dict, changed after the save
    found = store.get_schedule("weekly")
    assert found is not None and found.input == {"file": "leads.csv"}


def test_advance_is_a_compare_and_set_on_the_next_fire(store: Store) -> None:
    store.save_schedule(WEEKLY, replace=False)
    moved = dict(next_fire=NOW + 200, last_fire=NOW + 100, last_run_id="sched-weekly-1")
    assert not store.advance_schedule("weekly", expected_next=NOW + 99, **moved)
    assert store.get_schedule("weekly") == WEEKLY  # nothing changed
    assert store.advance_schedule("weekly", expected_next=NOW + 100, **moved)
    assert not store.advance_schedule("weekly", expected_next=NOW + 100, **moved)  # done once
    found = store.get_schedule("weekly")
    assert found is not None
    assert (found.next_fire, found.last_fire, found.last_run_id) == (
        NOW + 200,
        NOW + 100,
        "sched-weekly-1",
    )
    # a look that queued nothing (catch_up="skip") keeps the last fire and run
    assert store.advance_schedule(
        "weekly", expected_next=NOW + 200, next_fire=NOW + 300, last_fire=None, last_run_id=None
    )
    found = store.get_schedule("weekly")
    assert found is not None
    assert (found.next_fire, found.last_fire, found.last_run_id) == (
        NOW + 300,
        NOW + 100,
        "sched-weekly-1",
    )
    assert not store.advance_schedule(
        "gone", expected_next=NOW, next_fire=NOW + 1, last_fire=None, last_run_id=None
    )


def test_due_schedules_are_the_unpaused_ones_whose_time_came_soonest_first(store: Store) -> None:
    for name, at in [("c", NOW + 5), ("a", NOW + 1), ("b", NOW - 3), ("later", NOW + 60)]:
        store.save_schedule(replace(WEEKLY, name=name, next_fire=at), replace=False)
    store.save_schedule(replace(WEEKLY, name="held", next_fire=NOW - 9, paused=True), replace=False)
    assert [s.name for s in store.due_schedules(now=NOW + 5)] == ["b", "a", "c"]
    assert [s.name for s in store.due_schedules(now=NOW + 5, limit=2)] == ["b", "a"]
    assert store.due_schedules(now=NOW - 10) == []
    # what a waiting worker asks: the soonest schedule of all
    assert [s.name for s in store.due_schedules(now=math.inf, limit=1)] == ["b"]


def test_pause_and_resume_with_a_new_next_fire(store: Store) -> None:
    store.save_schedule(WEEKLY, replace=False)
    assert store.pause_schedule("weekly", True, now=NOW + 1)
    paused = store.get_schedule("weekly")
    assert paused is not None and paused.paused and paused.next_fire == WEEKLY.next_fire
    assert paused.updated_at == NOW + 1
    assert store.due_schedules(now=NOW + 1000) == []
    assert store.pause_schedule("weekly", False, now=NOW + 2, next_fire=NOW + 700)
    resumed = store.get_schedule("weekly")
    assert resumed is not None and not resumed.paused and resumed.next_fire == NOW + 700
    assert not store.pause_schedule("nope", True, now=NOW)


def test_delete_forgets_the_schedule(store: Store) -> None:
    store.save_schedule(WEEKLY, replace=False)
    assert store.delete_schedule("weekly")
    assert store.get_schedule("weekly") is None and store.list_schedules() == []
    assert not store.delete_schedule("weekly")


def test_of_workers_racing_to_advance_one_time_one_wins(durable_url: str) -> None:
    """Two store objects on one file or database (two workers), eight threads each: every
    advance from the same next fire is tried at once; exactly one succeeds."""
    stores = [open_store(durable_url), open_store(durable_url)]
    try:
        stores[0].save_schedule(WEEKLY, replace=False)
        start = threading.Barrier(16)
        won: list[bool] = []

        def advance(store: Store, n: int) -> None:
            start.wait()
            won.append(
                store.advance_schedule(
                    "weekly",
                    expected_next=WEEKLY.next_fire,
                    next_fire=NOW + 1000 + n,
                    last_fire=WEEKLY.next_fire,
                    last_run_id=f"run-{n}",
                )
            )

        threads = [threading.Thread(target=advance, args=(stores[n % 2], n)) for n in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(won) == [False] * 15 + [True]
        found = stores[1].get_schedule("weekly")
        assert found is not None and found.last_run_id == f"run-{int(found.next_fire - NOW - 1000)}"
    finally:
        for store in stores:
            store.close()


@pytest.mark.parametrize("bad", [{"x": object()}, {1, 2}])
def test_an_input_that_is_not_json_is_refused(store: Store, bad: object) -> None:
    with pytest.raises(PlaylineError, match=r"input|schedule"):
        store.save_schedule(replace(WEEKLY, input=bad), replace=False)
    assert store.list_schedules() == []
