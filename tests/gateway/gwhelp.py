"""Helpers for the gateway tests (a unique module name: test dirs have no __init__.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

import playline as pl
from playline.sim import Simulator

PERSON_FIELDS = ("first_name", "last_name", "domain")


def person_input(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in PERSON_FIELDS}


def world_people(sim: Simulator, limit: int, offset: int = 0) -> list[dict[str, Any]]:
    """People of the simulated world with their true email and phone, over HTTP."""
    response = httpx.get(
        f"{sim.url}/__world/people", params={"limit": limit, "offset": offset}, timeout=10
    )
    assert response.status_code == 200
    people: list[dict[str, Any]] = response.json()["people"]
    assert len(people) == limit
    return people


def tool_column(tool: str) -> Callable[..., Any]:
    """A resolver ``(row, ctx)`` calling ``tool`` with the row's person fields."""

    def resolve(row: Mapping[str, Any], ctx: pl.Context) -> Any:
        return ctx.tool(tool, person_input(row))

    return resolve


def people_play(
    name: str,
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[tuple[str, Callable[..., Any], Callable[..., Any] | None]],
    *,
    limits: pl.Limits | None = None,
) -> pl.Play:
    """A play running ``rows`` (keyed by true email) through ``columns`` (name, resolver, when)."""

    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        builder = ctx.dataset("people", list(rows), key="email")
        for column, resolver, when in columns:
            builder = builder.with_column(column, resolver, when=when)
        return await builder.run()

    return pl.play(name=name, limits=limits)(play)


def by_email(ds: pl.Dataset) -> dict[str, dict[str, Any]]:
    return {row["email"]: row for row in ds}


@contextmanager
def fake_gateway(tools: Any, answer: Any) -> Iterator[tuple[str, list[Any]]]:
    """A gateway on loopback that lists ``tools`` (its ``{"tools": ...}``) and answers every
    call 200 with ``answer``: for what the simulator never sends. Yields its URL and the
    bodies of the calls it got."""
    posts: list[Any] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _json(self, body: Any) -> None:
            raw = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            self._json({"tools": tools})

        def do_POST(self) -> None:
            posts.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            self._json(answer)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", posts
    finally:
        httpd.shutdown()
        thread.join()
