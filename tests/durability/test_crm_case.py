"""Issue 42: a CRM export full of case and whitespace variants pays each person once.

A 500-row file made here (the simulator's people, some of them two or three times, each
repeat written in another case or spacing: `Maya,Baker,verpaxhealth.com` then
`MAYA, baker ,VerpaxHealth.com `) goes the way the getting-started guide takes a newcomer:
`playline run` of a play that reads it with `ctx.csv` and finds emails with the shipped
`work_email` waterfall over the simulator's gateway, then `playline show`. The repeats are
rows of their own (row keys are kept as written), and their calls are answered by their
normalised twins: the simulator charges no input twice, sees each person once, and `show`
counts the calls that a twin answered.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from playline.cli import app
from playline.sim import Simulator, serve

ROWS = 500
TWICE, THRICE = 80, 20  # people written two and three times
EMAIL_TOOLS = ("sim.email.alpha", "sim.email.beta", "sim.email.gamma", "sim.email.verify")

PLAY = """
import playline as pl

@pl.play
async def crm(ctx, input):
    return await (
        ctx.dataset("leads", ctx.csv(input["file"]))
        .with_column("email", lambda row, ctx: ctx.waterfall("work_email", dict(row)))
        .run(description="Work emails of a CRM export")
    )
"""


@pytest.fixture
def sim() -> Iterator[Simulator]:
    """The simulator on loopback, its email tools' rate limits lifted (a CLI run paces on
    the real clock)."""
    with serve(seed=7, latency_ms=0) as running:
        running.faults(
            tools={t: {"rate_per_second": 1_000_000, "burst": 1_000_000} for t in EMAIL_TOOLS}
        )
        yield running


def _normal(value: str) -> str:
    """A name or a domain as the simulator's tools compare it (``normalize=`` kinds)."""
    return " ".join(value.split()).casefold()


def _respell(value: str, rng: random.Random, taken: set[str]) -> str:
    """``value`` in another case or spacing, not one of ``taken`` nor the form it is
    compared in (so every call of the file is another spelling of its key)."""
    forms = [
        str.upper,
        str.lower,
        str.swapcase,
        lambda v: f" {v}",
        lambda v: f"{v}  ",
        lambda v: f" {v.upper()} ",
        lambda v: v[:1].lower() + v[1:].upper(),
    ]
    for form in rng.sample(forms, len(forms)):
        written = form(value)
        if written not in taken and written != _normal(written):
            return written
    raise AssertionError(f"no new spelling of {value!r}")


def crm_rows(people: list[dict[str, Any]], rng: random.Random) -> tuple[list[list[str]], int]:
    """The rows of the export and how many repeat a person written before (variants)."""
    distinct = ROWS - TWICE - 2 * THRICE
    chosen = people[:distinct]
    times = [3] * THRICE + [2] * TWICE + [1] * (distinct - TWICE - THRICE)
    rows = []
    for person, n in zip(chosen, times, strict=True):
        first = [person["first_name"], person["last_name"], person["domain"]]
        rows.append(first)
        seen = [{field} for field in first]
        for _ in range(n - 1):
            # every field respelled, so each repeat is a row of its own
            variant = [_respell(v, rng, seen[i]) for i, v in enumerate(first)]
            for i, v in enumerate(variant):
                seen[i].add(v)
            rows.append(variant)
    rng.shuffle(rows)  # a repeat anywhere in the file, before its first spelling too
    return rows, ROWS - distinct


def _write(path: Path, rows: list[list[str]], rng: random.Random) -> None:
    titles = ("CEO", "VP Sales", "Head of RevOps", "Engineer", "")
    lines = ["first_name,last_name,domain,title"]
    for first, last, domain in rows:
        lines.append(f'"{first}","{last}","{domain}",{rng.choice(titles)}')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_a_crm_export_with_case_and_space_variants_pays_each_person_once(
    sim: Simulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(42)
    # as a CRM holds them: names capitalised (no row is written as its key's form)
    people = [p for p in sim.people(limit=2 * ROWS) if p["first_name"] != _normal(p["first_name"])]
    rows, variants = crm_rows(people, rng)
    assert (len(rows), variants) == (ROWS, TWICE + 2 * THRICE)
    distinct = ROWS - variants
    assert len({tuple(r) for r in rows}) == ROWS  # no two rows written alike
    crm = tmp_path / "crm.csv"
    _write(crm, rows, rng)
    play = tmp_path / "crm_play.py"
    play.write_text(PLAY, encoding="utf-8")
    store = f"sqlite:///{tmp_path}/playline.db"
    monkeypatch.setenv("PLAYLINE_GATEWAY_TOKEN", sim.token)
    cli = CliRunner()

    ran = cli.invoke(
        app, ["run", str(play), "-i", f"file={crm}", "--gateway", sim.url, "--store", store]
    )

    assert ran.exit_code == 0, ran.output
    ledger = sim.ledger()
    assert ledger["duplicate_charges"] == 0, ledger["inputs"]
    # every person reaches beta, the first step: the simulator saw each of them once
    beta = ledger["items"].get("sim.email.beta.bulk", 0) + ledger["calls"].get("sim.email.beta", 0)
    assert beta == distinct
    assert all(n == 1 for inputs in ledger["inputs"].values() for n in inputs.values())
    run_id = ran.output.split()[1]
    shown = cli.invoke(app, ["show", run_id, "--json", "--store", store])
    assert shown.exit_code == 0, shown.output
    doc = json.loads(shown.output)
    assert doc["stats"]["rows"] == ROWS  # repeats are rows of their own, keyed as written
    tools = doc["trace"]["tools"]
    assert tools["sim.email.beta"]["twins"] == variants  # each repeat's beta call
    steps = {s["id"]: s for s in doc["waterfalls"][0]["steps"]}
    # a repeat that reaches a step is answered there by its twin, never bought
    assert (
        tools["sim.email.alpha"]["twins"]
        == steps["alpha"]["attempts"] - ledger["calls"]["sim.email.alpha"]
    )
    assert doc["trace"]["twins"] == doc["stats"]["tool_calls_twins"]
    said = " ".join(cli.invoke(app, ["show", run_id, "--store", store]).output.split())
    twins = said[said.index(f"{doc['trace']['twins']} call(s) answered by a normalised twin") :]
    assert f"sim.email.beta {variants}" in twins.split("Waterfall")[0]
