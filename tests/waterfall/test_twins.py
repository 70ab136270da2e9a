"""Normalised twins (issue 42): calls written otherwise than the input they are keyed on
(`Maya` and `MAYA`, ` Baker `) that a purchase of the same run answered, counted per tool and
in the run's stats; and every tool a shipped waterfall calls says how its inputs compare, so
a CRM export's case and whitespace variants share their receipts on every path a newcomer
takes (the simulator's work_email over the gateway, the providers' waterfalls)."""

from __future__ import annotations

from typing import Any

import pytest

import playline as pl
from playline.providers import PROVIDERS
from playline.sim import Simulator
from playline.waterfalls.providers import EMAIL_FINDERS, PHONE_FINDERS, VERIFIERS

from .helpers import fresh_store, run, waterfall_play

SPELLINGS = ["Maya", "MAYA", " maya ", "maya", "Maya"]  # one person; the last two as keyed
# and as the first


def finder(registry: pl.ToolRegistry, sent: list[str], **declared: Any) -> None:
    @registry.tool("t.find", batch=pl.Batch(max_size=50), cost=pl.Cost(1, charge="on_hit"),
                   **declared)  # fmt: skip
    def find(inputs: list[dict[str, Any]]) -> list[Any]:
        sent.extend(i["first_name"] for i in inputs)
        return [{"email": "maya@verpax.io"} for _ in inputs]


def spellings_play(spellings: list[str]) -> Any:
    """One row per spelling (keyed by its place), each calling ``t.find`` with its name."""
    rows = [{"i": i, "first_name": s} for i, s in enumerate(spellings)]

    def find(row: Any, ctx: pl.Context) -> Any:
        return ctx.tool("t.find", {"first_name": row["first_name"]})

    async def play(ctx: pl.Context, input: Any) -> Any:
        return await ctx.dataset("people", rows, key="i").with_column("found", find).run()

    return play


def test_calls_of_another_spelling_answered_by_one_purchase_are_counted_as_twins():
    registry, sent = pl.ToolRegistry(), []
    finder(registry, sent, normalize={"first_name": "name"})
    store = fresh_store()

    first = run(spellings_play(SPELLINGS), tools=[registry], store=store)

    assert first.status == "completed", first.error
    assert sent == ["maya"]  # one purchase, of the form it is keyed on
    assert first.stats.tool_calls_live == 1
    # MAYA, " maya " and the second Maya: written otherwise than "maya"; "maya" is not
    assert first.stats.tool_calls_twins == 3
    assert first.stats.tools["t.find"]["twins"] == 3

    again = run(spellings_play(SPELLINGS), tools=[registry], store=store)

    # a new run answered by the receipts of an earlier one: no twin of this run answered it
    assert (again.stats.tool_calls_cached, again.stats.tool_calls_twins) == (5, 0)


def test_spaces_alone_make_twins_of_a_tool_without_normalize():
    registry, sent = pl.ToolRegistry(), []
    finder(registry, sent)

    result = run(spellings_play(["Maya", " Maya  ", "MAYA"]), tools=[registry])

    assert sent == ["Maya", "MAYA"]  # case counts where the tool does not say otherwise
    assert result.stats.tool_calls_twins == 1


def test_a_waterfall_steps_twins_are_counted_per_tool(sim: Simulator):
    crowd = [
        {"x": i, **{k: p[k] for k in ("first_name", "last_name", "domain")}}
        for i, p in enumerate(sim.people(limit=20))
    ]
    twins = [
        {**p, "x": 100 + p["x"], "first_name": p["first_name"].upper(),
         "last_name": f" {p['last_name']}", "domain": p["domain"].upper()}
        for p in crowd
    ]  # fmt: skip

    result = run(
        waterfall_play("work_email", crowd + twins, make_input=_person),
        tools=[pl.tools.Gateway(sim.url, token=sim.token)],
    )

    assert result.status == "completed", result.error
    assert sim.ledger()["duplicate_charges"] == 0
    steps = result.output["stats"]["work_email"]["steps"]
    tools = result.stats.tools
    assert tools["sim.email.beta"]["twins"] == 20  # each twin's first step
    assert tools["sim.email.alpha"]["twins"] == steps[1]["attempts"] // 2
    assert values(result)[:20] == values(result)[20:]


def _person(row: Any) -> dict[str, Any]:
    return {k: row[k] for k in ("first_name", "last_name", "domain")}


def values(result: pl.RunResult) -> list[Any]:
    return list(result.output["values"])


def _shipped_tools() -> list[str]:
    finders = [*EMAIL_FINDERS.values(), *PHONE_FINDERS.values()]
    return sorted({f.tool for f in finders} | set(VERIFIERS.values()))


@pytest.mark.parametrize("tool", _shipped_tools())
def test_every_tool_of_the_providers_waterfalls_says_how_its_inputs_compare(tool: str):
    provider = PROVIDERS[tool.split(".", 1)[0]]
    (spec,) = [s for s in provider.tools().specs() if s.id == tool]
    assert spec.normalize is not None, f"{tool}: declare normalize= (docs/guide/tools.md)"


def test_every_tool_of_the_simulated_work_email_says_how_its_inputs_compare(sim: Simulator):
    specs = {s.id: s for s in pl.tools.Gateway(sim.url, token=sim.token).specs()}
    for tool in ("sim.email.beta", "sim.email.alpha", "sim.email.gamma", "sim.email.verify"):
        assert specs[tool].normalize is not None, tool


def test_a_row_answered_by_its_own_purchase_of_an_earlier_attempt_is_no_twin():
    """A row that bought " Maya " and then waited is run again by the next attempt: its call
    is answered by its own receipt (from receipts), not by a twin's purchase."""
    registry, sent = pl.ToolRegistry(), []
    finder(registry, sent, normalize={"first_name": "name"})
    store, clock = fresh_store(), pl.ManualClock()

    async def find(row: Any, ctx: pl.Context) -> Any:
        found = await ctx.tool("t.find", {"first_name": row["first_name"]})
        await ctx.sleep(3600)
        return found

    @pl.play(name="twins-across-attempts")
    async def play(ctx: pl.Context, input: Any) -> Any:
        rows = [{"i": 0, "first_name": " Maya "}]
        return await ctx.dataset("people", rows, key="i").with_column("found", find).run()

    first = run(play, tools=[registry], store=store, clock=clock)
    clock.advance(3600)
    again = run(play, tools=[registry], store=store, clock=clock, run_id=first.run_id)

    assert (first.status, again.status) == ("suspended", "completed"), again.error
    assert sent == ["maya"]
    assert (again.stats.tool_calls_cached, again.stats.tool_calls_twins) == (1, 0)
