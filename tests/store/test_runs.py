"""Runs: records, the lease one attempt holds, stop requests, and which suspended runs are due."""

from __future__ import annotations

import pytest

from playline.errors import StoreError
from playline.store import Boundary, RunClaimOutcome, RunEnd, RunRecord, RunStatus, Store

from storehelp import FAR, FAR2, LEASE, ME, NOW, OTHER, dead_owner, run


def test_create_get_and_list_runs(store: Store) -> None:
    assert store.get_run("nope") is None
    for i in range(3):
        assert store.create_run(
            RunRecord(
                run_id=f"r{i}",
                play="find_emails",
                status=RunStatus.RUNNING,
                input={"n": i, "list": [1, "two", None]},
                stats={"rows": i},
                created_at=100.0 + i,
                updated_at=100.0 + i,
                parent_run_id="parent" if i else None,
            )
        )
    got = store.get_run("r1")
    assert got is not None
    assert got.status is RunStatus.RUNNING
    assert got.input == {"n": 1, "list": [1, "two", None]}
    assert got.output is None and got.waiting is None and got.error is None
    assert got.stats == {"rows": 1}
    assert got.parent_run_id == "parent"
    assert (got.holder, got.lease_until, got.attempts, got.stop_requested) == (None, None, 0, False)
    assert (got.counters, got.options) == ({}, {})
    assert [r.run_id for r in store.list_runs()] == ["r2", "r1", "r0"]
    assert [r.run_id for r in store.list_runs(limit=2)] == ["r2", "r1"]


def test_every_field_of_a_run_is_kept(store: Store) -> None:
    record = run(
        "r",
        RunStatus.RUNNING,
        play="p",
        input=[1, {"a": None}],
        output={"emails": 2},
        error="partial",
        stats={"calls": 3},
        created_at=1.5,
        updated_at=2.5,
        parent_run_id="root",
        waiting={"wake_at": 5.0, "events": ["approve"]},
        holder=FAR,
        lease_until=9.5,
        attempts=3,
        stop_requested=True,
        counters={"run": {"calls": 2}, "tree": {"calls": 5}},
        options={"max_credits": 10.5},
    )
    store.create_run(record)
    assert store.get_run("r") == record
    assert record.wake_at == 5.0 and record.awaited_events == ["approve"]


def test_create_run_refuses_an_existing_id(store: Store) -> None:
    first = run("r", RunStatus.RUNNING, play="first", holder=FAR, lease_until=LEASE)
    assert store.create_run(first) is True
    assert store.create_run(run("r", RunStatus.COMPLETED, play="second")) is False
    assert store.get_run("r") == first


def test_list_runs_filters(store: Store) -> None:
    store.create_run(run("a", RunStatus.COMPLETED, play="p", created_at=1.0))
    store.create_run(run("b", RunStatus.FAILED, play="p", created_at=2.0))
    store.create_run(run("c", RunStatus.COMPLETED, play="q", created_at=3.0))
    store.create_run(run("c/1", RunStatus.COMPLETED, play="p", created_at=4.0, parent_run_id="c"))

    def ids(**filters: object) -> list[str]:
        return [r.run_id for r in store.list_runs(**filters)]  # type: ignore[arg-type]

    assert ids() == ["c/1", "c", "b", "a"]
    assert ids(status=RunStatus.COMPLETED) == ["c/1", "c", "a"]
    assert ids(play="p") == ["c/1", "b", "a"]
    assert ids(roots_only=True) == ["c", "b", "a"]
    assert ids(status=RunStatus.COMPLETED, play="p", roots_only=True) == ["a"]
    assert ids(status=RunStatus.SUSPENDED) == []
    assert ids(play="p", limit=1) == ["c/1"]


def test_child_runs_oldest_first(store: Store) -> None:
    store.create_run(run("p", created_at=1.0))
    store.create_run(run("p/b", created_at=3.0, parent_run_id="p"))
    store.create_run(run("p/a", created_at=2.0, parent_run_id="p"))
    store.create_run(run("p/a/x", created_at=4.0, parent_run_id="p/a"))
    store.create_run(run("q/a", created_at=5.0, parent_run_id="q"))
    assert [r.run_id for r in store.child_runs("p")] == ["p/a", "p/b"]
    assert [r.run_id for r in store.child_runs("p/a")] == ["p/a/x"]
    assert store.child_runs("nobody") == []


# claiming a run


def test_claim_of_an_unknown_run_is_missing(store: Store) -> None:
    claim = store.claim_run("nope", holder=ME, lease_until=LEASE, now=NOW)
    assert (claim.outcome, claim.record) == (RunClaimOutcome.MISSING, None)
    assert store.get_run("nope") is None


def test_claim_owns_a_suspended_run(store: Store) -> None:
    store.create_run(
        run("r", waiting={"wake_at": 5.0}, attempts=1, error="waiting", updated_at=NOW - 9)
    )
    claim = store.claim_run("r", holder=ME, lease_until=LEASE, now=NOW)
    assert claim.outcome is RunClaimOutcome.OWNED and claim.record is not None
    held = claim.record
    assert (held.status, held.holder, held.lease_until, held.attempts) == (
        RunStatus.RUNNING,
        ME,
        LEASE,
        2,
    )
    assert (held.waiting, held.error, held.stop_requested, held.updated_at) == (
        None,
        None,
        False,
        NOW,
    )
    assert store.get_run("r") == held


def test_claim_again_by_its_holder_is_the_same_attempt(store: Store) -> None:
    store.create_run(run("r", RunStatus.RUNNING, holder=ME, lease_until=LEASE, attempts=1))
    claim = store.claim_run("r", holder=ME, lease_until=LEASE + 5, now=NOW)
    assert claim.outcome is RunClaimOutcome.OWNED and claim.record is not None
    assert (claim.record.attempts, claim.record.lease_until) == (1, LEASE + 5)


def test_a_live_holder_elsewhere_keeps_its_run(store: Store) -> None:
    held = run("r", RunStatus.RUNNING, holder=FAR, lease_until=LEASE, attempts=1)
    store.create_run(held)
    claim = store.claim_run("r", holder=ME, lease_until=LEASE + 60, now=NOW + 1)
    assert (claim.outcome, claim.record) == (RunClaimOutcome.HELD, held)
    assert store.get_run("r") == held


def test_an_expired_lease_is_taken_over(store: Store) -> None:
    store.create_run(run("r", RunStatus.RUNNING, holder=FAR, lease_until=LEASE, attempts=1))
    claim = store.claim_run("r", holder=FAR2, lease_until=LEASE + 60, now=LEASE + 1)
    assert claim.outcome is RunClaimOutcome.OWNED and claim.record is not None
    assert (claim.record.holder, claim.record.attempts) == (FAR2, 2)


@pytest.mark.parametrize("holder", ["dead process", "ended attempt"])
def test_a_dead_holder_on_this_host_is_taken_over_under_a_live_lease(
    store: Store, holder: str
) -> None:
    gone = dead_owner() if holder == "dead process" else OTHER
    store.create_run(run("r", RunStatus.RUNNING, holder=gone, lease_until=LEASE, attempts=1))
    claim = store.claim_run("r", holder=ME, lease_until=LEASE, now=NOW + 1)
    assert claim.outcome is RunClaimOutcome.OWNED and claim.record is not None
    assert (claim.record.holder, claim.record.attempts) == (ME, 2)


def test_renew_runs_returns_the_held_runs_with_their_stop_requests(store: Store) -> None:
    for run_id in ("a", "b"):
        store.create_run(run(run_id))
        store.claim_run(run_id, holder=ME, lease_until=LEASE, now=NOW)
    store.create_run(run("c", RunStatus.RUNNING, holder=FAR, lease_until=LEASE))
    store.create_run(run("done", RunStatus.COMPLETED, holder=ME, lease_until=LEASE))
    assert store.request_stop("b")
    renewed = {r.run_id: r for r in store.renew_runs(ME, lease_until=LEASE + 100)}
    assert set(renewed) == {"a", "b"}
    assert [renewed[k].lease_until for k in "ab"] == [LEASE + 100, LEASE + 100]
    assert (renewed["a"].stop_requested, renewed["b"].stop_requested) == (False, True)
    assert store.get_run("a") == renewed["a"]
    c = store.get_run("c")
    assert c is not None and c.lease_until == LEASE
    # ME is not running in this process: another attempt takes "a" over, and ME no longer
    # renews it.
    store.claim_run("a", holder=FAR, lease_until=LEASE, now=NOW + 2)
    assert [r.run_id for r in store.renew_runs(ME, lease_until=LEASE + 200)] == ["b"]
    assert store.renew_runs("nobody/1/x", lease_until=LEASE) == []


def test_end_attempt_writes_how_it_ended_and_releases_the_run(store: Store) -> None:
    store.create_run(run("r", RunStatus.RUNNING, holder=ME, lease_until=LEASE, attempts=2))
    store.request_stop("r")
    end = RunEnd(
        status=RunStatus.COMPLETED,
        output={"emails": 3},
        stats={"calls": 4},
        counters={"run": {"calls": 4}},
    )
    store.end_attempt("r", holder=ME, end=end, now=NOW + 5)
    ended = store.get_run("r")
    assert ended is not None
    assert (ended.status, ended.output, ended.error, ended.stats, ended.counters) == (
        RunStatus.COMPLETED,
        {"emails": 3},
        None,
        {"calls": 4},
        {"run": {"calls": 4}},
    )
    assert (ended.holder, ended.lease_until, ended.stop_requested) == (None, None, False)
    assert (ended.attempts, ended.updated_at, ended.created_at) == (2, NOW + 5, NOW)


def test_end_attempt_refuses_an_attempt_that_lost_its_run(store: Store) -> None:
    store.create_run(run("r"))
    store.claim_run("r", holder=ME, lease_until=LEASE, now=NOW)
    taken = store.claim_run("r", holder=FAR, lease_until=LEASE + 60, now=NOW + 1).record
    end = RunEnd(status=RunStatus.FAILED, error="boom")
    with pytest.raises(StoreError, match="no longer held by this attempt") as caught:
        store.end_attempt("r", holder=ME, end=end, now=NOW + 2)
    assert FAR in str(caught.value)
    assert store.get_run("r") == taken
    with pytest.raises(StoreError, match="not in the store"):
        store.end_attempt("nope", holder=ME, end=end, now=NOW + 2)


def test_request_stop(store: Store) -> None:
    store.create_run(run("running", RunStatus.RUNNING, holder=FAR, lease_until=LEASE))
    store.create_run(run("suspended"))
    assert store.request_stop("running") is True
    stopped = store.get_run("running")
    assert stopped is not None and stopped.stop_requested
    assert store.request_stop("suspended") is False
    assert store.request_stop("nope") is False
    suspended = store.get_run("suspended")
    assert suspended is not None and not suspended.stop_requested
    # the next attempt starts without it
    claim = store.claim_run("running", holder=ME, lease_until=LEASE, now=LEASE + 1)
    assert claim.record is not None and not claim.record.stop_requested


# which runs are due


def _due(store: Store, now: float = NOW, limit: int = 100) -> list[str]:
    return [r.run_id for r in store.due_runs(now=now, limit=limit)]


def test_due_runs_by_wake_time(store: Store) -> None:
    store.create_run(run("late", waiting={"wake_at": NOW - 1}, updated_at=3.0))
    store.create_run(run("now", waiting={"wake_at": NOW}, updated_at=2.0))
    store.create_run(run("later", waiting={"wake_at": NOW + 1}, updated_at=1.0))
    assert _due(store) == ["now", "late"]  # oldest first
    assert _due(store, limit=1) == ["now"]
    assert _due(store, now=NOW + 1) == ["later", "now", "late"]


def test_due_runs_by_events_sent(store: Store) -> None:
    store.create_run(run("waits", waiting={"events": ["approve", "reject"]}, updated_at=2.0))
    store.create_run(
        run("also", waiting={"events": ["approve"], "wake_at": NOW + 9}, updated_at=1.0)
    )
    assert _due(store) == []
    assert store.send_event("reject", b'"no"', now=NOW)
    assert _due(store) == ["waits"]
    assert store.send_event("approve", b'"yes"', now=NOW)
    assert _due(store) == ["also", "waits"]
    # an event handed to its wait no longer wakes anyone
    store.deliver_event("approve", Boundary(key="b1", run_id="also", kind="event", status="x"))
    assert _due(store) == ["waits"]


def test_waits_written_by_end_attempt_are_cleared_by_the_next_one(store: Store) -> None:
    store.create_run(run("r", RunStatus.RUNNING, holder=ME, lease_until=LEASE))
    waiting = {"events": ["go"]}
    store.end_attempt(
        "r", holder=ME, end=RunEnd(status=RunStatus.SUSPENDED, waiting=waiting), now=NOW
    )
    store.send_event("go", b"1", now=NOW)
    assert _due(store) == ["r"]
    store.claim_run("r", holder=ME, lease_until=LEASE, now=NOW)
    assert _due(store) == []  # running
    store.end_attempt("r", holder=ME, end=RunEnd(status=RunStatus.SUSPENDED), now=NOW + 1)
    assert _due(store) == []  # stopped: suspended without a wake time or an event


def test_child_stopped_running_and_finished_runs_are_never_due(store: Store) -> None:
    store.send_event("go", b"1", now=NOW)
    past = {"wake_at": NOW - 1, "events": ["go"]}
    store.create_run(run("root", waiting=past))
    store.create_run(run("root/child", waiting=past, parent_run_id="root"))
    store.create_run(run("stopped"))
    store.create_run(run("running", RunStatus.RUNNING, waiting=past))
    store.create_run(run("done", RunStatus.COMPLETED, waiting=past))
    store.create_run(run("failed", RunStatus.FAILED, waiting=past))
    assert _due(store) == ["root"]


def test_a_claim_writes_the_options_it_is_given_over_the_runs(store: Store) -> None:
    # A budget raised on resume is the run's from the claim on: a kill before the attempt
    # ends does not take it back.
    store.create_run(run("rb", options={"max_credits": 5, "cwd": "/work"}))
    claim = store.claim_run(
        "rb", holder=ME, lease_until=LEASE, now=NOW, options={"max_credits": 12}
    )
    assert claim.outcome is RunClaimOutcome.OWNED and claim.record is not None
    assert claim.record.options == {"max_credits": 12, "cwd": "/work"}
    stored = store.get_run("rb")
    assert stored is not None and stored.options == {"max_credits": 12, "cwd": "/work"}
