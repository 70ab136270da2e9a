"""Schedules fired by the embedded worker: at their cron times in their timezone (across
daylight-saving changes), caught up as told after a worker was down, each time once however
many workers share the store, paused, resumed and deleted; their runs get the schedule's input
and read relative paths from where it was added."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import closing
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import playline as pl
from playline import triggers
from playline.store import RunStatus, Store, open_store
from playline.triggers import GRACE, fire_schedules, queue_run, queued_origin, schedule_run_id

HOUR = 3600.0
DAY = 24 * HOUR


def ts(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pl.play(name="sched-echo")
async def echo(ctx: pl.Context, input: Any) -> Any:
    return {"got": input}


@pl.play(name="sched-count-leads")
async def count_leads(ctx: pl.Context, input: Any) -> Any:
    return {"rows": len(ctx.csv(input["file"]).to_list()), "tag": input["tag"]}


def burst(worker: pl.Worker) -> list[pl.RunResult]:
    return asyncio.run(worker.run(burst=True))


def fired(store: Store) -> list[tuple[str, str]]:
    """(fire time, run status) of every run a schedule queued, by fire time."""
    found = []
    for run in store.list_runs(limit=1000):
        origin = queued_origin(run)
        if origin and origin.get("kind") == "schedule":
            found.append((origin["fire"], run.status.value))
    return sorted(found)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = open_store(store_url)
    yield opened
    opened.close()


def test_a_schedule_fires_at_its_times_with_its_input(store: Store) -> None:
    clock = pl.ManualClock(ts("2026-01-05T07:00:00Z"))  # a Monday, 08:00 in Paris
    added = pl.schedule(
        "weekly",
        echo,
        cron="0 9 * * MON",
        timezone="Europe/Paris",
        input={"segment": "new"},
        store=store,
        clock=clock,
    )
    assert iso(added.next_fire) == "2026-01-05T08:00:00Z"
    with pl.Worker(store=store, clock=clock) as worker:
        assert burst(worker) == []  # 08:00 in Paris: not yet
        clock.advance(HOUR)
        [result] = burst(worker)
        assert (result.run_id, result.status) == ("sched-weekly-20260105T080000Z", "completed")
        assert result.output == {"got": {"segment": "new"}}
        clock.advance(7 * DAY - 1)
        assert burst(worker) == []  # a second before next Monday's
        clock.advance(1)
        assert [r.run_id for r in burst(worker)] == ["sched-weekly-20260112T080000Z"]
    record = store.get_run("sched-weekly-20260112T080000Z")
    assert record is not None
    assert queued_origin(record) == {
        "kind": "schedule",
        "name": "weekly",
        "fire": "2026-01-12T08:00:00Z",
    }
    schedule = store.get_schedule("weekly")
    assert schedule is not None
    assert iso(schedule.next_fire) == "2026-01-19T08:00:00Z"
    assert schedule.last_run_id == "sched-weekly-20260112T080000Z"


def test_a_schedule_keeps_its_wall_clock_time_across_a_daylight_saving_change(
    store: Store,
) -> None:
    """09:00 in Paris is 08:00 UTC until the clocks go forward on 29 March 2026, then 07:00."""
    clock = pl.ManualClock(ts("2026-03-27T12:00:00Z"))
    pl.schedule("daily", echo, cron="0 9 * * *", timezone="Europe/Paris", store=store, clock=clock)
    runs = []
    with pl.Worker(store=store, clock=clock) as worker:
        for _ in range(4):
            upcoming = store.get_schedule("daily")
            assert upcoming is not None
            clock.advance(upcoming.next_fire - clock.now())  # up exactly on time
            runs += [r.run_id for r in burst(worker) if r.status == "completed"]
    assert runs == [
        "sched-daily-20260328T080000Z",
        "sched-daily-20260329T070000Z",
        "sched-daily-20260330T070000Z",
        "sched-daily-20260331T070000Z",
    ]


@pytest.mark.parametrize(
    ("cron", "after", "fires"),
    [
        # the clocks go forward at 02:00: 02:30 does not exist that night; it fires at the change
        (
            "30 2 * * *",
            "2026-03-28T12:00:00Z",
            ["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"],
        ),
        # they go back at 03:00: 02:30 happens twice; it fires once, at the first
        (
            "30 2 * * *",
            "2026-10-24T12:00:00Z",
            ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"],
        ),
        # every half hour: the repeated hour's times are not fired again
        (
            "*/30 * * * *",
            "2026-10-24T23:45:00Z",
            ["2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", "2026-10-25T02:00:00Z"],
        ),
        # every half hour: the skipped hour's times fire once, at the change
        (
            "*/30 * * * *",
            "2026-03-29T00:15:00Z",
            ["2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z"],
        ),
    ],
)
def test_each_wall_clock_time_fires_once_when_the_clocks_change(
    cron: str, after: str, fires: list[str]
) -> None:
    at, found = ts(after), []
    for _ in fires:
        at = triggers.next_fire_time(cron, "Europe/Paris", at)
        found.append(iso(at))
    assert found == fires


@pytest.mark.parametrize(
    ("catch_up", "queued"),
    [
        ("all", ["01:00", "02:00", "03:00"]),
        ("one", ["03:00"]),
        ("skip", []),
    ],
)
def test_a_worker_down_through_three_fire_times_catches_up_as_told(
    store: Store, catch_up: str, queued: list[str]
) -> None:
    clock = pl.ManualClock(ts("2026-01-01T00:30:00Z"))
    pl.schedule("hourly", echo, cron="0 * * * *", catch_up=catch_up, store=store, clock=clock)
    clock.advance(3 * HOUR + 10 * 60)  # 03:40: down through 01:00, 02:00 and 03:00
    with pl.Worker(store=store, clock=clock) as worker:
        ids = worker.fire()
        assert ids == [f"sched-hourly-20260101T{t.replace(':', '')}00Z" for t in queued]
        burst(worker)
        assert fired(store) == [(f"2026-01-01T{t}:00Z", "completed") for t in queued]
        schedule = store.get_schedule("hourly")
        assert schedule is not None and iso(schedule.next_fire) == "2026-01-01T04:00:00Z"
        # back on time: the next fire is queued whatever catch_up says, also a little late
        clock.advance(20 * 60 + GRACE / 2)
        assert worker.fire() == ["sched-hourly-20260101T040000Z"]


def test_skip_drops_a_fire_later_than_the_grace(store: Store) -> None:
    clock = pl.ManualClock(ts("2026-01-01T00:30:00Z"))
    pl.schedule("hourly", echo, cron="0 * * * *", catch_up="skip", store=store, clock=clock)
    clock.advance(30 * 60 + GRACE + 1)
    with pl.Worker(store=store, clock=clock) as worker:
        assert worker.fire() == []
    schedule = store.get_schedule("hourly")
    assert schedule is not None and iso(schedule.next_fire) == "2026-01-01T02:00:00Z"


def test_catching_up_all_of_a_long_outage_queues_every_time_in_order(store: Store) -> None:
    clock = pl.ManualClock(ts("2026-01-01T00:00:30Z"))
    pl.schedule("minutely", echo, cron="* * * * *", catch_up="all", store=store, clock=clock)
    clock.advance(250 * 60)  # more than one batch of missed times
    ids = fire_schedules(store, clock=clock)[0]
    assert len(ids) == 250 and ids == sorted(ids)
    assert ids[0] == "sched-minutely-20260101T000100Z"
    assert ids[-1] == "sched-minutely-20260101T041000Z"


def _durable(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/shared.db"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.mark.own_store
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_two_workers_on_one_store_fire_each_time_once(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Two store objects on one file or database, firing at once, fire by fire."""
    url = _durable(kind, request, tmp_path)
    clock = pl.ManualClock(ts("2026-01-01T00:30:00Z"))
    first, second = open_store(url), open_store(url)
    try:
        pl.schedule("hourly", echo, cron="0 * * * *", catch_up="all", store=first, clock=clock)
        queued: list[str] = []
        for _ in range(12):
            clock.advance(HOUR)
            start = threading.Barrier(2)

            def fire(store: Store, start: threading.Barrier = start) -> None:
                start.wait()
                queued.extend(fire_schedules(store, clock=clock)[0])

            workers = [threading.Thread(target=fire, args=(s,)) for s in (first, second)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        assert sorted(queued) == [f"sched-hourly-20260101T{hour:02d}0000Z" for hour in range(1, 13)]
        with pl.Worker(store=second, clock=clock) as worker:
            assert len(burst(worker)) == 12
        assert fired(first) == [
            (f"2026-01-01T{hour:02d}:00:00Z", "completed") for hour in range(1, 13)
        ]
    finally:
        first.close()
        second.close()


@pytest.mark.own_store
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_worker_that_died_between_queueing_and_advancing_is_finished_once(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = _durable(kind, request, tmp_path)
    clock = pl.ManualClock(ts("2026-01-01T00:30:00Z"))
    with closing(open_store(url)) as dead, closing(open_store(url)) as alive:
        added = pl.schedule("hourly", echo, cron="0 * * * *", store=dead, clock=clock)
        clock.advance(HOUR)
        # what the first worker did before it died: the run queued, the schedule not advanced
        run_id = schedule_run_id("hourly", added.next_fire)
        assert queue_run(
            dead,
            run_id=run_id,
            play="sched-echo",
            at=added.next_fire,
            origin={"kind": "schedule", "name": "hourly", "fire": iso(added.next_fire)},
            clock=clock,
        )
        with pl.Worker(store=alive, clock=clock) as worker:
            assert worker.fire() == []  # the time's run is there: nothing new is queued
            [result] = burst(worker)
        assert (result.run_id, result.status) == (run_id, "completed")
        schedule = alive.get_schedule("hourly")
        assert schedule is not None and iso(schedule.next_fire) == "2026-01-01T02:00:00Z"
        assert fired(alive) == [("2026-01-01T01:00:00Z", "completed")]


class _Stalled:
    """A worker's store that stalls after reading the due schedules: the other worker fires
    (``meanwhile``) before this one writes anything."""

    def __init__(self, store: Store, meanwhile: Any) -> None:
        self._store, self._meanwhile = store, meanwhile

    def due_schedules(self, **kwargs: Any) -> Any:
        found = self._store.due_schedules(**kwargs)
        self._meanwhile()
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_a_worker_that_read_a_schedule_late_does_not_move_it_back(
    durable_store_url: str,
) -> None:
    """Worker B read the schedule at 01:00:10 and stalled; worker A, later, fired 02:00 and
    moved it to 03:00. B's advance from 01:00 is refused (compare-and-set): the schedule stays
    at 03:00 with A's run as its last."""
    added = pl.ManualClock(ts("2026-01-01T00:30:00Z"))
    early = pl.ManualClock(ts("2026-01-01T01:00:10Z"))
    late = pl.ManualClock(ts("2026-01-01T02:00:10Z"))
    with closing(open_store(durable_store_url)) as a, closing(open_store(durable_store_url)) as b:
        pl.schedule("hourly", echo, cron="0 * * * *", store=a, clock=added)
        stalled = _Stalled(b, lambda: fire_schedules(a, clock=late))
        fire_schedules(stalled, clock=early)  # type: ignore[arg-type]
        schedule = a.get_schedule("hourly")
    assert schedule is not None
    assert iso(schedule.next_fire) == "2026-01-01T03:00:00Z"
    assert schedule.last_run_id == "sched-hourly-20260101T020000Z"


def test_a_paused_schedule_fires_nothing_and_resumes_without_catching_up(store: Store) -> None:
    clock = pl.ManualClock(ts("2026-01-01T00:30:00Z"))
    pl.schedule("hourly", echo, cron="0 * * * *", catch_up="all", store=store, clock=clock)
    paused = triggers.pause(store, "hourly", True, clock=clock)
    assert paused.paused
    clock.advance(3 * HOUR)  # 03:30
    with pl.Worker(store=store, clock=clock) as worker:
        assert worker.fire() == [] and burst(worker) == []
        resumed = triggers.pause(store, "hourly", False, clock=clock)
        assert not resumed.paused and iso(resumed.next_fire) == "2026-01-01T04:00:00Z"
        assert worker.fire() == []  # 01:00, 02:00, 03:00 passed while paused: not caught up
        clock.advance(30 * 60)
        assert worker.fire() == ["sched-hourly-20260101T040000Z"]
    with pytest.raises(pl.PlayDefinitionError, match=r"No schedule named 'nope'.*hourly"):
        triggers.pause(store, "nope", True, clock=clock)


def test_a_deleted_schedule_fires_no_more_and_its_queued_runs_stay(store: Store) -> None:
    clock = pl.ManualClock(ts("2026-01-01T00:30:00Z"))
    pl.schedule("hourly", echo, cron="0 * * * *", store=store, clock=clock)
    clock.advance(HOUR)
    with pl.Worker(store=store, clock=clock) as worker:
        assert worker.fire() == ["sched-hourly-20260101T010000Z"]
        assert store.delete_schedule("hourly")
        assert [r.run_id for r in burst(worker)] == ["sched-hourly-20260101T010000Z"]
        clock.advance(5 * HOUR)
        assert worker.fire() == [] and burst(worker) == []


def test_a_replaced_schedule_keeps_its_state_and_a_new_cron_its_next_time(store: Store) -> None:
    clock = pl.ManualClock(ts("2026-01-01T00:30:00Z"))
    first = pl.schedule("job", echo, cron="0 * * * *", store=store, clock=clock)
    triggers.pause(store, "job", True, clock=clock)
    clock.advance(60)
    same = pl.schedule("job", echo, cron="0  *  * * *", input={"v": 2}, store=store, clock=clock)
    assert same.paused and same.next_fire == first.next_fire and same.input == {"v": 2}
    assert same.created_at == first.created_at and same.updated_at == clock.now()
    other = pl.schedule("job", echo, cron="0 6 * * *", store=store, clock=clock)
    assert iso(other.next_fire) == "2026-01-01T06:00:00Z"
    with pytest.raises(pl.PlayDefinitionError, match=r"Schedule 'job' exists.*replace"):
        pl.schedule("job", echo, cron="0 6 * * *", store=store, replace=False)


def test_the_run_gets_its_input_and_reads_relative_paths_from_where_it_was_added(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "leads.csv").write_text("email\na@x.com\nb@y.com\nc@z.com\n", encoding="utf-8")
    monkeypatch.chdir(data)
    clock = pl.ManualClock(ts("2026-01-01T08:30:00Z"))
    input = {"file": "leads.csv", "tag": "monday"}
    pl.schedule("leads", count_leads, cron="0 9 * * *", input=input, store=store, clock=clock)
    elsewhere = tmp_path / "worker"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the worker runs somewhere else
    clock.advance(30 * 60)
    with pl.Worker(store=store, clock=clock) as worker:
        [result] = burst(worker)
    assert result.status == "completed", result.error
    assert result.output == {"rows": 3, "tag": "monday"}
    run = store.get_run(result.run_id)
    assert run is not None and run.status is RunStatus.COMPLETED and run.input == input


def test_a_waiting_worker_wakes_for_the_next_fire_not_its_interval(store: Store) -> None:
    """With an interval of a day, the runs still start at 01:00 and 02:00 exactly."""
    clock = pl.ManualClock(ts("2026-01-01T00:30:00Z"))
    pl.schedule("hourly", echo, cron="0 * * * *", store=store, clock=clock)
    started: list[float] = []

    def stop_after_two(event: pl.Event) -> None:
        if event.kind == "run" and event.status == "running":
            started.append(clock.now())
            if len(started) == 2:
                worker.stop()

    with pl.Worker(store=store, clock=clock, interval=DAY, listeners=[stop_after_two]) as worker:
        results = asyncio.run(worker.run())
    assert [r.status for r in results] == ["completed", "completed"]
    assert [iso(at) for at in started] == ["2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"cron": "0 9 * *"}, r"has 4 fields; give five"),
        ({"cron": "0 0 9 * * MON"}, r"has 6 fields; give five"),
        ({"cron": "61 * * * *"}, r"is not a cron expression.*\"0 9 \* \* MON\""),
        ({"cron": "0 9 31 2 *"}, r"never fires"),
        ({"cron": "0 9 1-0 * *"}, r"the range 1-0 of its day-of-month field runs backwards"),
        ({"cron": "0 17-9/2 * * *"}, r"the range 17-9 of its hour field runs backwards"),
        ({"cron": "@every"}, r"give one of @yearly"),
        ({"cron": ""}, r"needs a cron expression"),
        ({"timezone": "Mars/Olympus"}, r"not a known timezone.*Europe/Paris"),
        ({"timezone": "../../etc/passwd"}, r"not a known timezone"),
        ({"timezone": ""}, r"IANA timezone"),
        ({"catch_up": "some"}, r"catch_up='some': give one of skip, one, all"),
        ({"name": "has space"}, r"Schedule name 'has space'"),
        ({"name": "a/b"}, r"Schedule name 'a/b'"),
        ({"name": ""}, r"Schedule name ''"),
        ({"play": 42}, r"play=42 is not a play"),
        ({"play": "no-such-play"}, r"No play named 'no-such-play'"),
        ({"input": {"when": object()}}, r"input of schedule"),
    ],
)
def test_a_bad_schedule_is_refused_saying_what_to_do(
    store: Store, given: dict[str, Any], message: str
) -> None:
    args: dict[str, Any] = {"name": "job", "play": echo, "cron": "0 9 * * MON", **given}
    with pytest.raises(pl.PlayDefinitionError, match=message):
        pl.schedule(args.pop("name"), args.pop("play"), store=store, **args)
    assert store.list_schedules() == []


def test_a_sync_function_is_not_a_play(store: Store) -> None:
    def not_async(ctx: Any, input: Any) -> None:
        return None

    with pytest.raises(pl.PlayDefinitionError, match="async"):
        pl.schedule("job", not_async, cron="0 9 * * *", store=store)


def test_a_schedule_that_cannot_fire_is_skipped_and_the_others_fire(store: Store) -> None:
    clock = pl.ManualClock(ts("2026-01-01T00:30:00Z"))
    good = pl.schedule("good", echo, cron="0 * * * *", store=store, clock=clock)
    # written by hand: a timezone this machine's zone database does not know
    store.save_schedule(replace(good, name="bad", timezone="Nowhere/Land"), replace=False)
    clock.advance(HOUR)
    with pl.Worker(store=store, clock=clock) as worker:
        assert [r.run_id for r in burst(worker)] == ["sched-good-20260101T010000Z"]
    assert "Nowhere/Land" in worker.skipped["schedule bad"]


def test_a_schedule_whose_run_has_not_started_queues_no_other_until_it_does(
    store: Store,
) -> None:
    """A worker that cannot load the play (its file gone) leaves the run queued: the next
    fires queue nothing (one run waits, not one per fire) and say why; once a worker runs
    it, the schedule fires as before. ``catch_up="all"`` queues every fire."""
    clock = pl.ManualClock(ts("2026-01-01T00:30:00Z"))
    pl.schedule("hourly", echo, cron="0 * * * *", store=store, clock=clock)
    pl.schedule("every", echo, cron="0 * * * *", catch_up="all", store=store, clock=clock)

    def gone(record: Any) -> Any:
        raise pl.PlayDefinitionError("No play file weekly.py")

    with pl.Worker(store=store, clock=clock, resolve=gone) as lost:
        for _ in range(3):
            clock.advance(HOUR)
            assert burst(lost) == []
    assert fired(store) == [
        ("2026-01-01T01:00:00Z", "suspended"),  # hourly's first fire, and every's three
        ("2026-01-01T01:00:00Z", "suspended"),
        ("2026-01-01T02:00:00Z", "suspended"),
        ("2026-01-01T03:00:00Z", "suspended"),
    ]
    assert "sched-hourly-20260101T010000Z has not started" in lost.skipped["schedule hourly"]
    assert "schedule every" not in lost.skipped

    with pl.Worker(store=store, clock=clock) as worker:
        assert len(burst(worker)) == 4
        clock.advance(HOUR)
        assert sorted(r.run_id for r in burst(worker)) == [
            "sched-every-20260101T040000Z",
            "sched-hourly-20260101T040000Z",
        ]
