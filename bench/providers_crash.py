"""providers_crash: the work-email play over four real providers' doubles and a verifier,
killed and resumed, never paying twice.

1,000 people of the simulator's world through ``pl.waterfalls.work_email`` on hunter ->
prospeo -> leadmagic -> dropcontact (an async batch), catch-all addresses checked with
zerobounce, then every email found verified with zerobounce (``bench/providers_crash_child.py``),
against the doubles of ``playline sim --providers`` in a process of their own. Each attempt is a
runner process on a SQLite store. Trials, the doubles reset before each:

- ``clean``: one uninterrupted run (the reference wall time);
- ``sigkill``: the runner SIGKILLed at K seeded moments (5), resumed each time, then resumed
  until every row is completed. A moment is a number of requests the doubles received since
  the attempt began (1 to the clean run's requests / (K + 3)), so every kill lands mid-run,
  with requests in flight.

A request in flight when its runner dies may have been charged with no record of it. Hunter
and Prospeo do not charge a repeat (``repeat_free``): those are asked again on resume, free.
LeadMagic, ZeroBounce and Dropcontact's batch submit would charge a repeat: those calls stay
in doubt (a resume does not buy them again), and the last resume buys them again with
``--retry-in-doubt``, as a user decides to. Checked: every row completed; no double charged
anything twice except those calls (``duplicates`` <= ``in_doubt``, per provider, and 0 for
Hunter and Prospeo); Playline's ledger equals the doubles' charges less those repeats; the
waterfall's credits as ``playline show`` counts them equal the ledger's for its column.
``ratio``: the final resume's wall time against the clean run's.

The documented rates are kept, on a clock ``BENCH_PROVIDERS_CRASH_SCALE`` (25) times faster
than real time for both the doubles and the runners: ZeroBounce's 5 batches a minute would
otherwise make one run take minutes. ``BENCH_PROVIDERS_CRASH_PEOPLE`` (1000),
``BENCH_PROVIDERS_CRASH_KILLS`` (5), ``BENCH_PROVIDERS_CRASH_SEED`` (3).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from playline._engine.tallies import stored_tallies
from playline.sim import SimProcess, spawn
from playline.store import open_store

from .providers_crash_child import FINDERS

ROOT = Path(__file__).resolve().parents[1]
PEOPLE = int(os.environ.get("BENCH_PROVIDERS_CRASH_PEOPLE", "1000"))
KILLS = int(os.environ.get("BENCH_PROVIDERS_CRASH_KILLS", "5"))
SCALE = float(os.environ.get("BENCH_PROVIDERS_CRASH_SCALE", "25"))
SEED = int(os.environ.get("BENCH_PROVIDERS_CRASH_SEED", "3"))
PROVIDERS = (*FINDERS, "zerobounce")
ATTEMPT_TIMEOUT = 600.0
MAX_FINAL_RESUMES = 5
_POLL = 0.01


@dataclass
class Trial:
    name: str
    attempts: list[dict[str, Any]] = field(default_factory=list)
    kills: int = 0
    requests: int = 0
    charged: dict[str, float] = field(default_factory=dict)  # per provider, its own count
    duplicates: dict[str, int] = field(default_factory=dict)
    in_doubt: dict[str, int] = field(default_factory=dict)  # per provider, before retrying
    playline_credits: float = 0.0
    ledger: dict[str, float] = field(default_factory=dict)  # per provider, Playline's ledger
    rows: int = 0
    rows_completed: int = 0
    emails: int = 0
    # the waterfall's credits as `playline show` counts them, and the ledger's for its column
    waterfall_credits: float = 0.0
    waterfall_ledger: float = 0.0

    @property
    def credit_mismatch(self) -> float:
        """The doubles' charges Playline's ledger does not hold: 0, or the answers lost in a
        kill and bought again (at most the in-doubt calls' worth)."""
        return round(sum(self.charged.values()) - self.playline_credits, 6)


def _requests(sim: SimProcess) -> int:
    return sum(sum(sim.double(name)["calls"].values()) for name in PROVIDERS)


def _runner(
    store: str, run_id: str, env: dict[str, str], origin: float, *options: str
) -> subprocess.Popen[str]:
    args = ["--store", store, "--run-id", run_id, "--people", str(PEOPLE)]
    args += ["--scale", str(SCALE), "--origin", repr(origin), *options]
    return subprocess.Popen(
        [sys.executable, "-m", "bench.providers_crash_child", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _attempt(
    trial: Trial,
    sim: SimProcess,
    run: tuple[str, str],
    env: dict[str, str],
    origin: float,
    kill_after: int | None = None,
    *options: str,
) -> str | None:
    """One attempt; with ``kill_after``, SIGKILLed once the doubles received that many more
    requests (unless it finished first). Returns the attempt's status."""
    start, base = time.perf_counter(), _requests(sim)
    proc = _runner(*run, env, origin, *options)
    how = "run"
    if kill_after is not None:
        while proc.poll() is None and _requests(sim) < base + kill_after:
            time.sleep(_POLL)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            trial.kills += 1
            how = "sigkill"
    try:
        out, err = proc.communicate(timeout=ATTEMPT_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise RuntimeError(f"a runner hung for {ATTEMPT_TIMEOUT:g}s:\n{err[-3000:]}") from None
    lines = out.strip().splitlines()
    status = orjson.loads(lines[-1])["status"] if lines and lines[-1].startswith("{") else None
    if status is None and how != "sigkill":
        raise RuntimeError(f"a runner crashed (exit {proc.returncode}):\n{err[-3000:]}")
    wall = round(time.perf_counter() - start, 3)
    trial.attempts.append({"how": how, "exit": proc.returncode, "status": status, "wall_s": wall})
    return status


def run_trial(name: str, sim: SimProcess, folder: Path, env: dict[str, str], origin: float,
              kill_moments: list[int]) -> Trial:  # fmt: skip
    for provider in PROVIDERS:
        sim.double(provider, reset=True)
    trial = Trial(name)
    run = (f"sqlite:///{folder / name}.db", f"providers-crash-{name}")
    for after in kill_moments:
        _attempt(trial, sim, run, env, origin, kill_after=after)
    status = _attempt(trial, sim, run, env, origin)  # what a resume finishes by itself
    if status != "completed":  # calls in doubt: bought again, as the user decides
        store = open_store(run[0])
        try:
            doubtful = store.doubtful_receipts(run[1], now=time.time() * SCALE)
        finally:
            store.close()
        for tool in doubtful.values():
            provider = tool.split(".", 1)[0]
            trial.in_doubt[provider] = trial.in_doubt.get(provider, 0) + 1
        for _ in range(MAX_FINAL_RESUMES):
            if _attempt(trial, sim, run, env, origin, None, "--retry-in-doubt") == "completed":
                break
    trial.requests = _requests(sim)
    for provider in PROVIDERS:
        counted = sim.double(provider)
        trial.charged[provider] = counted["charged"]
        trial.duplicates[provider] = counted["duplicates"]
    store = open_store(run[0])
    try:
        for entry in store.read_ledger(run[1]):
            provider = entry.tool.split(".", 1)[0]
            trial.ledger[provider] = round(trial.ledger.get(provider, 0.0) + entry.credits, 6)
            if entry.column == "email":
                trial.waterfall_ledger = round(trial.waterfall_ledger + entry.credits, 6)
        tally = stored_tallies(store, run[1]).records().get("work_email", {})
        trial.waterfall_credits = float(tally.get("credits") or 0.0)
        trial.playline_credits = round(sum(trial.ledger.values()), 6)
        rows = list(store.iter_rows(run[1], "people"))
    finally:
        store.close()
    trial.rows = len(rows)
    trial.rows_completed = sum(1 for r in rows if r.status == "completed")
    trial.emails = sum(1 for r in rows if (r.values or {}).get("email"))
    return trial


def main() -> dict[str, Any]:
    rng = random.Random(SEED)
    origin = time.time()
    with (
        spawn(seed=7, latency_ms=1, providers=True, time_scale=SCALE, time_origin=origin) as sim,
        tempfile.TemporaryDirectory(prefix="bench-providers-crash-") as tmp,
    ):
        env = {}
        for provider in PROVIDERS:
            env[f"{provider.upper()}_API_KEY"] = sim.token
            env[f"PLAYLINE_{provider.upper()}_URL"] = f"{sim.url}/{provider}"
        clean = run_trial("clean", sim, Path(tmp), env, origin, [])
        spread = max(1, clean.requests // (KILLS + 3))
        moments = [rng.randint(1, spread) for _ in range(KILLS)]
        killed = run_trial("sigkill", sim, Path(tmp), env, origin, moments)
    trials = [clean, killed]
    return {
        "bench": "providers_crash",
        "ratio": round(killed.attempts[-1]["wall_s"] / clean.attempts[-1]["wall_s"], 3),
        "goal": "every row completed; no double charges anything twice but the calls in doubt "
        "bought again with --retry-in-doubt; Playline's ledger = the doubles' charges less those",
        "people": PEOPLE,
        "scale": SCALE,
        "kills": killed.kills,
        "duplicates": sum(sum(t.duplicates.values()) for t in trials),
        "in_doubt": sum(sum(t.in_doubt.values()) for t in trials),
        "credit_mismatch": round(sum(t.credit_mismatch for t in trials), 6),
        "rows_incomplete": sum(PEOPLE - t.rows_completed for t in trials),
        # `playline show`'s waterfall credits less the ledger's for its column (0)
        "waterfall_mismatch": round(
            sum(t.waterfall_credits - t.waterfall_ledger for t in trials), 6
        ),
        "clean_wall_s": clean.attempts[-1]["wall_s"],
        "details": [{**asdict(t), "credit_mismatch": t.credit_mismatch} for t in trials],
    }


if __name__ == "__main__":
    print(orjson.dumps(main()).decode())
