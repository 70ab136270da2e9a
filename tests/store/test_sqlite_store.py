"""What only the SQLite store promises: its file, its schema, and clear failures."""

from __future__ import annotations

import asyncio
import gc
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from playline.errors import StoreError
from playline.store import (
    Claim,
    Completion,
    GateConfig,
    ReceiptStatus,
    RowRecord,
    open_store,
    owner_id,
)
from playline.store._io import StoreIO
from playline.store.sql import SQLiteStore, _checkpoints, _rows
from playline.store.sql._schema import SCHEMA_VERSION

ME = owner_id("me")


def test_open_store_picks_sqlite_and_creates_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # as root, folders are created only in the working folder
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


def test_a_version_4_store_is_migrated_and_gets_the_rate_gates(tmp_path: Path) -> None:
    from playline.store.sql._schema import MIGRATIONS

    path = tmp_path / "v4.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        for migration in MIGRATIONS[:4]:
            for statement in migration:
                conn.execute(statement)
        conn.execute("INSERT INTO meta VALUES ('schema_version', '4')")
    store = SQLiteStore(f"sqlite:///{path}")
    try:
        assert store.schema_version_found == 4
        grant = store.lease_gate(
            "t@a", 3, config=GateConfig(ceiling=1.0, burst=4), holder="h", lease_until=9, now=1
        )
        assert grant.granted == 2
    finally:
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


def _sound_file(path: Path) -> tuple[bytes, int]:
    """A small sound database (not in WAL mode), its bytes and its page size."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (x)")
        db.execute("INSERT INTO t VALUES (1)")
    db.close()
    data = path.read_bytes()
    return data, int.from_bytes(data[16:18], "big")


def test_a_file_longer_than_its_header_counts_is_damaged_and_only_read(tmp_path: Path) -> None:
    path = tmp_path / "long.db"
    data, page = _sound_file(path)
    path.write_bytes(data + bytes(page))
    with SQLiteStore(f"sqlite:///{path}", read_only=True) as store:
        assert store.damage is not None and "the header counts 2 pages" in store.damage
        assert "file holds 3" in store.damage
        assert store.integrity_check()[0] == store.damage


def test_a_file_cut_inside_a_page_is_damaged(tmp_path: Path) -> None:
    path = tmp_path / "cut.db"
    data, page = _sound_file(path)
    path.write_bytes(data[: len(data) - page // 2])
    with SQLiteStore(f"sqlite:///{path}") as store:  # opened to be read, never written
        assert store.damage is not None and "not a whole number of" in store.damage
        with pytest.raises(StoreError, match="is damaged"):
            store.save_rows(_row("1"))
    assert path.read_bytes() == data[: len(data) - page // 2]


def test_a_header_counting_pages_past_the_files_end_is_damage(tmp_path: Path) -> None:
    path = tmp_path / "short.db"
    data, _ = _sound_file(path)
    header = bytearray(data[:100])
    header[28:32] = (len(data) // int.from_bytes(data[16:18], "big") + 2).to_bytes(4, "big")
    path.write_bytes(bytes(header) + data[100:])
    with SQLiteStore(f"sqlite:///{path}") as store:
        assert store.damage is not None and "malformed" in store.damage


def test_an_impossible_page_size_is_refused_as_no_database(tmp_path: Path) -> None:
    path = tmp_path / "pagesize.db"
    data, _ = _sound_file(path)
    path.write_bytes(data[:16] + (1000).to_bytes(2, "big") + data[18:])
    with pytest.raises(StoreError, match="not a SQLite database"):
        SQLiteStore(f"sqlite:///{path}")


def test_a_store_too_large_for_a_quick_check_opens_after_a_look_at_each_tables_ends(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playline.store.sql import _sqlite

    with SQLiteStore(db_url) as store:  # every table, WITHOUT ROWID ones too, holds a row
        store.save_rows(
            [
                RowRecord(
                    run_id="r",
                    dataset="d",
                    key="k",
                    index=0,
                    status="completed",
                    values={},
                    cells={},
                )
            ]
        )
    monkeypatch.setattr(_sqlite, "QUICK_CHECK_UP_TO", 0)
    with SQLiteStore(db_url) as store:
        assert store.damage is None
        assert list(store.load_rows("r", "d", ["k"])) == ["k"]


def test_new_claims_and_own_results_are_written_without_reading_receipts(db_url: str) -> None:
    """A fresh run's claims and results are written without a read of their receipts
    first; once claims meet stored receipts (a re-run), the next claims read theirs."""
    store = SQLiteStore(db_url)
    reads: list[str] = []
    assert store._conn is not None
    store._conn.set_trace_callback(
        lambda sql: reads.append(sql) if sql.startswith("SELECT") and "receipts" in sql else None
    )

    def claim(*keys: str) -> list[str]:
        results = store.claim_receipts(
            [Claim(key=k, tool="email", run_id="r1") for k in keys],
            owner=ME,
            lease_until=2e9,
            now=1e9,
        )
        return [r.outcome.value for r in results]

    try:
        assert claim("a", "b") == ["owned", "owned"]
        store.complete_receipts([Completion(key="a", result=b"1")], owner=ME, now=1e9)
        assert reads == []
        assert claim("a", "c") == ["completed", "owned"]  # tried unread, then read
        assert len(reads) == 1
        assert claim("d") == ["owned"]  # read: the last claims met a receipt
        assert len(reads) == 2
        assert claim("e") == ["owned"]  # the last read found none
        assert len(reads) == 2
        got = store.find_receipts(["a", "b", "c", "d", "e"])
        assert [r.status for r in got.values()] == [ReceiptStatus.COMPLETED] + [
            ReceiptStatus.RUNNING
        ] * 4
    finally:
        store.close()


def _row(value: str) -> list[RowRecord]:
    return [RowRecord(run_id="r", dataset="d", key="a", index=0, status="completed",
                      values={"v": value}, cells={})]  # fmt: skip


def _begun(store: SQLiteStore) -> list[str]:
    """The threads the store's transactions begin on, in order, as they begin."""
    threads: list[str] = []
    assert store._conn is not None
    store._conn.set_trace_callback(
        lambda sql: (
            threads.append(threading.current_thread().name) if sql.startswith("BEGIN") else None
        )
    )
    return threads


def test_the_engine_calls_the_store_on_its_loop_when_nothing_holds_it(db_url: str) -> None:
    """No thread hand-over for a store call that need not wait: it runs on the event loop.
    A function making store calls of its own runs on the store's thread."""
    store = SQLiteStore(db_url)
    begun = _begun(store)

    async def run() -> None:
        io = StoreIO(store)
        await io(store.save_rows, _row("1"))
        await io(store.save_rows, _row("2"))
        await io(lambda: list(store.iter_rows("r", "d")))

    try:
        asyncio.run(run())
        assert begun[:2] == ["MainThread", "MainThread"]
        assert begun[2].startswith("playline-store")
        assert [r.values for r in store.iter_rows("r", "d")] == [{"v": "2"}]
    finally:
        store.close()


def test_a_store_another_process_holds_is_waited_for_off_the_loop(
    db_url: str, tmp_path: Path
) -> None:
    """Another process holds the write lock: the engine's call does not wait for it on the
    event loop (which goes on) but on the store's thread, and a call made after it waits
    behind it there: they are made in order, once each."""
    store = SQLiteStore(db_url)
    begun = _begun(store)
    holder = sqlite3.connect(tmp_path / "playline.db", isolation_level=None)

    async def run() -> None:
        io = StoreIO(store)
        holder.execute("BEGIN IMMEDIATE")
        first = asyncio.create_task(io(store.save_rows, _row("first")))
        second = asyncio.create_task(io(store.save_rows, _row("second")))
        await asyncio.sleep(0)  # a turn of the loop: both have handed their call over
        assert not first.done() and not second.done()  # the loop goes on meanwhile
        holder.execute("COMMIT")  # the other process lets go
        await asyncio.gather(first, second)

    try:
        asyncio.run(run())
        assert begun[0] == "MainThread"  # tried on the loop, where it would have waited
        assert [t.startswith("playline-store") for t in begun[1:]] == [True, True]
        assert [r.values for r in store.iter_rows("r", "d")] == [{"v": "second"}]
    finally:
        holder.close()
        store.close()


def test_a_store_call_waits_behind_the_calls_made_before_it(db_url: str) -> None:
    """While an earlier call is on the store's thread, a store call that could run on the
    loop waits behind it there: calls are made in the order they were made."""
    store = SQLiteStore(db_url)
    go_on = threading.Event()

    def earlier_save() -> None:  # not a store method: made on the store's thread
        go_on.wait()
        store.save_rows(_row("earlier"))

    async def run() -> None:
        io = StoreIO(store)
        earlier = asyncio.create_task(io(earlier_save))
        later = asyncio.create_task(io(store.save_rows, _row("later")))
        await asyncio.sleep(0)  # a turn of the loop: both have handed their call over
        assert not later.done()
        go_on.set()
        await asyncio.gather(earlier, later)

    try:
        asyncio.run(run())
        assert [r.values for r in store.iter_rows("r", "d")] == [{"v": "later"}]
    finally:
        go_on.set()
        store.close()


def test_claims_made_again_on_the_receipts_read_give_way_too(db_url: str, tmp_path: Path) -> None:
    """Claims first written as if their keys had no receipt are rolled back where one has,
    and made again on the receipts read: if another process takes the write lock in
    between, that second try waits for it on the store's thread, not on the loop."""
    store = SQLiteStore(db_url)
    other = owner_id("other")
    store.claim_receipts(
        [Claim(key="a", tool="t", run_id="r0")], owner=other, lease_until=2e9, now=1e9
    )
    store.complete_receipts([Completion(key="a", result=b"1")], owner=other, now=1e9)
    holder = sqlite3.connect(tmp_path / "playline.db", isolation_level=None)
    begun: list[str] = []
    rolled_back = taken = False

    def trace(sql: str) -> None:
        nonlocal rolled_back, taken
        if sql == "ROLLBACK":  # the first try met the stored receipt
            rolled_back = True
        elif sql.startswith("BEGIN"):
            begun.append(threading.current_thread().name)
            if rolled_back and not taken:  # between the tries, once (on this thread: the
                taken = True  # store's thread may begin after the holder has committed)
                holder.execute("BEGIN IMMEDIATE")  # another process takes the write lock

    assert store._conn is not None
    store._conn.set_trace_callback(trace)
    claims = [Claim(key=k, tool="t", run_id="r1") for k in ("a", "b")]

    async def run() -> list[str]:
        call = asyncio.create_task(
            StoreIO(store)(store.claim_receipts, claims, owner=ME, lease_until=2e9, now=1e9)
        )
        await asyncio.sleep(0)  # a turn of the loop: the second try is handed over
        assert not call.done()
        holder.execute("COMMIT")
        return [r.outcome.value for r in await call]

    try:
        assert asyncio.run(run()) == ["completed", "owned"]
        assert begun[0] == "MainThread" and begun[-1].startswith("playline-store")
    finally:
        holder.close()
        store.close()


def test_indexing_many_row_keys_is_done_off_the_loop(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save that indexes its set's tail (here 6 keys, as if they were 200,000) does not
    stall the loop: it rolls back and is made on the store's thread, once."""
    monkeypatch.setattr(_rows, "TAIL_ROWS", 6)
    monkeypatch.setattr(_rows, "LONG_INDEX", 4)
    store = SQLiteStore(db_url)
    rows = [RowRecord(run_id="r", dataset="d", key=f"k{i}", index=i, status="completed",
                      values={"i": i}, cells={}) for i in range(8)]  # fmt: skip
    begun = _begun(store)

    async def run() -> None:
        io = StoreIO(store)
        await io(store.save_rows, rows[:3])
        await io(store.save_rows, rows[3:])

    try:
        asyncio.run(run())
        assert begun[:2] == ["MainThread", "MainThread"]  # the second gave way
        assert begun[2].startswith("playline-store") and len(begun) == 3
        assert [r.key for r in store.iter_rows("r", "d")] == [r.key for r in rows]
        assert sorted(store.load_rows("r", "d", ["k0", "k7"])) == ["k0", "k7"]
    finally:
        store.close()


@pytest.mark.parametrize("held", ["a transaction", "the rows' tail"])
def test_a_call_waits_for_another_thread_of_the_store_off_the_loop(db_url: str, held: str) -> None:
    """Another thread of the same store object is in a transaction, or writing rows (a UI
    beside the run): the engine's call waits for it on the store's thread, not on the loop."""
    store = SQLiteStore(db_url)
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with (
            store._transaction("read", write=False) if held == "a transaction" else store._writing()
        ):
            inside.set()
            leave.wait()

    other = threading.Thread(target=hold, name="other")
    other.start()
    inside.wait()
    begun = _begun(store)

    async def run() -> None:
        call = asyncio.create_task(StoreIO(store)(store.save_rows, _row("1")))
        await asyncio.sleep(0)  # a turn of the loop: the call is handed over
        assert not call.done()
        leave.set()
        await call

    try:
        asyncio.run(run())
        assert len(begun) == 1 and begun[0].startswith("playline-store")
        assert [r.values for r in store.iter_rows("r", "d")] == [{"v": "1"}]
    finally:
        leave.set()
        other.join()
        store.close()


def _padded(start: int, stop: int) -> list[RowRecord]:
    return [RowRecord(run_id="r", dataset="d", key=f"k{i}", index=i, status="completed",
                      values={"i": i, "pad": "x" * 200}, cells={})
            for i in range(start, stop)]  # fmt: skip


def test_the_log_is_copied_into_the_file_on_a_thread_of_its_own(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past EVERY rows changed, the store's own thread checkpoints: the rows reach the
    database file while the log is far below the pages that make a commit checkpoint. Closing
    the store ends the thread, and the log goes with the store's connection."""
    monkeypatch.setattr(_checkpoints, "EVERY", 500)
    store = SQLiteStore(db_url)
    path, log = Path(store.path), Path(f"{store.path}-wal")
    checkpoints = store._checkpoints
    assert checkpoints is not None
    try:
        before = path.stat().st_size
        for start in range(0, 2000, 250):
            store.save_rows(_padded(start, start + 250))
        assert checkpoints.settled(timeout=60)
        assert checkpoints.made >= 3  # at 500, 1000, 1500 rows (and their keys' index)
        assert path.stat().st_size > before + 2000 * 200  # the rows are in the file
        assert log.stat().st_size < _checkpoints.BACKSTOP * 4096 / 10
        thread = checkpoints._thread
        assert thread is not None and thread.is_alive()
        assert thread is not threading.current_thread()
    finally:
        store.close()
    assert not thread.is_alive()
    assert not log.exists()
    with SQLiteStore(db_url) as again:
        assert len(list(again.iter_rows("r", "d"))) == 2000


def test_a_store_dropped_unclosed_stops_its_checkpoints(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread holds nothing of its store: a store nobody closed is collected, and its
    thread ends."""
    monkeypatch.setattr(_checkpoints, "EVERY", 10)
    store = SQLiteStore(db_url)
    store.save_rows(_padded(0, 20))
    assert store._checkpoints is not None and store._checkpoints.settled(timeout=60)
    thread = store._checkpoints._thread
    assert thread is not None and thread.is_alive()
    del store
    gc.collect()
    thread.join(timeout=60)
    assert not thread.is_alive()


def test_small_commits_keep_the_log_under_its_limit(db_url: str) -> None:
    """Slow jobs commit a row or two at a time, each commit whole pages: with the commits'
    checkpoint at 40,000 pages, such a run grew its log past 100 MB. Under the defaults it
    stays under LOG_LIMIT (6,000 commits write about 75 MB of log)."""
    store = SQLiteStore(db_url)
    log, largest = Path(f"{store.path}-wal"), 0
    try:
        for i in range(6000):
            store.save_rows(_padded(i, i + 1))
            size = log.stat().st_size
            largest = max(largest, size)
        with store._transaction("look", write=False) as cur:
            pages = cur.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
    finally:
        store.close()
    assert largest < _checkpoints.LOG_LIMIT
    assert pages < _checkpoints.BACKSTOP  # the log started again


def test_a_log_larger_than_the_limit_is_cut_back(db_url: str) -> None:
    store = SQLiteStore(db_url)
    try:
        with store._transaction("look", write=False) as cur:
            limit = cur.execute("PRAGMA journal_size_limit").fetchone()[0]
    finally:
        store.close()
    assert limit == _checkpoints.LOG_LIMIT


def test_a_store_left_open_at_exit_leaves_no_log(tmp_path: Path) -> None:
    """A command that never closes its store, its checkpoint thread started: the process ends
    and the log is checkpointed and deleted, not left beside the file."""
    url = f"sqlite:///{tmp_path}/left-open.db"
    script = (
        "from playline.store.sql import SQLiteStore, _checkpoints\n"
        "from playline.store import RowRecord\n"
        f"store = SQLiteStore({url!r})\n"
        "rows = [RowRecord(run_id='r', dataset='d', key=f'k{i}', index=i, status='completed',\n"
        "                  values={'i': i}, cells={}) for i in range(_checkpoints.EVERY + 1)]\n"
        "store.save_rows(rows)\n"
        "assert store._checkpoints is not None and store._checkpoints.settled(timeout=60)\n"
        "assert store._checkpoints._thread is not None\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "left-open.db-wal").exists()
    with SQLiteStore(url) as again:
        assert len(list(again.iter_rows("r", "d"))) == _checkpoints.EVERY + 1
