"""Inputs normalised before they are keyed: a CRM export's case and whitespace variants of one
person are one receipt, one request and one charge at the provider (the simulator forgives
spelling as real providers do, and counts a second charge of one person as a duplicate)."""

from __future__ import annotations

from typing import Any

import playline as pl
from playline.sim import Simulator

from gwhelp import world_people

VARIANTS = (
    lambda p: dict(p),
    lambda p: {k: v.upper() for k, v in p.items()},
    lambda p: {k: f"  {v} " for k, v in p.items()},
    lambda p: {**p, "domain": f"https://www.{p['domain'].title()}/about"},
    lambda p: {**p, "first_name": p["first_name"].lower(), "last_name": f"{p['last_name']}\t"},
)


def test_variants_of_a_person_pay_once(sim: Simulator) -> None:
    sim.faults(tools={"sim.email.alpha": {"rate_per_second": 1000}})  # a quick test
    people = [
        {k: p[k] for k in ("first_name", "last_name", "domain")} for p in world_people(sim, 100)
    ]
    rows = [
        {"row": f"{i}-{v}", **variant(person)}
        for i, person in enumerate(people)
        for v, variant in enumerate(VARIANTS)
    ]

    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        return await (
            ctx.dataset("leads", rows, key="row")
            .with_column(
                "email",
                lambda row, ctx: ctx.tool(
                    "sim.email.alpha", {k: row[k] for k in ("first_name", "last_name", "domain")}
                ),
            )
            .run()
        )

    result = pl.run(
        pl.play(name="variants")(play),
        tools=[pl.Gateway(sim.url, token=sim.token)],
    )

    assert result.status == "completed"
    ledger = sim.ledger()
    assert len(rows) == 500
    assert ledger["duplicate_charges"] == 0
    assert ledger["calls"]["sim.email.alpha"] == len(people)  # distinct inputs: the people
    emails: dict[str, set[Any]] = {}
    for row in result.output:
        emails.setdefault(row["row"].split("-")[0], set()).add(str(row["email"]))
    assert all(len(found) == 1 for found in emails.values())  # every variant got its person's
