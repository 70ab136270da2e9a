"""Helpers of the issue-10 durability tests: runners in child processes against a simulator.

A runner is ``python -m bench.crash_child`` (the crash suite's own runner, see its
docstring): one attempt of a play over the simulator's people, on a SQLite store, printing
one JSON line when the attempt ends. Tests start it, kill it, resume it, and compare what
Playline recorded with what the simulator charged.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playline.store import open_store

ROOT = Path(__file__).resolve().parents[2]  # the repository: ``bench`` is importable from it
PROVIDERS = (
    "sim.email.alpha",
    "sim.email.beta",
    "sim.email.gamma",
    "sim.company.enrich",
    "sim.email.verify",
    "sim.phone.finder",
)
# Published and enforced alike: runners pace themselves under it, so a run is quick.
FAST = {"rate_per_second": 1000, "burst": 100}


def fast_tools() -> dict[str, Any]:
    """A ``faults(tools=...)`` document raising every provider's rate."""
    return {tool: dict(FAST) for tool in PROVIDERS}


_runners: list[subprocess.Popen[str]] = []  # started by this test, killed after it


def stop_leftover_runners() -> None:
    """Kill the runners a failed test left running: they would go on calling the session's
    simulator and spoil the next test's ledger."""
    while _runners:
        proc = _runners.pop()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def start(
    store_url: str,
    run_id: str,
    gateway: str,
    *options: str,
    people: int = 100,
) -> subprocess.Popen[str]:
    """Start a runner: one attempt of run ``run_id`` (``options``: see bench.crash_child)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.crash_child",
            "--store",
            store_url,
            "--run-id",
            run_id,
            "--gateway",
            gateway,
            "--people",
            str(people),
            *options,
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _runners.append(proc)
    return proc


def go(procs: list[subprocess.Popen[str]]) -> None:
    """Start runners waiting with ``--wait-go`` at the same moment (all are ready first)."""
    for proc in procs:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line == "ready", f"runner said {line!r}: {proc.stderr.read() if proc.stderr else ''}"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> dict[str, Any]:
    """Wait for a runner to end its attempt on its own (a hang fails here) and return what it
    printed; it must not have crashed."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"runner {proc.pid} hung for {timeout:g}s:\n{err[-3000:]}") from None
    lines = out.strip().splitlines()
    assert lines and lines[-1].startswith("{"), f"runner exited {proc.returncode}:\n{err[-3000:]}"
    result: dict[str, Any] = json.loads(lines[-1])
    result["exit_code"] = proc.returncode
    return result


def kill(proc: subprocess.Popen[str], signum: int = signal.SIGKILL) -> None:
    """SIGKILL a runner that is still running, and reap it (a zombie still looks alive)."""
    assert proc.poll() is None, "the runner ended before it could be killed"
    os.kill(proc.pid, signum)
    proc.communicate()
    assert proc.returncode == -signum


def wait_until(
    condition: Callable[[], bool],
    *,
    what: str,
    proc: subprocess.Popen[str],
    timeout: float = 60,
) -> None:
    """Poll an observable condition (the simulator's ledger, the store) while the runner is
    alive; ``timeout`` only bounds a broken test."""
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"the runner ended before {what}: {proc.communicate()[1]}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.communicate()
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def eventually(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    """Poll an observable condition; ``timeout`` only bounds a broken test."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.005)


def credits(store_url: str, *run_ids: str) -> float:
    """What Playline's ledger says the runs paid."""
    store = open_store(store_url)
    try:
        return round(sum(e.credits for r in run_ids for e in store.read_ledger(r)), 6)
    finally:
        store.close()
