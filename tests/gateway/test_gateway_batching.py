"""Bulk operations: calls are packed up to the tool's max size and results go back aligned."""

from __future__ import annotations

import playline as pl
from playline.sim import Simulator

from gwhelp import by_email, people_play, tool_column, world_people


def test_120_rows_go_out_as_three_bulk_requests(sim: Simulator, gateway: pl.tools.Gateway) -> None:
    people = world_people(sim, 120)
    play = people_play("gateway-bulk", people, [("found", tool_column("sim.email.beta"), None)])
    result = pl.run(play, tools=[gateway])
    assert result.status == "completed", result.error

    ledger = sim.ledger()
    assert ledger["calls"] == {"sim.email.beta.bulk": 3}
    assert ledger["items"] == {"sim.email.beta.bulk": 120}
    assert ledger["rejected"] == {} and ledger["duplicate_charges"] == 0
    assert result.stats.tool_requests == 3
    assert result.stats.tool_calls_live == 120

    rows = by_email(result.output)
    hits = 0
    for person in people:
        found = rows[person["email"]]["found"]
        if found is not None:
            hits += 1
            assert found["email"] == person["email"]  # this row's own person, not a neighbour's
    assert 0 < hits < 120
    assert result.stats.credits == ledger["credits"] == hits  # 1 credit on hit
