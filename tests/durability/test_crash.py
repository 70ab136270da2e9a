"""Issue 10's crash suite, short form: the people play against a simulator process, its runner
SIGKILLed at 5 seeded moments (and stopped by SIGTERM, SIGHUP and budgets), resumed each time
until every row completes; no input is charged twice and Playline's ledger equals the
provider's in every trial.

It runs ``python -m bench crash`` (bench/crash.py, where the trials are described) on fewer
people; the full form (1,200 people, 20 kills) is that benchmark. Its wall times are reported,
never asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from crash_helpers import ROOT

SHORT = {
    "BENCH_CRASH_PEOPLE": "40",
    "BENCH_CRASH_KILLS": "5",
    "BENCH_CRASH_STOPS": "1",
    "BENCH_CRASH_CAPS": "0.5",
    "BENCH_CRASH_SEED": "10",
    "BENCH_CRASH_RATE_SCALE": "10",
}


def _crash_suite() -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "crash"],
        cwd=ROOT,
        env={**os.environ, **SHORT},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def test_killed_stopped_and_resumed_runs_never_pay_twice() -> None:
    report = _crash_suite()
    trials = {t["name"]: t for t in report["details"]}
    assert set(trials) == {"clean", "sigkill", "sigterm", "sighup", "budget"}
    people = int(SHORT["BENCH_CRASH_PEOPLE"])
    for trial in trials.values():
        summary = json.dumps(trial, indent=1)
        assert trial["duplicates"] == 0, summary
        assert trial["credit_mismatch"] == 0, summary
        assert trial["rows"] == trial["rows_completed"] == people, summary
        assert trial["attempts"][-1]["status"] == "completed", summary
        # after a stop (a signal, a budget) the ledgers agree at once: nothing in flight lost
        assert all(m == 0 for m in trial["stop_mismatches"]), summary
    # the signals landed mid-run: each killed or stopped attempt ended early
    assert trials["sigkill"]["kills"] == 5
    assert [a["exit"] for a in trials["sigkill"]["attempts"][:-1]] == [-9] * 5
    for name in ("sigterm", "sighup"):
        assert trials[name]["stops"] == 1
        assert trials[name]["attempts"][0] == {"how": name, "exit": 3, "status": "suspended"}
    assert [a["status"] for a in trials["budget"]["attempts"][:-1]] == ["failed"]
    assert report["duplicates"] == 0 and report["credit_mismatch"] == 0
