"""Resume in the UI starts `playline resume` for any run id: one that looks like an option
(``--help``) is resumed, not read as one; a long one gets a log file whose name fits."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from playline.cli import app as cli_app
from playline.store import RunStatus, open_store
from playline.triggers import queue_run
from playline.web import UIConfig, create_app
from playline.web.actions import log_name
from services import serve_asgi

pytestmark = pytest.mark.timeout(240)

# Its row fails until a resume finds RESUMETEST_OK in its environment (the UI's, inherited).
PLAY = """
import os
import playline as pl

def check(row):
    if not os.environ.get("RESUMETEST_OK"):
        raise RuntimeError("not yet: a resume finishes this row")
    return "ok"

@pl.play
async def later(ctx, input):
    return await ctx.dataset("d", [{"k": "a"}], key="k").with_column("v", check).run()
"""


@pytest.mark.parametrize("run_id", ["--help", "-x", "r" * 300], ids=["help", "dash", "long"])
def test_resume_runs_any_run_id_as_a_run_id(
    run_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path}/ui.db"
    play = tmp_path / "later.py"
    play.write_text(PLAY, encoding="utf-8")
    with open_store(url) as db:  # no new run takes such an id: one a store kept from before has
        queue_run(db, run_id=run_id, play="later", origin={"kind": "test"})
    CliRunner().invoke(cli_app, ["run", str(play), "--store", url, f"--run-id={run_id}"])
    monkeypatch.setenv("RESUMETEST_OK", "1")
    with open_store(url) as db:
        first = db.get_run(run_id)
        assert first is not None and first.status is RunStatus.FAILED
        (tmp_path / "logs").mkdir()
        config = UIConfig(store=db, store_url=url, log_dir=tmp_path / "logs")
        ui = create_app(config)
        with serve_asgi(ui) as base:
            headers = {"X-CSRF-Token": config.csrf_token}
            answer = httpx.post(f"{base}/api/resume/{run_id}", headers=headers, timeout=30)
            assert answer.status_code == 202, answer.text
            child = ui.state.children.started[run_id]
            try:
                code = child.wait(timeout=120)
            finally:
                if child.poll() is None:
                    child.kill()
                    child.wait()
        log = Path(answer.json()["log"])
        said = log.read_text()
        assert code == 0, said
        assert "Usage:" not in said  # the id was not read as an option
        assert log.parent == tmp_path / "logs" and len(log.name) < 100
        done = db.get_run(run_id)
        assert done is not None and done.status is RunStatus.COMPLETED and done.attempts == 2


def test_resume_of_a_run_that_is_not_there_starts_nothing(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path}/ui.db") as db:
        config = UIConfig(store=db, store_url=f"sqlite:///{tmp_path}/ui.db", log_dir=tmp_path)
        ui = create_app(config)
        with serve_asgi(ui) as base:
            headers = {"X-CSRF-Token": config.csrf_token}
            for run_id in ("--help", "nope", "x" * 300):
                answer = httpx.post(f"{base}/api/resume/{run_id}", headers=headers, timeout=30)
                assert answer.status_code == 404, answer.text
        assert ui.state.children.started == {}
        assert list(tmp_path.glob("playline-resume-*")) == []


def _resume(db: Any, url: str, log_dir: Path | None, run_id: str = "r1") -> httpx.Response:
    """POST a resume of ``run_id`` to a UI over ``db``; the process it starts is stopped."""
    config = UIConfig(store=db, store_url=url, log_dir=log_dir)
    ui = create_app(config)
    with serve_asgi(ui) as base:
        headers = {"X-CSRF-Token": config.csrf_token}
        answer = httpx.post(f"{base}/api/resume/{run_id}", headers=headers, timeout=30)
    child = ui.state.children.started.get(run_id)
    if child is not None:
        child.kill()
        child.wait()
    return answer


def test_a_resume_log_is_its_user_s_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its output may hold rows' values: with no log folder given, it goes to a folder of
    the user's alone in the temp folder, readable by nobody else; a link planted where the
    log goes is not followed, and a folder of that name someone else made is not used."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    url = f"sqlite:///{tmp_path}/ui.db"
    with open_store(url) as db:
        queue_run(db, run_id="r1", play="later", origin={"kind": "test"})

        # a resume that ends at once says why (it cannot find the play), not "Resuming"
        answer = _resume(db, url, None)
        assert answer.status_code == 500, answer.text
        said = answer.json()["error"]
        assert "ended at once (exit 1)" in said and "its play file is unknown" in said
        log = tmp_path / f"playline-{os.getuid()}" / log_name("r1")
        assert str(log) in said and "its play file is unknown" in log.read_text()
        assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(log.stat().st_mode) == 0o600

        victim = tmp_path / "victim.txt"
        victim.write_text("kept")
        log.unlink()
        log.symlink_to(victim)
        linked = _resume(db, url, None)
        assert linked.status_code == 500 and "log file" in linked.json()["error"]
        assert victim.read_text() == "kept"

        log.unlink()
        log.parent.chmod(0o777)  # as if another user had made it for everyone
        opened = _resume(db, url, None)
        assert opened.status_code == 500 and "alone (mode 0700)" in opened.json()["error"]
