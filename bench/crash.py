"""crash: the people play, run to its end through crashes and stops, never paying twice.

The play of issue 10 (``bench/crash_child.py``: company enrichment in bulk, the ``work_email``
waterfall, verification) over the simulator's first N people (1,200), against a simulator
*process* (``playline.sim.spawn``), each attempt a runner in its own process on a SQLite store.
Trials, each on a fresh store with the simulator reset:

- ``clean``: one uninterrupted run (the reference wall time);
- ``sigkill``: the runner SIGKILLed at K seeded random moments (20), resumed each time;
- ``sigterm``, ``sighup``: the runner stopped by the signal at seeded moments (2 each), resumed;
- ``budget``: stopped by ``--max-credits`` at several caps (a quarter, half and three quarters
  of the clean run's credits), each resume with the next cap;

then resumed until every row is completed. A *moment* is a point in the provider's work: the
runner is signalled once the simulator has worked a seeded random number of inputs since the
attempt began (1 to the clean run's inputs / (K + 3)), so every signal lands mid-run.

Checked in every trial: the simulator's ``duplicate_charges`` is 0, Playline's credits (the
run's ledger) equal the simulator's, every row is completed; after a stop (a signal or a
budget) the two ledgers agree at once (requests in flight at the stop finish and are recorded).
Reference in the same run: the clean run's wall time; ``ratio`` is the slowest final resume
against it (goal: <= 1, no resume slower than a clean run).

``python -m bench crash`` (one JSON line). Smaller: ``BENCH_CRASH_PEOPLE``, ``BENCH_CRASH_KILLS``,
``BENCH_CRASH_STOPS``, ``BENCH_CRASH_CAPS`` (fractions, comma-separated), ``BENCH_CRASH_SEED``.
The simulator runs its default latency (20 ms) with the providers' rates raised
``BENCH_CRASH_RATE_SCALE`` times (2.5) so the full suite takes minutes, not an hour; the
runners pace themselves under those rates.
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

from playline.sim import SimProcess, spawn
from playline.store import open_store

ROOT = Path(__file__).resolve().parents[1]
PEOPLE = int(os.environ.get("BENCH_CRASH_PEOPLE", "1200"))
KILLS = int(os.environ.get("BENCH_CRASH_KILLS", "20"))
STOPS = int(os.environ.get("BENCH_CRASH_STOPS", "2"))
CAPS = [float(c) for c in os.environ.get("BENCH_CRASH_CAPS", "0.25,0.5,0.75").split(",") if c]
SEED = int(os.environ.get("BENCH_CRASH_SEED", "10"))
SCALE = float(os.environ.get("BENCH_CRASH_RATE_SCALE", "2.5"))
RATES = {  # requests/s, published and enforced: the catalog's x SCALE
    "sim.email.alpha": 20 * SCALE,
    "sim.email.beta": 10 * SCALE,
    "sim.email.gamma": 5 * SCALE,
    "sim.company.enrich": 50 * SCALE,
    "sim.email.verify": 50 * SCALE,
}
ATTEMPT_TIMEOUT = 600.0  # seconds: a runner that takes longer has hung
MAX_FINAL_RESUMES = 5
_POLL = 0.02


@dataclass
class Attempt:
    how: str  # "run", "sigkill", "sigterm", "sighup", "budget"
    exit_code: int | None
    status: str | None
    wall_s: float
    sim_credits: float
    playline_credits: float


@dataclass
class Trial:
    name: str
    attempts: list[Attempt] = field(default_factory=list)
    kills: int = 0
    stops: int = 0
    duplicates: int = 0
    sim_credits: float = 0.0
    playline_credits: float = 0.0
    rows: int = 0
    rows_completed: int = 0
    stop_mismatches: list[float] = field(default_factory=list)  # after graceful stops
    requests: int = 0

    @property
    def credit_mismatch(self) -> float:
        return round(abs(self.sim_credits - self.playline_credits), 6)

    @property
    def final_wall_s(self) -> float:
        return self.attempts[-1].wall_s if self.attempts else 0.0


def _requests(sim: SimProcess) -> int:
    """The provider's work so far, in inputs (a bulk request counts its items): unlike the
    number of requests, the work left is the same however an attempt packs it."""
    ledger = sim.ledger()
    items = ledger.get("items", {})
    return sum(items.get(tool, n) for tool, n in ledger["calls"].items())


def _playline_credits(store_url: str, run_id: str) -> float:
    store = open_store(store_url)
    try:
        return round(sum(e.credits for e in store.read_ledger(run_id)), 6)
    finally:
        store.close()


def _runner(sim: SimProcess, store_url: str, run_id: str, *options: str) -> subprocess.Popen[str]:
    args = ["--store", store_url, "--run-id", run_id, "--gateway", sim.url, "--token", sim.token]
    return subprocess.Popen(
        [sys.executable, "-m", "bench.crash_child", *args, "--people", str(PEOPLE), *options],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _outcome(proc: subprocess.Popen[str]) -> tuple[int, str | None, str]:
    try:
        out, err = proc.communicate(timeout=ATTEMPT_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise RuntimeError(f"a runner hung for {ATTEMPT_TIMEOUT:g}s:\n{err[-3000:]}") from None
    lines = out.strip().splitlines()
    status = orjson.loads(lines[-1])["status"] if lines and lines[-1].startswith("{") else None
    if status is None and proc.returncode not in (-signal.SIGKILL,):
        raise RuntimeError(f"a runner crashed (exit {proc.returncode}):\n{err[-3000:]}")
    return proc.returncode, status, err


def _attempt(
    trial: Trial,
    sim: SimProcess,
    store_url: str,
    run_id: str,
    *,
    how: str = "run",
    after: int | None = None,
    options: tuple[str, ...] = (),
) -> Attempt:
    """One attempt; with ``how`` a signal, it is sent once the simulator has accepted
    ``after`` more requests (unless the runner finished first)."""
    start = time.perf_counter()
    base = _requests(sim)
    proc = _runner(sim, store_url, run_id, *options)
    signum = {"sigkill": signal.SIGKILL, "sigterm": signal.SIGTERM, "sighup": signal.SIGHUP}
    if how in signum:
        assert after is not None
        while proc.poll() is None and _requests(sim) < base + after:
            time.sleep(_POLL)
        if proc.poll() is None:
            proc.send_signal(signum[how])
            if how == "sigkill":
                trial.kills += 1
            else:
                trial.stops += 1
        else:
            how = "run"  # it finished before the moment came
    code, status, _ = _outcome(proc)
    attempt = Attempt(
        how=how,
        exit_code=code,
        status=status,
        wall_s=round(time.perf_counter() - start, 3),
        sim_credits=sim.ledger()["credits"],
        playline_credits=_playline_credits(store_url, run_id),
    )
    trial.attempts.append(attempt)
    if how in ("sigterm", "sighup", "budget"):
        trial.stop_mismatches.append(round(abs(attempt.sim_credits - attempt.playline_credits), 6))
    return attempt


def _finish(trial: Trial, sim: SimProcess, store_url: str, run_id: str, *options: str) -> None:
    """Resume until the run is completed, then take the trial's figures."""
    for _ in range(MAX_FINAL_RESUMES):
        if _attempt(trial, sim, store_url, run_id, options=options).status == "completed":
            break
    ledger = sim.ledger()
    trial.duplicates = ledger["duplicate_charges"]
    trial.sim_credits = ledger["credits"]
    trial.requests = _requests(sim)
    trial.playline_credits = _playline_credits(store_url, run_id)
    store = open_store(store_url)
    try:
        rows = list(store.iter_rows(run_id, "people"))
    finally:
        store.close()
    trial.rows = len(rows)
    trial.rows_completed = sum(1 for r in rows if r.status == "completed")


def _prepare(sim: SimProcess) -> None:
    sim.reset()
    sim.faults(
        tools={tool: {"rate_per_second": r, "burst": max(1, int(r))} for tool, r in RATES.items()}
    )


def run_trial(
    name: str,
    sim: SimProcess,
    folder: Path,
    *,
    rng: random.Random,
    spread: int,
    clean_credits: float,
) -> Trial:
    """One trial on a fresh store; ``spread`` bounds the requests before each signal."""
    _prepare(sim)
    trial = Trial(name)
    store_url = f"sqlite:///{folder / name}.db"
    run_id = f"crash-{name}"
    if name in ("sigkill", "sigterm", "sighup"):
        for _ in range(KILLS if name == "sigkill" else STOPS):
            _attempt(trial, sim, store_url, run_id, how=name, after=rng.randint(1, spread))
    elif name == "budget":
        for fraction in CAPS:
            cap = f"{round(clean_credits * fraction, 3):g}"
            _attempt(trial, sim, store_url, run_id, how="budget", options=("--max-credits", cap))
            trial.stops += 1
    # a resume keeps the run's budget unless given another: lift it
    _finish(
        trial,
        sim,
        store_url,
        run_id,
        *(("--max-credits", "1e9") if CAPS and name == "budget" else ()),
    )
    return trial


def main() -> dict[str, Any]:
    rng = random.Random(SEED)
    with spawn(seed=7) as sim, tempfile.TemporaryDirectory(prefix="bench-crash-") as tmp:
        folder = Path(tmp)
        clean = Trial("clean")
        _prepare(sim)
        _finish(clean, sim, f"sqlite:///{folder / 'clean'}.db", "crash-clean")
        # a resumed attempt may pack its remaining calls in fewer requests than a clean run:
        # leave room so the last signal still lands mid-run
        spread = max(1, clean.requests // (max(KILLS, STOPS) + 3))
        trials = [clean] + [
            run_trial(name, sim, folder, rng=rng, spread=spread, clean_credits=clean.sim_credits)
            for name in ("sigkill", "sigterm", "sighup", "budget")
        ]
    resumed = [t for t in trials if t.name != "clean"]
    clean_wall = clean.final_wall_s
    slowest = max(t.final_wall_s for t in resumed)
    return {
        "bench": "crash",
        "ratio": round(slowest / clean_wall, 3) if clean_wall else None,
        "goal": (
            "0 duplicate charges and Playline's credits = the simulator's in every trial; "
            "every row completed; no resume slower than a clean run (ratio <= 1)"
        ),
        "people": PEOPLE,
        "seed": SEED,
        "trials": len(trials),
        "kills": sum(t.kills for t in trials),
        "stops": sum(t.stops for t in trials),
        "duplicates": sum(t.duplicates for t in trials),
        "credit_mismatch": round(sum(t.credit_mismatch for t in trials), 6),
        "stop_mismatch": round(sum(sum(t.stop_mismatches) for t in trials), 6),
        "rows_incomplete": sum(t.rows - t.rows_completed for t in trials)
        + sum(PEOPLE - t.rows for t in trials),
        "clean_wall_s": clean_wall,
        "final_resume_wall_s": {t.name: t.final_wall_s for t in resumed},
        "attempt_wall_s": {t.name: [a.wall_s for a in t.attempts] for t in trials},
        "details": [
            {
                **{k: v for k, v in asdict(t).items() if k != "attempts"},
                "credit_mismatch": t.credit_mismatch,
                "attempts": [
                    {"how": a.how, "exit": a.exit_code, "status": a.status} for a in t.attempts
                ],
            }
            for t in trials
        ],
    }


if __name__ == "__main__":
    print(orjson.dumps(main()).decode())
