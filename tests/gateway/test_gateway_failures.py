"""Failures over the wire: 429 storms, tools down, transient 5xx, auth and definition errors."""

from __future__ import annotations

import httpx
import pytest

import playline as pl
from playline.errors import GatewayError
from playline.sim import Simulator
from playline.tools._breaker import BREAK_AFTER

from gwhelp import by_email, people_play, person_input, tool_column, world_people

UNLIMITED = {"rate_per_second": 1_000_000, "burst": 1_000_000}


def _email_play(name: str, people: list[dict], tool: str, **options: object) -> pl.Play:
    return people_play(name, people, [("found", tool_column(tool), None)], **options)  # type: ignore[arg-type]


# 429s


def test_429s_from_an_undeclared_limit_are_waited_out_and_charged_once(
    sim: Simulator, gateway: pl.tools.Gateway
) -> None:
    """The provider enforces 10/s, burst 4, while its metadata still says 20/s, burst 20."""
    sim.faults(
        tools={"sim.email.alpha": {"rate_per_second": 10, "burst": 4, "publish_rate": False}}
    )
    people = world_people(sim, 20)
    result = pl.run(_email_play("gateway-429", people, "sim.email.alpha"), tools=[gateway])
    assert result.status == "completed", result.error
    ledger = sim.ledger()
    assert ledger["rejected"].get("sim.email.alpha", 0) > 0
    assert ledger["calls"] == {"sim.email.alpha": 20}  # accepted requests: one per row
    assert ledger["duplicate_charges"] == 0
    assert all(n == 1 for n in ledger["inputs"].get("sim.email.alpha", {}).values())
    assert result.stats.credits == ledger["credits"]
    rows = by_email(result.output)
    for person in people:
        found = rows[person["email"]]["found"]
        assert found is None or found["email"] == person["email"]


def test_a_429_storm_slows_the_tool_down(sim: Simulator, gateway: pl.tools.Gateway) -> None:
    """40 rows against a provider far slower than it says: every row completes, charged once,
    and the storm stays bounded. (How far the limiter cuts is tested in virtual time in
    ``tests/gates/test_learning.py``; here, in real time, a loaded machine's jitter against a
    burst of 1 decides how many 429s come: 20-38 on a busy 2-core machine, so the bound is
    twice the rows and the retry budget the default.)"""
    sim.faults(
        tools={"sim.email.alpha": {"rate_per_second": 10, "burst": 1, "publish_rate": False}}
    )
    people = world_people(sim, 40)
    result = pl.run(_email_play("gateway-429-storm", people, "sim.email.alpha"), tools=[gateway])
    ledger = sim.ledger()
    assert result.status == "completed", (result.status, result.output and result.output.errors)
    assert 0 < ledger["rejected"]["sim.email.alpha"] < 2 * 40
    assert ledger["calls"] == {"sim.email.alpha": 40}
    assert ledger["duplicate_charges"] == 0


# a tool down


def test_a_tool_going_down_fails_only_its_cells(sim: Simulator, gateway: pl.tools.Gateway) -> None:
    """alpha answers the run's metadata request, then goes down while the run is going."""
    local = pl.ToolRegistry()

    @local.tool("test.take_alpha_down", batch=pl.Batch(max_size=100))
    def take_alpha_down(inputs: list[dict]) -> list[dict]:
        sim.faults(tools={"sim.email.alpha": {"down": True}})
        return [{"down": True} for _ in inputs]

    people = world_people(sim, 8)
    even = {p["email"] for p in people[::2]}
    # fewer failed calls than open alpha's breaker: each cell fails with the provider's own
    # error, whichever wave its request went out in (a later one would be refused at once)
    assert len(even) < BREAK_AFTER
    play = people_play(
        "gateway-down",
        people,
        [
            ("beta", tool_column("sim.email.beta"), None),
            (
                "switch",
                lambda row, ctx: ctx.tool("test.take_alpha_down", {"k": row["email"]}),
                None,
            ),
            ("alpha", tool_column("sim.email.alpha"), lambda row: row["email"] in even),
        ],
    )
    result = pl.run(play, tools=[gateway, take_alpha_down])
    assert result.status == "completed_with_errors", result.error
    assert result.stats.rows_failed == len(even)
    ds = result.output
    errors = ds.errors
    assert {e.row_key for e in errors} == even
    for error in errors:
        assert error.column == "alpha"
        assert error.tool == "sim.email.alpha"
        assert error.status == 503
        assert error.code == "tool_down"
        assert error.request_id and error.request_id.startswith("req_")
        assert "sim.email.alpha" in error.message
    rows = by_email(ds)
    for person in people:
        row = rows[person["email"]]
        assert row["switch"] == {"down": True}
        assert row["beta"] is None or row["beta"]["email"] == person["email"]
        if person["email"] not in even:
            assert row["alpha"] is None  # skipped, not failed
    ledger = sim.ledger()
    assert ledger["calls"]["sim.email.beta.bulk"] == 1
    assert ledger["errors"]["sim.email.alpha"] == ledger["calls"]["sim.email.alpha"]
    assert "sim.email.alpha" not in ledger["charges"]


# transient 5xx


def test_transient_5xx_is_retried_for_a_retry_safe_tool(
    sim: Simulator, gateway: pl.tools.Gateway
) -> None:
    sim.faults(tools={"sim.email.gamma": {"error_rate": 0.15, **UNLIMITED}})
    people = world_people(sim, 20)
    result = pl.run(
        _email_play("gateway-gamma-5xx", people, "sim.email.gamma"),
        tools=[gateway],
    )
    assert result.status == "completed", result.error
    ledger = sim.ledger()
    errors = ledger["errors"]["sim.email.gamma"]
    assert errors > 0
    assert ledger["calls"]["sim.email.gamma"] == 20 + errors  # each failure retried once
    # retry-safe failures strike before the work: only the successful request is charged
    assert ledger["duplicate_charges"] == 0
    assert ledger["charges"]["sim.email.gamma"] == 2.0 * 20 == result.stats.credits


def test_a_5xx_after_a_paid_submit_is_resent_with_its_key_and_charged_once(
    sim: Simulator, gateway: pl.tools.Gateway
) -> None:
    """phone.finder is not retry-safe (its 5xx strike after the work is charged) but honours
    idempotency keys: the failed submit is sent again with the same key, and the provider
    answers it from the first request instead of charging again."""
    sim.faults(
        tools={
            "sim.phone.finder": {"error_rate": 0.3, **UNLIMITED},
            "sim.phone.finder.poll": {"error_rate": 0},  # only the (paid) submit fails
        }
    )
    people = world_people(sim, 10)
    result = pl.run(
        _email_play("gateway-phone-5xx", people, "sim.phone.finder"),
        tools=[gateway],
    )
    assert result.status == "completed", result.error
    ledger = sim.ledger()
    assert ledger["errors"]["sim.phone.finder"] > 0
    assert ledger["replayed"]["sim.phone.finder"] == ledger["errors"]["sim.phone.finder"]
    assert ledger["duplicate_charges"] == 0
    assert result.stats.credits == ledger["credits"]


def test_a_5xx_after_a_paid_submit_fails_in_doubt_when_the_provider_ignores_keys(
    sim: Simulator, gateway: pl.tools.Gateway
) -> None:
    """Without idempotency keys a repeat would pay twice: the call is not sent again, and its
    cell fails *in doubt*, naming the provider's error."""
    sim.faults(
        tools={
            "sim.phone.finder": {"error_rate": 0.3, "no_idempotency": True, **UNLIMITED},
            "sim.phone.finder.poll": {"error_rate": 0},
        }
    )
    blind = pl.tools.Gateway(sim.url, token=sim.token)  # reads the changed metadata
    people = world_people(sim, 10)
    result = pl.run(
        _email_play("gateway-phone-5xx-blind", people, "sim.phone.finder"),
        tools=[blind],
    )
    assert result.status == "completed_with_errors", result.error
    ledger = sim.ledger()
    assert ledger["calls"]["sim.phone.finder"] == 10  # one submit per row: none repeated
    assert ledger["duplicate_charges"] == 0
    failed = result.output.errors
    assert len(failed) == ledger["errors"]["sim.phone.finder"] > 0
    for error in failed:
        assert error.status == 503 and error.code == "in_doubt"
        assert "may have reached the provider" in error.message
        assert error.tool == "sim.phone.finder" and error.request_id


def test_a_transient_5xx_on_a_poll_is_retried_not_paid_twice(
    sim: Simulator, gateway: pl.tools.Gateway
) -> None:
    sim.faults(
        tools={
            "sim.phone.finder": UNLIMITED,
            "sim.phone.finder.poll": {"error_rate": 0.5},
        }
    )
    people = world_people(sim, 10)
    result = pl.run(
        _email_play("gateway-poll-5xx", people, "sim.phone.finder"),
        tools=[gateway],
    )
    ledger = sim.ledger()
    assert ledger["errors"]["sim.phone.finder.poll"] > 0
    assert ledger["calls"]["sim.phone.finder"] == 10
    assert result.status == "completed", result.output.errors if result.output else result.error


# auth and definition errors


def test_a_wrong_token_fails_each_call_with_401(sim: Simulator) -> None:
    wrong = pl.tools.Gateway(sim.url, token="not-the-token")
    people = world_people(sim, 3)
    result = pl.run(_email_play("gateway-401", people, "sim.email.alpha"), tools=[wrong])
    # every call refused: the run failed, and says why (not "completed with errors")
    assert result.status == "failed"
    assert result.error is not None
    assert "sim.email.alpha refused every call" in result.error and "401" in result.error
    errors = result.output.errors
    assert len(errors) == 3
    for error in errors:
        assert error.status == 401 and error.code == "unauthorized"
        assert "missing or wrong token" in error.message  # the gateway's own words
        assert error.request_id
    assert sim.ledger()["calls"] == {}


def test_an_unknown_tool_is_a_definition_error_naming_it(
    sim: Simulator, gateway: pl.tools.Gateway
) -> None:
    people = world_people(sim, 2)
    result = pl.run(_email_play("gateway-unknown", people, "sim.email.nope"), tools=[gateway])
    assert result.status == "failed"
    assert isinstance(result.exception, pl.PlayDefinitionError)
    assert "sim.email.nope" in str(result.exception)
    assert sim.ledger()["calls"] == {}


def test_an_unreachable_gateway_is_a_gateway_error() -> None:
    down = pl.tools.Gateway("http://127.0.0.1:1", token="x")
    with pytest.raises(GatewayError, match=r"Cannot reach the gateway at http://127\.0\.0\.1:1"):
        down.specs()
    people = [{"first_name": "Ada", "last_name": "Lovelace", "domain": "x.io", "email": "a@x.io"}]
    play = _email_play("gateway-unreachable", people, "sim.email.alpha")
    with pytest.raises(GatewayError, match="playline sim"):
        pl.run(play, tools=[down])


@pytest.mark.parametrize("url", ["127.0.0.1:8765", "ftp://127.0.0.1", "", "http://"])
def test_a_bad_url_is_a_gateway_error(url: str) -> None:
    with pytest.raises(GatewayError, match="http"):
        pl.tools.Gateway(url, token="x").specs()


def test_a_gateway_error_is_a_playline_error() -> None:
    assert issubclass(GatewayError, pl.PlaylineError)


@pytest.mark.parametrize("name", ["Gateway", "GatewayError"])
def test_the_gateway_names_are_on_the_facade(name: str) -> None:
    """API.md writes ``pl.Gateway(url, token=...)``; the runner's messages say so too."""
    assert name in pl.__all__ and hasattr(pl, name)
    assert pl.Gateway is pl.tools.Gateway and pl.GatewayError is GatewayError


def test_the_execute_endpoint_names_the_tool_in_its_errors(sim: Simulator) -> None:
    """Sanity check of the protocol the client relies on: 4xx bodies carry message/code/id."""
    person = person_input(world_people(sim, 1)[0])
    response = httpx.post(
        f"{sim.url}/api/v2/integrations/sim.email.alpha/execute",
        json={"payload": person},
        headers={"Authorization": "Bearer wrong"},
        timeout=10,
    )
    assert response.status_code == 401
    assert set(response.json()) >= {"message", "code", "request_id"}
