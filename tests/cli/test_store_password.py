"""No command shows the password of a PostgreSQL store given with ``--store``.

The store is a real PostgreSQL database reached as the role ``rw`` with a password in its URL
(``postgres_password_url``); each command's whole output (stdout and stderr) is searched for
it, and the store must still be named, without it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from playline.cli import app
from services import STORE_PASSWORD

from clihelp import Cli

pytestmark = pytest.mark.timeout(240)


def _shown(url: str) -> str:
    return url.replace(f":{STORE_PASSWORD}@", "@", 1)


def test_commands_name_the_store_without_its_password(
    cli: Cli, local_play: str, postgres_password_url: str
) -> None:
    url = postgres_password_url
    runner = CliRunner()
    said = {}
    for argv in (
        ["run", local_play, "--run-id", "r1"],
        ["runs"],
        ["show", "r1"],
        ["show", "nope"],
        ["logs", "nope"],
        ["store", "check"],
        ["cache", "clear", "--tool", "nope", "--yes"],
    ):
        result = runner.invoke(app, [*argv, "--store", url])
        said[" ".join(argv)] = result.stdout + result.stderr
    assert [name for name, out in said.items() if STORE_PASSWORD in out] == []
    assert "r1" in said["runs"] and "completed" in said["show r1"]
    assert f"The store {_shown(url)} is sound" in said["store check"]
    assert f"in the store {_shown(url)}" in said["show nope"]


def test_demo_hints_name_the_store_without_its_password(postgres_password_url: str) -> None:
    url = postgres_password_url
    result = CliRunner().invoke(app, ["demo", "--store", url])
    assert result.exit_code == 0, result.output
    out = result.stdout + result.stderr
    assert STORE_PASSWORD not in out
    assert f"playline ui --store {_shown(url)} --run" in out
    assert "without its password" in out


def test_the_ui_start_line_names_the_store_without_its_password(
    postgres_password_url: str,
) -> None:
    url = postgres_password_url
    ui = subprocess.Popen(
        [sys.executable, "-m", "playline", "ui", "--port", "0", "--store", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert ui.stdout is not None
        said = [ui.stdout.readline().decode()]
        while not said[-1].startswith("Playline UI on") and said[-1]:
            said.append(ui.stdout.readline().decode())  # (a new store is said first)
    finally:
        ui.terminate()
        ui.wait(timeout=30)
    first = said[-1]
    assert first.startswith("Playline UI on http://127.0.0.1:"), said
    assert STORE_PASSWORD not in "".join(said) and f"(store {_shown(url)})" in first
