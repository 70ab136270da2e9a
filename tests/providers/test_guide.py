"""The providers guide's examples run as written against `playline sim --providers` (in a
process of its own, as the guide starts it), each provider's key and URL in the environment
as the guide exports them. They are the guide's Python blocks marked ``linenums="1"`` (the
site's example runner, tests/test_docs.py, runs only the blocks that need no provider)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from playline.providers import PROVIDERS
from playline.sim import SimProcess, spawn

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "providers.md"
_EXAMPLE = re.compile(r'^```python title="([\w.-]+\.py)" linenums="1"\n(.*?)^```', re.S | re.M)


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    with spawn(seed=7, latency_ms=0, providers=True) as running:
        for name in PROVIDERS:  # a job is done at its first poll: the examples wait less
            running.double(name, pending_polls=0)
        yield running


def test_every_provider_has_a_working_example() -> None:
    shown = {name for name in PROVIDERS if f"pl.providers.{name}(" in GUIDE.read_text("utf-8")}
    titled = " ".join(code for _, code in _EXAMPLE.findall(GUIDE.read_text("utf-8")))
    assert len(_EXAMPLE.findall(GUIDE.read_text("utf-8"))) >= 7
    assert shown and all(f"PLAYLINE_{n.upper()}_URL" in GUIDE.read_text("utf-8") for n in PROVIDERS)
    assert "pl.providers.hunter()" in titled


def test_the_guide_s_examples_run_against_the_doubles(sim: SimProcess, tmp_path: Path) -> None:
    """All at once, each in a folder of its own: the async providers' examples spend most
    of their time waiting for their first poll (30 s for Dropcontact, as documented)."""
    env = dict(os.environ)
    for name, provider in PROVIDERS.items():
        env[provider.key] = sim.token
        env[provider.url_variable] = f"{sim.url}/{name}"
    running = {}
    for name, code in _EXAMPLE.findall(GUIDE.read_text("utf-8")):
        folder = tmp_path / name.removesuffix(".py")
        folder.mkdir()
        (folder / name).write_text(code, encoding="utf-8")
        running[name] = subprocess.Popen(
            [sys.executable, name], cwd=folder, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
    for name, proc in running.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{name}: {err[-3000:]}"
        assert "completed" in out, f"{name}: {out}"
