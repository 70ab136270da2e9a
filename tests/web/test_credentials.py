"""No page, JSON answer or command line of the UI shows the password of a PostgreSQL store.

The store is a real PostgreSQL database reached as the role ``rw`` with a password in its URL
(``postgres_password_url``). Every page and JSON twin is read and searched for the password;
Resume starts a real ``playline resume``, held at a named pipe while the test reads its
``/proc/PID/cmdline`` (no password: the URL reaches it through its environment).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from playline.cli import app as cli_app
from playline.store import RunStatus, Store, open_store
from playline.web import UIConfig, create_app
from services import STORE_PASSWORD, serve_asgi

pytestmark = pytest.mark.timeout(240)

# One row, whose column fails until a resume finds CREDTEST_GATE: then it waits for the test
# to write to that named pipe, so the resume's process lives while the test looks at it.
HELD_PLAY = """
import os
import playline as pl

def hold(row):
    gate = os.environ.get("CREDTEST_GATE")
    if not gate:
        raise RuntimeError("no gate yet: a resume finishes this row")
    with open(gate, encoding="utf-8") as fifo:  # waits for the test's line
        fifo.readline()
    return "held"

@pl.play
async def held(ctx, input):
    ctx.log("holding one row")
    return await ctx.dataset("d", [{"k": "a"}], key="k").with_column("v", hold).run()
"""

PAGES = ("/", "/run/r1", "/grid/r1?dataset=d", "/run/nope", "/grid/nope")
ANSWERS = (
    "/api/runs",
    "/api/run/r1",
    "/api/run/nope",
    "/api/rows/r1?dataset=d",
    "/api/rows/nope",
    "/api/counts/r1?dataset=d",
    "/api/counts/nope",
    "/api/row/r1?dataset=d&key=a",
    "/api/log/r1",
    "/api/log/nope",
    "/api/columns/r1",
    "/api/columns/nope",
)


def _held_run(tmp_path: Path, url: str) -> None:
    """Run r1 of the held play with `playline run`: its row fails, so it ends failed (resumable)."""
    play = tmp_path / "held.py"
    play.write_text(HELD_PLAY, encoding="utf-8")
    CliRunner().invoke(cli_app, ["run", str(play), "--store", url, "--run-id", "r1"])


@pytest.fixture
def held(tmp_path: Path, postgres_password_url: str) -> Iterator[tuple[Store, str]]:
    url = postgres_password_url
    _held_run(tmp_path, url)
    db = open_store(url)
    record = db.get_run("r1")
    assert record is not None and record.status is RunStatus.FAILED
    yield db, url
    db.close()


def _scan(base: str) -> list[str]:
    """The text of every page and JSON answer the UI serves for r1 (and for a missing run)."""
    texts = []
    for path in PAGES + ANSWERS:
        answer = httpx.get(base + path, timeout=30)
        assert answer.status_code in (200, 404), (path, answer.status_code, answer.text)
        texts.append(f"{path}: {answer.status_code} {answer.text}")
    return texts


def test_no_page_or_answer_shows_the_password(held: tuple[Store, str]) -> None:
    db, url = held
    assert STORE_PASSWORD in url
    config = UIConfig(store=db, store_url=url)
    with serve_asgi(create_app(config)) as base:
        texts = _scan(base)
    leaks = [text[:300] for text in texts if STORE_PASSWORD in text]
    assert leaks == []
    missing = next(text for text in texts if text.startswith("/api/run/nope"))
    assert "postgresql://rw@127.0.0.1" in missing  # the store is named, without its password


def test_a_password_in_the_query_is_not_shown_either(
    tmp_path: Path, postgres_password_url: str
) -> None:
    url = postgres_password_url.replace(f":{STORE_PASSWORD}@", "@", 1)
    url += f"?password={STORE_PASSWORD}&sslmode=disable"
    _held_run(tmp_path, url)
    with open_store(url) as db, serve_asgi(create_app(UIConfig(store=db, store_url=url))) as base:
        assert db.get_run("r1") is not None  # libpq took the password from the query
        texts = _scan(base)
        assert repr(db).count(STORE_PASSWORD) == 0
    assert [text[:300] for text in texts if STORE_PASSWORD in text] == []


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_resume_passes_the_store_through_the_environment_not_the_command_line(
    held: tuple[Store, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, url = held
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    monkeypatch.setenv("CREDTEST_GATE", str(gate))  # the UI's child inherits it
    config = UIConfig(store=db, store_url=url, log_dir=tmp_path)
    ui = create_app(config)
    pipe = os.open(gate, os.O_RDWR)  # open both ways: the child's open never waits for it
    try:
        with serve_asgi(ui) as base:
            answer = httpx.post(
                f"{base}/api/resume/r1", headers={"X-CSRF-Token": config.csrf_token}, timeout=30
            )
            assert answer.status_code == 202, answer.text
            body = answer.json()
            child = ui.state.children.started["r1"]
            try:
                argv = _cmdline(child.pid)  # it lives: its row waits for the line below
                environ = Path(f"/proc/{child.pid}/environ").read_bytes().split(b"\0")
                os.write(pipe, b"go\n")
                assert child.wait(timeout=120) == 0, Path(body["log"]).read_text()
            finally:
                if child.poll() is None:
                    child.kill()
                    child.wait()
            again = _scan(base)
    finally:
        os.close(pipe)
    assert STORE_PASSWORD not in answer.text
    assert STORE_PASSWORD not in argv and "playline resume -- r1" in argv
    assert STORE_PASSWORD not in " ".join(child.args)
    assert f"PLAYLINE_STORE={url}".encode() in environ
    assert body["command"] == (
        f"PLAYLINE_STORE={url.replace(f':{STORE_PASSWORD}@', '@')} playline resume -- r1"
    )
    assert STORE_PASSWORD not in Path(body["log"]).read_text()
    assert [text[:300] for text in again if STORE_PASSWORD in text] == []
    done = db.get_run("r1")
    assert done is not None and done.status is RunStatus.COMPLETED and done.attempts == 2
