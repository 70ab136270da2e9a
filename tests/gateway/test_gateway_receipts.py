"""Receipts over the gateway (a second run sends nothing) and the async phone finder."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

import playline as pl
from playline._secrets import Secret
from playline.sim import Simulator
from playline.store import open_store

from gwhelp import by_email, fake_gateway, people_play, person_input, tool_column, world_people


def test_a_second_run_is_served_from_receipts(sim: Simulator, gateway: pl.tools.Gateway) -> None:
    people = world_people(sim, 20)
    play = people_play(
        "gateway-receipts",
        people,
        [
            ("alpha", tool_column("sim.email.alpha"), None),
            ("beta", tool_column("sim.email.beta"), None),
        ],
    )
    store = open_store()
    first = pl.run(play, store=store, tools=[gateway])
    assert first.status == "completed", first.error
    after_first = sim.ledger()
    assert after_first["calls"]["sim.email.alpha"] == 20

    second = pl.run(play, store=store, tools=[gateway])
    assert second.status == "completed", second.error
    assert second.run_id != first.run_id
    assert sim.ledger() == after_first  # not one request, not one credit
    assert second.stats.tool_calls_live == 0 and second.stats.tool_requests == 0
    assert second.stats.tool_calls_cached == 40
    assert second.stats.credits == 0
    assert by_email(second.output) == by_email(first.output)
    for record in store.iter_rows(second.run_id, "people"):
        assert record.cells["alpha"]["status"] in ("cached", "not_found")
        assert record.cells["beta"]["status"] in ("cached", "not_found")
    statuses = {r.cells["alpha"]["status"] for r in store.iter_rows(second.run_id, "people")}
    assert "cached" in statuses


def _known_to_the_phone_finder(sim: Simulator) -> dict:
    """A person the phone finder knows (asked directly, then the ledger is reset)."""
    with httpx.Client(base_url=sim.url, headers=sim.headers, timeout=10) as client:
        for person in world_people(sim, 30):
            body = client.post(
                "/api/v2/integrations/sim.phone.finder/execute",
                json={"payload": person_input(person)},
            ).json()
            if body.get("_metadata", {}).get("credits"):  # charged at submit: a hit
                sim.reset()
                return person
    raise AssertionError("the phone finder knows none of the first 30 people")


def test_the_async_phone_finder_submits_once_and_polls(
    sim: Simulator, gateway: pl.tools.Gateway
) -> None:
    person = _known_to_the_phone_finder(sim)
    play = people_play(
        "gateway-phone", [person], [("phone", tool_column("sim.phone.finder"), None)]
    )
    result = pl.run(play, tools=[gateway])
    assert result.status == "completed", result.error
    row = result.output.to_list()[0]
    assert row["phone"] == {"phone": person["phone"]}
    ledger = sim.ledger()
    assert ledger["calls"]["sim.phone.finder"] == 1
    assert ledger["calls"]["sim.phone.finder.poll"] >= 1
    assert ledger["charges"] == {"sim.phone.finder": 5.0} and ledger["duplicate_charges"] == 0
    assert result.stats.credits == 5.0


def test_the_async_phone_finder_reports_no_result(
    sim: Simulator, gateway: pl.tools.Gateway
) -> None:
    nobody = {"first_name": "Nobody", "last_name": "Atall", "domain": "example.invalid"}
    play = people_play(
        "gateway-phone-miss",
        [{**nobody, "email": "nobody@example.invalid"}],
        [("phone", tool_column("sim.phone.finder"), None)],
    )
    store = open_store()
    result = pl.run(play, store=store, tools=[gateway])
    assert result.status == "completed", result.error
    assert result.output.to_list()[0]["phone"] is None
    record = next(iter(store.iter_rows(result.run_id, "people")))
    assert record.cells["phone"]["status"] == "not_found"
    ledger = sim.ledger()
    assert ledger["calls"]["sim.phone.finder"] == 1 and ledger["credits"] == 0


@pytest.mark.parametrize("as_secret", [False, True], ids=["text", "secret"])
def test_a_gateway_token_its_provider_echoes_is_never_stored(
    tmp_path: Path, as_secret: bool
) -> None:
    token = f"gw-{uuid.uuid4().hex}"  # PLAYLINE_GATEWAY_TOKEN comes as such a text
    tools = [{"id": "echo.headers", "cost": {"credits": 1}}]
    answer = {"status": "completed", "result": {"authorization": f"Bearer {token}"}}
    with fake_gateway(tools, answer) as (url, _):
        gateway = pl.Gateway(url, token=Secret("GW", token) if as_secret else token)

        @pl.play(name="token-echo")
        async def play(ctx: pl.Context, input: Any) -> Any:
            return await (
                ctx.dataset("rows", [{"x": 1}], key="x")
                .with_column("r", lambda row, ctx: ctx.tool("echo.headers", {"x": row["x"]}))
                .run()
            )

        result = pl.run(play, store=f"sqlite:///{tmp_path}/s.db", tools=[gateway])

    (error,) = result.output.errors
    assert "secret" in error.message
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("s.db*"))
    assert token.encode() not in stored


def test_a_gateway_token_that_is_no_text_is_refused() -> None:
    with pytest.raises(pl.GatewayError, match="token"):
        pl.Gateway("http://127.0.0.1:1", token=b"bytes")  # type: ignore[arg-type]
