"""Building blocks for the waterfall tests: recording tools and one-column plays."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import playline as pl
from playline.store import open_store

_stores = itertools.count()


def fresh_store() -> str:
    """A named memory store shared by every run of this test (and no other test)."""
    return f"memory://wf-{next(_stores)}-{id(object())}"


def batch_tool(
    registry: pl.ToolRegistry,
    tool_id: str,
    answer: Callable[[int], Any],
    calls: list[list[int]],
    *,
    cost: pl.Cost | float = 0,
) -> None:
    """A batch tool answering ``answer(x)`` per input; each batch call's xs go to ``calls``."""

    @registry.tool(tool_id, batch=pl.Batch(max_size=1000), cost=cost)
    def bulk(inputs: list[dict[str, Any]]) -> list[Any]:
        calls.append([i["x"] for i in inputs])
        return [answer(i["x"]) for i in inputs]


def waterfall_play(
    spec: pl.Waterfall | str,
    rows: Iterable[Any],
    *,
    make_input: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None,
) -> Callable[..., Any]:
    """A play with one dataset ``rows`` whose column ``value`` is the waterfall's value."""

    async def play(ctx: pl.Context, input: Any) -> dict[str, Any]:
        ds = await (
            ctx.dataset("rows", list(rows), key="x" if make_input is None else None)
            .with_column(
                "value",
                lambda row, ctx: ctx.waterfall(
                    spec, make_input(row) if make_input else {"x": row["x"]}
                ),
            )
            .run()
        )
        return {
            "values": [row["value"] for row in ds],
            "stats": {k: v.to_dict() for k, v in ctx.waterfall_stats().items()},
        }

    return play


def run(play: Any, *, tools: list[Any], store: str | None = None, **options: Any) -> pl.RunResult:
    options.setdefault("clock", pl.ManualClock())
    return pl.run(play, None, tools=tools, store=store or fresh_store(), **options)


def cells(result: pl.RunResult, store: str, column: str = "value") -> list[dict[str, Any]]:
    """The stored metadata of ``column`` in each row of dataset ``rows``, in row order."""
    return [rec.cells[column] for rec in open_store(store).iter_rows(result.run_id, "rows")]
