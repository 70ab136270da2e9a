"""Keys out of receipts: a Python tool that declares its key (``@pl.tool(..., secrets=[...])``)
and reads it with ``pl.secret`` keeps its receipts when the key's value is rotated, while the
same tool under another variable (another account) buys its own. The tool here calls the
simulator's gateway with the key as its bearer token, as it would call a provider."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import playline as pl
from playline._secrets import Secrets
from playline.sim import Simulator, serve
from playline.store import Store, open_store

KEY_BEFORE = "hk-live-before-the-rotation"
KEY_AFTER = "hk-live-after-the-rotation"


class Provider:
    """Where the tool sends its calls: the simulator of the moment."""

    url = ""


def keyed_tool(registry: pl.ToolRegistry, variable: str) -> None:
    """``keyed.company``: the simulator's company lookup, paid with the key in ``variable``."""

    @registry.tool("keyed.company", cost=pl.Cost(1, charge="on_hit"), secrets=[variable])
    async def company(input: dict[str, Any]) -> Any:
        key = pl.secret(variable).reveal()
        async with httpx.AsyncClient(base_url=Provider.url, timeout=10) as client:
            answer = await client.post(
                "/api/v2/integrations/sim.company.enrich/execute",
                json={"payload": input},
                headers={"Authorization": f"Bearer {key}"},
            )
        answer.raise_for_status()
        body = answer.json()
        return body["result"] if body["status"] == "completed" else None


def companies_play(domains: list[str]) -> pl.Play:
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        rows = [{"domain": d} for d in domains]
        return await (
            ctx.dataset("c", rows, key="domain")
            .with_column("co", lambda row, ctx: ctx.tool("keyed.company", dict(row)))
            .run()
        )

    return pl.play(name="keyed-companies")(play)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    db = open_store(f"sqlite:///{tmp_path}/keys.db")
    yield db
    db.close()


@pytest.fixture
def sims() -> Iterator[tuple[Simulator, Simulator]]:
    """The provider before the key's rotation, and after (it takes only the new key)."""
    with (
        serve(seed=7, latency_ms=0, token=KEY_BEFORE) as before,
        serve(seed=7, latency_ms=0, token=KEY_AFTER) as after,
    ):
        yield before, after


def _domains(sim: Simulator, n: int) -> list[str]:
    return [str(c["domain"]) for c in sim.companies(n)]


def test_rotating_a_declared_key_keeps_every_receipt(
    sims: tuple[Simulator, Simulator], store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, after = sims
    registry = pl.ToolRegistry()
    keyed_tool(registry, "ROTATED_KEY")
    domains = _domains(before, 6)

    monkeypatch.setenv("PLAYLINE_SECRET_ROTATED_KEY", KEY_BEFORE)
    Provider.url = before.url
    first = pl.run(companies_play(domains), store=store, tools=[registry])
    assert first.status == "completed", first.error
    assert first.stats.tool_calls_live == 6
    assert sum(before.ledger()["calls"].values()) == 6

    monkeypatch.setenv("PLAYLINE_SECRET_ROTATED_KEY", KEY_AFTER)
    Provider.url = after.url
    second = pl.run(companies_play(domains), store=store, tools=[registry])
    assert second.status == "completed", second.error
    assert second.stats.tool_calls_live == 0 and second.stats.tool_calls_cached == 6
    assert after.ledger()["calls"] == {}  # nothing bought again

    third = pl.run(companies_play(_domains(after, 7)), store=store, tools=[registry])
    assert third.status == "completed", third.error  # the new company: paid with the new key
    assert third.stats.tool_calls_live == 1 and sum(after.ledger()["calls"].values()) == 1
    assert after.ledger()["duplicate_charges"] == 0


def test_two_variables_are_two_accounts_that_do_not_share_receipts(
    sims: tuple[Simulator, Simulator], store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, _ = sims
    Provider.url = before.url
    domains = _domains(before, 4)
    monkeypatch.setenv("PLAYLINE_SECRET_TEAM_A_KEY", KEY_BEFORE)
    monkeypatch.setenv("PLAYLINE_SECRET_TEAM_B_KEY", KEY_BEFORE)  # even with the same value
    for variable in ("TEAM_A_KEY", "TEAM_B_KEY", "TEAM_A_KEY"):
        registry = pl.ToolRegistry()
        keyed_tool(registry, variable)
        assert pl.run(companies_play(domains), store=store, tools=[registry]).status == "completed"
    assert sum(before.ledger()["calls"].values()) == 8  # team A once, team B once


def test_a_key_in_the_input_keys_on_its_value_so_rotating_it_buys_again(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pattern the docs moved away from, kept as the docs describe it."""
    registry = pl.ToolRegistry()
    calls: list[str] = []

    @registry.tool("input.keyed", cost=1)
    def lookup(input: dict[str, Any]) -> Any:
        calls.append(input["api_key"])
        return {"domain": input["domain"]}

    @pl.play(name="input-keyed")
    async def play(ctx: pl.Context, input: Any) -> Any:
        key = ctx.secrets.get("INPUT_KEY")
        result = await ctx.tool("input.keyed", {"domain": "acme.io", "api_key": key})
        return result.data

    for value in (KEY_BEFORE, KEY_BEFORE, KEY_AFTER):
        monkeypatch.setenv("PLAYLINE_SECRET_INPUT_KEY", value)
        assert pl.run(play, store=store, tools=[registry]).status == "completed"
    assert calls == [KEY_BEFORE, KEY_AFTER]


def test_a_declared_key_that_is_not_set_stops_the_run_before_any_call(
    sims: tuple[Simulator, Simulator], store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, _ = sims
    Provider.url = before.url
    monkeypatch.delenv("PLAYLINE_SECRET_UNSET_KEY", raising=False)
    monkeypatch.delenv("UNSET_KEY", raising=False)
    registry = pl.ToolRegistry()
    keyed_tool(registry, "UNSET_KEY")
    result = pl.run(companies_play(_domains(before, 3)), store=store, tools=[registry])
    assert result.status == "failed"
    assert result.error is not None and "PLAYLINE_SECRET_UNSET_KEY" in result.error
    assert before.ledger()["calls"] == {}


def test_pl_secret_reads_only_what_the_running_tool_declared(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAYLINE_SECRET_DECLARED_KEY", KEY_BEFORE)
    monkeypatch.setenv("PLAYLINE_SECRET_OTHER_KEY", KEY_AFTER)
    with pytest.raises(pl.PlayDefinitionError, match=r"ctx\.secrets\.get"):
        pl.secret("DECLARED_KEY")  # outside a tool's call
    registry = pl.ToolRegistry()

    @registry.tool("reads.other", secrets=["DECLARED_KEY"])
    def reads_other(input: dict[str, Any]) -> Any:
        return {"length": len(pl.secret("OTHER_KEY"))}

    @pl.play(name="reads-other")
    async def play(ctx: pl.Context, input: Any) -> Any:
        return (
            await ctx.dataset("d", [{"k": 1}], key="k")
            .with_column("v", lambda row, ctx: ctx.tool("reads.other", {"k": row["k"]}))
            .run()
        )

    result = pl.run(play, store=store, tools=[registry])
    (error,) = result.output.errors
    assert "does not declare it" in error.message and "secrets=[...]" in error.message


@pytest.mark.parametrize("secrets", ["HUNTER_KEY", ["not a name"], [""], [7]])
def test_secrets_is_a_list_of_variable_names(secrets: Any) -> None:
    with pytest.raises(pl.PlayDefinitionError, match="secrets="):
        pl.ToolRegistry().tool("bad.secrets", secrets=secrets)


PASTED = "sk_live_abcdef1234567890XYZ"  # a key given where its variable's name belongs


@pytest.mark.parametrize(
    "make",
    [
        lambda: pl.Auth.bearer(PASTED),
        lambda: pl.Auth.header("X-Api-Key", PASTED),
        lambda: pl.Auth.query("api_key", PASTED),
        lambda: pl.Auth.body("api_key", PASTED),
        lambda: pl.Auth.basic(PASTED),
        lambda: pl.Auth.basic(PASTED, user="me"),
        lambda: pl.Auth.bearer("sk-live.abc/def+ghi="),
        lambda: pl.ToolRegistry().tool("bad.secrets", secrets=[PASTED]),
        lambda: pl.HttpTool("a.b", "GET", "https://x.io", auth=pl.Auth.bearer(PASTED)),
    ],
)
def test_a_key_given_for_its_name_is_refused_unshown(make: Any) -> None:
    """A key where its variable's name belongs was taken, and its run failed with "Secret
    'sk_live_...' is not set", a message stored with the run: it is refused when declared,
    showing at most its first 4 characters."""
    with pytest.raises(pl.PlayDefinitionError, match="NAME of the variable") as caught:
        make()
    assert "ACME_API_KEY" in str(caught.value) or "HUNTER_KEY" in str(caught.value)
    assert "sk_live_a" not in str(caught.value) and "abcdef" not in str(caught.value)


def test_a_key_read_for_its_name_is_not_shown_in_the_stored_error() -> None:
    with pytest.raises(pl.PlayDefinitionError, match="NAME of the environment") as caught:
        Secrets().get(PASTED)
    assert "sk_live_a" not in str(caught.value) and "'sk_l…'" in str(caught.value)
