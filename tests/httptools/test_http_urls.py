"""pl.HttpTool's URL placeholders and request building, against a loopback server that
records the raw path of every request it gets: a row's value stays one path segment, a
value that would send the call to another URL fails the cell before anything is sent, a
declaration that cannot be sent is refused at import, and a request that cannot be built is
failed as not sent, never in doubt."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import playline as pl
from playline.store import open_store
from services import serve_asgi


class Recorder:
    """An ASGI app answering 200 ``{"data": <raw path>}`` and keeping each raw path."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.status = 200

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        path = scope["raw_path"].decode() + ("?" + scope["query_string"].decode() or "")
        self.paths.append(path.rstrip("?"))
        body = b'{"data": "ok"}'
        await send({"type": "http.response.start", "status": self.status, "headers": []})
        await send({"type": "http.response.body", "body": body})


@pytest.fixture
def server() -> Iterator[tuple[Recorder, str]]:
    recorder = Recorder()
    with serve_asgi(recorder) as url:
        yield recorder, url


def run(
    tool: pl.HttpTool, rows: Sequence[Mapping[str, Any]], tmp_path: Path
) -> dict[str, dict[str, Any]]:
    """Each row's ``c`` cell after a run calling ``tool`` with the row (keyed by ``k``)."""
    return {r.key: r.cells["c"] for r in _run(tool, rows, tmp_path)[1]}


def _run(tool: pl.HttpTool, rows: Sequence[Mapping[str, Any]], tmp_path: Path) -> Any:

    async def column(row: Mapping[str, Any], ctx: pl.Context) -> Any:
        return await ctx.tool(tool.id, {k: v for k, v in row.items() if k != "k"})

    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        return (
            await ctx.dataset("d", [dict(r) for r in rows], key="k").with_column("c", column).run()
        )

    store = f"sqlite:///{tmp_path}/s.db"
    result = pl.run(pl.play(name="urls")(play), store=store, tools=[tool])
    assert result.stats.credits_in_doubt == 0
    return result, list(open_store(store).iter_rows(result.run_id, "d"))


def test_a_row_value_stays_one_path_segment_and_dot_segments_are_refused(
    server: tuple[Recorder, str], tmp_path: Path
) -> None:
    recorder, url = server
    tool = pl.HttpTool("x.find", "GET", url + "/nope/{domain}/{first}?q={first}", query={})
    rows = [
        {"k": "evil", "domain": "../../__ledger?x=1#f", "first": "a/b"},
        {"k": "dot", "domain": ".", "first": "a"},
        {"k": "dotdot", "domain": "..", "first": "a"},
        {"k": "zero", "domain": "a b", "first": 0},
    ]

    cells = run(tool, rows, tmp_path)

    assert sorted(recorder.paths) == [
        "/nope/..%2F..%2F__ledger%3Fx%3D1%23f/a%2Fb?q=a%2Fb",  # '/' quoted: one segment
        "/nope/a%20b/0?q=0",  # 0 is a value, not a missing one
    ]
    for key in ("dot", "dotdot"):
        assert cells[key]["status"] == "failed"
        assert "not sent: the URL's path segment {domain}" in cells[key]["error"]
        assert "x.find" in cells[key]["error"]


def test_a_missing_none_or_empty_placeholder_fails_the_cell_and_sends_nothing(
    server: tuple[Recorder, str], tmp_path: Path
) -> None:
    recorder, url = server
    tool = pl.HttpTool("x.find", "GET", url + "/nope/{domain}/{first}")
    rows = [
        {"k": "none", "domain": "ok.io", "first": None},
        {"k": "empty", "domain": "ok.io", "first": ""},
        {"k": "missing", "domain": "ok.io"},
    ]

    cells = run(tool, rows, tmp_path)

    assert recorder.paths == []
    for cell in cells.values():
        assert cell["status"] == "failed"
        assert "Tool x.find failed: not sent: the URL's {first} has no value" in cell["error"]
        assert "code=invalid_input" in cell["error"]


def test_a_request_that_cannot_be_built_fails_as_not_sent_never_in_doubt(
    server: tuple[Recorder, str], tmp_path: Path
) -> None:
    """A request function can still give what the declaration checks refuse: a header value
    that is not text (httpx refuses to build it) or a header name h11 refuses to write."""
    recorder, url = server
    tool = pl.HttpTool("x.find", "GET", url + "/find", cost=pl.Cost(1))

    @tool
    def request(input: dict[str, Any]) -> dict[str, Any]:
        return {"headers": {input["name"]: input["value"]}}

    rows = [
        {"k": "number", "name": "X-A", "value": 5},
        {"k": "name", "name": "Bad Name", "value": "1"},
        {"k": "newline", "name": "X-A", "value": "a\r\nX-B: 1"},
        {"k": "fine", "name": "X-A", "value": "1"},
    ]

    cells = run(tool, rows, tmp_path)

    assert recorder.paths == ["/find"]
    assert cells["fine"]["status"] == "completed"
    for key in ("number", "name", "newline"):
        assert cells[key]["status"] == "failed", key
        assert "not sent: the request cannot be" in cells[key]["error"]


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"idempotency": "Bad Header Name"}, "idempotency='Bad Header Name'.*a header name"),
        ({"headers": {"X-A": 5}}, "the value of 'X-A' is 5; give text.*'X-A': '5'"),
        ({"headers": {"X-A": "a\nb"}}, "text on one line"),
        ({"headers": {"X A": "1"}}, "'X A' is not a header name"),
        ({"headers": ["X-A"]}, "a dict of header name to text"),
    ],
)
def test_headers_that_cannot_be_sent_are_refused_at_declaration(
    options: dict[str, Any], says: str
) -> None:
    with pytest.raises(pl.PlayDefinitionError, match=says):
        pl.HttpTool("x.find", "GET", "https://x.io/find", **options)


@pytest.mark.parametrize(
    "url",
    [
        "https://x.io/v1/{domain",
        "https://x.io/v1/}x",
        "https://x/{}",
        "https://x/{0}",
        "https://x/{a.b}",
        "https://x/{a[0]}",
        "https://x/{a!r}",
        "https://x/{a:>9}",
    ],
)
def test_a_url_template_that_does_not_parse_is_refused_at_declaration(url: str) -> None:
    with pytest.raises(pl.PlayDefinitionError, match=r"'x\.find'.*the URL template"):
        pl.HttpTool("x.find", "GET", url)


@pytest.mark.parametrize("outcomes", [[pl.Outcome("fatal", status=401)], []])
def test_a_refused_provider_key_is_named_in_the_hint_not_the_gateway_token(
    server: tuple[Recorder, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    outcomes: list[pl.Outcome],
) -> None:
    from playline.cli._app import failure_lines

    recorder, url = server
    recorder.status = 401
    monkeypatch.setenv("URLS_API_KEY", "wrongwrongwrong")
    auth = pl.Auth.header("X-Api-Key", "URLS_API_KEY")
    tool = pl.HttpTool("x.find", "GET", url + "/find", auth=auth, outcomes=outcomes)

    result, _ = _run(tool, [{"k": "a"}], tmp_path)

    ((what, line),) = failure_lines(result.stats)
    assert what == "calls failed"
    assert line.startswith("1 x 401 from x.find (")
    assert "check URLS_API_KEY (the provider's key" in line
    assert "gateway" not in line
    assert "wrongwrongwrong" not in line
    assert result.error is not None  # every call refused: the run says what to check
    assert "check URLS_API_KEY, the provider's key" in result.error
    assert "GATEWAY_TOKEN" not in result.error
