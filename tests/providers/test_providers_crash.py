"""The providers' crash test, short form: the work-email play over hunter -> prospeo ->
leadmagic -> dropcontact (an async batch), zerobounce verifying, against the doubles in a
process of their own, its runner SIGKILLed 5 times and resumed (``python -m bench
providers_crash``, where the trials are described; the full form runs 1,000 people).

What a kill leaves in doubt is what a real provider would: a request Hunter or Prospeo
answered is asked again free (they do not charge a repeat); one LeadMagic, ZeroBounce or
Dropcontact may have charged stays in doubt until the user buys it again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SHORT = {
    "BENCH_PROVIDERS_CRASH_PEOPLE": "80",
    "BENCH_PROVIDERS_CRASH_KILLS": "5",
    "BENCH_PROVIDERS_CRASH_SEED": "3",
}


def _bench() -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "providers_crash"],
        cwd=ROOT,
        env={**os.environ, **SHORT},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def test_killed_runs_over_real_providers_complete_and_never_pay_twice_unasked() -> None:
    report = _bench()
    clean, killed = report["details"]
    people = int(SHORT["BENCH_PROVIDERS_CRASH_PEOPLE"])
    summary = json.dumps(report, indent=1)
    assert killed["kills"] == 5
    assert [a["exit"] for a in killed["attempts"][:5]] == [-9] * 5, summary
    for trial in (clean, killed):
        assert trial["rows"] == trial["rows_completed"] == people, summary
        assert trial["attempts"][-1]["status"] == "completed", summary
    assert clean["credit_mismatch"] == 0 and not any(clean["duplicates"].values()), summary
    # the repeat-free providers: nothing in doubt, nothing charged twice
    # (and their ledger is the provider's: an answer lost in a kill was charged, its repeat free)
    for provider in ("hunter", "prospeo"):
        assert killed["duplicates"][provider] == 0 and provider not in killed["in_doubt"]
        assert killed["ledger"][provider] == killed["charged"][provider], summary
    # the others: charged twice at most what was in doubt, and only once the user asked
    for provider, count in killed["duplicates"].items():
        assert count <= killed["in_doubt"].get(provider, 0), summary
    assert 0 <= killed["credit_mismatch"] <= sum(killed["in_doubt"].values()), summary
    assert killed["emails"] == clean["emails"]  # the same people found
    # the waterfall's credits (`playline show`) are what the ledger charged its column, also
    # for steps a resume answered from the receipts an earlier attempt bought
    for trial in (clean, killed):
        assert trial["waterfall_credits"] == trial["waterfall_ledger"] > 0, summary
