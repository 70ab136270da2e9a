"""Three processes running different plays against one provider account on one store stay
within the provider's rate together; with a gate each, they draw 429s (the contrast).

Measured from the simulator's side: its ledger counts accepted and rejected (429) requests
and the span from the first accepted request to the last. A shared gate starts with half its
burst (6.5 tokens) spent at once, so the sustained rate is (requests - 6.5) / span;
requests / span is printed too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from playline.sim import Simulator, serve
from playline.store import open_store
from stores import durable_kinds, url_for

TOOL = "sim.email.alpha"  # declared 20/s, burst 20
RATE, BURST = 20.0, 20
START = (BURST - 7) / 2  # a new shared gate's tokens: half its burst (see shared_burst)

PLAYS = '''
"""Three plays that call the same provider: a column, a column after a pure one, direct calls."""

import asyncio
import json
import sys

import playline as pl

TOOL = "sim.email.alpha"
PERSON = ("first_name", "last_name", "domain")
# 429s are waited out; with gates of their own, the processes would spend a run's retries.
LIMITS = pl.Limits(retries=None)


def person(row):
    return {k: row[k] for k in PERSON}


@pl.play(name="find-emails", limits=LIMITS)
async def find_emails(ctx, people):
    ds = await (
        ctx.dataset("people", people, key="email")
        .with_column("work_email", lambda row, ctx: ctx.tool(TOOL, person(row)))
        .run()
    )
    return len(ds)


@pl.play(name="score-leads", limits=LIMITS)
async def score_leads(ctx, people):
    ds = await (
        ctx.dataset("leads", people, key="email")
        .with_column("name", lambda row, ctx: row["first_name"] + " " + row["last_name"])
        .with_column("found", lambda row, ctx: ctx.tool(TOOL, person(row)))
        .run()
    )
    return len(ds)


@pl.play(name="one-by-one", limits=LIMITS)
async def one_by_one(ctx, people):
    found = await asyncio.gather(*(ctx.tool(TOOL, person(p)) for p in people))
    return len(found)


PLAYS = {p.name: p for p in (find_emails, score_leads, one_by_one)}

if __name__ == "__main__":
    sim_url, store, name, people_file = sys.argv[1:5]
    gateway = pl.Gateway(sim_url, token="dev")
    gateway.specs()
    print("ready", flush=True)
    sys.stdin.readline()
    with open(people_file) as f:
        people = json.load(f)
    result = pl.run(PLAYS[name], people, store=store, tools=[gateway])
    print(json.dumps({"status": result.status, "error": result.error,
                      "live": result.stats.tool_calls_live}), flush=True)
'''


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with serve(seed=11) as sim:  # the default latency: 20 ms, jittered
        yield sim


def run_three(tmp_path: Path, sim: Simulator, store: str, rows: int) -> dict[str, Any]:
    """Run the three plays at once, ``rows`` people each (none shared), on ``store``; return
    the simulator's ledger."""
    script = tmp_path / "plays.py"
    script.write_text(PLAYS)
    people = sim.people(3 * rows)
    procs = []
    for i, name in enumerate(("find-emails", "score-leads", "one-by-one")):
        slice_file = tmp_path / f"people-{i}.json"
        slice_file.write_text(json.dumps(people[i * rows : (i + 1) * rows]))
        procs.append(
            subprocess.Popen(
                [sys.executable, str(script), sim.url, store, name, str(slice_file)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, "PLAYLINE_GATEWAY_URL": ""},
            )
        )
    for proc in procs:  # a barrier: all imported, their tools listed, before any run starts
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        out, err = proc.communicate(timeout=100)
        assert proc.returncode == 0, err
        result = json.loads(out.strip().splitlines()[-1])
        assert result["status"] == "completed", result["error"]
        assert result["live"] == rows
    ledger: dict[str, Any] = sim.ledger()
    return ledger


@pytest.mark.slow
@pytest.mark.parametrize("kind", durable_kinds())
def test_three_processes_on_one_store_share_the_providers_rate(
    kind: str, sim: Simulator, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    rows = 80  # 240 requests: about 12 s at 19/s
    store = url_for(kind, request, tmp_path)
    ledger = run_three(tmp_path, sim, store, rows)

    accepted = ledger["calls"][TOOL]
    span = ledger["spans"][TOOL]
    sustained = (accepted - START) / span
    print(
        f"\n{kind}: {accepted} requests in {span:.2f} s, {ledger['rejected'].get(TOOL, 0)} "
        f"rejected; {accepted / span:.2f}/s overall, {sustained:.2f}/s sustained "
        f"({sustained / RATE:.0%} of {RATE:g}/s)"
    )
    assert ledger["rejected"].get(TOOL, 0) == 0
    assert accepted == 3 * rows
    assert 0.90 * RATE <= sustained <= RATE
    assert ledger["duplicate_charges"] == 0
    # One gate for the tool and account, learned nothing: the declared rate held.
    [gate] = open_store(store).read_gates(now=0)
    assert gate.key.startswith(f"{TOOL}@") and gate.rate == pytest.approx(RATE * 0.95)


@pytest.mark.slow
def test_three_processes_with_gates_of_their_own_draw_429s(sim: Simulator, tmp_path: Path) -> None:
    """The same three processes, each on a store of its own (so each with a local gate)."""
    rows = 30
    ledger = run_three(tmp_path, sim, "memory://", rows)

    rejected = ledger["rejected"].get(TOOL, 0)
    print(f"\nlocal gates: {ledger['calls'][TOOL]} requests accepted, {rejected} rejected")
    assert rejected > 0
    assert ledger["calls"][TOOL] == 3 * rows  # each 429 was waited out, nothing paid twice
    assert ledger["duplicate_charges"] == 0
