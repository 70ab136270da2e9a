"""`tools`, `event send`, `sim`, `demo`, `version` and `--help` on every command."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from playline.cli import app
from playline.sim import Simulator
from playline.store import open_store

from clihelp import Cli, one_error_line

COMMANDS = [
    [], ["run"], ["resume"], ["runs"], ["show"], ["logs"], ["export"], ["cache"],
    ["cache", "stats"], ["cache", "clear"], ["tools"], ["tools", "list"],
    ["tools", "describe"], ["event"], ["event", "send"], ["sim"], ["demo"], ["version"],
]  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "playline")
def test_every_command_has_help(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.stdout


def test_help_keeps_an_extra_in_brackets() -> None:
    """Rich reads '[parquet]' as markup: the install command lost its extra."""
    result = CliRunner().invoke(app, ["export", "--help"], env={"COLUMNS": "200"})
    assert "pip install 'playline[parquet]'" in result.stdout, result.stdout


def test_version() -> None:
    import playline as pl

    assert CliRunner().invoke(app, ["version"]).stdout.strip() == pl.__version__


def test_tools_of_a_play_file(cli: Cli, local_play: str) -> None:
    result = cli("tools", "list", "--play", local_play, store=False)
    assert result.exit_code == 0, result.output
    assert "clitest.upper" in result.stdout and "local" in result.stdout
    doc = json.loads(
        cli("tools", "describe", "clitest.upper", "--play", local_play, store=False).stdout
    )
    assert doc["batch"] == {"max_size": 10, "via": None}
    assert doc["cost"] == {"credits": 1.0, "charge": "on_hit"}


def test_tools_of_the_gateway(cli: Cli, sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAYLINE_GATEWAY_URL", sim.url)
    monkeypatch.setenv("PLAYLINE_GATEWAY_TOKEN", sim.token)
    listed = cli("tools", store=False)  # bare `playline tools` lists
    assert listed.exit_code == 0, listed.output
    assert "sim.email.alpha" in listed.stdout and "sim.company.enrich" in listed.stdout
    docs = cli.json_lines(cli("tools", "list", "--json", store=False).stdout)
    assert {d["id"] for d in docs} >= {"sim.email.alpha", "sim.phone.finder"}
    doc = json.loads(cli("tools", "describe", "sim.company.enrich", store=False).stdout)
    assert doc["batch"]["max_size"] == 100 and doc["rate"]["per_second"] == 50
    line = one_error_line(cli("tools", "describe", "sim.nope", store=False), 1)
    assert "No tool 'sim.nope'" in line


def test_tools_errors(cli: Cli, tmp_path: Path) -> None:
    assert "No tools to list" in one_error_line(cli("tools", "list", store=False), 2)
    gateway = ["--gateway", "http://127.0.0.1:1"]
    line = one_error_line(cli("tools", "list", *gateway, store=False), 1)
    assert "Cannot reach the gateway" in line
    missing = str(tmp_path / "none.py")
    assert "not found" in one_error_line(cli("tools", "list", "--play", missing, store=False), 2)


def test_run_through_the_gateway(cli: Cli, sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAYLINE_GATEWAY_TOKEN", sim.token)
    play = cli.play(
        "import playline as pl\n\n@pl.play\nasync def firm(ctx, input):\n"
        "    return await ctx.dataset('d', [{'domain': input['domain']}]).with_column(\n"
        "        'c', lambda row, ctx: ctx.tool('sim.company.enrich', {'domain': row['domain']})\n"
        "    ).run()\n"
    )
    domain = sim.companies(limit=1)[0]["domain"]
    result = cli("run", play, "--gateway", sim.url, "-i", f"domain={domain}", "--json")
    assert result.exit_code == 0, result.output
    final = cli.json_lines(result.stdout)[-1]
    assert final["stats"]["tool_calls_live"] == 1


def test_event_send(cli: Cli) -> None:
    open_store(cli.store).close()
    sent = cli("event", "send", "k1", "--data", '{"a": 1}')
    assert sent.exit_code == 0, sent.output
    assert "Sent event 'k1'" in sent.stdout
    again = cli("event", "send", "k1")
    assert again.exit_code == 0 and "sent before" in again.stdout
    assert "not valid JSON" in one_error_line(cli("event", "send", "k2", "--data", "{"), 2)


@pytest.mark.parametrize(
    "command",
    [
        ["event", "send", "k1"],
        ["resume", "r1"],
        ["schedule", "pause", "s1"],
        ["schedule", "resume", "s1"],
        ["schedule", "delete", "s1"],
    ],
)
def test_commands_for_what_a_store_holds_create_no_store(
    cli: Cli, tmp_path: Path, command: list[str]
) -> None:
    """A mistyped --store made a new store: `event send` parked the event there, where no
    run reads it, and said it was sent (exit 0)."""
    typo = tmp_path / "typo.db"

    line = one_error_line(cli(*command, "--store", f"sqlite:///{typo}", store=False), 1)

    assert f"No store at {typo}" in line and not typo.exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_sim_serves_the_gateway_until_stopped() -> None:
    port = _free_port()
    exe = Path(sys.executable).with_name("playline")
    proc = subprocess.Popen(
        [str(exe), "sim", "--port", str(port), "--seed", "3", "--latency-ms", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/api/v2/integrations", timeout=1)
                break
            except httpx.HTTPError:
                assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert answer.status_code == 200
        assert any(t["id"] == "sim.email.alpha" for t in answer.json()["tools"])
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_demo_runs_twice_and_the_second_run_is_free(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["demo", "--store", f"sqlite:///{tmp_path}/demo.db"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Enriched people" in out and "What it cost" in out
    assert "sim.company.enrich" in out and "sim.email.verify" in out
    assert "The second run was free" in out
    assert "0 live calls" in out
    # the AI column: one line on each company by gpt-4o-mini on the simulator's OpenAI double,
    # its dollars beside the credits; the second run pays none
    words = " ".join(out.split())
    assert "summary (AI)" in out and "openai.chat" in out
    [first, second] = re.findall(r"credits · \$(\d+(?:\.\d+)?) for the AI column", words)
    assert float(first) > 0 and float(second) == 0
