"""The gateway's token is never part of a receipt: the account its calls are bought for is
where the gateway is and the ``account`` it is given, so rotating the token buys nothing again,
while two accounts of one gateway each buy their own."""

from __future__ import annotations

from pathlib import Path

import pytest

import playline as pl
from playline.sim import Simulator, serve
from playline.store import open_store
from services import free_port

from gwhelp import people_play, tool_column, world_people


def test_a_rotated_gateway_token_keeps_every_receipt(tmp_path: Path) -> None:
    port = free_port()
    store = open_store(f"sqlite:///{tmp_path}/rotation.db")
    with serve(seed=7, latency_ms=0, port=port, token="token-before-the-rotation") as before:
        people = world_people(before, 10)
        columns = [("alpha", tool_column("sim.email.alpha"), None)]
        play = people_play("rotation", people, columns)
        first = pl.run(play, store=store, tools=[pl.Gateway(before.url, token=before.token)])
        assert first.status == "completed", first.error
        assert before.ledger()["calls"] == {"sim.email.alpha": 10}
    # the same gateway, which now takes only the new token
    with serve(seed=7, latency_ms=0, port=port, token="token-after-the-rotation") as after:
        assert after.url == before.url
        rotated = pl.Gateway(after.url, token=after.token)
        second = pl.run(play, store=store, tools=[rotated])
        assert second.status == "completed", second.error
        assert second.stats.tool_calls_live == 0 and second.stats.tool_calls_cached == 10
        assert after.ledger()["calls"] == {}  # not one request bought again

        # one more person: sent, with the new token
        more = people_play("rotation", world_people(after, 11), columns)
        third = pl.run(more, store=store, tools=[rotated])
        assert third.status == "completed", third.error
        assert after.ledger()["calls"] == {"sim.email.alpha": 1}
    store.close()


def test_two_accounts_of_one_gateway_do_not_share_receipts(sim: Simulator, tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/accounts.db")
    people = world_people(sim, 5)
    play = people_play("accounts", people, [("alpha", tool_column("sim.email.alpha"), None)])
    for account in ("team-a", "team-b", "team-a"):
        gateway = pl.Gateway(sim.url, token=sim.token, account=account)
        assert pl.run(play, store=store, tools=[gateway]).status == "completed"
    assert sim.ledger()["calls"] == {"sim.email.alpha": 10}  # team-a once, team-b once
    store.close()


def test_a_gateway_account_is_a_name() -> None:
    for wrong in ("", 7):
        try:
            pl.Gateway("http://127.0.0.1:1", token="t", account=wrong)  # type: ignore[arg-type]
        except pl.GatewayError as exc:
            assert "account=" in str(exc)
        else:
            raise AssertionError(f"account={wrong!r} was taken")


def test_a_pasted_token_loses_its_line_end_and_is_taken(sim: Simulator, tmp_path: Path) -> None:
    """``export T=$(cat token.txt)`` leaves a line end: the token is sent without it (it was an
    illegal header, and the error that said so printed the token)."""
    store = open_store(f"sqlite:///{tmp_path}/pasted.db")
    people = world_people(sim, 2)
    play = people_play("pasted", people, [("alpha", tool_column("sim.email.alpha"), None)])
    gateway = pl.Gateway(sim.url, token=f"  {sim.token}\n")
    gateway.check()
    result = pl.run(play, store=store, tools=[gateway])
    assert result.status == "completed", result.error
    store.close()


@pytest.mark.parametrize(
    "token", ["gw_SUPER\nSECRET_TOKEN", "gw_SUPERSECRET\tTOKEN", "gw_\x7fSUPER"]
)
def test_a_token_with_a_control_character_inside_is_refused_unshown(token: str) -> None:
    with pytest.raises(pl.PlayDefinitionError, match="control character") as caught:
        pl.Gateway("http://127.0.0.1:1", token=token)
    assert "SUPER" not in str(caught.value)


@pytest.mark.parametrize(
    "options",
    [
        {"timeout": float("nan")},
        {"timeout": float("inf")},
        {"timeout": -1},
        {"timeout": 0},
        {"timeout": "30"},
        {"poll_interval": 0},
        {"poll_interval": True},
    ],
)
def test_gateway_timeouts_are_seconds_above_zero(options: dict[str, object]) -> None:
    (name,) = options
    with pytest.raises(pl.PlayDefinitionError, match=f"{name}=.*seconds above 0"):
        pl.Gateway("http://127.0.0.1:1", token="t", **options)  # type: ignore[arg-type]
