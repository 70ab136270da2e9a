"""`playline plan`, `resume --retry-failed` and `run --refresh`, against the simulator's ledger:
what a plan says a run will cost, and that a retry or a refresh pays only for what it redoes."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import playline
from playline.sim import Simulator
from playline.store import open_store

from clihelp import Cli

DEMO = str(Path(playline.__file__).with_name("demo") / "__init__.py")


@pytest.fixture
def gateway(sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The simulator as the gateway, its ledger and idempotency keys forgotten (so calls an
    earlier test made are charged again here)."""
    sim.reset()
    monkeypatch.setenv("PLAYLINE_GATEWAY_URL", sim.url)
    monkeypatch.setenv("PLAYLINE_GATEWAY_TOKEN", sim.token)
    yield sim.url
    sim.faults(tools={"sim.email.verify": None})


def charges(sim: Simulator) -> dict[str, float]:
    return dict(sim.ledger()["charges"])


def inputs(sim: Simulator) -> Counter[tuple[str, str]]:
    """How often each (tool, input) was charged by the simulator."""
    return Counter(
        {(tool, key): n for tool, per in sim.ledger()["inputs"].items() for key, n in per.items()}
    )


def spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {
        tool: round(after[tool] - before.get(tool, 0.0), 6)
        for tool in after
        if round(after[tool] - before.get(tool, 0.0), 6)
    }


def test_plan_of_the_demo_is_close_before_the_run_and_free_after(
    cli: Cli, sim: Simulator, gateway: str
) -> None:
    before = charges(sim)
    planned = cli("plan", DEMO, "--json")
    assert planned.exit_code == 0, planned.output
    estimate = json.loads(planned.stdout)
    assert charges(sim) == before  # a plan pays nothing
    assert open_store(cli.store).list_runs() == []  # and records nothing
    tools = {t["tool"]: t for t in estimate["tools"]}
    assert set(tools) == {
        "sim.company.enrich", "sim.email.beta", "sim.email.alpha", "sim.email.gamma",
    }  # fmt: skip
    beta = tools["sim.email.beta"]
    assert (beta["calls"], beta["requests"]) == (50, 1)  # one bulk request of 50
    assert beta["hit_rate_from"] == "published coverage" and beta["hit_rate"] == 0.45
    assert tools["sim.email.alpha"]["requests"] == 50  # no bulk endpoint: one call each
    assert tools["sim.email.gamma"]["credits_max"] == 100  # every row could reach it
    assert tools["sim.email.gamma"]["seconds"] > 0  # 5 requests a second
    columns = {c["column"]: c for c in estimate["columns"]}
    assert set(columns) == {"people.company", "people.email"}
    expected = estimate["credits"]["expected"]
    assert expected < estimate["credits"]["max"]

    ran = cli("run", DEMO, "--json")
    assert ran.exit_code == 0, ran.output
    paid = sum(spent(before, charges(sim)).values())
    assert cli.json_lines(ran.stdout)[-1]["stats"]["credits"] == pytest.approx(paid)
    assert abs(expected - paid) <= 0.25 * paid, (expected, paid)

    after = json.loads(cli("plan", DEMO, "--json").stdout)
    assert after["credits"]["expected"] <= 1 and after["credits"]["max"] <= 1
    assert after["from_receipts"] > 0 and after["calls"] == 0


def test_plan_in_words(cli: Cli, gateway: str) -> None:
    result = cli("plan", DEMO)
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())
    assert "Plan of play enrich-people: 50 rows" in out
    assert "credits: about" in out and "expected, at most 250" in out
    assert "sim.email.gamma: 2 credits per input, found or not (per_call)" in out
    assert "are not counted" in out  # what a plan cannot see is said


RETRY_PLAY = """
import itertools
import playline as pl

stamps = itertools.count()

@pl.play
async def verify_people(ctx, input):
    return await (
        ctx.dataset("people", input["people"], key="email")
        .with_column("stamp", lambda row: next(stamps))  # differs whenever a cell is rerun
        .with_column("company", lambda row, ctx: ctx.tool("sim.company.enrich",
                                                         {"domain": row["domain"]}))
        .with_column("check", lambda row, ctx: ctx.tool("sim.email.verify",
                                                       {"email": row["email"]}),
                     when=lambda row: not row.get("skip"))
        .run()
    )
"""


def test_resume_retry_failed_pays_only_for_the_failed_cells(
    cli: Cli, sim: Simulator, gateway: str, tmp_path: Path
) -> None:
    people = [{"email": p["email"], "domain": p["domain"]} for p in sim.people(30, offset=500)]
    people += [{"email": f"{n}@nowhere.test", "domain": "nowhere.test", "skip": True}
               for n in ("ada", "alan")]  # fmt: skip
    play = cli.play(RETRY_PLAY)
    sim.faults(tools={"sim.email.verify": {"down": True}})
    first = cli("run", play, "--input-json", json.dumps({"people": people}), "--run-id", "r1")
    assert first.exit_code == 0, first.output
    assert "retry the failed cells: playline resume r1 --retry-failed" in first.stdout
    store = open_store(cli.store)
    before_rows = {r.key: r for r in store.iter_rows("r1", "people")}
    failed = {k for k, r in before_rows.items() if r.status == "failed"}
    assert len(failed) == 30
    assert all(before_rows[k].cells["check"]["status"] == "failed" for k in failed)

    sim.faults(tools={"sim.email.verify": None})
    paid_before, asked_before = charges(sim), inputs(sim)
    again = cli("resume", "r1", "--retry-failed")
    assert again.exit_code == 0, again.output
    assert "completed run r1" in again.stdout
    # only the failed inputs were paid for: one verification each, nothing else
    assert set(spent(paid_before, charges(sim))) == {"sim.email.verify"}
    asked = inputs(sim) - asked_before
    assert {tool for tool, _ in asked} == {"sim.email.verify"}
    assert sum(asked.values()) == len(failed)
    after = {r.key: r for r in store.iter_rows("r1", "people")}
    assert all(r.status == "completed" for r in after.values())
    for key, row in after.items():  # the cells before the failed one were kept, not rerun
        assert row.values["stamp"] == before_rows[key].values["stamp"]
        assert row.values["company"] == before_rows[key].values["company"]
        assert row.cells["check"]["status"] == ("completed" if key in failed else "skipped")
    doc = json.loads(cli("show", "r1", "--json").stdout)
    assert doc["stats"]["rows_executed"] == len(failed) and doc["stats"]["rows_reused"] == 2
    assert doc["stats"]["tool_calls_live"] == len(failed)  # verify only: company was kept
    assert doc["stats"]["tool_calls_cached"] == 0


def test_run_refresh_buys_one_column_again_and_keeps_the_rest(
    cli: Cli, sim: Simulator, gateway: str
) -> None:
    assert cli("run", DEMO, "--run-id", "d1").exit_code == 0
    paid_before, asked_before = charges(sim), inputs(sim)
    refreshed = cli("run", DEMO, "--refresh", "email", "--run-id", "d2", "--json")
    assert refreshed.exit_code == 0, refreshed.output
    paid = spent(paid_before, charges(sim))
    asked = inputs(sim) - asked_before
    # the email waterfall was bought again (its steps and gamma's checks), nothing else
    assert set(paid) <= {"sim.email.beta", "sim.email.alpha", "sim.email.gamma",
                         "sim.email.verify"}  # fmt: skip
    assert "sim.company.enrich" not in {tool for tool, _ in asked}
    store = open_store(cli.store)
    first: Counter[str] = Counter()
    for entry in store.read_ledger("d1"):
        first[entry.tool] += entry.credits
    for tool in ("sim.email.beta", "sim.email.alpha"):  # the same finds, bought again
        assert paid[tool] == pytest.approx(first[tool]) and paid[tool] > 0
    assert paid["sim.email.gamma"] > 0
    assert _verify_column(store, "d1") > 0
    assert _verify_column(store, "d2") == 0  # the verification column: from receipts
    stats = cli.json_lines(refreshed.stdout)[-1]["stats"]
    assert stats["credits"] == pytest.approx(sum(paid.values()))
    # the refresh is the run's: resuming it pays nothing again
    paid_before = charges(sim)
    assert cli("resume", "d2").exit_code == 0
    assert spent(paid_before, charges(sim)) == {}
    typo = cli("run", DEMO, "--refresh", "emial")
    assert "warning: --refresh emial: the run has no column 'emial'" in " ".join(
        typo.stderr.split()
    )
    assert "(--refresh) re-buys columns in a new run" in " ".join(
        cli("run", DEMO, "--refresh", "email", "--run-id", "d1").stderr.split()
    )


def _verify_column(store: Any, run_id: str) -> float:
    """What the verification column (not the waterfall's checks) paid in ``run_id``."""
    return sum(
        float(r.cells["verification"].get("cost", 0))
        for r in store.iter_rows(run_id, "people")
        if "verification" in r.cells
    )


def test_plan_on_a_store_that_is_not_there_creates_nothing(
    cli: Cli, gateway: str, tmp_path: Path
) -> None:
    fresh = tmp_path / "fresh" / "plan.db"
    fresh.parent.mkdir()

    planned = cli("plan", DEMO, "--store", f"sqlite:///{fresh}", store=False)

    assert planned.exit_code == 0, planned.output
    assert "credits" in planned.stdout and list(fresh.parent.iterdir()) == []


GAMMA_PLAY = """
import playline as pl

PEOPLE = [{"first_name": f, "last_name": "Lovelace", "domain": "acme.io"}
          for f in ("ada", "byron", "anne")]

@pl.play
async def emails(ctx, input):
    return await (
        ctx.dataset("people", PEOPLE, key="first_name")
        .with_column("email", lambda row, ctx: ctx.tool("sim.email.gamma", dict(row)))
        .run()
    )
"""


def test_calls_whose_receipts_were_cleared_are_bought_again_under_new_keys(
    cli: Cli, sim: Simulator, gateway: str
) -> None:
    play = cli.play(GAMMA_PLAY)
    assert cli("run", play).exit_code == 0
    paid = charges(sim)
    assert paid == {"sim.email.gamma": 6.0}  # 3 calls of 2 credits

    cleared = " ".join(cli("cache", "clear", "--yes").stdout.split())

    assert "Deleted 3 receipt(s)" in cleared and "up to about 6 credits" in cleared, cleared
    assert "under new idempotency keys" in cleared, cleared
    # as it says: the simulator, which honours keys, answers them afresh and charges again
    again = cli("run", play, "--json")
    assert again.exit_code == 0, again.output
    assert cli.json_lines(again.stdout)[-1]["stats"]["tool_calls_live"] == 3
    assert charges(sim) == {"sim.email.gamma": 12.0}
    assert sim.ledger()["replayed"] == {}
    # a second run finds the new receipts: nothing more is bought
    assert cli("run", play).exit_code == 0
    assert charges(sim) == {"sim.email.gamma": 12.0}
    # and a --refresh after a clear buys under a key of its own too
    assert cli("cache", "clear", "--yes").exit_code == 0
    assert cli("run", play, "--refresh", "email").exit_code == 0
    assert charges(sim) == {"sim.email.gamma": 18.0}
    assert sim.ledger()["replayed"] == {}
