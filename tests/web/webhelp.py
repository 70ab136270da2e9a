"""Helpers of the web UI tests: server-sent events read over real HTTP, a gated play whose
rows finish when the test says so, and waiting for observable conditions."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

import playline as pl

WAIT_S = 60.0  # generous: 2 busy cores


def wait_until(condition: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    """Poll an observable condition (a store read, an HTTP answer) until it holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        threading.Event().wait(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@dataclass
class Message:
    event: str
    data: Any
    id: str | None


def sse_messages(response: httpx.Response) -> Iterator[Message]:
    """Parse a text/event-stream response into messages (comments and pings skipped)."""
    event, data, ident = "message", [], None
    for line in response.iter_lines():
        if line == "":
            if data:
                yield Message(event, json.loads("\n".join(data)), ident)
            event, data, ident = "message", [], None
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
            elif name == "id":
                ident = value


@dataclass
class Gate:
    """Rows of the gated play finish one per ``release``."""

    permits: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))

    def release(self, n: int) -> None:
        for _ in range(n):
            self.permits.release()


def gated_play(gate: Gate) -> pl.Play:
    async def slow(row: Any) -> str:
        import asyncio

        await asyncio.to_thread(gate.permits.acquire)
        return f"item-{row['n']}"

    @pl.play(name=f"gated-{id(gate)}")
    async def gated(ctx: pl.Context, input: Any) -> Any:
        return await (
            ctx.dataset("items", [{"n": n} for n in range(input["rows"])], key="n")
            .with_column("label", slow)
            .with_column("double", lambda row: row["n"] * 2)
            .run()
        )

    return gated


def every_endpoint(run_id: str, dataset: str, key: str) -> tuple[list[str], list[str]]:
    """(GET paths, POST paths): every page, JSON twin, stream, static file and action of the
    UI, for ``run_id``'s ``dataset`` and its row ``key``."""
    q = f"?dataset={quote(dataset)}"
    run = quote(run_id)
    gets = [
        "/", f"/run/{run}", f"/grid/{run}{q}", "/api/runs", f"/api/run/{run}",
        f"/api/rows/{run}{q}", f"/api/counts/{run}{q}", f"/api/row/{run}{q}&key={quote(key)}",
        f"/api/log/{run}", f"/api/columns/{run}", "/static/common.js",
        "/static/vendor/ag-grid.min.js", "/api/stream/runs", f"/api/stream/{run}{q}",
    ]  # fmt: skip
    posts = [f"/api/stop/{run}", f"/api/resume/{run}", f"/api/export/{run}", "/api/event"]
    return gets, posts
