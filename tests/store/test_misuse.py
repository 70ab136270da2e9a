"""Misuse: every store answers the same call with the same StoreError (never a KeyError), and
a call about something that does not exist neither raises nor writes."""

from __future__ import annotations

import pytest

from playline.errors import StoreError
from playline.store import (
    Boundary,
    Completion,
    Failure,
    RunEnd,
    RunRecord,
    RunStatus,
    Store,
)
from playline.store._messages import lost_run, never_claimed

from storehelp import FAR, LEASE, ME, NOW, claim


def test_ending_an_attempt_of_an_unknown_run(store: Store) -> None:
    with pytest.raises(StoreError) as caught:
        store.end_attempt("nope", holder=ME, end=RunEnd(status=RunStatus.FAILED), now=NOW)
    assert str(caught.value) == lost_run("nope", None)
    assert store.get_run("nope") is None


def test_ending_an_attempt_that_lost_its_run(store: Store) -> None:
    held = RunRecord(run_id="r", play="p", status=RunStatus.RUNNING, holder=FAR, lease_until=LEASE)
    store.create_run(held)
    with pytest.raises(StoreError) as caught:
        store.end_attempt("r", holder=ME, end=RunEnd(status=RunStatus.COMPLETED), now=NOW)
    assert str(caught.value) == lost_run("r", held)
    assert store.get_run("r") == held


def test_completing_receipts_never_claimed(store: Store) -> None:
    keys = [f"ghost{i}" for i in range(7)]
    with pytest.raises(StoreError) as caught:
        store.complete_receipts([Completion(key=k, result=b"1") for k in keys], owner=ME, now=NOW)
    assert str(caught.value) == never_claimed(keys)
    assert "..." in str(caught.value)
    assert store.find_receipts(keys) == {}


def test_calls_about_what_does_not_exist_neither_raise_nor_write(store: Store) -> None:
    claim(store, "k")
    before = store.find_receipts(["k"])
    store.fail_receipts([Failure(key="ghost", error="x")], owner=ME, now=NOW)
    store.save_jobs([("ghost", b"1")], owner=ME)
    store.release_receipts(["ghost"], owner=ME)
    assert store.find_receipts(["k", "ghost"]) == before
    assert store.request_stop("nope") is False
    assert store.renew_runs("nobody/1/x", lease_until=LEASE) == []
    assert store.child_runs("nope") == []
    assert store.load_rows("nope", "d", ["a"]) == {}
    assert list(store.iter_rows("nope", "d")) == []
    assert store.datasets("nope") == []
    assert store.read_events("nope", after_seq=5, kinds=["x"], limit=3) == []
    assert store.read_ledger("nope") == []
    assert store.spent("nope") == 0.0
    assert store.get_boundary("nope") is None
    wait = Boundary(key="w", run_id="r", kind="event", status="waiting")
    assert store.deliver_event("nope", wait) is None
    assert store.get_boundary("w") is None
    assert store.waiting_events(["nope"]) == set()
    assert store.list_runs() == []
    assert store.due_runs(now=NOW) == []
    assert set(store.receipt_stats()) == {"email"}
