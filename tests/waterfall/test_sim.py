"""The shipped work_email waterfall against the real simulator."""

from __future__ import annotations

from typing import Any

import httpx

import playline as pl
from playline.sim import Simulator

from .helpers import cells, fresh_store, run, waterfall_play

FIELDS = ("first_name", "last_name", "domain")


def people(sim: Simulator, limit: int) -> list[dict[str, Any]]:
    response = httpx.get(f"{sim.url}/__world/people", params={"limit": limit}, headers=sim.headers)
    response.raise_for_status()
    return [{"x": i, **p} for i, p in enumerate(response.json()["people"])]


def by_name(row: Any) -> dict[str, Any]:
    return {k: row[k] for k in FIELDS}


def test_work_email_finds_true_emails_with_each_step_batched(sim):
    crowd = people(sim, 60)
    store = fresh_store()

    result = run(
        waterfall_play("work_email", crowd, make_input=by_name),
        tools=[pl.tools.Gateway(sim.url, token=sim.token)],
        store=store,
    )

    assert result.status == "completed", result.error
    values = result.output["values"]
    found = [(v, p["email"]) for v, p in zip(values, crowd, strict=True) if v is not None]
    assert all(value == truth for value, truth in found)  # guesses were verified away
    stats = result.output["stats"]["work_email"]
    beta, alpha, gamma = stats["steps"]
    assert stats["satisfied"] == len(found)
    assert len(found) > beta["hits"]  # the later steps found more
    assert beta["attempts"] == 60
    assert alpha["attempts"] == 60 - beta["hits"]
    assert gamma["attempts"] == alpha["attempts"] - alpha["hits"]
    ledger = sim.ledger()
    assert (
        ledger["calls"].get("sim.email.beta.bulk", 0) + ledger["calls"].get("sim.email.beta", 0)
        == 2
    )  # 60 rows in bulk calls of at most 50
    assert ledger["calls"]["sim.email.alpha"] == alpha["attempts"]
    metas = cells(result, store)
    winners = {m["waterfall"]["winner"] for m in metas}
    assert winners <= {"beta", "alpha", "gamma", None}
    assert all((m["status"] == "not_found") == (m["waterfall"]["winner"] is None) for m in metas)


def test_a_rerun_of_work_email_calls_no_provider(sim):
    crowd = people(sim, 25)
    store = fresh_store()
    play = waterfall_play("work_email", crowd, make_input=by_name)
    gateway = pl.tools.Gateway(sim.url, token=sim.token)
    first = run(play, tools=[gateway], store=store)
    calls = sim.ledger()["calls"]

    second = run(play, tools=[gateway], store=store)

    assert sim.ledger()["calls"] == calls
    assert second.stats.tool_calls_live == 0 and second.stats.credits == 0
    assert second.output["values"] == first.output["values"]
    assert {m["status"] for m in cells(second, store)} <= {"cached", "not_found"}
