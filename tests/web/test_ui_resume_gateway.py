"""Resume in `playline ui --gateway-token T` resumes the run with the settings it used: the
gateway it recorded (the UI was given none) and the UI's token (not in the UI's environment),
passed to the `playline resume` it starts, which the UI then reaps: no defunct child is left.

The UI is a real process, driven over HTTP as its page drives it (the CSRF token from the
page, then a POST to /api/resume), against a simulator whose gateway takes only that token.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from gateway_play import RESUMED_THROUGH_GATEWAY
from playline.cli import app as cli_app
from playline.sim import Simulator, serve
from playline.store import RunStatus, open_store
from playline.web import UIConfig, create_app
from services import serve_asgi

from webhelp import wait_until

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def token() -> str:
    return f"gw-{uuid.uuid4().hex}"


@pytest.fixture
def gateway(token: str) -> Iterator[Simulator]:
    with serve(seed=7, latency_ms=0, token=token) as running:
        yield running


def _alive(pid: int) -> set[tuple[int, str]]:
    """The children of ``pid`` that have not ended (not zombies), each as (pid, "R")."""
    return {(child, "R") for child, state in _children(pid) if state != "Z"}


def _children(pid: int) -> list[tuple[int, str]]:
    """The processes whose parent is ``pid``, with their state (``Z``: a zombie)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # it ended meanwhile
            continue
        state, parent = stat.rsplit(")", 1)[1].split()[:2]
        if int(parent) == pid:
            found.append((int(entry.name), state))
    return found


@pytest.fixture
def clean_env() -> dict[str, str]:
    """The environment of the UI: no gateway and no token of its own."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PLAYLINE_")}


def test_resume_in_the_ui_uses_the_runs_gateway_and_the_uis_token_and_reaps_its_child(
    tmp_path: Path, gateway: Simulator, token: str, clean_env: dict[str, str]
) -> None:
    url = f"sqlite:///{tmp_path}/ui.db"
    play = tmp_path / "play.py"
    play.write_text(RESUMED_THROUGH_GATEWAY, encoding="utf-8")
    first = CliRunner().invoke(
        cli_app,
        ["run", str(play), "--store", url, "--gateway", gateway.url, "--gateway-token", token],
        env={"PLAYLINE_GATEWAY_TOKEN": None, "PLAYLINE_GATEWAY_URL": None},
    )
    assert first.exit_code == 1, first.output  # its rows failed before any call
    db = open_store(url)
    (run,) = db.list_runs()
    assert run.status is RunStatus.FAILED and gateway.ledger()["calls"] == {}
    (tmp_path / "go").write_text("", encoding="utf-8")

    ui = subprocess.Popen(
        [sys.executable, "-m", "playline", "ui", "--store", url, "--port", "0",
         "--gateway-token", token],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=clean_env, cwd=tmp_path, text=True,
    )  # fmt: skip
    try:
        assert ui.stdout is not None
        said = ui.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+)/", said)
        assert found, said
        base = found.group(1)
        page = httpx.get(base + "/", timeout=30).text
        csrf = re.search(r'<meta name="csrf-token" content="([^"]+)"', page)
        assert csrf, page[:500]
        answer = httpx.post(
            f"{base}/api/resume/{run.run_id}", headers={"X-CSRF-Token": csrf.group(1)}, timeout=30
        )
        assert answer.status_code == 202, answer.text
        assert token not in answer.text  # the command it shows holds no token
        log, pid = Path(answer.json()["log"]), answer.json()["pid"]
        wait_until(lambda: (pid, "R") not in _alive(ui.pid), "the resume's process to end")
        done = db.get_run(run.run_id)
        assert done is not None and done.status is RunStatus.COMPLETED, log.read_text()
        assert gateway.ledger()["calls"] == {"sim.company.enrich.bulk": 1}
        # its process ended and the UI reaped it: no child at all, a zombie least of all
        wait_until(lambda: _children(ui.pid) == [], f"no child of the UI ({_children(ui.pid)})")
        assert ui.poll() is None  # the UI serves on
    finally:
        ui.terminate()
        ui.wait(timeout=30)
        db.close()


def test_resume_in_a_ui_without_the_token_a_run_was_given_says_so_and_starts_nothing(
    tmp_path: Path, gateway: Simulator, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PLAYLINE_GATEWAY_TOKEN", raising=False)
    monkeypatch.delenv("PLAYLINE_GATEWAY_URL", raising=False)
    url = f"sqlite:///{tmp_path}/ui.db"
    play = tmp_path / "play.py"
    play.write_text(RESUMED_THROUGH_GATEWAY, encoding="utf-8")
    args = ["run", str(play), "--store", url, "--gateway", gateway.url, "--gateway-token", token]
    assert CliRunner().invoke(cli_app, args).exit_code == 1
    with open_store(url) as db:
        (run,) = db.list_runs()
        config = UIConfig(store=db, store_url=url, log_dir=tmp_path)
        ui = create_app(config)
        with serve_asgi(ui) as base:
            answer = httpx.post(
                f"{base}/api/resume/{run.run_id}",
                headers={"X-CSRF-Token": config.csrf_token},
                timeout=30,
            )
        assert answer.status_code == 409, answer.text
        assert "playline ui --gateway-token" in answer.json()["error"]
        assert ui.state.children.started == {}
