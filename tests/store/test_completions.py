"""Completing, failing, releasing receipts and recording their jobs; a paid result and its
charge are written together, and a receipt's generation is charged once."""

from __future__ import annotations

import pytest

from playline.errors import StoreError
from playline.store import Claim, ClaimOutcome, Completion, Failure, ReceiptStatus, Store
from playline.store._messages import never_claimed

from storehelp import FAR, LEASE, ME, NOW, OTHER, charge, claim, complete, fail


def test_complete_keeps_another_owners_result(store: Store) -> None:
    claim(store, "k", owner=FAR)
    claim(store, "k", owner=ME, now=LEASE + 1)  # FAR's lease expired; ME took over
    assert complete(store, ("k", b'"mine"'), owner=ME, now=LEASE + 2) == {}
    kept = complete(store, ("k", b'"late"'), owner=FAR, now=LEASE + 3)
    assert kept == {"k": b'"mine"'}
    receipt = store.find_receipts(["k"])["k"]
    assert (receipt.result, receipt.owner, receipt.updated_at) == (b'"mine"', ME, LEASE + 2)


def test_complete_replaces_a_running_or_own_result(store: Store) -> None:
    claim(store, "k", "j")
    assert complete(store, ("k", b"1"), ("j", b"2")) == {}
    assert complete(store, ("k", b"3"), now=NOW + 1) == {}
    got = store.find_receipts(["k", "j"])
    assert (got["k"].result, got["j"].result) == (b"3", b"2")
    assert got["k"].status is ReceiptStatus.COMPLETED and got["k"].error is None
    assert (got["k"].lease_until, got["k"].updated_at) == (None, NOW + 1)


def test_completing_an_unclaimed_receipt_raises_and_writes_nothing(store: Store) -> None:
    claim(store, "k")
    with pytest.raises(StoreError) as caught:
        store.complete_receipts(
            [
                Completion(key="k", result=b"1", charge=charge("k")),
                Completion(key="ghost", result=b"2", charge=charge("ghost")),
            ],
            owner=ME,
            now=NOW + 1,
        )
    assert str(caught.value) == never_claimed(["ghost"])
    assert store.find_receipts(["k"])["k"].status is ReceiptStatus.RUNNING
    assert store.find_receipts(["ghost"]) == {}
    assert store.read_ledger("r1") == []


def test_a_completion_writes_its_charge_with_it(store: Store) -> None:
    claim(store, "paid", "free")
    entry = charge("paid", 1.5)
    store.complete_receipts(
        [Completion(key="paid", result=b'{"ok":1}', charge=entry), Completion("free", b"{}")],
        owner=ME,
        now=NOW,
    )
    assert store.find_receipts(["paid"])["paid"].status is ReceiptStatus.COMPLETED
    assert store.read_ledger("r1") == [entry]


def test_a_generation_is_charged_once_however_often_it_is_completed(store: Store) -> None:
    claim(store, "k")
    first = charge("k", 2.0)
    for owner in (ME, ME, OTHER):
        store.complete_receipts(
            [Completion(key="k", result=b"1", charge=first)], owner=owner, now=NOW
        )
    store.fail_receipts([Failure(key="k", error="x", charge=first)], owner=ME, now=NOW)
    assert store.read_ledger("r1") == [first]
    [forced] = claim(store, "k", force=True, now=NOW + 1)
    assert forced.receipt.generation == 2
    second = charge("k", 3.0, generation=2)
    for _ in range(2):
        store.complete_receipts(
            [Completion(key="k", result=b"2", charge=second)], owner=ME, now=NOW + 2
        )
    assert store.read_ledger("r1") == [first, second]
    assert store.spent("r1") == 5.0


def test_fail_only_touches_own_running_receipts(store: Store) -> None:
    claim(store, "mine", "done")
    claim(store, "theirs", owner=FAR)
    complete(store, ("done", b"1"))
    fail(store, ("mine", "boom"), ("theirs", "boom"), ("done", "boom"), ("ghost", "boom"))
    got = store.find_receipts(["mine", "theirs", "done", "ghost"])
    assert got["mine"].status is ReceiptStatus.FAILED and got["mine"].error == "boom"
    assert got["mine"].lease_until is None
    assert got["theirs"].status is ReceiptStatus.RUNNING
    assert got["done"].status is ReceiptStatus.COMPLETED and got["done"].error is None
    assert "ghost" not in got


def test_a_charged_failure_is_in_the_ledger(store: Store) -> None:
    claim(store, "k")
    entry = charge("k", 0.5)
    store.fail_receipts([Failure(key="k", error="unusable", charge=entry)], owner=ME, now=NOW)
    assert store.find_receipts(["k"])["k"].status is ReceiptStatus.FAILED
    assert store.read_ledger("r1") == [entry]


def test_release(store: Store) -> None:
    claim(store, "fresh", "retried")
    fail(store, ("retried", "boom"))
    claim(store, "retried", now=NOW + 1)
    claim(store, "theirs", owner=FAR)
    store.release_receipts(["fresh", "retried", "theirs", "unknown"], owner=ME)
    got = store.find_receipts(["fresh", "retried", "theirs"])
    assert "fresh" not in got  # never sent anywhere: forgotten
    assert got["retried"].status is ReceiptStatus.FAILED
    assert got["retried"].error == "released before it was sent"
    assert got["retried"].lease_until is None
    assert got["theirs"].status is ReceiptStatus.RUNNING
    [again] = claim(store, "fresh", owner=OTHER)
    assert again.outcome is ClaimOutcome.OWNED and again.receipt.attempt == 1


def test_a_submitted_job_is_kept_through_release_and_reclaim(store: Store) -> None:
    claim(store, "job", "other-owner")
    store.save_jobs([("job", b'"job_1"'), ("other-owner", b'"job_2"')], owner=ME)
    store.save_jobs([("other-owner", b'"job_x"')], owner=OTHER)  # not its receipt: ignored
    assert store.find_receipts(["job"])["job"].job == b'"job_1"'
    store.release_receipts(["job"], owner=ME)  # paid for at submission: never forgotten
    [again] = claim(store, "job", owner=OTHER, now=NOW + 1)
    assert again.outcome is ClaimOutcome.OWNED
    assert again.receipt.job == b'"job_1"'
    assert store.find_receipts(["other-owner"])["other-owner"].job == b'"job_2"'
    store.save_jobs([("other-owner", None)], owner=ME)
    assert store.find_receipts(["other-owner"])["other-owner"].job is None


def test_results_and_claims_are_written_in_one_transaction(store: Store) -> None:
    """Group commit: the results of requests that answered and the claims of the next ones
    go together, results first, and return what each would alone."""
    claim(store, "done", "failed", "shared")
    kept, claimed = store.write_receipts(
        completions=[Completion(key="done", result=b"1", charge=charge("done"))],
        failures=[Failure(key="failed", error="503")],
        claims=[Claim(key=k, tool="email", run_id="r1") for k in ("next", "done", "failed")],
        owner=ME,
        now=NOW + 1,
        lease_until=NOW + 61,
    )
    assert kept == {}
    # a key completed in this transaction answers its claim; a failed one is claimed again
    assert [c.outcome for c in claimed] == [
        ClaimOutcome.OWNED,
        ClaimOutcome.COMPLETED,
        ClaimOutcome.OWNED,
    ]
    got = store.find_receipts(["done", "failed", "next", "shared"])
    assert got["done"].result == b"1" and got["done"].status is ReceiptStatus.COMPLETED
    assert got["next"].status is ReceiptStatus.RUNNING and got["next"].lease_until == NOW + 61
    assert got["shared"].status is ReceiptStatus.RUNNING  # untouched
    assert [e.receipt_key for e in store.read_ledger("r1")] == ["done"]


def test_a_group_commit_that_fails_writes_none_of_its_parts(store: Store) -> None:
    claim(store, "k")
    with pytest.raises(StoreError) as caught:
        store.write_receipts(
            completions=[
                Completion(key="k", result=b"1", charge=charge("k")),
                Completion(key="ghost", result=b"2"),
            ],
            claims=[Claim(key="next", tool="email", run_id="r1")],
            owner=ME,
            now=NOW + 1,
            lease_until=NOW + 61,
        )
    assert str(caught.value) == never_claimed(["ghost"])
    assert store.find_receipts(["k"])["k"].status is ReceiptStatus.RUNNING
    assert store.find_receipts(["next"]) == {}
    assert store.read_ledger("r1") == []


def test_a_key_completed_twice_in_one_batch(store: Store) -> None:
    """The owner's second result replaces its first; a late owner's first result is
    written to the receipt another took over, and its second then keeps that one."""
    claim(store, "k")
    assert complete(store, ("k", b"1"), ("k", b"2"), now=NOW + 1) == {}
    assert store.find_receipts(["k"])["k"].result == b"2"
    claim(store, "j", owner=FAR)
    claim(store, "j", owner=ME, now=LEASE + 1)  # FAR's lease expired; ME took it over
    assert complete(store, ("j", b'"a"'), ("j", b'"b"'), owner=FAR, now=LEASE + 2) == {"j": b'"a"'}
    receipt = store.find_receipts(["j"])["j"]
    assert (receipt.status, receipt.result, receipt.owner) == (
        ReceiptStatus.COMPLETED,
        b'"a"',
        ME,
    )
