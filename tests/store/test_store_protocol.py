"""The store protocol, checked against every store: what MemoryStore does, SQLiteStore does."""

from __future__ import annotations

import random
import socket
import subprocess
import sys
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from playline._json import dumps, loads
from playline.store import (
    Claim,
    ClaimOutcome,
    Event,
    LedgerEntry,
    ReceiptStatus,
    RowRecord,
    RunRecord,
    RunStatus,
    Store,
    owner_id,
)

ME = owner_id("me")
OTHER = owner_id("other")  # same live process, another attempt: alive
NOW = 1_000.0
LEASE = NOW + 60


def claim(store: Store, *keys: str, owner: str = ME, now: float = NOW, force: bool = False) -> Any:
    return store.claim_receipts(
        [Claim(key=k, tool="email", run_id="r1", force=force) for k in keys],
        owner=owner,
        lease_until=now + 60,
        now=now,
    )


def dead_owner() -> str:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return f"{socket.gethostname()}/{proc.pid}/token"


# runs


def test_create_get_and_list_runs(store: Store) -> None:
    assert store.get_run("nope") is None
    for i in range(3):
        store.create_run(
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
    run = store.get_run("r1")
    assert run is not None
    assert run.status is RunStatus.RUNNING
    assert run.input == {"n": 1, "list": [1, "two", None]}
    assert run.output is None and run.waiting is None and run.error is None
    assert run.stats == {"rows": 1}
    assert run.parent_run_id == "parent"
    assert [r.run_id for r in store.list_runs()] == ["r2", "r1", "r0"]
    assert [r.run_id for r in store.list_runs(limit=2)] == ["r2", "r1"]


def test_update_run(store: Store) -> None:
    store.create_run(RunRecord(run_id="r", play="p", status=RunStatus.RUNNING, created_at=1.0))
    store.update_run(
        "r",
        status=RunStatus.SUSPENDED,
        waiting={"wake_at": 5.0, "events": ["approve"]},
        stats={"calls": 3},
        updated_at=2.0,
    )
    store.update_run("r", output={"emails": 2}, error="partial")
    run = store.get_run("r")
    assert run is not None
    assert run.status is RunStatus.SUSPENDED
    assert run.waiting == {"wake_at": 5.0, "events": ["approve"]}
    assert run.stats == {"calls": 3}
    assert run.output == {"emails": 2}
    assert run.error == "partial"
    assert (run.created_at, run.updated_at, run.play) == (1.0, 2.0, "p")


# claims


def test_fresh_claim_is_owned(store: Store) -> None:
    [result] = claim(store, "k")
    assert result.outcome is ClaimOutcome.OWNED
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
    assert store.find_receipts(["k"])["k"] == r


def test_completed_receipt_is_returned(store: Store) -> None:
    claim(store, "k")
    assert store.complete_receipts([("k", b'{"email":"a@b.c"}')], owner=ME, now=NOW + 1) == {}
    [result] = claim(store, "k", owner=OTHER, now=NOW + 2)
    assert result.outcome is ClaimOutcome.COMPLETED
    assert result.receipt.status is ReceiptStatus.COMPLETED
    assert result.receipt.result == b'{"email":"a@b.c"}'
    assert result.receipt.lease_until is None
    assert result.receipt.updated_at == NOW + 1


def test_failed_receipt_is_owned_again(store: Store) -> None:
    claim(store, "k")
    store.fail_receipts([("k", "HTTP 500")], owner=ME, now=NOW + 1)
    failed = store.find_receipts(["k"])["k"]
    assert (failed.status, failed.error, failed.lease_until) == (
        ReceiptStatus.FAILED,
        "HTTP 500",
        None,
    )
    [result] = claim(store, "k", owner=OTHER, now=NOW + 2)
    assert result.outcome is ClaimOutcome.OWNED
    assert (result.receipt.attempt, result.receipt.owner, result.receipt.error) == (2, OTHER, None)


def test_force_reclaims_a_completed_receipt(store: Store) -> None:
    claim(store, "k")
    store.complete_receipts([("k", b"1")], owner=ME, now=NOW)
    [result] = claim(store, "k", owner=OTHER, force=True, now=NOW + 1)
    assert result.outcome is ClaimOutcome.OWNED
    assert result.receipt.status is ReceiptStatus.RUNNING
    assert result.receipt.attempt == 2
    store.complete_receipts([("k", b"2")], owner=OTHER, now=NOW + 2)
    assert store.find_receipts(["k"])["k"].result == b"2"


def test_live_lease_of_another_owner_is_held(store: Store) -> None:
    [mine] = claim(store, "k")
    [result] = claim(store, "k", owner=OTHER, now=NOW + 1)
    assert result.outcome is ClaimOutcome.HELD
    assert result.receipt == mine.receipt
    [again] = claim(store, "k", owner=ME, now=NOW + 1)  # the owner itself may re-claim
    assert again.outcome is ClaimOutcome.OWNED


def test_expired_lease_is_reclaimed(store: Store) -> None:
    claim(store, "k")
    [result] = claim(store, "k", owner=OTHER, now=LEASE + 1)
    assert result.outcome is ClaimOutcome.OWNED
    assert (result.receipt.owner, result.receipt.attempt) == (OTHER, 2)
    assert store.find_receipts(["k"])["k"].owner == OTHER


def test_dead_owner_is_reclaimed_under_a_live_lease(store: Store) -> None:
    dead = dead_owner()
    claim(store, "k", owner=dead)
    [result] = claim(store, "k", owner=ME, now=NOW + 1)
    assert result.outcome is ClaimOutcome.OWNED
    assert (result.receipt.owner, result.receipt.attempt) == (ME, 2)


def test_claim_results_align_with_claims(store: Store) -> None:
    claim(store, "done", "held")
    store.complete_receipts([("done", b"{}")], owner=ME, now=NOW)
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
    assert all(r.outcome is ClaimOutcome.OWNED for r in claim(store, *keys))
    store.complete_receipts([(k, k.encode()) for k in keys[::2]], owner=ME, now=NOW)
    results = claim(store, *reversed(keys), owner=OTHER, now=NOW + 1)
    by_key = {r.receipt.key: r.outcome for r in results}
    assert by_key["k0"] is ClaimOutcome.COMPLETED
    assert by_key["k1"] is ClaimOutcome.HELD
    got = store.find_receipts(keys)
    assert list(got) == keys
    assert got["k1232"].result == b"k1232"


# complete, fail, release


def test_complete_keeps_another_owners_result(store: Store) -> None:
    claim(store, "k")
    claim(store, "k", owner=OTHER, now=LEASE + 1)  # our lease expired; OTHER took over
    assert store.complete_receipts([("k", b'"theirs"')], owner=OTHER, now=LEASE + 2) == {}
    kept = store.complete_receipts([("k", b'"ours"')], owner=ME, now=LEASE + 3)
    assert kept == {"k": b'"theirs"'}
    receipt = store.find_receipts(["k"])["k"]
    assert (receipt.result, receipt.owner, receipt.updated_at) == (b'"theirs"', OTHER, LEASE + 2)


def test_complete_replaces_a_running_or_own_result(store: Store) -> None:
    claim(store, "k", "j")
    assert store.complete_receipts([("k", b"1"), ("j", b"2")], owner=ME, now=NOW) == {}
    assert store.complete_receipts([("k", b"3")], owner=ME, now=NOW + 1) == {}
    got = store.find_receipts(["k", "j"])
    assert (got["k"].result, got["j"].result) == (b"3", b"2")
    assert got["k"].status is ReceiptStatus.COMPLETED and got["k"].error is None


def test_fail_only_touches_own_running_receipts(store: Store) -> None:
    claim(store, "mine", "done")
    claim(store, "theirs", owner=OTHER)
    store.complete_receipts([("done", b"1")], owner=ME, now=NOW)
    store.fail_receipts([("mine", "boom"), ("theirs", "boom"), ("done", "boom")], owner=ME, now=NOW)
    got = store.find_receipts(["mine", "theirs", "done"])
    assert got["mine"].status is ReceiptStatus.FAILED and got["mine"].error == "boom"
    assert got["theirs"].status is ReceiptStatus.RUNNING
    assert got["done"].status is ReceiptStatus.COMPLETED and got["done"].error is None


def test_release(store: Store) -> None:
    claim(store, "fresh", "retried")
    store.fail_receipts([("retried", "boom")], owner=ME, now=NOW)
    claim(store, "retried", now=NOW + 1)
    claim(store, "theirs", owner=OTHER)
    store.release_receipts(["fresh", "retried", "theirs", "unknown"], owner=ME)
    got = store.find_receipts(["fresh", "retried", "theirs"])
    assert "fresh" not in got  # never sent anywhere: forgotten
    assert got["retried"].status is ReceiptStatus.FAILED
    assert got["retried"].error == "released" and got["retried"].lease_until is None
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


def test_get_receipts_skips_missing_and_keeps_order(store: Store) -> None:
    claim(store, "a", "b", "c")
    assert list(store.find_receipts(["c", "missing", "a"])) == ["c", "a"]
    assert store.find_receipts([]) == {}


# rows


def row(key: str, index: int, dataset: str = "people", run_id: str = "r1", **values: Any) -> Any:
    return RowRecord(
        run_id=run_id,
        dataset=dataset,
        key=key,
        index=index,
        status="completed",
        values={"key": key, **values},
        cells={"email": {"status": "completed", "provider": "sim", "cost": 1.5}},
        updated_at=float(index),
    )


def test_rows_save_load_and_iterate_in_index_order(store: Store) -> None:
    rows = [row(f"k{i}", i, email=f"{i}@x.io") for i in range(2500)]
    shuffled = rows[:]
    random.Random(3).shuffle(shuffled)
    for start in range(0, len(shuffled), 700):
        store.save_rows(shuffled[start : start + 700])
    assert list(store.iter_rows("r1", "people")) == rows
    assert list(store.iter_rows("r1", "nobody")) == []
    assert list(store.iter_rows("r2", "people")) == []
    loaded = store.load_rows("r1", "people", ["k7", "missing", "k2"])
    assert loaded == {"k7": rows[7], "k2": rows[2]}
    assert list(loaded) == ["k7", "k2"]


def test_rows_overwrite(store: Store) -> None:
    store.save_rows([row("a", 0), row("b", 1)])
    failed = RowRecord(
        run_id="r1",
        dataset="people",
        key="a",
        index=0,
        status="failed",
        values={},
        cells={"email": {"status": "failed", "error": "boom"}},
        error="boom",
        updated_at=9.0,
    )
    store.save_rows([failed])
    assert list(store.iter_rows("r1", "people")) == [failed, row("b", 1)]


def test_datasets(store: Store) -> None:
    store.save_rows([row("a", 0, dataset="people"), row("a", 0, dataset="companies")])
    store.save_rows([row("a", 0, dataset="other", run_id="r2")])
    assert store.datasets("r1") == ["people", "companies"]
    assert store.datasets("r2") == ["other"]
    assert store.datasets("r3") == []


# events


def test_event_seq_is_store_wide_and_increasing(store: Store) -> None:
    for n in range(3):
        store.append_events(
            [
                Event(kind="cell", run_id=run, at=float(n), row_key=f"k{n}", column="email")
                for run in ("r1", "r2")
            ]
        )
    store.append_events(
        [Event(kind="log", run_id="r1", at=9.0, preview="hi", data={"level": "info", "n": [1]})]
    )
    r1 = store.read_events("r1")
    r2 = store.read_events("r2")
    seqs = sorted(e.seq for e in r1 + r2)
    assert seqs == list(range(seqs[0], seqs[0] + 7)) and seqs[0] >= 1
    assert [e.seq for e in r1] == sorted(e.seq for e in r1)
    assert [e.row_key for e in r1] == ["k0", "k1", "k2", None]
    assert r1[-1].data == {"level": "info", "n": [1]} and r1[-1].preview == "hi"
    assert r1[0].column == "email" and r1[0].data is None
    assert store.read_events("r1", after_seq=r1[1].seq) == r1[2:]
    assert store.read_events("r1", kinds=["log"]) == r1[3:]
    assert store.read_events("r1", kinds=[]) == []
    assert store.read_events("r9") == []


# ledger


def test_ledger(store: Store) -> None:
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
    store.append_ledger(entries[:2])
    store.append_ledger(
        [LedgerEntry(run_id="r2", tool="t", receipt_key="x", credits=1, found=True, at=0.0)]
    )
    store.append_ledger(entries[2:])
    assert store.read_ledger("r1") == entries
    assert [e.receipt_key for e in store.read_ledger("r2")] == ["x"]
    assert store.read_ledger("r3") == []


# round trips

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(exclude_categories=["Cs"])),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(alphabet=st.characters(exclude_categories=["Cs"])), children, max_size=4
        )
    ),
    max_leaves=12,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=st.dictionaries(st.text(max_size=8), _json_values, max_size=5), result=_json_values)
def test_json_round_trips(store: Store, values: dict[str, Any], result: Any) -> None:
    stored = RowRecord(
        run_id="r",
        dataset="d",
        key="k",
        index=0,
        status="completed",
        values=values,
        cells={"c": {"value": result}},
    )
    store.save_rows([stored])
    assert store.load_rows("r", "d", ["k"])["k"] == stored
    assert list(store.iter_rows("r", "d")) == [stored]

    key = f"receipt-{random.random()}"
    claim(store, key)
    store.complete_receipts([(key, dumps(result))], owner=ME, now=NOW)
    receipt = store.find_receipts([key])[key]
    assert receipt.result is not None and loads(receipt.result) == result


def test_iter_rows_pages_through_equal_indexes(store: Store) -> None:
    rows = [row(f"k{i}", i // 1500) for i in range(3000)]
    store.save_rows(rows)
    assert [r.key for r in store.iter_rows("r1", "people")] == [r.key for r in rows]


def test_a_completion_writes_its_ledger_entries_with_it(store: Store) -> None:
    claim(store, "paid")
    entry = LedgerEntry(
        run_id="r1", tool="email", receipt_key="paid", credits=1.5, found=True, at=NOW
    )
    store.complete_receipts([("paid", b'{"ok":1}')], owner=ME, now=NOW, ledger=[entry])
    assert store.find_receipts(["paid"])["paid"].status is ReceiptStatus.COMPLETED
    assert store.read_ledger("r1") == [entry]
