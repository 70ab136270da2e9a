"""Headless Chromium through Playwright's driver loads a page from a local Starlette app."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

import services
from services import chromium_context, serve_asgi


async def home(request: Request) -> HTMLResponse:
    return HTMLResponse(
        "<!doctype html><html><head><title>Playline selftest</title></head>"
        "<body><h1 id='greeting'>hello from uvicorn</h1></body></html>"
    )


def test_chromium_reads_the_title_of_a_local_page(chromium_path: Path) -> None:
    app = Starlette(routes=[Route("/", home)])
    with serve_asgi(app) as url, chromium_context(chromium_path) as browser:
        page = browser.new_page()
        page.goto(url)
        assert page.title() == "Playline selftest"
        assert page.text_content("#greeting") == "hello from uvicorn"
    # Closed, Playwright leaves no loop marked running: the next async test can run.
    assert asyncio.run(asyncio.sleep(0, result="free")) == "free"


def test_a_missing_chromium_fails_with_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(services, "CHROMIUM", tmp_path / "chromium")
    with pytest.raises(pytest.fail.Exception, match="apt-get install -y chromium"):
        services.chromium_executable()
