"""The ledger: charges by run, and what a run and its child plays spent."""

from __future__ import annotations

from playline.store import Completion, Failure, LedgerEntry, LedgerTotals, Store

from storehelp import FAR, ME, NOW, charge, claim, complete, fail


def pay(store: Store, run_id: str, key: str, credits: float) -> LedgerEntry:
    """Claim ``key`` for ``run_id`` and complete it with a charge."""
    claim(store, key, run_id=run_id)
    entry = charge(key, credits, run_id=run_id)
    store.complete_receipts([Completion(key=key, result=b"{}", charge=entry)], owner=ME, now=NOW)
    return entry


def test_read_ledger_by_run_in_the_order_charged(store: Store) -> None:
    entries = [
        LedgerEntry(
            run_id="r1",
            tool="email",
            receipt_key=f"k{i}",
            credits=0.5 * i,
            found=i % 2 == 0,
            at=float(i),
            dataset="people" if i else None,
            row_key=f"row{i}" if i else None,
        )
        for i in range(4)
    ]
    claim(store, "k0", "k1", "k2", "k3", "x")
    store.complete_receipts(
        [Completion(key=e.receipt_key, result=b"{}", charge=e) for e in entries[:2]],
        owner=ME,
        now=NOW,
    )
    other = LedgerEntry(run_id="r2", tool="t", receipt_key="x", credits=1, found=True, at=0.0)
    store.complete_receipts([Completion(key="x", result=b"{}", charge=other)], owner=ME, now=NOW)
    store.complete_receipts(
        [Completion(key=e.receipt_key, result=b"{}", charge=e) for e in entries[2:]],
        owner=ME,
        now=NOW,
    )
    assert store.read_ledger("r1") == entries
    assert store.read_ledger("r2") == [other]
    assert store.read_ledger("r3") == []


def test_a_charge_the_provider_reported_keeps_both_figures(store: Store) -> None:
    """The provider said it charged 3 where the tool declares 1: the entry keeps both, and
    what the run spent counts the higher."""
    claim(store, "k")
    entry = LedgerEntry(
        run_id="r1", tool="t", receipt_key="k", credits=3.0, found=True, at=NOW,
        declared=1.0, reported=3.0,
    )  # fmt: skip
    store.complete_receipts([Completion(key="k", result=b"{}", charge=entry)], owner=ME, now=NOW)
    assert store.read_ledger("r1") == [entry]
    assert store.spent("r1") == 3.0


def test_spent_counts_a_run_and_its_child_plays(store: Store) -> None:
    pay(store, "r1", "a", 1.0)
    pay(store, "r1/child", "b", 2.0)
    pay(store, "r1/child/grandchild", "c", 4.0)
    pay(store, "r10", "d", 8.0)  # another run whose id starts alike
    pay(store, "r1-x", "e", 16.0)
    pay(store, "r", "f", 32.0)
    assert store.spent("r1") == 7.0
    assert store.spent("r1/child") == 6.0
    assert store.spent("r10") == 8.0
    assert store.spent("r") == 32.0
    assert store.spent("nobody") == 0.0


def test_ledger_totals_sum_every_run_by_tool(store: Store) -> None:
    assert store.ledger_totals() == {}
    for i, (run_id, tool, credits, found) in enumerate(
        [("r1", "alpha", 1.0, True), ("r1", "alpha", 0.0, False), ("r2", "alpha", 1.0, True),
         ("r2/child", "gamma", 2.0, False)]
    ):  # fmt: skip
        claim(store, f"k{i}", run_id=run_id)
        entry = LedgerEntry(
            run_id=run_id, tool=tool, receipt_key=f"k{i}", credits=credits, found=found, at=NOW
        )
        store.complete_receipts(
            [Completion(key=f"k{i}", result=b"{}", charge=entry)], owner=ME, now=NOW
        )
    totals = store.ledger_totals()
    assert totals == {
        "alpha": LedgerTotals(calls=3, found=2, credits=2.0),
        "gamma": LedgerTotals(calls=1, found=0, credits=2.0),
    }
    assert totals["alpha"].hit_rate == 2 / 3 and LedgerTotals().hit_rate is None


def test_doubtful_receipts_are_a_runs_calls_that_may_have_been_charged_unrecorded(
    store: Store,
) -> None:
    """In doubt, or running with no live holder: of the run and its child plays only."""
    claim(store, "done", "doubt", "dead", "refused")
    complete(store, ("done", b"{}"))
    store.fail_receipts([Failure(key="doubt", error="timeout", in_doubt=True)], owner=ME, now=NOW)
    fail(store, ("refused", "400 bad input"))
    claim(store, "live", owner=FAR)  # another host's, under a running lease
    claim(store, "child", run_id="r1/step")
    claim(store, "other", run_id="r10")  # another run whose id starts alike
    assert store.doubtful_receipts("r1", now=NOW) == {
        "doubt": "email",
        "dead": "email",  # this process's attempt that claimed it is gone
        "child": "email",
    }
    assert "live" in store.doubtful_receipts("r1", now=NOW + 120)  # its lease ran out
