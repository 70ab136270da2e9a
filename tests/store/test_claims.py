"""Claims of receipts: what each state answers (the rules of ``_claims.py``), the lease an owner
renews, and reading receipts without claiming them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from playline.store import ClaimOutcome, Failure, ReceiptStatus, Store
from playline.store._claims import IN_DOUBT_MESSAGE

from storehelp import FAR, FAR2, LEASE, ME, NOW, OTHER, claim, complete, dead_owner, fail


def test_fresh_claim_is_owned(store: Store) -> None:
    [result] = claim(store, "k", request="req-1")
    assert (result.outcome, result.resent) == (ClaimOutcome.OWNED, False)
    r = result.receipt
    assert (r.key, r.tool, r.status, r.owner, r.run_id, r.attempt, r.lease_until) == (
        "k",
        "email",
        ReceiptStatus.RUNNING,
        ME,
        "r1",
        1,
        LEASE,
    )
    assert (r.generation, r.request, r.job, r.result, r.error) == (1, "req-1", None, None, None)
    assert store.find_receipts(["k"])["k"] == r


def test_completed_receipt_is_returned(store: Store) -> None:
    claim(store, "k")
    assert complete(store, ("k", b'{"email":"a@b.c"}'), now=NOW + 1) == {}
    [result] = claim(store, "k", owner=OTHER, now=NOW + 2)
    assert result.outcome is ClaimOutcome.COMPLETED
    assert result.receipt.status is ReceiptStatus.COMPLETED
    assert result.receipt.result == b'{"email":"a@b.c"}'
    assert result.receipt.lease_until is None
    assert result.receipt.updated_at == NOW + 1
    assert store.find_receipts(["k"])["k"] == result.receipt  # nothing written


def test_failed_receipt_is_owned_again(store: Store) -> None:
    claim(store, "k")
    fail(store, ("k", "HTTP 500"), now=NOW + 1)
    failed = store.find_receipts(["k"])["k"]
    assert (failed.status, failed.error, failed.lease_until) == (
        ReceiptStatus.FAILED,
        "HTTP 500",
        None,
    )
    [result] = claim(store, "k", owner=OTHER, now=NOW + 2)
    assert (result.outcome, result.resent) == (ClaimOutcome.OWNED, False)
    r = result.receipt
    assert (r.attempt, r.owner, r.error, r.generation) == (2, OTHER, None, 1)


def test_force_buys_a_completed_receipt_again(store: Store) -> None:
    claim(store, "k")
    store.save_jobs([("k", b'"job"')], owner=ME)
    complete(store, ("k", b"1"))
    [result] = claim(store, "k", owner=OTHER, run_id="r2", force=True, now=NOW + 1)
    assert result.outcome is ClaimOutcome.OWNED
    r = result.receipt
    assert (r.status, r.attempt, r.generation, r.job) == (ReceiptStatus.RUNNING, 2, 2, None)
    complete(store, ("k", b"2"), owner=OTHER, now=NOW + 2)
    assert store.find_receipts(["k"])["k"].result == b"2"


def test_force_buys_again_once_per_run_not_once_per_attempt(store: Store) -> None:
    claim(store, "k", run_id="r0")
    complete(store, ("k", b"old"))
    [bought] = claim(store, "k", force=True, now=NOW + 1)  # run r1's first attempt buys it
    assert (bought.outcome, bought.receipt.generation) == (ClaimOutcome.OWNED, 2)
    complete(store, ("k", b"new"), now=NOW + 2)
    [again] = claim(store, "k", force=True, now=NOW + 3)  # the same attempt asks again: bought
    assert (again.outcome, again.receipt.generation) == (ClaimOutcome.OWNED, 3)
    complete(store, ("k", b"newer"), now=NOW + 4)

    [resumed] = claim(store, "k", owner=OTHER, force=True, now=NOW + 5)  # r1's next attempt
    assert (resumed.outcome, resumed.receipt.result) == (ClaimOutcome.COMPLETED, b"newer")

    claim(store, "j", force=True, run_id="r2", owner=dead_owner())  # killed mid-call
    [resent] = claim(store, "j", owner=OTHER, force=True, run_id="r2", now=NOW + 5)
    assert (resent.outcome, resent.resent, resent.receipt.generation) == (
        ClaimOutcome.OWNED,
        True,  # sent again with the key of the purchase the kill cut off: not paid twice
        1,
    )


def test_live_lease_of_another_owner_is_held(store: Store) -> None:
    [theirs] = claim(store, "k", owner=FAR)
    [result] = claim(store, "k", owner=ME, now=NOW + 1)
    assert (result.outcome, result.receipt) == (ClaimOutcome.HELD, theirs.receipt)
    assert store.find_receipts(["k"])["k"] == theirs.receipt
    [again] = claim(store, "k", owner=FAR, now=NOW + 1)  # the owner itself may claim again
    assert again.outcome is ClaimOutcome.OWNED and again.receipt.attempt == 2


# in doubt: the request may have reached the provider


@pytest.mark.parametrize("gone", ["expired lease", "dead process", "ended attempt"])
def test_a_running_receipt_whose_owner_is_gone_is_resent_under_its_key(
    store: Store, gone: str
) -> None:
    if gone == "expired lease":
        owner, now = FAR, LEASE + 1
    else:
        owner, now = (dead_owner() if gone == "dead process" else OTHER), NOW + 1
    claim(store, "k", owner=owner)
    store.save_jobs([("k", b'"job_1"')], owner=owner)
    [result] = claim(store, "k", owner=ME, now=now)
    assert (result.outcome, result.resent) == (ClaimOutcome.OWNED, True)
    r = result.receipt
    assert (r.owner, r.attempt, r.generation, r.job) == (ME, 2, 1, b'"job_1"')
    assert store.find_receipts(["k"])["k"] == r


def test_in_doubt_without_resend_or_retry_is_refused_and_becomes_unknown(store: Store) -> None:
    claim(store, "k", owner=FAR)
    [result] = claim(store, "k", owner=ME, now=LEASE + 1, resend=False)
    assert result.outcome is ClaimOutcome.IN_DOUBT
    r = result.receipt
    assert (r.status, r.owner, r.lease_until, r.error, r.generation, r.attempt) == (
        ReceiptStatus.UNKNOWN,
        FAR,
        None,
        IN_DOUBT_MESSAGE,
        1,
        1,
    )
    assert store.find_receipts(["k"])["k"] == r
    [again] = claim(store, "k", owner=OTHER, now=LEASE + 2, resend=False)
    assert again.outcome is ClaimOutcome.IN_DOUBT
    assert replace(again.receipt, updated_at=r.updated_at) == r
    assert store.find_receipts(["k"])["k"] == r  # already unknown: nothing written


def test_retry_in_doubt_buys_again_as_a_new_generation(store: Store) -> None:
    claim(store, "k", owner=FAR)
    store.save_jobs([("k", b'"job_1"')], owner=FAR)
    [result] = claim(store, "k", owner=ME, now=LEASE + 1, resend=False, retry_in_doubt=True)
    assert (result.outcome, result.resent) == (ClaimOutcome.OWNED, False)
    r = result.receipt
    assert (r.status, r.owner, r.generation, r.attempt, r.job) == (
        ReceiptStatus.RUNNING,
        ME,
        2,
        2,
        None,
    )


def test_a_receipt_failed_in_doubt_is_unknown(store: Store) -> None:
    claim(store, "k")
    store.fail_receipts([Failure(key="k", error="timed out", in_doubt=True)], owner=ME, now=NOW)
    r = store.find_receipts(["k"])["k"]
    assert (r.status, r.error, r.lease_until) == (ReceiptStatus.UNKNOWN, "timed out", None)
    [refused] = claim(store, "k", owner=OTHER, now=NOW + 1, resend=False)
    assert refused.outcome is ClaimOutcome.IN_DOUBT and refused.receipt.error == "timed out"
    [resent] = claim(store, "k", owner=OTHER, now=NOW + 1)
    assert (resent.outcome, resent.resent, resent.receipt.generation) == (
        ClaimOutcome.OWNED,
        True,
        1,
    )
    [forced] = claim(store, "k", owner=FAR, run_id="r2", now=LEASE + 99, force=True)
    assert (forced.outcome, forced.resent, forced.receipt.generation) == (
        ClaimOutcome.OWNED,
        False,
        2,
    )


def test_a_lost_job_is_bought_again(store: Store) -> None:
    claim(store, "k")
    store.save_jobs([("k", b'"job_1"')], owner=ME)
    store.fail_receipts(
        [Failure(key="k", error="the provider lost the job", rebuy=True)], owner=ME, now=NOW
    )
    r = store.find_receipts(["k"])["k"]
    assert (r.status, r.generation, r.job) == (ReceiptStatus.FAILED, 2, None)
    [again] = claim(store, "k", owner=OTHER, now=NOW + 1)
    assert (again.outcome, again.receipt.generation, again.receipt.job) == (
        ClaimOutcome.OWNED,
        2,
        None,
    )


def test_a_lost_result_is_bought_again_only_when_asked(store: Store) -> None:
    """An async job's result expired at the provider: paid, and gone. A later claim fails
    with the cause; one that asks (retry_failed, or force) buys its next generation."""
    claim(store, "k")
    store.save_jobs([("k", b'"job_1"')], owner=ME)
    gone = Failure(key="k", error="the result of job_1 expired", rebuy=True, lost=True)
    store.fail_receipts([gone], owner=ME, now=NOW)
    r = store.find_receipts(["k"])["k"]
    assert (r.status, r.generation, r.job) == (ReceiptStatus.LOST, 2, None)
    [again] = claim(store, "k", owner=OTHER, now=NOW + 1)
    assert (again.outcome, again.receipt.error) == (ClaimOutcome.LOST, gone.error)
    [asked] = claim(store, "k", owner=OTHER, now=NOW + 2, retry_failed=True)
    assert (asked.outcome, asked.receipt.generation) == (ClaimOutcome.OWNED, 2)


# batches


def test_claim_results_align_with_claims(store: Store) -> None:
    claim(store, "done")
    complete(store, ("done", b"{}"))
    claim(store, "held", owner=FAR)
    keys = ["new", "done", "held", "new2"]
    results = claim(store, *keys, owner=OTHER, now=NOW + 1)
    assert [r.receipt.key for r in results] == keys
    assert [r.outcome for r in results] == [
        ClaimOutcome.OWNED,
        ClaimOutcome.COMPLETED,
        ClaimOutcome.HELD,
        ClaimOutcome.OWNED,
    ]


def test_claims_beyond_one_chunk(store: Store) -> None:
    keys = [f"k{i}" for i in range(1234)]
    assert all(r.outcome is ClaimOutcome.OWNED for r in claim(store, *keys, owner=FAR))
    complete(store, *[(k, k.encode()) for k in keys[::2]], owner=FAR)
    results = claim(store, *reversed(keys), owner=FAR2, now=NOW + 1)
    by_key = {r.receipt.key: r.outcome for r in results}
    assert by_key["k0"] is ClaimOutcome.COMPLETED
    assert by_key["k1"] is ClaimOutcome.HELD
    assert sum(o is ClaimOutcome.COMPLETED for o in by_key.values()) == 617
    got = store.find_receipts(keys)
    assert list(got) == keys
    assert got["k1232"].result == b"k1232"


def test_find_receipts_skips_missing_and_keeps_order(store: Store) -> None:
    claim(store, "a", "b", "c")
    assert list(store.find_receipts(["c", "missing", "a", "c"])) == ["c", "a"]
    assert store.find_receipts([]) == {}
    assert store.find_receipts(["missing"]) == {}


# leases


def test_renew_receipts_extends_the_owners_running_receipts(store: Store) -> None:
    claim(store, "a", "b", "done")
    complete(store, ("done", b"1"))
    claim(store, "theirs", owner=FAR)
    assert store.renew_receipts(ME, lease_until=LEASE + 500) == 2
    got = store.find_receipts(["a", "b", "done", "theirs"])
    assert [got[k].lease_until for k in ("a", "b", "done", "theirs")] == [
        LEASE + 500,
        LEASE + 500,
        None,
        LEASE,
    ]
    assert store.renew_receipts("nobody/1/x", lease_until=LEASE) == 0


def test_find_answers_reads_the_completed_receipts_only(store: Store) -> None:
    """The lookup every call makes first: what a completed receipt answers, when it was
    bought and by which run; running, failed and unknown keys are not answers."""
    claim(store, "done", "running", "failed", run_id="r7")
    complete(store, ("done", b'{"ok":true}'), now=NOW + 1)
    fail(store, ("failed", "400 bad input"))
    answers = store.find_answers(["done", "running", "failed", "missing", "done"])
    assert answers == {"done": (b'{"ok":true}', NOW + 1, "r7")}
    assert isinstance(answers["done"].result, bytes)


def test_new_keys_claimed_with_stored_ones_get_one_receipt_each(store: Store) -> None:
    """A batch that mixes new keys with keys that have receipts (a resume's): each new key
    is owned once, with the receipt its last claim in the batch made; the others are
    answered from what is stored."""
    claim(store, "done")
    complete(store, ("done", b"1"))
    claim(store, "held", owner=FAR)
    results = claim(store, "new", "done", "new", "held", "new2", owner=OTHER, now=NOW + 1)
    assert [r.outcome for r in results] == [
        ClaimOutcome.OWNED,
        ClaimOutcome.COMPLETED,
        ClaimOutcome.OWNED,
        ClaimOutcome.HELD,
        ClaimOutcome.OWNED,
    ]
    got = store.find_receipts(["new", "done", "held", "new2"])
    assert got["new"] == results[2].receipt
    assert (got["new"].owner, got["new2"].owner, got["held"].owner) == (OTHER, OTHER, FAR)
    assert got["new2"] == results[4].receipt
    assert got["done"].result == b"1"


def test_an_in_doubt_job_is_polled_again_even_when_its_tool_would_not_recognise_a_repeat(
    store: Store,
) -> None:
    """A submit that may have been paid is never sent again blindly, but the job the provider
    accepted can be polled: a poll is free, and tells what the submit bought."""
    claim(store, "k")
    store.save_jobs([("k", b'"job_1"')], owner=ME)
    store.fail_receipts(
        [Failure(key="k", error="polls throttled", in_doubt=True)], owner=ME, now=NOW
    )
    [polled] = claim(store, "k", owner=OTHER, now=NOW + 1, resend=False)
    assert (polled.outcome, polled.resent) == (ClaimOutcome.OWNED, True)
    r = polled.receipt
    assert (r.status, r.owner, r.generation, r.job) == (ReceiptStatus.RUNNING, OTHER, 1, b'"job_1"')
