"""The users' documentation: the site builds, the generated pages are current, the examples
run, and nothing links outside the repository (users of the package have only the package).

These run in `make test` (which installs the `docs` extra); `-m "not docs"` leaves them out.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import playline as pl

pytestmark = pytest.mark.docs

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
LINKED = [*PAGES, ROOT / "README.md"]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_site_builds_with_mkdocs_strict(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None:
        pytest.fail("mkdocs is not installed: pip install -e '.[docs]' (make test does it)")
    built = _run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)], ROOT
    )
    assert built.returncode == 0, built.stderr + built.stdout
    assert (tmp_path / "reference" / "python" / "index.html").is_file()


def test_the_command_line_page_matches_the_help() -> None:
    checked = _run([sys.executable, "scripts/gen_cli_docs.py", "--check"], ROOT)
    assert checked.returncode == 0, checked.stderr


def test_every_public_name_is_in_the_api_reference() -> None:
    page = (DOCS / "reference" / "python.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^::: playline\.(\w+)$", page, flags=re.M))
    assert sorted(set(pl.__all__) - documented) == []


# links

_FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.S | re.M)
_CODE = re.compile(r"(`+).+?\1", re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_LINK = re.compile(
    r"\]\(\s*<?([^)\s>]+)"  # [text](target)
    r"|^\s*\[[^\]]+\]:\s*<?(\S+?)>?\s*$"  # [label]: target
    r"|<((?:[a-z][a-z0-9+.-]*:|www\.)[^>\s]+)>"  # <scheme:...>
    r"|(?:href|src)\s*=\s*[\"']([^\"']+)"  # raw HTML
    r"|\b((?:https?|ftp)://\S+|www\.\S+)",  # a bare URL (GitHub links those)
    re.M | re.I,
)


def _prose(text: str) -> str:
    """The text a reader follows links in: code blocks, code spans and comments removed."""
    return _CODE.sub("", _FENCE.sub("", _COMMENT.sub("", text)))


def _links(path: Path) -> list[str]:
    found = _LINK.findall(_prose(path.read_text(encoding="utf-8")))
    return [next(group for group in groups if group) for groups in found]


def _outside(path: Path, target: str) -> str | None:
    """Why ``target`` (linked from ``path``) leaves the repository, or None if it does not."""
    if re.match(r"^[a-z][a-z0-9+.-]*:|^//|^www\.", target, flags=re.I):
        return "an address outside the repository"
    if target.startswith("/"):
        return "an absolute path"
    file = target.split("#", 1)[0]
    if not file:
        return None  # an anchor on the same page
    resolved = (path.parent / file).resolve()
    if not resolved.is_relative_to(ROOT):
        return "a path outside the repository"
    if not resolved.exists():
        return "a file that does not exist"
    return None


def test_no_page_links_outside_the_repository() -> None:
    bad = [
        f"{path.relative_to(ROOT)}: {target} ({why})"
        for path in LINKED
        for target in _links(path)
        if (why := _outside(path, target))
    ]
    assert bad == []
    assert sum(len(_links(path)) for path in LINKED) > 50  # the scan sees the links


def test_the_link_check_catches_what_it_should(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "See [design](../shared/design/API.md), [site](https://example.com), "
        "<https://example.com>, http://example.com, [ok](#anchor).\n\n"
        "[ref]: https://example.com\n\n"
        "```sh\ncurl http://127.0.0.1:8765  # in code: not a link\n```\n"
        "Also `http://127.0.0.1:8765`.\n",
        encoding="utf-8",
    )
    verdicts = [_outside(page, target) for target in _links(page)]
    assert len(verdicts) == 6
    assert verdicts.count(None) == 1  # only the anchor


# examples

_TITLED = re.compile(r'^```python title="([\w.-]+\.py)"\n(.*?)^```', re.S | re.M)
EXAMPLES = [
    pytest.param(code, id=f"{page.relative_to(DOCS)}:{name}")
    for page in PAGES
    for name, code in _TITLED.findall(page.read_text(encoding="utf-8"))
]


@pytest.mark.parametrize("code", EXAMPLES)
def test_the_example_runs_as_written(code: str, tmp_path: Path) -> None:
    """Complete examples carry a file name (```python title="x.py"); each runs as a script,
    in an empty folder (its SQLite store lands there), with the simulator in-process."""
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    ran = _run([sys.executable, str(script)], tmp_path)
    assert ran.returncode == 0, ran.stderr


def test_the_crm_webhook_example_works_as_written(tmp_path: Path) -> None:
    """automation.md's hooks.py served by `playline serve`, and its curl/openssl request: the
    answer is the one the page shows, and the serve's worker completes the run."""
    page = (DOCS / "guide" / "automation.md").read_text(encoding="utf-8")
    hooks = dict(_TITLED.findall(page))["hooks.py"]
    (shell,) = [b for b in re.findall(r"^```bash\n(.*?)^```", page, re.S | re.M) if "openssl" in b]
    shown = re.search(r"^# (\{.*\})$", shell, re.M)
    assert shown, shell
    (tmp_path / "hooks.py").write_text(hooks, encoding="utf-8")
    env = {**os.environ, "CRM_HOOK_SECRET": "whsec-test-0123456789", "COLUMNS": "200"}
    store = f"sqlite:///{tmp_path}/hooks.db"
    playline = str(Path(sys.executable).with_name("playline"))
    serve = subprocess.Popen(
        [playline, "serve", "hooks.py", "--port", "0", "--store", store],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert serve.stderr is not None
        first = serve.stderr.readline()
        url = re.search(r"(http://127\.0\.0\.1:\d+)", first)
        assert url, first + serve.stderr.read()
        sent = subprocess.run(
            ["bash", "-c", shell.replace("http://127.0.0.1:8767", url[1])],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert sent.returncode == 0, sent.stderr
        assert json.loads(sent.stdout) == json.loads(shown[1])
        for line in serve.stderr:  # the serve's worker says when the run ends
            if line.startswith("run hook:crm-signup:signup-1"):
                assert line.split()[-1] == "completed", line
                break
        else:
            raise AssertionError("playline serve ended before the run did")
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.communicate(timeout=60)
