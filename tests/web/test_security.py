"""What keeps the UI's data to itself and its pages, over real HTTP: it answers only for its
own host names (a page of another site served under a name that resolves to this machine,
DNS rebinding, gets nothing), an action passes from the UI's own pages and not from another
site's, every error carries the security headers, and an export's file name cannot break
its response."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response

import playline as pl
from playline.store import Store, open_store
from playline.web import UIConfig, create_app
from playline.web.server import no_login_warning
from services import serve_asgi

from webhelp import every_endpoint

UI = tuple[str, str, UIConfig]
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
}


def _first_key(base: str, run_id: str) -> str:
    rows = httpx.get(f"{base}/api/rows/{run_id}?dataset=people&limit=1", timeout=30).json()
    return str(rows["rows"][0]["key"])


def test_a_request_for_another_host_gets_nothing_from_any_endpoint(demo_ui: UI) -> None:
    """A page served as http://evil.test:PORT/ (evil.test resolving to 127.0.0.1) sends its
    own name as Host, and as the Origin of its actions: pages, JSON, streams, static files
    and actions all answer 400 with nothing of the store, even with the right token."""
    base, run_id, config = demo_ui
    key = _first_key(base, run_id)
    host = f"evil.test:{base.rsplit(':', 1)[1]}"
    gets, posts = every_endpoint(run_id, "people", key)
    form = {"csrf_token": config.csrf_token, "dataset": "people", "key": "rebound:1"}
    with httpx.Client(base_url=base, headers={"Host": host}, timeout=30) as client:
        for path in gets:
            with client.stream("GET", path) as answer:  # a stream answered 200 would not end
                assert answer.status_code == 400, path
                body = answer.read().decode()
            assert config.csrf_token not in body and run_id not in body, path
            assert answer.headers["x-frame-options"] == "DENY", path
        for path in posts:
            answer = client.post(path, data=form, headers={"Origin": f"http://{host}"})
            assert answer.status_code == 400 and run_id not in answer.text, path
    path = config.store_url.removeprefix("sqlite:///")
    with closing(sqlite3.connect(path)) as db:
        assert not db.execute("SELECT key FROM inbox WHERE key = 'rebound:1'").fetchall()


def test_the_ui_answers_for_its_loopback_names_and_an_allowed_host(
    demo_store: tuple[Store, str, str],
) -> None:
    db, url, run_id = demo_store
    config = UIConfig(store=db, store_url=url, allowed_hosts=("proxy.example",))
    with serve_asgi(create_app(config)) as base:
        port = base.rsplit(":", 1)[1]
        form = {"csrf_token": config.csrf_token, "dataset": "people"}
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "proxy.example"):
            headers = {"Host": host}
            page = httpx.get(f"{base}/run/{run_id}", headers=headers, timeout=30)
            assert page.status_code == 200 and config.csrf_token in page.text, host
            origin = {**headers, "Origin": f"http://{host}", "Sec-Fetch-Site": "same-origin"}
            export = httpx.post(
                f"{base}/api/export/{run_id}", data=form, headers=origin, timeout=30
            )
            assert export.status_code == 200 and export.text.startswith("first_name,"), host
        for host in ("evil.test", f"evil.test:{port}", "www.proxy.example", "127.0.0.2"):
            refused = httpx.get(f"{base}/api/runs", headers={"Host": host}, timeout=30)
            assert refused.status_code == 400, host


def test_an_action_passes_from_the_uis_own_pages_and_not_from_another_site(
    demo_ui: UI,
) -> None:
    """What Chromium sends for the grid's Download form on a page with no referrer allowed
    is ``Origin: null`` with ``Sec-Fetch-Site: same-origin``: accepted. What another site's
    page sends (its Origin, or null, and cross-site or same-site) is refused; the token is
    needed either way."""
    base, run_id, config = demo_ui
    form = {"csrf_token": config.csrf_token, "dataset": "people"}
    cases: list[tuple[str | None, str | None, int]] = [
        ("null", "same-origin", 200),
        (base, "same-origin", 200),
        (base, None, 200),
        (None, "same-origin", 200),
        (None, None, 200),  # no browser: the token decides
        ("null", None, 403),
        ("null", "cross-site", 403),
        ("http://evil.example", "cross-site", 403),
        ("http://evil.example", None, 403),
        (base, "same-site", 403),  # another port or subdomain of the same site
        (None, "cross-site", 403),
        (None, "same-site", 403),
    ]
    for origin, site, status in cases:
        headers = {"Origin": origin, "Sec-Fetch-Site": site}
        answer = httpx.post(
            f"{base}/api/export/{run_id}",
            data=form,
            headers={k: v for k, v in headers.items() if v is not None},
            timeout=30,
        )
        assert answer.status_code == status, (origin, site, answer.text[:200])
        if status == 403:
            assert "another site" in answer.json()["error"], (origin, site)
    tokenless = httpx.post(
        f"{base}/api/export/{run_id}",
        data={"dataset": "people"},
        headers={"Origin": "null", "Sec-Fetch-Site": "same-origin"},
        timeout=30,
    )
    assert tokenless.status_code == 403 and "CSRF" in tokenless.json()["error"]
    page = httpx.get(base + "/", timeout=30)
    assert page.headers["referrer-policy"] == "same-origin"  # so a form POST names its Origin


def test_a_500_carries_the_security_headers_and_not_the_error(
    demo_store: tuple[Store, str, str],
) -> None:
    db, url, _ = demo_store

    def boom(request: Request) -> Response:
        raise RuntimeError("a secret in the traceback")

    app = create_app(UIConfig(store=db, store_url=url))
    app.add_route("/api/boom", boom)
    app.add_route("/boom", boom)
    with serve_asgi(app) as base:
        for path in ("/api/boom", "/boom"):
            answer = httpx.get(base + path, timeout=30)
            assert answer.status_code == 500, path
            for name, value in SECURITY_HEADERS.items():
                assert value in answer.headers.get(name, ""), (path, name)
            assert "secret" not in answer.text and "terminal" in answer.text, path
        assert httpx.get(base + "/api/boom", timeout=30).json()["error"].startswith("The UI")


NAMES = {
    "crlf": "people\r\nX-Injected: 1",
    "quote": 'q"; filename="evil.exe',
    "semicolon": "a;b",
    "accents": "pëople €",
    "backslash": "back\\slash 100%",
}


async def _named(ctx: pl.Context, input: Any) -> Any:
    for name in NAMES.values():
        await ctx.dataset(name, [{"n": 1}], key="n").run()


def test_an_export_names_its_file_safely_whatever_its_dataset_is_called(tmp_path: Path) -> None:
    """RFC 6266: the exact name in ``filename*`` (UTF-8, percent-encoded), a printable ASCII
    copy in ``filename``. A CR/LF in a dataset's name broke the response (h11 refused the
    header: no answer at all) and a quote added parameters."""
    url = f"sqlite:///{tmp_path}/names.db"
    run_id = pl.run(pl.play(name="named")(_named), store=url, tools=[]).run_id
    db = open_store(url)
    config = UIConfig(store=db, store_url=url)
    with serve_asgi(create_app(config)) as base:
        for what, name in NAMES.items():
            form = {"csrf_token": config.csrf_token, "dataset": name, "format": "jsonl"}
            answer = httpx.post(f"{base}/api/export/{run_id}", data=form, timeout=30)
            assert answer.status_code == 200 and answer.text == '{"n": 1}\n', what
            value = answer.headers["content-disposition"]
            assert value.isprintable() and value.isascii(), what
            kind, fallback, exact = value.split("; ")  # no parameter added by the name
            assert kind == "attachment", value
            plain = fallback.removeprefix('filename="').removesuffix('"')
            assert fallback == f'filename="{plain}"' and not set('"\\%;') & set(plain), value
            assert unquote(exact.removeprefix("filename*=UTF-8''")) == f"{run_id}-{name}.jsonl"
    db.close()


@pytest.fixture
def blocking_play(tmp_path: Path) -> Iterator[Path]:
    """A play file whose one row waits until its process is stopped."""
    play = tmp_path / "blocks.py"
    play.write_text(
        "import asyncio\n\nimport playline as pl\n\n\n"
        "async def forever(row):\n    await asyncio.Event().wait()\n\n\n"
        "@pl.play(name='blocks')\n"
        "async def blocks(ctx, input):\n"
        "    await ctx.dataset('d', [{'n': 1}], key='n').with_column('v', forever).run()\n"
    )
    yield play


def _serving(command: list[str], stream: str) -> tuple[subprocess.Popen[str], str]:
    """Start a command that serves the UI; (its process, the base URL it printed)."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = process.stdout if stream == "stdout" else process.stderr
    assert out is not None
    for line in out:
        if line.startswith("Playline UI on "):
            return process, line.split()[3].rstrip("/")
    process.wait()
    raise AssertionError(f"{command[3]} printed no URL (exit {process.returncode})")


def test_playline_ui_and_run_ui_answer_only_for_their_own_hosts(
    tmp_path: Path, blocking_play: Path
) -> None:
    """`playline ui --allowed-host NAME` answers for NAME too; `playline run --ui` for its
    loopback names only; both refuse another host."""
    store = f"sqlite:///{tmp_path}/hosts.db"
    python = [sys.executable, "-m", "playline"]
    ui_command = [*python, "ui", "--store", store, "--port", "0", "--allowed-host", "proxy.example"]
    run_command = [*python, "run", str(blocking_play), "--store", store, "--ui"]
    ui, ui_base = _serving(ui_command, "stdout")
    try:
        run, run_base = _serving(run_command, "stderr")
        try:
            for base, names in ((ui_base, ["proxy.example"]), (run_base, [])):
                port = base.rsplit(":", 1)[1]
                for host in [f"127.0.0.1:{port}", f"localhost:{port}", *names]:
                    answer = httpx.get(base + "/api/runs", headers={"Host": host}, timeout=30)
                    assert answer.status_code == 200 and "runs" in answer.json(), (base, host)
                for host in (f"evil.test:{port}", "proxy.example.evil.test"):
                    answer = httpx.get(base + "/", headers={"Host": host}, timeout=30)
                    assert answer.status_code == 400, (base, host)
        finally:
            run.send_signal(signal.SIGINT)
            run.communicate(timeout=60)
    finally:
        ui.send_signal(signal.SIGINT)
        ui.communicate(timeout=60)


def test_an_allowed_host_is_a_name_alone_and_any_address_says_so(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from playline.cli import app

    store = f"sqlite:///{tmp_path}/x.db"
    for name in ("http://proxy.example", "proxy.example:443", "*", "a/b"):
        result = CliRunner().invoke(app, ["ui", "--store", store, "--allowed-host", name])
        assert result.exit_code == 2, name
        assert "is not a host name" in result.stderr and "--allowed-host" in result.stderr
    assert "--allowed-host" in no_login_warning("0.0.0.0")
    assert "--allowed-host" not in no_login_warning("192.0.2.1")


def test_playline_ui_stopped_by_sigterm_closes_its_store_and_says_when_it_is_new(
    tmp_path: Path,
) -> None:
    """A mistyped --store is said (the UI starts on a new, empty store); SIGTERM (what a
    service manager sends) stops the UI as Ctrl-C does: its store closed, no -wal or -shm
    left behind."""
    store = tmp_path / "typo.db"
    command = [sys.executable, "-m", "playline", "ui", "--store", f"sqlite:///{store}",
               "--port", "0"]  # fmt: skip
    ui, base = _serving(command, "stdout")
    try:
        assert httpx.get(base + "/api/runs", timeout=30).json()["runs"] == []
        assert store.with_name("typo.db-wal").exists()  # open: its log is there
    finally:
        ui.send_signal(signal.SIGTERM)
        _, err = ui.communicate(timeout=60)

    assert ui.returncode == 0, err
    assert "warning: no store at" in err and "typo.db yet" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["typo.db"]
