"""peers: one enrichment job done by Playline, a hand-written asyncio script and DBOS.

The job: a work email for each of 2,000 people of the simulated world
(``/__world/people?limit=2000``, seed 7) through the 3-step waterfall beta -> alpha -> gamma
of ``src/playline/waterfalls/simulated.py`` (a gamma guess below 0.6 confidence is kept
only when the verifier says ``valid``), against the simulator with its real rate limits
(alpha 20/s, beta 10/s with a bulk operation of 50, gamma 5/s) and default latency.

Three programs in ``bench/peers/``, each a subprocess printing a JSON line:

- ``playline_job.py``: ``ctx.waterfall("work_email", ...)`` in a column, SQLite store;
- ``asyncio_job.py``: httpx, a semaphore per provider, its own retries, single calls only;
- ``dbos_job.py``: DBOS Transact, a workflow per person, each call a step with retries.

The peers run in their own virtualenv, ``bench/.peers-venv``, made from the pinned
``bench/peers/requirements.txt`` when missing or out of date; they import nothing from
Playline. Each program gets a fresh simulator (``/__reset``), runs, then runs a second time
against the same simulator and its own state (Playline answers from its receipts; the peers
pay again). The simulator's ledger gives requests, 429s, credits and duplicate charges.

``python -m bench peers`` prints a JSON line and, on stderr, a table. A full run takes about
15 minutes (the hand-written script is bound by beta's 10 single calls/s);
``BENCH_ROWS_PEERS=200`` makes a quick one.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from playline.sim import Simulator, serve

PEOPLE = int(os.environ.get("BENCH_ROWS_PEERS", "2000"))
HERE = Path(__file__).resolve().parent
PROGRAMS_DIR = HERE / "peers"
REQUIREMENTS = PROGRAMS_DIR / "requirements.txt"
VENV = HERE / ".peers-venv"
_STAMP = VENV / ".requirements.sha256"
PROGRAM_TIMEOUT_S = 3600.0
GOAL = "<= 1.05x the hand-written script, ahead of DBOS, 0 429s, fewer requests, 0 re-run requests"


def peers_python() -> Path:
    """The peers' interpreter, (re)creating ``bench/.peers-venv`` when requirements changed."""
    python = VENV / "bin" / "python"
    want = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    if python.exists() and _STAMP.exists() and _STAMP.read_text().strip() == want:
        return python
    print(f"peers: installing {REQUIREMENTS.name} into {VENV} ...", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)],
        capture_output=True,
        text=True,
    )
    if install.returncode != 0:
        raise RuntimeError(
            f"could not install the peers' packages into {VENV}: {_tail(install.stderr)}; "
            f"check that PyPI is reachable, or run `{python} -m pip install -r {REQUIREMENTS}` "
            "by hand and run the bench again"
        )
    _STAMP.write_text(want + "\n")
    return python


def _tail(text: str, lines: int = 5) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])


def _people(sim: Simulator) -> list[dict[str, Any]]:
    response = httpx.get(f"{sim.url}/__world/people", params={"limit": PEOPLE})
    response.raise_for_status()
    people: list[dict[str, Any]] = response.json()["people"]
    return people


def run_program(
    name: str, python: Path, sim: Simulator, people_file: Path, state: Path
) -> dict[str, Any]:
    """Run one program to the end; its JSON line plus the process's own wall time."""
    script = PROGRAMS_DIR / f"{name}_job.py"
    command = [str(python), str(script), "--url", sim.url, "--token", sim.token]
    command += ["--people", str(people_file), "--state", str(state)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=PROGRAM_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(
            f"{script.name} ran past {PROGRAM_TIMEOUT_S:g} s; run it by hand to see where it "
            f"hangs: {' '.join(command)}"
        ) from exc
    process_s = time.perf_counter() - start
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"{script.name} failed (exit {proc.returncode}): {_tail(proc.stderr)}; "
            f"run it by hand: {' '.join(command)}"
        )
    out: dict[str, Any] = json.loads(lines[-1])
    out["process_s"] = process_s
    return out


def _diff(now: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    keys = sorted(set(now) | set(before))
    return {k: now.get(k, 0) - before.get(k, 0) for k in keys if now.get(k, 0) - before.get(k, 0)}


def figures(
    out: dict[str, Any],
    people: list[dict[str, Any]],
    ledger: dict[str, Any],
    before: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One run's figures: its own output, and the ledger's change over the run."""
    before = before or {"calls": {}, "rejected": {}, "errors": {}, "credits": 0.0}
    calls = _diff(ledger["calls"], before["calls"])
    rejected = _diff(ledger["rejected"], before["rejected"])
    errors = _diff(ledger["errors"], before["errors"])
    by_tool = {t: calls.get(t, 0) + rejected.get(t, 0) for t in sorted(set(calls) | set(rejected))}
    found = out["found"]
    return {
        "wall_s": round(out["wall_s"], 3),
        "process_s": round(out["process_s"], 3),
        "requests": sum(by_tool.values()),
        "requests_by_tool": by_tool,
        "rejected_429": sum(rejected.values()),
        "rejected_by_tool": rejected,
        "errors_5xx": sum(errors.values()),
        "duplicate_charges": ledger["duplicate_charges"] - before.get("duplicate_charges", 0),
        "credits": round(ledger["credits"] - before["credits"], 3),
        "found": sum(1 for f in found if f),
        "found_correct": sum(1 for f, p in zip(found, people, strict=True) if f == p["email"]),
    }


def measure(
    name: str, python: Path, sim: Simulator, people: list[dict[str, Any]], tmp: Path
) -> dict[str, Any]:
    """A fresh simulator, the program once, then again on the same simulator and state."""
    people_file = tmp / "people.json"
    state = tmp / name
    state.mkdir()
    sim.reset()
    print(f"peers: {name}, first run ...", file=sys.stderr, flush=True)
    first = run_program(name, python, sim, people_file, state)
    after_first = sim.ledger()
    print(f"peers: {name}, second run ...", file=sys.stderr, flush=True)
    second = run_program(name, python, sim, people_file, state)
    after_second = sim.ledger()
    return {
        **figures(first, people, after_first),
        "rerun": figures(second, people, after_second, after_first),
    }


def main() -> dict[str, Any]:
    peer = peers_python()
    ours = Path(sys.executable)
    with serve(seed=7) as sim, tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        people = _people(sim)
        (tmp / "people.json").write_text(json.dumps(people))
        programs = {
            "playline": measure("playline", ours, sim, people, tmp),
            "asyncio": measure("asyncio", peer, sim, people, tmp),
            "dbos": measure("dbos", peer, sim, people, tmp),
        }
    pl_, hand, dbos = programs["playline"], programs["asyncio"], programs["dbos"]
    ratio = pl_["wall_s"] / hand["wall_s"]
    report = {
        "bench": "peers",
        "ratio": round(ratio, 3),
        "goal": GOAL,
        "met": (
            ratio <= 1.05
            and pl_["wall_s"] < dbos["wall_s"]
            and pl_["rejected_429"] == 0
            and pl_["requests"] < min(hand["requests"], dbos["requests"])
            and pl_["rerun"]["requests"] == 0
        ),
        "people": len(people),
        "vs_dbos": round(pl_["wall_s"] / dbos["wall_s"], 3),
        **programs,
    }
    print(table(report), file=sys.stderr, flush=True)
    return report


def table(report: dict[str, Any]) -> str:
    names = ("playline", "asyncio", "dbos")
    rows: list[tuple[str, Any]] = [
        ("wall s", lambda r: f"{r['wall_s']:.1f}"),
        ("requests", lambda r: r["requests"]),
        ("429s", lambda r: r["rejected_429"]),
        ("5xx", lambda r: r["errors_5xx"]),
        ("duplicate charges", lambda r: r["duplicate_charges"]),
        ("credits", lambda r: f"{r['credits']:.1f}"),
        ("emails found", lambda r: r["found"]),
        ("  correct", lambda r: r["found_correct"]),
        ("re-run wall s", lambda r: f"{r['rerun']['wall_s']:.1f}"),
        ("re-run requests", lambda r: r["rerun"]["requests"]),
        ("re-run 429s", lambda r: r["rerun"]["rejected_429"]),
        ("re-run credits", lambda r: f"{r['rerun']['credits']:.1f}"),
        ("re-run dup. charges", lambda r: r["rerun"]["duplicate_charges"]),
    ]
    lines = [f"peers: {report['people']} people, work_email waterfall (beta -> alpha -> gamma)"]
    lines.append(f"{'':22}" + "".join(f"{n:>12}" for n in names))
    for label, cell in rows:
        lines.append(f"{label:22}" + "".join(f"{cell(report[n])!s:>12}" for n in names))
    lines.append("requests by tool (first run):")
    tools = sorted({t for n in names for t in report[n]["requests_by_tool"]})
    for tool in tools:
        counts = "".join(f"{report[n]['requests_by_tool'].get(tool, 0):>12}" for n in names)
        lines.append(f"  {tool:20}" + counts)
    lines.append(
        f"playline / asyncio wall: {report['ratio']:.3f}   playline / dbos wall: "
        f"{report['vs_dbos']:.3f}   goal met: {report['met']}"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(json.dumps(main()))
