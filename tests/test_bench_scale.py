"""The scale bench, short form: ``python -m bench scale`` with two processes on two seconds of
work (bench/scale.py describes the full form: 1, 4 and 16 processes and Temporal workers).

What it checks is what the bench's figures rest on, never a timing: every call of the play is
one request to its provider (the bulk operations are left out, or the limits would not bind),
nothing is paid twice, and the store's transactions, connections and gate leases were seen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from playline.tools._declared import PACE

ROOT = Path(__file__).resolve().parents[1]
SECONDS = 2
SHORT = {
    "BENCH_SCALE_PROCESSES": "2",
    "BENCH_SCALE_WORKERS": "",
    "BENCH_SCALE_MORE": "",
    "BENCH_SCALE_SECONDS": str(SECONDS),
}


def _bench() -> tuple[dict[str, Any], str]:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "scale"],
        cwd=ROOT,
        env={**os.environ, **SHORT},
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report, done.stderr


def test_two_processes_make_one_request_a_call_pay_once_and_are_measured() -> None:
    report, table = _bench()
    (config,) = report["configs"]
    summary = json.dumps(config, indent=1)
    assert report["bench"] == "scale" and config["config"] == "2 processes"
    # each provider's rows are its requests (gamma's transient 503s are asked again)
    for tool, limit in report["limits"].items():
        rows = round(limit * PACE * SECONDS)
        sent = config["requests_by_tool"].get(tool, 0)  # a bulk request would be "beta.bulk"
        assert sent >= rows if tool == "gamma" else sent == rows, summary
    assert config["duplicate_charges"] == 0 and config["failed_calls"] == 0, summary
    # the store and its gates, as the bench reads them
    assert config["store_tx_per_s"] > 0 and config["connections_max"] >= 2, summary
    assert config["gate_leases_per_call"] > 0 and config["lease_updates"] > 0, summary
    assert config["gate_slot_hold_ms"] > 0 and config["receipt_write_ms"] > 0, summary
    assert "| 2 processes |" in table
