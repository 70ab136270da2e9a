"""What `playline cache stats|clear` needs from a store: receipt counts, and clearing them."""

from __future__ import annotations

from playline.store import ClaimOutcome, Failure, ReceiptStatus, Store

from storehelp import ME, NOW, claim, complete, fail


def _fill(store: Store) -> None:
    claim(store, "e1", "e2", "e3", "e4", tool="email")
    claim(store, "c1", "c2", tool="company")
    complete(store, ("e1", b'{"a":1}'), ("e2", b"{}"), ("c1", b"[1,2]"))
    fail(store, ("c2", "boom"))
    store.fail_receipts([Failure(key="e4", error="timeout", in_doubt=True)], owner=ME, now=NOW)
    # e3 stays running


def test_receipt_stats_count_by_tool_and_status(store: Store) -> None:
    assert store.receipt_stats() == {}
    _fill(store)
    assert store.receipt_stats() == {
        "email": {"completed": 2, "failed": 0, "running": 1, "unknown": 1, "lost": 0, "bytes": 9},
        "company": {"completed": 1, "failed": 1, "running": 0, "unknown": 0, "lost": 0, "bytes": 5},
    }


def test_clear_one_tool_keeps_the_others_and_running_and_in_doubt_receipts(
    store: Store,
) -> None:
    _fill(store)
    assert store.clear_receipts("company") == 2
    assert set(store.receipt_stats()) == {"email"}
    # e1, e2; e3 is running: its owner will complete it; e4 is in doubt (it may have been
    # charged): cleared, its next call would be bought again under a new idempotency key
    assert store.clear_receipts() == 2
    assert store.receipt_stats() == {
        "email": {"completed": 0, "failed": 0, "running": 1, "unknown": 1, "lost": 0, "bytes": 0}
    }
    found = store.find_receipts(["e1", "e3", "e4"])
    assert found["e1"].status is ReceiptStatus.CLEARED and found["e1"].result is None
    assert found["e3"].status is ReceiptStatus.RUNNING
    assert found["e4"].status is ReceiptStatus.UNKNOWN and found["e4"].generation == 1
    assert store.find_answers(["e1", "e2", "c1"]) == {}
    assert store.clear_receipts() == 0  # cleared already


def test_clear_unknown_tool_deletes_nothing(store: Store) -> None:
    _fill(store)
    assert store.clear_receipts("nope") == 0
    assert sum(s["completed"] for s in store.receipt_stats().values()) == 3


def test_a_cleared_receipts_next_claim_is_a_new_generation(store: Store) -> None:
    """So its request carries a new idempotency key: a provider that honours keys answers it
    afresh, not with the purchase that was cleared (one lost with its store has no receipt,
    and is sent again under its first key)."""
    _fill(store)
    store.clear_receipts()
    (again,) = claim(store, "e1", run_id="r2")
    assert again.outcome is ClaimOutcome.OWNED and again.receipt.generation == 2
    complete(store, ("e1", b'{"a":2}'))
    assert store.find_answers(["e1"])["e1"].result == b'{"a":2}'
    assert store.receipt_stats()["email"]["completed"] == 1
    store.clear_receipts("email")
    (forced,) = claim(store, "e1", run_id="r3", force=True)  # bought again once, not twice
    assert forced.receipt.generation == 3
