"""The simulator as a process: ``playline sim --port 0`` names its URL, and ``spawn()`` runs
it apart from the client, so a client killed mid-call leaves the provider and its ledger."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from playline.sim import SimProcess, spawn

from simhelp import eventually, execute

CLIENT = """
import sys, httpx
url, token = sys.argv[1:3]
httpx.post(
    url + "/api/v2/integrations/sim.email.verify/execute",
    json={"payload": {"email": "ada@example.com"}},
    headers={"Authorization": "Bearer " + token, "Idempotency-Key": "crash-1"},
    timeout=60,
)
print("answered", flush=True)
"""


@pytest.fixture(scope="module")
def proc() -> Iterator[SimProcess]:
    with spawn(seed=7, latency_ms=0) as running:
        yield running


def test_spawn_runs_the_simulator_in_its_own_process_group(proc: SimProcess) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", proc.url)
    assert proc.token == "dev" and proc.pid != os.getpid()
    assert os.getpgid(proc.pid) == proc.pid != os.getpgid(0)
    with httpx.Client(base_url=proc.url, headers=proc.headers) as client:
        assert execute(client, "sim.email.verify", {"email": "a@b.c"}).status_code == 200
        assert proc.ledger()["calls"] == {"sim.email.verify": 1}
        assert proc.faults(tools={"sim.email.verify": {"down": True}})["tools"] == {
            "sim.email.verify": {"down": True}
        }
        assert execute(client, "sim.email.verify", {"email": "a@b.c"}).status_code == 503
        with pytest.raises(ValueError, match="error_rate"):
            proc.faults(tools={"sim.email.verify": {"error_rate": 2}})
        job = execute(
            client, "sim.phone.finder", {"first_name": "A", "last_name": "B", "domain": "c.com"}
        ).json()["result"]
        assert proc.forget_jobs() == 1
        assert execute(client, "sim.phone.finder.poll", job).status_code == 404
    proc.reset()
    assert proc.ledger()["calls"] == {} and proc.faults()["tools"] == {}
    assert len(proc.people(limit=3)) == 3 and len(proc.companies(limit=2)) == 2


def test_the_process_stops_with_the_block() -> None:
    with spawn(seed=7, latency_ms=0) as sim:
        url = sim.url
        assert httpx.get(f"{url}/api/v2/integrations").status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/api/v2/integrations")


def test_a_killed_client_leaves_the_simulator_and_its_ledger(proc: SimProcess) -> None:
    """The client's call is held by the provider, the client is SIGKILLed, the provider then
    does the work and charges: a re-send with the same key gets that answer, not a charge."""
    proc.reset()
    proc.faults(tools={"sim.email.verify": {"hold": True}})
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, proc.url, proc.token],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        eventually(lambda: proc.ledger()["inflight"] == {"sim.email.verify": 1}, "call held")
    finally:
        client.send_signal(signal.SIGKILL)
        client.wait()
        assert client.stdout is not None
        client.stdout.close()
    assert client.returncode == -signal.SIGKILL
    assert proc.ledger()["charges"] == {}  # held before the work

    proc.faults(tools={"sim.email.verify": {"hold": None}})
    eventually(lambda: proc.ledger()["charges"] == {"sim.email.verify": 0.2}, "work done")

    with httpx.Client(base_url=proc.url, headers=proc.headers) as http:
        again = execute(http, "sim.email.verify", {"email": "ada@example.com"}, "crash-1")
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert again.json()["result"] == {"email": "ada@example.com", "status": "invalid"}
    ledger = proc.ledger()
    assert ledger["calls"] == {"sim.email.verify": 1}
    assert ledger["charges"] == {"sim.email.verify": 0.2}
    assert ledger["duplicate_charges"] == 0 and ledger["inflight"] == {}


def test_playline_sim_port_0_prints_the_bound_url_first() -> None:
    exe = Path(sys.executable).with_name("playline")
    sim = subprocess.Popen(
        [str(exe), "sim", "--port", "0", "--seed", "7", "--latency-ms", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert sim.stdout is not None
        line = sim.stdout.readline().decode()
        found = re.match(r"playline sim on (http://127\.0\.0\.1:(\d+))  seed=7  token='dev'", line)
        assert found is not None, line
        assert int(found.group(2)) != 0
        assert httpx.get(f"{found.group(1)}/api/v2/integrations").status_code == 200
    finally:
        sim.terminate()
        sim.wait(timeout=30)
        assert sim.stdout is not None
        sim.stdout.close()


def test_a_port_that_is_taken_is_a_one_line_error_with_exit_1() -> None:
    """Not uvicorn's log line and its exit 3 (which Playline's commands use for a run that
    is suspended)."""
    import socket

    from typer.testing import CliRunner

    from playline.cli import app

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        command = CliRunner().invoke(app, ["sim", "--port", port])
        module = subprocess.run(
            [sys.executable, "-m", "playline.sim", "--port", port],
            capture_output=True,
            text=True,
            timeout=60,
        )
        cli = subprocess.run(
            [sys.executable, "-m", "playline", "sim", "--port", port],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert command.exit_code == 1 and f"Cannot listen on 127.0.0.1:{port}" in command.output
    assert module.returncode == 1 and "cannot listen on" in module.stderr
    # the port is tried before the server starts: no server log line before Playline's own
    assert cli.returncode == 1 and cli.stdout == ""
    assert cli.stderr.splitlines() == [
        f"error: Cannot listen on 127.0.0.1:{port} (Address already in use). Choose another "
        "port with --port (0 picks a free one)."
    ]


def test_a_host_or_port_that_cannot_be_is_said_as_such() -> None:
    from typer.testing import CliRunner

    from playline.cli import app

    for command in (["sim"], ["ui", "--store", "memory://"]):
        host = CliRunner().invoke(app, [*command, "--host", "999.1.1.1", "--port", "0"])
        assert host.exit_code == 1 and "Check --host: an address of this machine" in host.output
        port = CliRunner().invoke(app, [*command, "--port", "99999"])
        assert port.exit_code == 2 and "65535" in port.output
