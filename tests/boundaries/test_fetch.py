"""SEMANTICS 30: ctx.fetch stores the response and replays it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

import playline as pl

from boundhelp import unique


class _Handler(BaseHTTPRequestHandler):
    hits: ClassVar[list[tuple[str, str]]] = []
    authorizations: ClassVar[list[str | None]] = []

    def _answer(self) -> None:
        self.hits.append((self.command, self.path))
        self.authorizations.append(self.headers.get("Authorization"))
        body = b"plain text, not json" if self.path == "/text" else b'{"price": 12}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.hits = []
    _Handler.authorizations = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    thread.join()


def test_a_response_is_stored_and_replayed(run, worker, store, server):
    @pl.play(name=unique("fetcher"))
    async def fetcher(ctx: pl.Context, input: Any) -> Any:
        price = await ctx.fetch("price", f"{server}/price")
        await ctx.wait_for_event(f"{ctx.run_id}:go")
        return [price.ok, price.status, price.json]

    first = run(fetcher)
    pl.send_event(f"{first.run_id}:go", store=store)
    (resumed,) = worker()
    assert resumed.output == [True, 200, {"price": 12}]
    assert _Handler.hits == [("GET", "/price")]  # the replay did not ask again


def test_a_body_that_is_not_json_gives_json_none(run, server):
    @pl.play(name=unique("text"))
    async def play(ctx: pl.Context, input: Any) -> Any:
        response = await ctx.fetch("text", f"{server}/text")
        return [response.text, response.json]

    assert run(play).output == ["plain text, not json", None]


def test_a_post_needs_an_idempotency_key(run, server):
    @pl.play(name=unique("post"))
    async def post(ctx: pl.Context, input: Any) -> Any:
        return (await ctx.fetch("hook", f"{server}/hook", method="POST", json={"a": 1})).status

    result = run(post)
    assert isinstance(result.exception, pl.PlayDefinitionError)
    assert "Idempotency-Key" in result.error
    assert _Handler.hits == []

    @pl.play(name=unique("post-ok"))
    async def post_ok(ctx: pl.Context, input: Any) -> Any:
        headers = {"idempotency-KEY": "hook-1"}
        response = await ctx.fetch("hook", f"{server}/hook", method="POST", headers=headers)
        return response.status

    assert run(post_ok).output == 200


@pytest.mark.parametrize("method", ["FROB", "", None])
def test_a_method_that_is_no_http_method_is_named(run, server, method):
    """ "FROB" was taken, and refused for want of an Idempotency-Key."""

    @pl.play(name=unique("frob"))
    async def play(ctx: pl.Context, input: Any) -> Any:
        return await ctx.fetch("x", f"{server}/price", method=method)

    result = run(play)
    assert isinstance(result.exception, pl.PlayDefinitionError)
    assert f"method={method!r}): one of DELETE, GET, HEAD" in (result.error or "")


def test_fetch_is_not_allowed_inside_a_column(run, server):
    @pl.play(name=unique("fetch-column"))
    async def play(ctx: pl.Context, input: Any) -> Any:
        async def column(row: Any, ctx: pl.Context) -> Any:
            return await ctx.fetch("x", f"{server}/price")

        return await ctx.dataset("rows", [1]).with_column("x", column).run()

    result = run(play)
    assert isinstance(result.exception, pl.PlayDefinitionError)
    assert "use a tool" in result.error or "call a tool" in result.error


def test_an_unreachable_url_is_a_tool_error(run):
    @pl.play(name=unique("unreachable"))
    async def play(ctx: pl.Context, input: Any) -> Any:
        return await ctx.fetch("x", "http://127.0.0.1:1/")

    result = run(play)
    assert isinstance(result.exception, pl.ToolError)


def test_a_secret_in_a_header_reaches_the_server_and_is_never_stored(
    run, store, server, monkeypatch
):
    monkeypatch.setenv("PLAYLINE_SECRET_FETCH_TOKEN", "tok_live_0123456789abcdef")

    @pl.play(name=unique("with-secret"))
    async def with_secret(ctx: pl.Context, input: Any) -> Any:
        token = ctx.secrets.get("FETCH_TOKEN")
        return (await ctx.fetch("price", f"{server}/price", headers={"Authorization": token})).json

    result = run(with_secret)
    assert result.output == {"price": 12}
    assert _Handler.authorizations == ["tok_live_0123456789abcdef"]
    events = store.read_events(result.run_id, after_seq=0, limit=1000)
    assert events and not any("tok_live" in repr(event) for event in events)


def test_a_header_value_that_is_not_text_is_refused(run, server):
    @pl.play(name=unique("bad-header"))
    async def bad_header(ctx: pl.Context, input: Any) -> Any:
        return (await ctx.fetch("price", f"{server}/price", headers={"X-Count": 3})).status

    result = run(bad_header)
    assert isinstance(result.exception, pl.PlayDefinitionError)
    assert "'X-Count' must be text" in result.error
    assert _Handler.hits == []
