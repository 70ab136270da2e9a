"""The README's first play runs as written (on a store in a temp folder)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"


def test_the_first_play_in_the_readme_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    first = blocks[0].replace(".playline/playline.db", f"{tmp_path}/readme.db")
    exec(compile(first, "README.md", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    assert out.startswith("completed 1 ")  # two rows, one lookup: both ask the same thing
    assert "'size': 42" in out
