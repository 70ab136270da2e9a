"""``sys.exit()``, ``KeyboardInterrupt`` and a play's own ``BaseException``, raised by play code
(its body, a column, a tool function, a child play): the run ends ``failed`` with the cause,
secrets redacted, and ``pl.run`` returns that result instead of leaving the event loop."""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable
from typing import Any

import pytest

import playline as pl
from playline.store import Store

SECRET = "exit-secret-51c9e0a7"


class Boom(BaseException):
    """A play's own BaseException."""


RAISED: dict[str, Callable[[str], BaseException]] = {
    "sys.exit(0)": lambda secret: SystemExit(0),
    "sys.exit(text)": lambda secret: SystemExit(f"giving up with {secret}"),
    "KeyboardInterrupt": lambda secret: KeyboardInterrupt(secret),
    "BaseException": lambda secret: Boom(f"boom {secret}"),
}


def _raise(error: BaseException) -> Any:
    raise error


def _play(where: str, error: Callable[[str], BaseException], registry: pl.ToolRegistry) -> Any:
    """A play that raises ``error`` (given the secret's value) at ``where``."""

    @registry.tool("exits.tool")
    def tool(input: dict[str, Any]) -> Any:
        return _raise(error(input["key"]))

    @pl.play(name="exits-child")
    async def child(ctx: pl.Context, input: Any) -> Any:
        return _raise(error(ctx.secrets.get("EXIT_KEY").reveal()))

    async def raising(row: dict[str, Any], ctx: pl.Context) -> Any:
        return _raise(error(ctx.secrets.get("EXIT_KEY").reveal()))

    columns: dict[str, Callable[..., Any]] = {
        "column": lambda row, ctx: _raise(error(ctx.secrets.get("EXIT_KEY").reveal())),
        "async column": raising,
        "tool": lambda row, ctx: ctx.tool("exits.tool", {"key": ctx.secrets.get("EXIT_KEY")}),
    }

    @pl.play(name=f"exits-{where.replace(' ', '-')}")
    async def play(ctx: pl.Context, input: Any) -> Any:
        key = ctx.secrets.get("EXIT_KEY")
        if where == "body":
            _raise(error(key.reveal()))
        if where == "child play":
            return await ctx.run_play("child", child)
        rows = ctx.dataset("rows", [{"n": n} for n in range(3)], key="n")
        return await rows.with_column("v", columns[where]).run()

    return play


@pytest.mark.parametrize("raised", list(RAISED))
@pytest.mark.parametrize("where", ["body", "column", "async column", "tool", "child play"])
def test_a_base_exception_of_play_code_fails_the_run_with_its_cause(
    where: str,
    raised: str,
    registry: pl.ToolRegistry,
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("PLAYLINE_SECRET_EXIT_KEY", SECRET)
    error = RAISED[raised]

    result = pl.run(_play(where, error, registry), store=store, tools=[registry])
    gc.collect()  # a task whose exception nobody retrieved says so when it is collected

    assert result.status == "failed"
    assert type(result.exception) is type(error(SECRET))
    name = type(result.exception).__name__
    assert result.error is not None and result.error.startswith(f"{name}: ")
    assert "raised by the play's code" in result.error
    assert SECRET not in result.error
    if raised != "sys.exit(0)":
        assert "[secret EXIT_KEY]" in result.error
    record = store.get_run(result.run_id)
    assert record is not None and record.status == "failed"
    assert record.error == result.error
    logged = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not logged, [r.getMessage() for r in logged]  # "Task exception was never retrieved"


def test_the_calls_in_flight_when_play_code_exits_are_recorded(
    registry: pl.ToolRegistry, store: Store
) -> None:
    """The run stops as a stop does: the calls already sent finish and are kept (a resume
    answers them from receipts), and the run fails with the exit."""
    sent: list[int] = []

    @registry.tool("exits.paid", cost=pl.Cost(1))
    def paid(input: dict[str, Any]) -> Any:
        sent.append(input["n"])
        return {"v": input["n"]}

    @pl.play(name="exits-after-calls")
    async def play(ctx: pl.Context, input: Any) -> Any:
        rows = ctx.dataset("rows", [{"n": n} for n in range(3)], key="n")
        done = await rows.with_column("v", lambda row, ctx: ctx.tool("exits.paid", row)).run()
        raise SystemExit(f"{len(done)} rows enriched")

    first = pl.run(play, store=store, tools=[registry])
    assert first.status == "failed"
    assert first.error is not None and first.error.startswith("SystemExit: 3 rows enriched")
    again = pl.run(play, store=store, tools=[registry], run_id=first.run_id)
    assert again.status == "failed"
    assert sorted(sent) == [0, 1, 2]  # paid once
    assert again.stats.rows_reused == 3
