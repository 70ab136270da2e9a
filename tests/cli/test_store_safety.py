"""A store that refuses damage, as a careless user or an attacker would meet it.

A damaged file is found when opened and never written (run and resume refuse; runs, show,
logs and export read what is left; `store check` lists the damage); a store deleted under a
running play fails the run; reading commands never create a store and read stores they
cannot write (as another user: root can write anything).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from clihelp import Cli, one_error_line

DELETER = """
import os
import playline as pl

@pl.tool("safety.step", batch=pl.Batch(max_size=10))
def step(inputs):
    if any(i["n"] == 25 for i in inputs):
        os.remove(os.environ["STORE_FILE"])  # the store disappears mid-run
    return [{"n": i["n"]} for i in inputs]

@pl.play
async def doomed(ctx, input):
    return await (
        ctx.dataset("numbers", [{"n": i} for i in range(100)], key="n")
        .with_column("step", lambda row, ctx: ctx.tool("safety.step", {"n": row["n"]}))
        .run()
    )
"""


@pytest.fixture
def ran(cli: Cli, local_play: str) -> str:
    result = cli("run", local_play, "--run-id", "r1")
    assert result.exit_code == 0, result.output
    return "r1"


def _db(cli: Cli) -> Path:
    return cli.tmp / "cli.db"


def _settle(path: Path) -> None:
    """Everything in the database file itself, none in its write-ahead log."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _damage(path: Path) -> str:
    """4 KiB of garbage over the pages in the middle of a store; its new digest."""
    _settle(path)
    size = path.stat().st_size
    with path.open("r+b") as file:
        file.seek((size // 2) // 4096 * 4096)
        file.write(bytes((i * 131 + 7) % 256 for i in range(4096)))
    return _digest(path)


def _digest(path: Path) -> str:
    """Of the database and its write-ahead log, where a write would land first."""
    wal = Path(f"{path}-wal")
    return hashlib.sha256(
        path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    ).hexdigest()


def test_a_damaged_store_is_never_written(cli: Cli, ran: str, local_play: str) -> None:
    before = _damage(_db(cli))

    resume = one_error_line(cli("resume", ran), 1)
    run = one_error_line(cli("run", local_play), 1)

    assert "is damaged" in resume and "store check" in resume
    assert "is damaged" in run
    assert _digest(_db(cli)) == before


def test_a_damaged_store_can_still_be_read(cli: Cli, ran: str, tmp_path: Path) -> None:
    before = _damage(_db(cli))

    runs = cli("runs", "--json")
    show = cli("show", ran)
    export = cli("export", ran, "--out", str(tmp_path / "rescued.jsonl"))

    assert runs.exit_code == 0 and cli.json_lines(runs.stdout)[0]["status"] == "completed"
    assert "warning: the store" in runs.stderr and "damaged" in runs.stderr
    assert show.exit_code == 0 and "completed" in show.stdout
    assert export.exit_code == 0
    assert len((tmp_path / "rescued.jsonl").read_text().splitlines()) == 3
    assert _digest(_db(cli)) == before


def test_store_check_runs_the_full_check(cli: Cli, ran: str) -> None:
    sound = cli("store", "check")
    assert sound.exit_code == 0 and "no damage found" in sound.stdout

    _damage(_db(cli))
    damaged = cli("store", "check")

    assert damaged.exit_code == 1
    assert "is damaged:" in damaged.stdout and "restore it from a backup" in damaged.stderr


def test_a_store_deleted_mid_run_fails_the_run(cli: Cli, tmp_path: Path) -> None:
    play = cli.play(DELETER)
    exe = Path(sys.executable).with_name("playline")
    env = {**os.environ, "STORE_FILE": str(_db(cli))}

    proc = subprocess.run(
        [str(exe), "run", play, "--store", cli.store],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )

    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "was deleted or replaced" in proc.stderr and str(_db(cli)) in proc.stderr
    assert "completed" not in proc.stdout
    assert not _db(cli).exists()  # and no new, empty store was made in its place


def test_reading_commands_never_create_a_store(cli: Cli, tmp_path: Path) -> None:
    typo = tmp_path / "typo.db"
    for command in (["runs"], ["show", "r1"], ["logs", "r1"], ["cache", "stats"]):
        line = one_error_line(cli(*command, "--store", f"sqlite:///{typo}", store=False), 1)
        assert f"No store at {typo}" in line
    assert not typo.exists()


def _as_another_user(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the command line as a user who cannot write the store (root writes anything)."""
    argv = [str(Path(sys.executable).with_name("playline")), *args]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv to run as another user")
        as_nobody = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
        probe = subprocess.run([*as_nobody, argv[0], "version"], capture_output=True, text=True)
        if probe.returncode != 0:  # e.g. a checkout in a private folder, as mktemp -d makes
            pytest.skip(f"another user cannot run this checkout's playline: {probe.stderr[-200:]}")
        argv = [*as_nobody, *argv]
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("PLAYLINE_")},
    )


@pytest.fixture
def public_dirs() -> Iterator[tuple[Path, Path]]:
    """A folder another user can read but not write, and one they can write: outside
    pytest's own folders, which only their owner can enter."""
    shared, out = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
    shared.chmod(0o755)
    out.chmod(0o777)
    try:
        yield shared, out
    finally:
        shared.chmod(0o755)
        shutil.rmtree(shared)
        shutil.rmtree(out)


def test_a_read_only_store_can_be_read(cli: Cli, ran: str, public_dirs: tuple[Path, Path]) -> None:
    shared, out = public_dirs
    _settle(_db(cli))
    shutil.copy(_db(cli), shared / "runs.db")  # no -wal, no -shm: as a closed store is
    (shared / "runs.db").chmod(0o444)
    shared.chmod(0o555)
    url = f"sqlite:///{shared}/runs.db"

    runs = _as_another_user(["runs", "--json", "--store", url], out)
    show = _as_another_user(["show", ran, "--store", url], out)
    logs = _as_another_user(["logs", ran, "--store", url], out)
    stats = _as_another_user(["cache", "stats", "--store", url], out)
    check = _as_another_user(["store", "check", "--store", url], out)
    export = _as_another_user(["export", ran, "--out", str(out / "r.csv"), "--store", url], out)
    resume = _as_another_user(["resume", ran, "--store", url], out)

    for done in (runs, show, logs, stats, check, export):
        assert done.returncode == 0, done.stderr
    assert '"status": "completed"' in runs.stdout and "shout" in show.stdout
    assert "shouting 3 names" in logs.stdout and "clitest.upper" in stats.stdout
    assert len((out / "r.csv").read_text().splitlines()) == 4
    assert resume.returncode == 1 and "read-only" in resume.stderr
    assert sorted(p.name for p in shared.iterdir()) == ["runs.db"]
