"""The gateway's token where users look for it: `--gateway-token` on every command that takes
`--gateway`, a plan and a run that say at once that the gateway refuses the token (before a
run is recorded or a credit spent), and a resume that calls the gateway its run called, with
the token given again, never stored."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway_play import RESUMED_THROUGH_GATEWAY
from playline.sim import Simulator, serve
from playline.store import open_store

from clihelp import Cli, one_error_line


@pytest.fixture
def token() -> str:
    return f"gw-{uuid.uuid4().hex}"  # long enough to be caught wherever it would leak


@pytest.fixture
def gateway(token: str) -> Iterator[Simulator]:
    """A simulator whose gateway takes only ``token``."""
    with serve(seed=7, latency_ms=0, token=token) as running:
        yield running


def _play(cli: Cli, *, go: bool = True) -> str:
    if go:
        (cli.tmp / "go").write_text("", encoding="utf-8")
    return cli.play(RESUMED_THROUGH_GATEWAY)


def _said(result: object) -> str:
    return " ".join(str(getattr(result, "output", "")).split())


def _stored(tmp: Path) -> bytes:
    return b"".join(p.read_bytes() for p in tmp.glob("cli.db*"))


def test_plan_without_the_token_says_the_gateway_refuses_it_and_which_tools(
    cli: Cli, gateway: Simulator
) -> None:
    planned = cli("plan", _play(cli), "--gateway", gateway.url)
    assert planned.exit_code == 1, planned.output
    said = _said(planned)
    assert "refuses calls without a token (401" in said, said
    assert "the calls of sim.company.enrich would fail" in said, said
    assert "--gateway-token" in said
    assert gateway.ledger()["calls"] == {}  # nothing spent


def test_plan_with_a_wrong_token_says_so_in_its_json(
    cli: Cli, gateway: Simulator, token: str
) -> None:
    planned = cli(
        "plan", _play(cli), "--gateway", gateway.url, "--gateway-token", "wrong-one", "--json"
    )
    assert planned.exit_code == 1, planned.output
    (refused,) = json.loads(planned.stdout)["refused"]
    assert refused["tools"] == ["sim.company.enrich"]
    assert "refuses the token it was given (401" in refused["why"]
    assert token not in planned.output


def test_plan_with_the_token_option_refuses_nothing(
    cli: Cli, gateway: Simulator, token: str
) -> None:
    planned = cli("plan", _play(cli), "--gateway", gateway.url, "--gateway-token", token, "--json")
    assert planned.exit_code == 0, planned.output
    estimate = json.loads(planned.stdout)
    assert estimate["refused"] == [] and estimate["calls"] == 3
    assert token not in planned.output  # never echoed


def test_run_without_the_token_refuses_before_a_run_is_recorded(
    cli: Cli, gateway: Simulator
) -> None:
    ran = cli("run", _play(cli), "--gateway", gateway.url)
    line = one_error_line(ran, 1)
    assert "refuses calls without a token (401" in line, line
    assert "sim.company.enrich" in line and "no run was started" in line, line
    assert open_store(cli.store).list_runs() == []
    assert gateway.ledger()["calls"] == {}


def test_run_takes_the_token_option_and_stores_where_it_came_from_not_the_token(
    cli: Cli, gateway: Simulator, token: str
) -> None:
    ran = cli("run", _play(cli), "--gateway", gateway.url, "--gateway-token", token, "--json")
    assert ran.exit_code == 0, ran.output
    assert cli.json_lines(ran.stdout)[-1]["status"] == "completed"
    assert gateway.ledger()["calls"] == {"sim.company.enrich.bulk": 1}
    assert token not in ran.output
    assert token.encode() not in _stored(cli.tmp)  # not in the run record, nor anywhere
    db = open_store(cli.store)
    (run,) = db.list_runs()
    (source,) = db.read_events(run.run_id, kinds=["source"])
    assert source.data is not None
    assert source.data["gateway"] == gateway.url
    assert source.data["gateway_token"] == "--gateway-token"


def test_resume_calls_the_gateway_the_run_recorded_with_the_token_given_again(
    cli: Cli, gateway: Simulator, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    play = _play(cli, go=False)
    first = cli("run", play, "--gateway", gateway.url, "--gateway-token", token, "--json")
    assert first.exit_code == 1, first.output  # every row failed before its call
    run_id = cli.json_lines(first.stdout)[-1]["run_id"]
    (cli.tmp / "go").write_text("", encoding="utf-8")

    unsure = cli("resume", run_id)  # no token now: it asks for it, and starts nothing
    line = one_error_line(unsure, 2)
    assert f"called the gateway at {gateway.url} with a token" in line, line
    assert "--gateway-token" in line and "PLAYLINE_GATEWAY_TOKEN" in line
    assert gateway.ledger()["calls"] == {}

    monkeypatch.setenv("PLAYLINE_GATEWAY_TOKEN", token)  # no --gateway: the recorded one
    resumed = cli("resume", run_id, "--json")
    assert resumed.exit_code == 0, resumed.output
    assert cli.json_lines(resumed.stdout)[-1]["status"] == "completed"
    assert gateway.ledger()["calls"] == {"sim.company.enrich.bulk": 1}


def test_worker_with_a_refused_token_does_not_start(cli: Cli, gateway: Simulator) -> None:
    started = cli("worker", "--burst", "--gateway", gateway.url, "--gateway-token", "wrong-one")
    line = one_error_line(started, 1)
    assert "refuses the token it was given (401" in line and "the worker did not start" in line


def test_a_token_without_a_gateway_is_a_usage_error(cli: Cli) -> None:
    planned = cli("plan", _play(cli), "--gateway-token", "some-token")
    line = one_error_line(planned, 2)
    assert "--gateway-token goes with a gateway" in line and "some-token" not in line


@pytest.mark.parametrize(
    "command",
    ["run", "resume", "plan", "ui", "worker", "serve", "tools list", "tools describe"],
)
def test_every_command_that_takes_a_gateway_takes_its_token(cli: Cli, command: str) -> None:
    helped = cli(*command.split(), "--help", store=False)
    assert helped.exit_code == 0, helped.output
    assert "--gateway-token" in helped.output
