"""`playline plan` says which counted tools read a key that is not set (an `HttpTool`'s
`auth=` variable, a `@pl.tool`'s `secrets=`), before the run would fail on it; a key that is
set refuses nothing."""

from __future__ import annotations

import json

import pytest

from clihelp import Cli

PLAY = """
import playline as pl

find = pl.HttpTool(
    "plantest.find", "GET", "http://127.0.0.1:9/find",
    auth=pl.Auth.bearer("PLANTEST_HTTP_KEY"), cost=1,
)

@pl.tool("plantest.lookup", cost=1, secrets=["PLANTEST_TOOL_KEY"])
def lookup(input):
    return {"key_length": len(pl.secret("PLANTEST_TOOL_KEY"))}

@pl.play
async def keyed(ctx, input):
    rows = [{"n": n} for n in range(3)]
    return await (
        ctx.dataset("d", rows, key="n")
        .with_column("found", lambda row, ctx: ctx.tool("plantest.find", {"n": row["n"]}))
        .with_column("looked", lambda row, ctx: ctx.tool("plantest.lookup", {"n": row["n"]}))
        .run()
    )
"""

VARIABLES = ("PLANTEST_HTTP_KEY", "PLANTEST_TOOL_KEY")


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(f"PLAYLINE_SECRET_{name}", raising=False)


def test_plan_says_which_keys_are_not_set_and_which_tools_need_them(cli: Cli) -> None:
    planned = cli("plan", cli.play(PLAY), "--json")
    assert planned.exit_code == 1, planned.output
    refused = {r["why"].split(":")[0]: r["tools"] for r in json.loads(planned.stdout)["refused"]}
    assert refused == {
        "the key PLANTEST_HTTP_KEY is not set": ["plantest.find"],
        "the key PLANTEST_TOOL_KEY is not set": ["plantest.lookup"],
    }

    shown = cli("plan", cli.play(PLAY))
    said = " ".join(shown.output.split())
    assert shown.exit_code == 1
    assert (
        "refused: the key PLANTEST_HTTP_KEY is not set: export PLAYLINE_SECRET_PLANTEST_HTTP_KEY"
        in said
    )
    assert "the calls of plantest.lookup would fail" in said


def test_plan_with_the_keys_set_refuses_nothing(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANTEST_HTTP_KEY", "http-key-value")
    monkeypatch.setenv("PLAYLINE_SECRET_PLANTEST_TOOL_KEY", "tool-key-value")
    planned = cli("plan", cli.play(PLAY), "--json")
    assert planned.exit_code == 0, planned.output
    assert json.loads(planned.stdout)["refused"] == []
