"""`playline ui` on a store its user cannot write (a colleague's, a backup): it shows the
runs, read-only, and refuses the actions that write, saying why; it refused to start."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import httpx

import playline as pl
from playline.cli._ui import _opened
from playline.store import open_store
from playline.web import UIConfig, create_app
from services import as_another_user, serve_asgi


@pl.play(name="read-only-ui")
async def _play(ctx: pl.Context, input: object) -> object:
    rows = [{"n": n} for n in range(3)]
    return await ctx.dataset("rows", rows, key="n").with_column("x", lambda r: r["n"]).run()


def test_a_read_only_ui_shows_the_runs_and_refuses_what_writes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    result = pl.run(_play, store=url)
    with open_store(url, read_only=True) as db:
        config = UIConfig(store=db, store_url=url)
        with serve_asgi(create_app(config)) as base:
            runs = httpx.get(f"{base}/api/runs", timeout=30).json()["runs"]
            assert [r["run_id"] for r in runs] == [result.run_id]
            rows = httpx.get(f"{base}/api/rows/{result.run_id}?dataset=rows", timeout=30)
            assert rows.status_code == 200 and len(rows.json()["rows"]) == 3
            headers = {"X-CSRF-Token": config.csrf_token}
            for path, body in (
                (f"/api/stop/{result.run_id}", None),
                (f"/api/resume/{result.run_id}", None),
                ("/api/event", {"key": "k", "payload": "{}"}),
            ):
                refused = httpx.post(base + path, headers=headers, json=body, timeout=30)
                assert refused.status_code == 409, (path, refused.text)
                assert "opened the store read-only" in refused.json()["error"]
            export = httpx.post(
                f"{base}/api/export/{result.run_id}",
                headers=headers,
                data={"dataset": "rows", "format": "csv"},
                timeout=30,
            )
            assert export.status_code == 200, export.text  # reading is not writing


def test_the_ui_opens_a_store_its_user_cannot_write_read_only() -> None:
    """As another user (root writes anything), in a shared folder: the UI's store opens."""
    shared = Path(tempfile.mkdtemp())  # outside pytest's folders, which only root enters
    try:
        shared.chmod(0o755)
        url = f"sqlite:///{shared}/s.db"
        pl.run(_play, store=url, run_id="seen")
        (shared / "s.db").chmod(0o644 if os.geteuid() == 0 else 0o444)

        def open_as_the_ui() -> str:
            with _opened(url) as db:
                return f"{getattr(db, 'read_only', False)} {db.list_runs()[0].run_id}"

        assert as_another_user(open_as_the_ui) == "True seen"
        assert sorted(p.name for p in shared.iterdir()) == ["s.db"]
    finally:
        shutil.rmtree(shared)
