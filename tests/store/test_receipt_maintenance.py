"""What `playline cache stats|clear` needs from a store: receipt counts, and clearing them."""

from __future__ import annotations

from playline.store import Claim, Store, owner_id

ME = owner_id("me")
NOW = 1_000.0


def _claim(store: Store, tool: str, *keys: str) -> None:
    store.claim_receipts(
        [Claim(key=k, tool=tool, run_id="r1") for k in keys],
        owner=ME,
        lease_until=NOW + 60,
        now=NOW,
    )


def _fill(store: Store) -> None:
    _claim(store, "email", "e1", "e2", "e3")
    _claim(store, "company", "c1", "c2")
    store.complete_receipts(
        [("e1", b'{"a":1}'), ("e2", b"{}"), ("c1", b"[1,2]")], owner=ME, now=NOW
    )
    store.fail_receipts([("c2", "boom")], owner=ME, now=NOW)  # e3 stays running


def test_receipt_stats_count_by_tool_and_status(store: Store) -> None:
    assert store.receipt_stats() == {}
    _fill(store)
    assert store.receipt_stats() == {
        "email": {"completed": 2, "failed": 0, "running": 1, "bytes": 9},
        "company": {"completed": 1, "failed": 1, "running": 0, "bytes": 5},
    }


def test_clear_one_tool_keeps_the_others_and_running_receipts(store: Store) -> None:
    _fill(store)
    assert store.clear_receipts("company") == 2
    assert set(store.receipt_stats()) == {"email"}
    assert store.clear_receipts() == 2  # e1, e2; e3 is running: its owner will complete it
    assert store.receipt_stats() == {
        "email": {"completed": 0, "failed": 0, "running": 1, "bytes": 0}
    }
    assert store.find_receipts(["e1", "e3"]).keys() == {"e3"}


def test_clear_unknown_tool_deletes_nothing(store: Store) -> None:
    _fill(store)
    assert store.clear_receipts("nope") == 0
    assert sum(s["completed"] for s in store.receipt_stats().values()) == 3
