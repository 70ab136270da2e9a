"""The sample play ``playline demo`` runs against the provider simulator.

``people.csv`` holds 50 people of the simulator's world (seed 7), as a CRM export would:
``First Name, Last Name, Title, Company Website``. The play reads it with ``ctx.csv``, then
per person: the company domain from the website, firmographics (``sim.company.enrich``,
batched 100 at a time), a work email through the shipped ``work_email`` waterfall (beta,
alpha, then gamma), and a deliverability check of that email (``sim.email.verify``).

Run it yourself against a simulator (``playline sim`` in another terminal)::

    playline run src/playline/demo/__init__.py --gateway http://127.0.0.1:8765
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import playline as pl

__all__ = ["PEOPLE_CSV", "domain_of", "enrich_people"]

PEOPLE_CSV = Path(__file__).with_name("people.csv")

_HEADERS = {
    "First Name": "first_name",
    "Last Name": "last_name",
    "Title": "title",
    "Company Website": "website",
}


def domain_of(website: str) -> str:
    """``"https://www.Acme.io/about"`` -> ``"acme.io"``."""
    host = website.strip().lower().split("://", 1)[-1].split("/", 1)[0]
    return host.removeprefix("www.")


def _person(row: Any) -> dict[str, Any]:
    return {"first_name": row["first_name"], "last_name": row["last_name"], "domain": row["domain"]}


@pl.play(name="enrich-people")
async def enrich_people(ctx: pl.Context, input: Any) -> Any:
    """Company, work email and its verification for each person of a CSV."""
    file = (input or {}).get("file") or PEOPLE_CSV
    rows = ctx.csv(file, rename=_HEADERS, required=list(_HEADERS))
    return await (
        ctx.dataset("people", rows, key=["first_name", "last_name", "website"])
        .with_column("domain", lambda row: domain_of(row["website"]))
        .with_column(
            "company", lambda row, ctx: ctx.tool("sim.company.enrich", {"domain": row["domain"]})
        )
        .with_column("industry", lambda row: row["company"].get("industry"))
        .with_column("email", lambda row, ctx: ctx.waterfall("work_email", _person(row)))
        .with_column(
            "verification",
            lambda row, ctx: ctx.tool("sim.email.verify", {"email": row["email"]}),
            when=lambda row: bool(row["email"]),
        )
        .run(description="Enrich people: company, work email, verification")
    )
