"""The sample play ``playline demo`` runs against the provider simulator.

``people.csv`` holds 50 people of the simulator's world (seed 7), as a CRM export would:
``First Name, Last Name, Title, Company Website``. The play reads it with ``ctx.csv``, then
per person: the company domain from the website, firmographics (``sim.company.enrich``,
batched 100 at a time), a work email through the shipped ``work_email`` waterfall (beta,
alpha, then gamma), and a deliverability check of that email (``sim.email.verify``). With
the input ``summary: true`` it also writes a one-line summary of each company with ``ctx.llm``
(``gpt-4o-mini`` through ``openai.chat``, priced in dollars): ``playline demo`` does, against
the simulator's OpenAI double.

Run it yourself against a simulator (``playline sim`` in another terminal)::

    playline run src/playline/demo/__init__.py --gateway http://127.0.0.1:8765

(the summary needs an OpenAI-compatible server as well: ``playline sim --providers`` serves a
double of OpenAI under ``/openai/v1``, whose key is the simulator's token; with
``OPENAI_API_KEY`` and ``PLAYLINE_OPENAI_URL`` set, add ``-i summary:=true``.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import playline as pl

__all__ = ["PEOPLE_CSV", "SUMMARY_MODEL", "domain_of", "enrich_people"]

PEOPLE_CSV = Path(__file__).with_name("people.csv")
SUMMARY_MODEL = "gpt-4o-mini"

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


def _summary(row: Any, ctx: pl.Context) -> Any:
    """One line on the person's company, from what ``sim.company.enrich`` found: the same
    company asks the same prompt, so its people share one call (and one receipt)."""
    company = row["company"]
    return ctx.llm(
        f"{company.get('name')}: {company.get('industry')}, {company.get('size')} employees, "
        f"{company.get('country')}. What does the company do, in one line?",
        model=SUMMARY_MODEL,
        system="You answer in one short line.",
        max_tokens=60,
    )


@pl.play(name="enrich-people")
async def enrich_people(ctx: pl.Context, input: Any) -> Any:
    """Company, work email and its verification for each person of a CSV; with ``summary:
    true``, a one-line summary of the company by an LLM (``openai.chat``)."""
    options = input or {}
    file = options.get("file") or PEOPLE_CSV
    summary = options.get("summary", False)
    if not isinstance(summary, bool):
        raise pl.PlayDefinitionError(
            f"enrich-people's input summary={summary!r}: true or false (on the command line "
            "-i summary:=true), whether to add the companies' one-line summaries."
        )
    rows = ctx.csv(file, rename=_HEADERS, required=list(_HEADERS))
    people = (
        ctx.dataset("people", rows, key=["first_name", "last_name", "website"])
        .with_column("domain", lambda row: domain_of(row["website"]))
        .with_column(
            "company", lambda row, ctx: ctx.tool("sim.company.enrich", {"domain": row["domain"]})
        )
        .with_column("industry", lambda row: row["company"].get("industry"))
    )
    if summary:
        people = people.with_column(
            "summary", _summary, when=lambda row: bool(row["company"].get("name"))
        )
    return await (
        people.with_column("email", lambda row, ctx: ctx.waterfall("work_email", _person(row)))
        .with_column(
            "verification",
            lambda row, ctx: ctx.tool("sim.email.verify", {"email": row["email"]}),
            when=lambda row: bool(row["email"]),
        )
        .run(
            description="Enrich people: company, "
            + ("summary, " if summary else "")
            + "work email, verification"
        )
    )
