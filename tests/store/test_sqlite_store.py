"""What only the SQLite store promises: durability, several processes, and clear failures."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import playline.store
from playline.errors import StoreError
from playline.store import (
    Claim,
    ClaimOutcome,
    Event,
    LedgerEntry,
    ReceiptStatus,
    RowRecord,
    RunRecord,
    RunStatus,
    open_store,
    owner_id,
)
from playline.store.sql._schema import SCHEMA_VERSION
from playline.store.sql import SQLiteStore

ME = owner_id("me")
SRC = str(Path(playline.store.__file__).resolve().parents[2])


def test_data_survives_close_and_reopen(db_url: str) -> None:
    store = SQLiteStore(db_url)
    store.create_run(RunRecord(run_id="r", play="p", status=RunStatus.COMPLETED, output=[1]))
    store.claim_receipts(
        [Claim(key="k", tool="t", run_id="r")], owner=ME, lease_until=60.0, now=0.0
    )
    store.complete_receipts([("k", b'{"ok":true}')], owner=ME, now=1.0)
    record = RowRecord(
        run_id="r", dataset="d", key="a", index=0, status="completed", values={"x": 1}, cells={}
    )
    store.save_rows([record])
    store.append_events([Event(kind="run", run_id="r", at=1.0)])
    store.append_ledger(
        [LedgerEntry(run_id="r", tool="t", receipt_key="k", credits=2.0, found=True, at=1.0)]
    )
    store.close()

    with SQLiteStore(db_url) as again:
        run = again.get_run("r")
        assert run is not None and run.status is RunStatus.COMPLETED and run.output == [1]
        receipt = again.find_receipts(["k"])["k"]
        assert receipt.status is ReceiptStatus.COMPLETED and receipt.result == b'{"ok":true}'
        assert list(again.iter_rows("r", "d")) == [record]
        assert again.read_ledger("r")[0].credits == 2.0
        again.append_events([Event(kind="run", run_id="r", at=2.0)])
        assert [e.seq for e in again.read_events("r")] == [1, 2]


def test_open_store_picks_sqlite_and_creates_the_folder(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/.playline/playline.db")
    assert isinstance(store, SQLiteStore)
    assert (tmp_path / ".playline" / "playline.db").is_file()
    store.close()


def test_relative_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with SQLiteStore("sqlite:///.playline/relative.db"):
        pass
    assert (tmp_path / ".playline" / "relative.db").is_file()


def test_wal_mode_and_schema_version(db_url: str, tmp_path: Path) -> None:
    SQLiteStore(db_url).close()
    conn = sqlite3.connect(tmp_path / "playline.db")
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        assert version == (str(SCHEMA_VERSION),)
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
        assert {"runs", "receipts", "rows", "events", "ledger", "boundaries"} <= tables
    finally:
        conn.close()


def test_a_version_1_store_is_migrated_and_keeps_its_receipts(tmp_path: Path) -> None:
    from playline.store.sql._schema import MIGRATIONS

    path = tmp_path / "v1.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        for statement in MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
        conn.execute(
            "INSERT INTO receipts VALUES ('k', 't', 'completed', 'o', 'r', 1, NULL, ?, NULL, 1.0)",
            (b"{}",),
        )
    store = SQLiteStore(f"sqlite:///{path}")
    assert store.schema_version_found == 1
    receipt = store.find_receipts(["k"])["k"]
    assert (receipt.status, receipt.result, receipt.job) == (ReceiptStatus.COMPLETED, b"{}", None)
    store.close()


def test_future_schema_version_is_refused(db_url: str, tmp_path: Path) -> None:
    SQLiteStore(db_url).close()
    conn = sqlite3.connect(tmp_path / "playline.db")
    with conn:
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),)
        )
    conn.close()
    with pytest.raises(StoreError, match="Upgrade playline"):
        SQLiteStore(db_url)


def test_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    conn.close()
    with pytest.raises(StoreError, match="not a Playline store"):
        SQLiteStore(f"sqlite:///{path}")


def test_corrupt_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    garbage = os.urandom(4096)
    path.write_bytes(garbage)
    with pytest.raises(StoreError, match="not a SQLite database") as caught:
        SQLiteStore(f"sqlite:///{path}")
    assert str(path) in str(caught.value)
    assert path.read_bytes() == garbage


def test_missing_parent_of_parent_folder(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist") as caught:
        SQLiteStore(f"sqlite:///{tmp_path}/missing/.playline/playline.db")
    assert str(tmp_path / "missing") in str(caught.value)
    assert not (tmp_path / "missing").exists()


def test_read_only_folder(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running as a user who can write to read-only folders (root)")
        with pytest.raises(StoreError, match="read-only"):
            SQLiteStore(f"sqlite:///{folder}/playline.db")
        with pytest.raises(StoreError, match="Cannot create the folder"):
            SQLiteStore(f"sqlite:///{folder}/.playline/playline.db")
    finally:
        folder.chmod(0o755)


def test_invalid_url() -> None:
    with pytest.raises(StoreError, match="three slashes"):
        SQLiteStore("sqlite://host/path.db")


def test_closed_store_refuses_calls(db_url: str) -> None:
    store = SQLiteStore(db_url)
    store.close()
    store.close()  # closing twice is fine
    with pytest.raises(StoreError, match="store is closed"):
        store.get_run("r")
    with pytest.raises(StoreError, match="store is closed"):
        store.claim_receipts([Claim(key="k", tool="t", run_id="r")], owner=ME, lease_until=1, now=0)


def test_locked_database_gives_up_with_a_clear_error(db_url: str, tmp_path: Path) -> None:
    store = SQLiteStore(db_url, busy_timeout=0.2)
    holder = sqlite3.connect(tmp_path / "playline.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreError, match="locked by another process"):
            store.save_rows(
                [
                    RowRecord(
                        run_id="r", dataset="d", key="a", index=0, status="x", values={}, cells={}
                    )
                ]
            )
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    # Nothing was half-written, and the store works again once the lock is gone.
    store.save_rows(
        [RowRecord(run_id="r", dataset="d", key="a", index=0, status="x", values={}, cells={})]
    )
    assert len(list(store.iter_rows("r", "d"))) == 1
    store.close()


def test_completing_an_unclaimed_receipt_writes_nothing(db_url: str) -> None:
    with SQLiteStore(db_url) as store:
        store.claim_receipts(
            [Claim(key="k", tool="t", run_id="r")], owner=ME, lease_until=60.0, now=0.0
        )
        with pytest.raises(StoreError, match="never claimed"):
            store.complete_receipts([("k", b"1"), ("ghost", b"2")], owner=ME, now=1.0)
        assert store.find_receipts(["k"])["k"].status is ReceiptStatus.RUNNING


def test_non_json_values_raise_before_anything_is_written(db_url: str) -> None:
    from playline.errors import PlayDefinitionError

    with SQLiteStore(db_url) as store:
        bad = RowRecord(
            run_id="r", dataset="d", key="a", index=0, status="x", values={"s": {1, 2}}, cells={}
        )
        with pytest.raises(PlayDefinitionError):
            store.save_rows([bad])
        assert list(store.iter_rows("r", "d")) == []
        store.save_rows([])  # the store is still usable


_CLAIMER = """
import json, sys, time
from playline.store import Claim, ClaimOutcome, owner_id
from playline.store.sql import SQLiteStore

store = SQLiteStore(sys.argv[1])
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


def test_concurrent_claims_own_each_key_once(db_url: str) -> None:
    SQLiteStore(db_url).close()  # create the schema before anyone races
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-c", _CLAIMER, db_url],
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

        def claim_all(name: str, order: list[str]) -> None:
            store = SQLiteStore(db_url)
            owner = owner_id(name)
            start.wait()
            got = owned.setdefault(name, [])
            for i in range(0, len(order), 2):
                now = time.time()
                results = store.claim_receipts(
                    [Claim(key=k, tool="t", run_id=name) for k in order[i : i + 2]],
                    owner=owner,
                    lease_until=now + 600,
                    now=now,
                )
                got += [r.receipt.key for r in results if r.outcome is ClaimOutcome.OWNED]
            store.close()

        threads = [
            threading.Thread(target=claim_all, args=("a", keys)),
            threading.Thread(target=claim_all, args=("b", keys[::-1])),
        ]
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
    with SQLiteStore(db_url) as store:
        receipts = store.find_receipts(keys)
        assert all(r.attempt == 1 for r in receipts.values())
