"""SEMANTICS 11: each paid call carries an idempotency key derived from its receipt.

A call whose receipt never completed (the process died after the provider answered) is sent
again with the same key, and a provider that honours keys (the simulator does) answers it
from the first answer instead of charging twice. A forced refresh asks anew.
"""

from __future__ import annotations

from typing import Any

import httpx

import playline as pl
from playline.sim import Simulator
from playline.store import open_store
from stores import lose_receipts

from gwhelp import people_play, tool_column, world_people


def test_the_simulator_replays_a_request_repeated_with_its_key(sim: Simulator) -> None:
    person = world_people(sim, 1)[0]
    body = {"payload": {k: person[k] for k in ("first_name", "last_name", "domain")}}
    headers = {"Authorization": f"Bearer {sim.token}", "Idempotency-Key": "k-1"}
    url = f"{sim.url}/api/v2/integrations/sim.email.gamma/execute"

    first = httpx.post(url, json=body, headers=headers)
    again = httpx.post(url, json=body, headers=headers)

    assert first.status_code == again.status_code == 200
    assert again.json()["result"] == first.json()["result"]
    assert again.headers["idempotent-replayed"] == "true"
    ledger = sim.ledger()
    assert ledger["charges"]["sim.email.gamma"] == 2  # gamma charges 2 per call: once
    assert ledger["replayed"] == {"sim.email.gamma": 1}


def test_a_call_repeated_without_its_receipt_is_not_charged_twice(
    sim: Simulator, gateway: pl.Gateway
) -> None:
    people = world_people(sim, 5)
    play = people_play("idem-gamma", people, [("email", tool_column("sim.email.gamma"), None)])

    first = pl.run(play, tools=[gateway])
    lose_receipts(open_store())  # as if the receipts had never been completed
    lost = pl.run(play, tools=[gateway])

    assert first.status == lost.status == "completed"
    assert first.stats.tool_calls_live == lost.stats.tool_calls_live == 5
    ledger = sim.ledger()
    assert ledger["calls"]["sim.email.gamma"] == 5
    assert ledger["replayed"] == {"sim.email.gamma": 5}
    assert ledger["duplicate_charges"] == 0


def test_a_forced_call_asks_the_provider_anew(sim: Simulator, gateway: pl.Gateway) -> None:
    person = world_people(sim, 1)[0]
    fields = {k: person[k] for k in ("first_name", "last_name", "domain")}

    @pl.play(name="idem-force")
    async def play(ctx: pl.Context, input: Any) -> Any:
        await ctx.tool("sim.email.alpha", fields)
        return (await ctx.tool("sim.email.alpha", fields, force=True)).execution.source

    result = pl.run(play, tools=[gateway])

    assert result.output == "live"
    assert sim.ledger()["calls"]["sim.email.alpha"] == 2
    assert sim.ledger()["replayed"] == {}
