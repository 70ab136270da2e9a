"""The sample play ``playline demo`` runs: leads enriched by local tools, printed as a table."""

from __future__ import annotations

import hashlib
from typing import Any

from .._context import Context
from .._play import play
from ..tools import Batch, Cost, Rate, ToolRegistry

__all__ = ["LEADS", "demo_tools", "enrich_leads"]

demo_tools = ToolRegistry()

LEADS = [
    {"name": "Ada Lovelace", "website": "https://analytical.io/"},
    {"name": "Grace Hopper", "website": "https://cobol.dev"},
    {"name": "Alan Turing", "website": "https://bletchley.ai/"},
    {"name": "Katherine Johnson", "website": "https://orbits.space"},
    {"name": "Edsger Dijkstra", "website": "https://shortest.path/"},
    {"name": "Barbara Liskov", "website": "https://substitution.org"},
]


def _known(domain: str, salt: str) -> int:
    return hashlib.sha256(f"{salt}:{domain}".encode()).digest()[0]


@demo_tools.tool(
    "demo.company",
    batch=Batch(max_size=50),
    rate=Rate(per_second=50),
    cost=Cost(1, charge="on_hit"),
    outputs={"industry": ["industry"], "size": ["employees"]},
)
def company(inputs: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """Firmographics for a domain (a deterministic stand-in for a provider)."""
    industries = ["software", "fintech", "aerospace", "research", "education"]
    return [
        {
            "domain": i["domain"],
            "industry": industries[_known(i["domain"], "industry") % len(industries)],
            "employees": 10 + _known(i["domain"], "size") * 7,
        }
        if _known(i["domain"], "company") % 6
        else None
        for i in inputs
    ]


@demo_tools.tool("demo.email", rate=Rate(per_second=20, concurrency=4), cost=Cost(1, "on_hit"))
async def email(input: dict[str, Any]) -> dict[str, Any] | None:
    """A work email from a name and domain (found for about two thirds of people)."""
    first, _, last = input["name"].lower().partition(" ")
    if _known(input["domain"], "email") % 3 == 0:
        return None
    return {"email": f"{first}.{last}@{input['domain']}"}


@play(name="enrich-leads")
async def enrich_leads(ctx: Context, input: Any) -> Any:
    rows = (input or {}).get("leads", LEADS)
    return await (
        ctx.dataset("leads", rows, key="website")
        .with_column("domain", lambda row: row["website"].split("//")[-1].strip("/"))
        .with_column(
            "company", lambda row, ctx: ctx.tool("demo.company", {"domain": row["domain"]})
        )
        .with_column(
            "email",
            lambda row, ctx: ctx.tool("demo.email", {"name": row["name"], "domain": row["domain"]}),
            when=lambda row: row["company"].found,
        )
        .run(description="Enrich leads")
    )
