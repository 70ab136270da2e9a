"""Tools are discovered from the gateway's metadata and called like local ones."""

from __future__ import annotations

from typing import Any

import pytest

import playline as pl
from playline.sim import Simulator

from gwhelp import by_email, fake_gateway, people_play, tool_column, world_people

local = pl.ToolRegistry()


@local.tool("test.initials", cost=pl.Cost(0))
def initials(input: dict[str, Any]) -> dict[str, Any]:
    return {"initials": input["first_name"][0] + input["last_name"][0]}


def test_specs_come_from_metadata(gateway: pl.tools.Gateway) -> None:
    specs = {s.id: s for s in gateway.specs()}
    assert {
        "sim.email.alpha",
        "sim.email.beta",
        "sim.email.gamma",
        "sim.company.enrich",
        "sim.email.verify",
        "sim.phone.finder",
    } <= set(specs)
    # operations (bulk, poll) are how tools are called, not tools of their own
    assert not any(tool_id.endswith((".bulk", ".poll")) for tool_id in specs)
    beta = specs["sim.email.beta"]
    assert beta.batch is not None and beta.batch.max_size == 50
    assert beta.max_batch == 50
    assert beta.rate.per_second == 10 and beta.rate.burst == 10
    assert beta.rate.concurrency is not None
    assert beta.cost == pl.Cost(1.0, "on_hit")
    assert beta.outputs["email"] == ("email",)
    assert beta.version == "2026-01"
    assert beta.retry_safe is True
    assert specs["sim.company.enrich"].max_batch == 100
    assert specs["sim.email.gamma"].cost == pl.Cost(2.0, "per_call")
    assert specs["sim.email.gamma"].batch is None
    assert specs["sim.phone.finder"].retry_safe is False


def test_specs_describe_the_published_metadata(gateway: pl.tools.Gateway) -> None:
    described = {s.id: s.describe() for s in gateway.specs()}
    alpha = described["sim.email.alpha"]
    assert alpha["rate"] == {"per_second": 20.0, "burst": 20}
    assert alpha["cost"] == {"credits": 1.0, "charge": "on_hit"}
    assert alpha["batch"] is None
    assert alpha["version"] == "2026-01" and alpha["retry_safe"] is True


def test_local_and_remote_tools_in_one_play(sim: Simulator, gateway: pl.tools.Gateway) -> None:
    people = world_people(sim, 6)
    play = people_play(
        "gateway-local-and-remote",
        people,
        [
            ("initials", tool_column("test.initials"), None),
            ("found", tool_column("sim.email.alpha"), None),
        ],
    )
    result = pl.run(play, tools=[gateway, initials])
    assert result.status == "completed", result.error
    rows = by_email(result.output)
    for person in people:
        row = rows[person["email"]]
        assert row["initials"] == {"initials": person["first_name"][0] + person["last_name"][0]}
        assert row["found"] is None or row["found"]["email"] == person["email"]
    assert result.stats.tool_calls_live == 12
    assert sim.ledger()["calls"] == {"sim.email.alpha": 6}


def test_a_gateway_without_a_token_lists_its_tools_and_calls_say_unauthorized(
    sim: Simulator,
) -> None:
    anonymous = pl.Gateway(sim.url)
    assert "sim.email.alpha" in {spec.id for spec in anonymous.specs()}

    @pl.play(name="anonymous-call")
    async def play(ctx: pl.Context, input: Any) -> Any:
        return await ctx.tool("sim.company.enrich", {"domain": "acme.io"})

    result = pl.run(play, tools=[anonymous])
    assert isinstance(result.exception, pl.ToolError)
    assert result.exception.status == 401


@pytest.mark.parametrize(
    "meta",
    [
        {"rate": {"per_second": "fast"}},
        {"rate": [1]},
        {"cost": {"credits": "abc"}},
        {"batch": {"max_size": "x", "operation": "bulk"}},
        {"batch": {"max_size": 10}},
        {"outputs": ["email"]},
        {"lists": {"emails": 3}},
        {"rate": {"per_second": -1}},
    ],
    ids=[
        "rate-text",
        "rate-list",
        "cost-text",
        "batch-size",
        "batch-op",
        "outputs",
        "lists",
        "negative-rate",
    ],
)
def test_metadata_playline_cannot_use_is_the_gateways_error_naming_the_tool(
    meta: dict[str, Any],
) -> None:
    with (
        fake_gateway([{"id": "odd.tool", **meta}], {}) as (url, _),
        pytest.raises(pl.GatewayError) as caught,
    ):
        pl.Gateway(url).specs()
    message = str(caught.value)
    assert "'odd.tool'" in message and "Fix the tool's metadata at the gateway" in message


def test_an_output_given_as_one_path_is_that_path_and_a_list_that_is_none_is_refused() -> None:
    with fake_gateway([{"id": "one.path", "outputs": {"email": "contact.email"}}], {}) as (url, _):
        (spec,) = pl.Gateway(url).specs()
    assert spec.outputs == {"email": ("contact.email",)}
    with (
        fake_gateway({"id": "not.a.list"}, {}) as (url, _),
        pytest.raises(pl.GatewayError, match="not"),
    ):
        pl.Gateway(url).specs()
