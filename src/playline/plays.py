"""Plays that ship with Playline, over the real providers whose keys are set
(``docs/guide/providers.md``)::

    playline run playline.plays:work_email -i file=leads.csv --out enriched.csv
    playline run playline.plays:linkedin_to_email -i file=leads.csv -i catch_all=accept
    playline run playline.plays:person_to_phone -i file=leads.csv -i providers:='["leadmagic"]'

Input: ``file`` (a CSV whose columns are named as the providers' inputs: ``first_name``,
``last_name``, ``full_name``, ``domain``, ``company``, ``linkedin_url``, ``email``) or
``people`` (a list of such rows); ``providers`` (a list of names; default: the waterfall's);
for the email plays ``verify`` (a verifier's name, or null) and ``catch_all`` (``accept``,
``verify`` or ``reject``). Each row keeps its columns and gains the one found.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import playline as pl
from playline import waterfalls

__all__ = ["linkedin_to_email", "person_to_phone", "work_email"]


def _rows(ctx: pl.Context, input: Mapping[str, Any]) -> Any:
    if input.get("file"):
        return ctx.csv(input["file"])
    people = input.get("people")
    if not isinstance(people, list):
        raise pl.PlayDefinitionError(
            "Give the people as -i file=leads.csv (a CSV with first_name, last_name, domain, "
            "linkedin_url... columns) or as a list under 'people'."
        )
    return people


_POLICY = ("verify", "catch_all")  # the email waterfalls' options a play input may set


async def _through(
    ctx: pl.Context,
    input: Any,
    column: str,
    make: Callable[..., pl.Waterfall],
    options: tuple[str, ...] = (),
) -> pl.Dataset:
    """The rows of ``input`` with ``column`` found by the waterfall ``make`` gives."""
    input = input or {}
    spec = make(input.get("providers"), **{k: input[k] for k in options if k in input})
    return await (
        ctx.dataset("people", _rows(ctx, input))
        .with_column(column, lambda row, ctx: ctx.waterfall(spec, dict(row)))
        .run(description=spec.description)
    )


@pl.play(name="work_email")
async def work_email(ctx: pl.Context, input: Any) -> pl.Dataset:
    """A verified work email for each person (name and company domain)."""
    return await _through(ctx, input, "email", waterfalls.work_email, _POLICY)


@pl.play(name="linkedin_to_email")
async def linkedin_to_email(ctx: pl.Context, input: Any) -> pl.Dataset:
    """A verified work email for each person's LinkedIn profile."""
    return await _through(ctx, input, "email", waterfalls.linkedin_to_email, _POLICY)


@pl.play(name="person_to_phone")
async def person_to_phone(ctx: pl.Context, input: Any) -> pl.Dataset:
    """A mobile phone for each person (LinkedIn profile or email)."""
    return await _through(ctx, input, "phone", waterfalls.person_to_phone)
