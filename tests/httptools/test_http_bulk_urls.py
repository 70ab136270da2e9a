"""A bulk HttpTool's URL, against a loopback server that records every request: one request
carries many inputs, so a URL a bulk request goes to names no input's field (refused at
declaration, with what to do instead); the fields travel in the items, and a lone input goes
to the single URL, whose fields are the input's."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import playline as pl
from services import serve_asgi


class Recorder:
    """An ASGI app keeping each request (method, raw path, JSON body): a POST's items are
    answered ``{"data": <the item's domain>}`` each, in order, a GET ``{"data": <its path>}``."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        path, body = scope["raw_path"].decode(), json.loads(raw) if raw else None
        self.asked.append((scope["method"], path, body))
        answer: Any = {"data": path}
        if scope["method"] == "POST":
            answer = [{"data": item["domain"]} for item in body["items"]]
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})


@pytest.fixture
def server() -> Iterator[tuple[Recorder, str]]:
    recorder = Recorder()
    with serve_asgi(recorder) as url:
        yield recorder, url


def _tool(url: str) -> pl.HttpTool:
    """NeverBounce's shape: a single URL with the input's field, a bulk URL of its own."""
    return pl.HttpTool(
        "x.find",
        "GET",
        url + "/find/{domain}",
        result="data",
        bulk=pl.HttpBulk(
            max_size=10,
            url=url + "/bulk",
            items="items",
            item={"domain": "{domain}"},
            results="",
            item_result="data",
        ),
    )


def _cells(tool: pl.HttpTool, domains: list[str], store: str) -> dict[str, Any]:
    async def column(row: Any, ctx: pl.Context) -> Any:
        return await ctx.tool(tool.id, {"domain": row["domain"]})

    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        rows = [{"domain": d} for d in domains]
        return await ctx.dataset("d", rows, key="domain").with_column("c", column).run()

    result = pl.run(pl.play(name="bulk_urls")(play), store=store, tools=[tool])
    assert result.ok, result.error
    return {row["domain"]: row["c"] for row in result.output}


@pytest.mark.parametrize(
    ("declare", "says"),
    [
        (
            lambda: pl.HttpBulk(max_size=10, url="https://api.acme.com/v1/{domain}/bulk"),
            "pl.HttpBulk(url='https://api.acme.com/v1/{domain}/bulk'): a bulk request carries "
            "many inputs, so its URL cannot hold one input's {domain}; send it in each item "
            "(item={'domain': '{domain}'}) or in body=",
        ),
        (
            lambda: pl.HttpTool(
                "a.b",
                "GET",
                "https://api.acme.com/v1/find?domain={domain}",
                bulk=pl.HttpBulk(max_size=10),
            ),
            "its bulk requests go to this URL, which cannot hold one input's {domain} when a "
            "request carries many; give the bulk form a URL of its own without fields",
        ),
        (
            lambda: pl.HttpBulk(max_size=10, url="https://api.acme.com/{domain"),
            "the URL does not parse",
        ),
        (lambda: pl.HttpBulk(max_size=10, url="ftp://api.acme.com/bulk"), "http:// or https://"),
    ],
    ids=["bulk_url_field", "tool_url_field_without_bulk_url", "unparsed", "not_http"],
)
def test_a_bulk_url_naming_an_input_s_field_is_refused_at_declaration(
    declare: Callable[[], Any], says: str
) -> None:
    with pytest.raises(pl.PlayDefinitionError) as refused:
        declare()
    assert says in str(refused.value)


def test_a_bulk_tool_sends_fields_in_its_items_and_a_lone_input_to_its_single_url(
    server: tuple[Recorder, str], tmp_path: Path
) -> None:
    recorder, url = server
    tool = _tool(url)

    many = _cells(tool, ["a.com", "b.io", "c/d"], f"sqlite:///{tmp_path}/many.db")
    posts = [body for method, path, body in recorder.asked if method == "POST"]
    assert {p for _, p, _ in recorder.asked} == {"/bulk"}, "one URL for many inputs"
    assert sorted(i["domain"] for body in posts for i in body["items"]) == ["a.com", "b.io", "c/d"]
    assert any(len(body["items"]) > 1 for body in posts)
    assert many == {"a.com": "a.com", "b.io": "b.io", "c/d": "c/d"}

    recorder.asked.clear()
    lone = _cells(tool, ["c/d"], f"sqlite:///{tmp_path}/lone.db")
    assert recorder.asked == [("GET", "/find/c%2Fd", None)]
    assert lone == {"c/d": "/find/c%2Fd"}
