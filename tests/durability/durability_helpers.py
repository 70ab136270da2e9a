"""Shared by the durability tests: a play module run in child processes, and its journal.

The play's tools append one line per input they execute to ``journal.log`` next to the
module: ``TOOL PID BATCH INPUT``. The journal is the source of truth for "was this call
executed", independent of anything Playline reports. The parent marks each kill with a line
``KILL``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PLAY_MODULE = '''
"""A play whose two batch tools journal every input they execute."""

import json
import os
import sys
import time
from pathlib import Path

import playline as pl

JOURNAL = Path(__file__).with_name("journal.log")
ROWS = int(os.environ.get("PLAY_ROWS", "300"))
# Per-input work, standing in for a provider's latency: a run lasts long enough to be
# killed in the middle. Nothing waits on it.
LATENCY = float(os.environ.get("PLAY_LATENCY", "0.001"))
_batches = {"t.count": 0, "t.square": 0}


def _journal(tool, values):
    _batches[tool] += 1
    fd = os.open(JOURNAL, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for value in values:
            if LATENCY:
                time.sleep(LATENCY)
            os.write(fd, f"{tool} {os.getpid()} {_batches[tool]} {value}\\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


# One request at a time per tool: what may run again after a kill is then exactly the request
# in flight (a tool's concurrency bounds the requests in doubt; see the receipts docs).
@pl.tool("t.count", batch=pl.Batch(max_size=10), rate=pl.Rate(concurrency=1))
def count(inputs):
    _journal("t.count", [i["n"] for i in inputs])
    return [{"n": i["n"], "double": 2 * i["n"]} for i in inputs]


@pl.tool("t.square", batch=pl.Batch(max_size=10), rate=pl.Rate(concurrency=1))
def square(inputs):
    _journal("t.square", [i["v"] for i in inputs])
    return [{"square": i["v"] * i["v"]} for i in inputs]


@pl.play(name="journal-play")
async def journal_play(ctx, input):
    rows = [{"n": i} for i in range(input["rows"])]
    ds = await (
        ctx.dataset("numbers", rows, key="n")
        .with_column("count", lambda row, ctx: ctx.tool("t.count", {"n": row["n"]}))
        .with_column(
            "square", lambda row, ctx: ctx.tool("t.square", {"v": row["count"].data["double"]})
        )
        .run()
    )
    return len(ds)


if __name__ == "__main__":
    store_url, run_id = sys.argv[1], sys.argv[2]
    if "--wait-go" in sys.argv[3:]:
        print("ready", flush=True)
        sys.stdin.readline()
    result = pl.run(
        journal_play, {"rows": ROWS}, store=store_url, run_id=run_id, tools=[count, square]
    )
    print(json.dumps({"status": result.status, "error": result.error,
                      "stats": result.stats.to_dict()}), flush=True)
'''

TOOLS = ("t.count", "t.square")
BATCH_SIZE = 10


def write_play(folder: Path) -> Path:
    script = folder / "journal_play.py"
    script.write_text(PLAY_MODULE)
    return script


def start(
    script: Path, store_url: str, run_id: str, *extra: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(script), store_url, run_id, *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> dict[str, Any]:
    """Wait for a child run to exit and return the result it printed."""
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"child failed ({proc.returncode}):\n{err}"
    parsed: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return parsed


def query(store_url: str, sql: str) -> list[tuple[Any, ...]]:
    """The rows ``sql`` reads from a durable store's database behind Playline's back (what a
    test watches a child process write); none while the schema is not there yet."""
    if store_url.startswith("sqlite:"):
        import sqlite3

        path = store_url.removeprefix("sqlite:///")
        if not Path(path).exists():
            return []
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
                return [tuple(row) for row in db.execute(sql)]
        except sqlite3.OperationalError:  # no such table yet
            return []
    import psycopg

    with psycopg.connect(store_url, autocommit=True) as conn:
        try:
            return [tuple(row) for row in conn.execute(sql).fetchall()]  # type: ignore[arg-type]
        except psycopg.errors.UndefinedTable:
            return []


def journal_lines(journal: Path) -> list[str]:
    return journal.read_text().splitlines() if journal.exists() else []


def wait_until(
    condition: Any, *, what: str, proc: subprocess.Popen[str], timeout: float = 30
) -> None:
    """Poll an observable condition (a file, a table) while the child is alive."""
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"the child exited before {what}: {proc.communicate()[1]}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def kill(proc: subprocess.Popen[str], journal: Path) -> None:
    """SIGKILL a child that must still be running, reap it, and mark the kill in the journal."""
    assert proc.poll() is None, "the child finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()  # reaps it: a zombie would still look alive to the receipt owner check
    assert proc.returncode == -signal.SIGKILL
    with journal.open("a") as f:
        f.write("KILL\n")


@dataclass
class Journal:
    """The executions of a journal, split into process lifetimes by its KILL lines."""

    kills: int = 0
    executions: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    # (tool, input) -> (segment, batch id) of every execution, in order
    where: dict[tuple[str, int], list[tuple[int, tuple[int, int]]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    # (segment, tool) -> the batch id of the last batch of that tool in that segment
    last_batch: dict[tuple[int, str], tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def parse(cls, lines: list[str]) -> Journal:
        journal = cls()
        for line in lines:
            if line == "KILL":
                journal.kills += 1
                continue
            tool, pid, batch, value = line.split()
            batch_id = (int(pid), int(batch))
            journal.executions[tool][int(value)] += 1
            journal.where[(tool, int(value))].append((journal.kills, batch_id))
            journal.last_batch[(journal.kills, tool)] = batch_id
        return journal

    def duplicates(self) -> dict[tuple[str, int], int]:
        return {
            (tool, value): n - 1
            for tool, counts in self.executions.items()
            for value, n in counts.items()
            if n > 1
        }

    def assert_only_in_flight_repeated(self) -> None:
        """An input runs again only if its earlier run was in the last batch before a kill."""
        for (tool, value), runs in self.where.items():
            for segment, batch_id in runs[:-1]:
                assert segment < self.kills, f"{tool} {value} ran twice without a kill between"
                assert self.last_batch[(segment, tool)] == batch_id, (
                    f"{tool} {value} ran again although its batch {batch_id} was not the last "
                    f"one in flight at kill {segment + 1}: its receipt had been completed"
                )
