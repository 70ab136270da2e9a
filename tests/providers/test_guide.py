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
EXAMPLES = [
    pytest.param(code, id=name) for name, code in _EXAMPLE.findall(GUIDE.read_text("utf-8"))
]


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    with spawn(seed=7, latency_ms=0, providers=True) as running:
        for name in PROVIDERS:  # a job is done at its first poll: the examples wait less
            running.double(name, pending_polls=0)
        yield running


def test_every_provider_has_a_working_example() -> None:
    shown = {name for name in PROVIDERS if f"pl.providers.{name}(" in GUIDE.read_text("utf-8")}
    titled = " ".join(code for _, code in _EXAMPLE.findall(GUIDE.read_text("utf-8")))
    assert len(EXAMPLES) >= 7
    assert shown and all(f"PLAYLINE_{n.upper()}_URL" in GUIDE.read_text("utf-8") for n in PROVIDERS)
    assert "pl.providers.hunter()" in titled


@pytest.mark.parametrize("code", EXAMPLES)
def test_the_guide_s_example_runs_against_the_doubles(
    code: str, sim: SimProcess, tmp_path: Path
) -> None:
    env = dict(os.environ)
    for name, provider in PROVIDERS.items():
        env[provider.key] = sim.token
        env[provider.url_variable] = f"{sim.url}/{name}"
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    ran = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "completed" in ran.stdout, ran.stdout
