"""Mutation tests of the invariants: ``make mutate``.

Each mutant in ``mutants.py`` (beside this file) is a plausible bug in the engine or the
store, described by a file, an exact snippet of its code (the anchor) and the snippet that
replaces it. For each mutant this copies ``src/`` to a temporary directory, applies the
mutant there (never to the working tree), puts the copy first on ``PYTHONPATH`` and runs
the few tests that guard the invariant it breaks. A mutant is killed when a test fails; the
report names the first test that did (``pytest -x``). A mutant that no test kills is
reported SURVIVED, and the run exits non-zero: the invariant it breaks needs a test.

An anchor must occur exactly once in its file, or nothing runs: when the code changes, the
list is brought up to date instead of silently mutating nothing. A mutant whose tests do not
run (the copy does not import, a collection error, no test selected: pytest's exit status 2
or more) is reported BROKEN and fails the run as well: a mutant must be a bug the tests could
miss, not a crash.

Why a runner of described mutants and not ``mutmut`` or ``cosmic-ray``: both make their
mutants with a fixed set of operators (flip a comparison, drop a call, swap a constant) over
whole files, and neither takes a named list of hand-written replacements (cosmic-ray takes
new operators as plugins: a class per bug, finding its own syntax nodes). The invariants
here are about order and ownership (settle after the commit, another owner's result wins,
the claim before the send), which no operator writes: moving a loop ahead of an ``await``,
or replacing ``call.key in kept`` by ``False``. Their operators over the engine and the store
would also make thousands of mutants, far past the ten minutes CI allows.

Usage: ``python scripts/mutate.py [NAME ...] [--jobs N] [--list]``.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from mutants import MUTANTS, Mutant

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
TIMEOUT = 120  # seconds one test may take (pytest-timeout): a mutant that hangs is killed by it
_FAILED = re.compile(r"^(FAILED|ERROR) (\S.*?)(?: - .*)?$")  # -rfE: "FAILED node - why"


@dataclass(frozen=True, slots=True)
class Outcome:
    mutant: Mutant
    verdict: str  # "killed", "SURVIVED" or "BROKEN"
    test: str  # the killing test, or what went wrong
    seconds: float


def check_anchors(mutants: Sequence[Mutant]) -> list[str]:
    """What is wrong with the mutants' anchors: each must occur exactly once in its file."""
    problems = []
    names = [m.name for m in mutants]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"{name}: two mutants have this name")
    for mutant in mutants:
        path = SRC / mutant.file
        if not path.is_file():
            problems.append(f"{mutant.name}: no file src/{mutant.file}")
            continue
        count = path.read_text().count(mutant.anchor)
        if count != 1:
            problems.append(
                f"{mutant.name}: its anchor occurs {count} times in src/{mutant.file} "
                "(it must occur exactly once: update the anchor to the code as it is now)"
            )
        if isinstance(mutant.tests, str) or not mutant.tests:
            problems.append(f"{mutant.name}: its tests must be a tuple of pytest arguments")
        if mutant.anchor == mutant.replacement:
            problems.append(f"{mutant.name}: its replacement is its anchor")
    return problems


def _env(src: Path, store: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
    env.pop("PYTEST_ADDOPTS", None)
    env["PLAYLINE_TEST_STORE"] = store  # the tests' store (the conformance suite's, too)
    return env


def mutated_tree(mutant: Mutant, into: Path) -> Path:
    """A copy of ``src/`` with ``mutant`` applied; returns the copy's ``src``."""
    src = into / "src"
    shutil.copytree(SRC, src, ignore=shutil.ignore_patterns("__pycache__"))
    path = src / mutant.file
    path.write_text(path.read_text().replace(mutant.anchor, mutant.replacement, 1))
    return src


def run_mutant(mutant: Mutant, tests: Sequence[str] = ()) -> Outcome:
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.name}-") as tmp:
        src = mutated_tree(mutant, Path(tmp))
        env = _env(src, mutant.store)
        where = subprocess.run(
            [sys.executable, "-c", "import playline; print(playline.__file__)"],
            env=env,
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        if not where.stdout.startswith(str(src)):  # a crash on import, or another playline
            tail = "\n".join((where.stdout + where.stderr).strip().splitlines()[-6:])
            return Outcome(mutant, "BROKEN", f"playline not imported from the copy:\n{tail}", 0)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-x",
                "-q",
                "-rfE",
                # the summary names the killer; a long traceback of some failures crashes
                # CPython 3.11's parser inside pytest (INTERNALERROR: AST recursion depth)
                "--tb=line",
                "-p",
                "no:cacheprovider",
                "-p",
                "no:xdist",  # mutants already run side by side (--jobs): one process each
                f"--timeout={TIMEOUT}",
                *(tests or mutant.tests),
            ],
            env=env,
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
    seconds = time.monotonic() - start
    if done.returncode == 0:
        return Outcome(mutant, "SURVIVED", "", seconds)
    lines = done.stdout.splitlines()
    summary = next((i for i, line in enumerate(lines) if "short test summary info" in line), 0)
    failed = [m.group(2) for m in map(_FAILED.match, lines[summary:]) if m]
    if done.returncode == 1 and failed:
        return Outcome(mutant, "killed", failed[0], seconds)
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
    return Outcome(mutant, "BROKEN", f"pytest exit status {done.returncode}:\n{tail}", seconds)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="run only these mutants (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once (default 2)")
    parser.add_argument(
        "--tests",
        help="run these pytest arguments instead of each mutant's tests (to find the tests "
        "that kill a new mutant), e.g. --tests 'tests/engine -k budget'",
    )
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    args = parser.parse_args(argv)
    problems = check_anchors(MUTANTS)
    if problems:
        print("mutate: the mutant list does not match the code:", *problems, sep="\n  ")
        return 2
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names]
    unknown = set(args.names) - {m.name for m in MUTANTS}
    if unknown:
        print(f"mutate: no mutant named {', '.join(sorted(unknown))} (see --list)")
        return 2
    if args.list:
        for mutant in chosen:
            print(f"{mutant.name:32} src/{mutant.file}: {mutant.why}")
        return 0
    width = max(len(m.name) for m in chosen)
    start = time.monotonic()
    outcomes = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        tests = shlex.split(args.tests or "")
        for outcome in pool.map(lambda m: run_mutant(m, tests), chosen):  # in the list's order
            outcomes.append(outcome)
            where = f"src/{outcome.mutant.file}"
            print(
                f"{outcome.mutant.name:{width}} {outcome.verdict:8} {outcome.test or where}"
                f"  ({outcome.seconds:.0f} s)",
                flush=True,
            )
    bad = [o for o in outcomes if o.verdict != "killed"]
    killed = len(outcomes) - len(bad)
    print(f"\n{killed} of {len(outcomes)} mutants killed in {time.monotonic() - start:.0f} s")
    for outcome in bad:
        print(f"{outcome.verdict}: {outcome.mutant.name} ({outcome.mutant.why})")
        if outcome.verdict == "BROKEN":
            print(outcome.test)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
