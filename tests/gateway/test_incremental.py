"""Incremental datasets and fresh cells against the simulator over loopback (issue 40): what a
weekly job on a growing CSV and a 90-day refresh pay, in the simulator's own ledger."""

from __future__ import annotations

import csv
import datetime as dt
from pathlib import Path
from typing import Any

import playline as pl

from gwhelp import person_input, world_people

DAY = 86_400.0


def write_csv(path: Path, people: list[dict[str, Any]]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["email", "first_name", "last_name", "domain"])
        writer.writeheader()
        for person in people:
            writer.writerow({k: person[k] for k in writer.fieldnames})


@pl.play(name="weekly-new-leads")
async def weekly(ctx: pl.Context, input: Any) -> pl.Dataset:
    leads = ctx.csv(input["file"])
    return await (
        ctx.dataset("leads", leads, key="email", mode=input.get("mode", "all"))
        .with_column(
            "found",
            lambda row: ctx.tool("sim.email.beta", person_input(row)),
            stale_after=dt.timedelta(days=input.get("days", 90)),
        )
        .run()
    )


def test_net_new_on_a_csv_grown_from_1000_to_1200_rows_pays_for_200(sim, gateway, tmp_path):
    people = world_people(sim, 1200)
    leads = tmp_path / "leads.csv"
    write_csv(leads, people[:1000])
    first = pl.run(weekly, {"file": str(leads)}, tools=[gateway])
    assert first.status == "completed", first.error
    before = sim.ledger()
    assert before["items"] == {"sim.email.beta.bulk": 1000}

    write_csv(leads, people)
    second = pl.run(weekly, {"file": str(leads), "mode": "net_new"}, tools=[gateway])

    assert second.status == "completed", second.error
    after = sim.ledger()
    assert after["items"] == {"sim.email.beta.bulk": 1200}  # 200 more items sent, no more
    assert after["duplicate_charges"] == 0
    assert second.stats.rows == 200 and second.stats.rows_seen == 1000
    assert second.stats.credits == after["credits"] - before["credits"]
    assert {row["email"] for row in second.output} == {p["email"] for p in people[1000:]}


def test_stale_after_buys_again_only_what_is_older_than_the_limit(sim, gateway, tmp_path):
    people = world_people(sim, 30)
    leads = tmp_path / "leads.csv"
    clock = pl.ManualClock()
    write_csv(leads, people[:20])
    pl.run(weekly, {"file": str(leads)}, tools=[gateway], clock=clock)  # day 0: 20 rows
    clock.advance(60 * DAY)
    write_csv(leads, people)
    pl.run(weekly, {"file": str(leads)}, tools=[gateway], clock=clock)  # day 60: 10 new
    assert sim.ledger()["items"] == {"sim.email.beta.bulk": 30}

    clock.advance(40 * DAY)  # day 100: the first 20 are 100 days old, the 10 others 40
    result = pl.run(weekly, {"file": str(leads)}, tools=[gateway], clock=clock)

    assert result.status == "completed", result.error
    assert sim.ledger()["items"] == {"sim.email.beta.bulk": 50}  # the 20 old ones, again
    assert (result.stats.cells_recomputed, result.stats.cells_kept) == (20, 10)
