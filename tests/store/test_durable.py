"""What the durable stores (SQLite, PostgreSQL) promise beyond the protocol: data outlives the
store object, and several processes share one store without owning a receipt twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import playline.store
from playline.store import (
    Claim,
    ClaimOutcome,
    Completion,
    Event,
    ReceiptStatus,
    RowRecord,
    RunRecord,
    RunStatus,
    open_store,
    owner_id,
)
from playline.store._owners import holding

from storehelp import ME, NOW, charge

SRC = str(Path(playline.store.__file__).resolve().parents[2])


def test_data_survives_close_and_reopen(durable_url: str) -> None:
    store = open_store(durable_url)
    store.create_run(RunRecord(run_id="r", play="p", status=RunStatus.COMPLETED, output=[1]))
    store.claim_receipts([Claim(key="k", tool="t", run_id="r")], owner=ME, lease_until=60, now=0)
    store.complete_receipts(
        [Completion(key="k", result=b'{"ok":true}', charge=charge("k", 2.0, run_id="r"))],
        owner=ME,
        now=1.0,
    )
    record = RowRecord(
        run_id="r", dataset="d", key="a", index=0, status="completed", values={"x": 1}, cells={}
    )
    store.save_rows([record])
    store.append_events([Event(kind="run", run_id="r", at=1.0)])
    store.send_event("go", b"1", now=NOW)
    store.close()

    again = open_store(durable_url)
    try:
        assert again is not store
        run = again.get_run("r")
        assert run is not None and run.status is RunStatus.COMPLETED and run.output == [1]
        receipt = again.find_receipts(["k"])["k"]
        assert receipt.status is ReceiptStatus.COMPLETED and receipt.result == b'{"ok":true}'
        assert list(again.iter_rows("r", "d")) == [record]
        assert again.read_ledger("r")[0].credits == 2.0
        assert again.waiting_events(["go"]) == {"go"}
        again.append_events([Event(kind="run", run_id="r", at=2.0)])
        assert [e.seq for e in again.read_events("r")] == [1, 2]
    finally:
        again.close()


_CLAIMER = """
import json, sys, time
from playline.store import Claim, ClaimOutcome, open_store, owner_id

store = open_store(sys.argv[1])
owner = owner_id("process")
print("ready", flush=True)
sys.stdin.readline()
print("claiming", flush=True)
owned = []
for key in [f"k{i}" for i in [*range(50, 100), *range(50)]]:
    now = time.time()
    [result] = store.claim_receipts(
        [Claim(key=key, tool="t", run_id="proc")], owner=owner, lease_until=now + 600, now=now
    )
    if result.outcome is ClaimOutcome.OWNED:
        owned.append(key)
print(json.dumps(owned), flush=True)
sys.stdin.readline()  # stay alive, so our claims stay live, until the parent has finished
store.close()
"""


def test_concurrent_claims_own_each_key_once(durable_url: str) -> None:
    open_store(durable_url).close()  # create the schema before anyone races
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-c", _CLAIMER, durable_url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "ready"
        keys = [f"k{i}" for i in range(100)]
        owned: dict[str, list[str]] = {}
        start = threading.Barrier(3)
        holders = {name: owner_id(name) for name in ("a", "b")}

        def claim_all(name: str, order: list[str]) -> None:
            # A store object (a connection) of its own, as another process would have.
            store = open_store(durable_url)
            start.wait()
            got = owned.setdefault(name, [])
            for i in range(0, len(order), 2):
                now = time.time()
                results = store.claim_receipts(
                    [Claim(key=k, tool="t", run_id=name) for k in order[i : i + 2]],
                    owner=holders[name],
                    lease_until=now + 600,
                    now=now,
                )
                got += [r.receipt.key for r in results if r.outcome is ClaimOutcome.OWNED]
            store.close()

        threads = [
            threading.Thread(target=claim_all, args=("a", keys)),
            threading.Thread(target=claim_all, args=("b", keys[::-1])),
        ]
        with holding(holders["a"]), holding(holders["b"]):  # alive while they claim
            for thread in threads:
                thread.start()
            proc.stdin.write("go\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "claiming"
            start.wait()
            for thread in threads:
                thread.join()
        owned["process"] = json.loads(proc.stdout.readline())
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    everyone = owned["a"] + owned["b"] + owned["process"]
    assert sorted(everyone) == sorted(keys), {name: len(got) for name, got in owned.items()}
    store = open_store(durable_url)
    try:
        receipts = store.find_receipts(keys)
        assert all(r.attempt == 1 for r in receipts.values())
    finally:
        store.close()


def test_one_of_many_connections_creating_a_run_creates_it(durable_url: str) -> None:
    open_store(durable_url).close()
    stores = [open_store(durable_url) for _ in range(4)]
    start = threading.Barrier(len(stores))
    created: list[bool] = []

    def create(index: int) -> None:
        start.wait()
        for n in range(20):
            record = RunRecord(run_id=f"r{n}", play=f"p{index}", status=RunStatus.RUNNING)
            created.append(stores[index].create_run(record))

    threads = [threading.Thread(target=create, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert created.count(True) == 20 and len(created) == 80
        assert len(stores[0].list_runs(limit=100)) == 20
    finally:
        for store in stores:
            store.close()
