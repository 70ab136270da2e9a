"""A SQLite store shared by the UI's process and others loses no write.

Closing any descriptor of a file drops every POSIX lock its process holds on it. A process
that read the store's header with ``open()`` beside a live connection lost its lock on the
file: another process closing the store then took itself for the last one, checkpointed and
deleted the write-ahead log under the live connection, and every later write of the first
process went to a deleted file (a run printed "completed" while the store kept 34 of its 400
rows). Each test here has the UI in one process read counts and windows while other processes
run plays, the first process writes after them, and then finds every write of every process
in the store, the log never deleted while the UI's connection lived, and ``store check``
agreeing. A last test checks that no module of Playline opens a store's file with ``open()``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import playline as pl
from playline.store import RunStatus, open_store
from playline.web import UIConfig, create_app
from services import serve_asgi

from webhelp import wait_until

pytestmark = pytest.mark.timeout(180)

PLAY = """
import asyncio, os
from pathlib import Path
import playline as pl

@pl.tool("shared.upper", batch=pl.Batch(max_size=5))
async def upper(inputs):
    gate = os.environ.get("GATE_FILE")  # rows past the fifth wait until the test opens it
    if gate and any(int(i["n"]) >= 5 for i in inputs):
        while not Path(gate).exists():
            await asyncio.sleep(0.01)
    return [{"word": f"W{i['n']}"} for i in inputs]

@pl.play
async def words(ctx, input):
    rows = [{"n": n} for n in range(int(input.get("rows", 8)))]
    return await (
        ctx.dataset("words", rows, key="n")
        .with_column("up", lambda row, ctx: ctx.tool("shared.upper", {"n": row["n"]}))
        .run()
    )
"""


def _playline(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "playline", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
        check=False,
    )


def _other_processes_run_plays(play: Path, url: str) -> None:
    """Three small plays (3, 4 and 5 rows), each a process that opens the store and closes it."""
    for rows in (3, 4, 5):
        done = _playline("run", str(play), "--store", url, "-i", f"rows={rows}")
        assert done.returncode == 0, done.stdout + done.stderr


def _every_row_of_every_run_is_there(url: str, rows: list[int]) -> None:
    """The store holds one completed run per count of ``rows``, each with all its rows
    answered; ``playline store check`` finds it sound."""
    with open_store(url, read_only=True) as after:
        runs = after.list_runs(limit=100)
        assert [r.status for r in runs] == [RunStatus.COMPLETED] * len(rows)
        assert sorted(after.count_rows(r.run_id, "words") for r in runs) == sorted(rows)
        for run in runs:
            for row in after.iter_rows(run.run_id, "words"):
                assert row.values["up"] == {"word": f"W{row.values['n']}"}, row
    checked = _playline("store", "check", "--store", url)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _wal_inode(path: Path) -> int:
    return os.stat(f"{path}-wal").st_ino


@pytest.fixture
def play(tmp_path: Path) -> Path:
    path = tmp_path / "words.py"
    path.write_text(PLAY, encoding="utf-8")
    return path


def test_the_ui_reading_beside_other_processes_loses_no_write(tmp_path: Path, play: Path) -> None:
    from playline.cli._load import load_play

    path = tmp_path / "shared.db"
    url = f"sqlite:///{path}"
    words = load_play(str(play)).play
    db = open_store(url)
    first = pl.run(words, {"rows": 4}, store=db)
    assert first.status == "completed"
    wal = _wal_inode(path)
    config = UIConfig(store=db, store_url=url)
    with serve_asgi(create_app(config)) as base, httpx.Client(base_url=base) as http:
        for _ in range(2):  # the grid's first load: its window and its chip counts
            assert http.get(f"/api/rows/{first.run_id}").status_code == 200
            assert http.get(f"/api/counts/{first.run_id}").status_code == 200
            assert http.get(f"/api/run/{first.run_id}").status_code == 200
        _other_processes_run_plays(play, url)
        sent = http.post(
            "/api/event",
            json={"key": "after-the-others", "payload": '{"ok": true}'},
            headers={"X-CSRF-Token": config.csrf_token},
        )
        assert sent.status_code == 200 and sent.json()["sent"] is True
        again = pl.run(words, {"rows": 6}, store=db)  # the UI's process writes a run too
        assert again.status == "completed"
        assert _wal_inode(path) == wal  # the log the UI's connection writes to is the file's
    db.close()
    with open_store(url, read_only=True) as after:
        assert after.waiting_events(["after-the-others"]) == {"after-the-others"}
    _every_row_of_every_run_is_there(url, [4, 3, 4, 5, 6])


def test_a_run_with_its_ui_open_keeps_every_row_while_other_processes_use_the_store(
    tmp_path: Path, play: Path
) -> None:
    path = tmp_path / "shared.db"
    url = f"sqlite:///{path}"
    open_store(url).close()
    gate = tmp_path / "gate"
    slow = subprocess.Popen(
        [sys.executable, "-m", "playline", "run", str(play), "--store", url, "--ui",
         "-i", "rows=40"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "GATE_FILE": str(gate)},
    )  # fmt: skip
    try:
        assert slow.stderr is not None
        address = _ui_address(slow.stderr)
        with open_store(url, read_only=True) as reader:
            run_id = wait_until(lambda: _run_with_rows(reader), "the slow run's first rows")
        wal = _wal_inode(path)
        with httpx.Client(base_url=address) as http:
            for _ in range(2):
                assert http.get(f"/api/rows/{run_id}").status_code == 200
                assert http.get(f"/api/counts/{run_id}").status_code == 200
        _other_processes_run_plays(play, url)
        assert _wal_inode(path) == wal
        gate.touch()  # the slow run's other 35 rows go on now
        out, err = slow.communicate(timeout=120)
    finally:
        if slow.poll() is None:
            slow.kill()
            slow.wait()
    assert slow.returncode == 0, out + err
    assert "completed" in out
    _every_row_of_every_run_is_there(url, [40, 3, 4, 5])


def _ui_address(stderr: Any) -> str:
    for line in stderr:
        found = re.search(r"Playline UI on (http://\S+?)/? ", line)
        if found:
            return found.group(1)
    raise AssertionError("`playline run --ui` did not say where its UI is")


def _run_with_rows(reader: Any) -> str | None:
    runs = reader.list_runs(limit=1)
    if runs and reader.count_rows(runs[0].run_id, "words") >= 5:
        return str(runs[0].run_id)
    return None


@pytest.fixture
def opened_files() -> Iterator[list[str]]:
    """Every file this process opens from Python (``open``, ``os.open``, ``Path.open``) while
    the block runs: the audit event ``open`` (SQLite's own opens are not Python's)."""
    opened: list[str] = []
    _AUDIT.append(opened)
    try:
        yield opened
    finally:
        _AUDIT.remove(opened)


_AUDIT: list[list[str]] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _AUDIT and isinstance(args[0], (str, bytes, os.PathLike)):
        for opened in _AUDIT:
            opened.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)  # for the whole session: a hook cannot be removed, so it is idle


def test_no_module_opens_a_store_file_with_open(
    tmp_path: Path, play: Path, opened_files: list[str]
) -> None:
    from playline.cli._load import load_play

    path = tmp_path / "watched.db"
    url = f"sqlite:///{path}"
    words = load_play(str(play)).play
    with open_store(url) as db:
        result = pl.run(words, {"rows": 4}, store=db)
        with open_store(url) as second, open_store(url, read_only=True) as reader:
            assert second.integrity_check() == [] and reader.integrity_check() == []
            config = UIConfig(store=second, store_url=url)
            with serve_asgi(create_app(config)) as base, httpx.Client(base_url=base) as http:
                for page in ("rows", "counts", "run", "columns", "log"):
                    assert http.get(f"/api/{page}/{result.run_id}").status_code == 200
        assert db.integrity_check() == []
    store_files = {str(path), f"{path}-wal", f"{path}-shm", f"{path}-journal"}
    touched = [name for name in opened_files if os.path.abspath(name) in store_files]
    assert touched == [], f"opened with open(): {touched}"
