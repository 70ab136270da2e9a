"""Small building blocks for the engine tests: one-dataset plays and instruments for tools."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from hypothesis import strategies as st

import playline as pl

Resolver = Callable[..., Any]


def run_play(play: Any, input: Any = None, *, tools: list[Any], **options: Any) -> pl.RunResult:
    """``pl.run`` on the test's store (``conftest.default_store``) and a fresh ``ManualClock``
    unless given.

    A fresh clock also means fresh per-process rate gates, so tests cannot see each other's.
    """
    options.setdefault("clock", pl.ManualClock())
    return pl.run(play, input, tools=tools, **options)


def dataset_play(
    rows: Iterable[Any],
    columns: Mapping[str, Resolver],
    *,
    name: str = "rows",
    key: Any = None,
    on_row_error: Any = "record",
) -> Callable[..., Any]:
    """A play running ``rows`` through ``columns`` (name -> resolver) and returning the dataset."""

    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        builder = ctx.dataset(name, rows, key=key)
        for column, resolver in columns.items():
            builder = builder.with_column(column, resolver)
        return await builder.run(on_row_error=on_row_error)

    return play


def run_dataset(
    rows: Iterable[Any],
    columns: Mapping[str, Resolver],
    *,
    tools: list[Any],
    key: Any = None,
    on_row_error: Any = "record",
    **options: Any,
) -> pl.RunResult:
    play = dataset_play(rows, columns, key=key, on_row_error=on_row_error)
    return run_play(play, tools=tools, **options)


def call_tool(tool: str, make_input: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None):
    """A resolver ``(row, ctx)`` calling ``tool`` with ``make_input(row)``.

    The input defaults to ``{"x": row["x"]}``.
    """

    async def resolve(row: Mapping[str, Any], ctx: pl.Context) -> pl.ToolResult:
        return await ctx.tool(tool, make_input(row) if make_input else {"x": row["x"]})

    return resolve


def rows_of(n: int) -> list[dict[str, int]]:
    return [{"x": i} for i in range(n)]


class Gauge:
    """Counts how many holders are inside at once; ``peak`` is the most ever seen."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0

    def __enter__(self) -> Gauge:
        self.now += 1
        self.peak = max(self.peak, self.now)
        return self

    def __exit__(self, *exc: object) -> None:
        self.now -= 1


async def yield_a_few_times(n: int = 3) -> None:
    """Give every other ready task a turn (no time passes: this is not a sleep)."""
    for _ in range(n):
        await asyncio.sleep(0)


class LivelockGuardClock(pl.ManualClock):
    """A ManualClock that stops code sleeping over and over without getting anywhere.

    A pacing loop that never converges would otherwise spin forever on a manual clock.
    """

    def __init__(self, max_sleeps: int = 10_000) -> None:
        super().__init__()
        self.sleeps = 0
        self.max_sleeps = max_sleeps

    async def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        if self.sleeps > self.max_sleeps:
            raise RuntimeError(f"slept {self.sleeps} times; a pacing loop is not converging")
        await super().sleep(seconds)


# JSON as the store encodes it: 64-bit integers, finite floats, text without lone surrogates.
json_text = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12)
json_ints = st.integers(-(2**63), 2**63 - 1)
json_scalars = (
    st.none()
    | st.booleans()
    | json_ints
    | st.floats(allow_nan=False, allow_infinity=False)
    | json_text
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(json_text, inner, max_size=4),
    max_leaves=12,
)


def row_reports(events: list[pl.Event]) -> list[tuple[str, str, dict]]:
    """Every row a listener was told of: ``(row key, status, {"cells", "values"})``, whether
    it came alone (a ``row`` event: failed or waiting rows) or with others (``rows``)."""
    reports = []
    for event in events:
        if event.kind == "row":
            assert event.row_key is not None and event.status is not None
            reports.append((event.row_key, event.status, event.data or {}))
        elif event.kind == "rows":
            for row in (event.data or {})["rows"]:
                detail = {"cells": row["cells"], "values": row["values"]}
                reports.append((row["key"], "completed", detail))
    return reports
