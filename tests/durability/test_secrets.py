"""SEMANTICS 15: values from ctx.secrets never reach the store, a log or an event."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import playline as pl
from playline._engine.events import EventLog
from playline._secrets import Secret
from playline.store import open_store
from services import serve_asgi

SECRET = "sk-live-7f3a9c"


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAYLINE_SECRET_API_KEY", SECRET)


def _store_text(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


def _run_key_through(
    tmp_path: Path, play_name: str, tool_id: str, fn: Callable[[dict[str, Any]], Any]
) -> tuple[pl.RunResult, Path]:
    """One row whose column calls ``fn`` (as tool ``tool_id``) with the secret API_KEY, on a
    SQLite store in ``tmp_path``: the run's result and the store's file."""
    tool = pl.tool(tool_id)(fn)

    @pl.play(name=play_name)
    async def play(ctx: pl.Context, input: Any) -> Any:
        key = ctx.secrets.get("API_KEY")
        return await (
            ctx.dataset("rows", [{"x": 1}], key="x")
            .with_column("r", lambda row, ctx: ctx.tool(tool_id, {"key": key}))
            .run()
        )

    db = tmp_path / "s.db"
    return pl.run(play, store=f"sqlite:///{db}", tools=[tool]), db


def test_a_secret_used_as_a_tool_input_is_never_stored(tmp_path: Path) -> None:
    seen: list[str] = []

    @pl.tool("t.authed", batch=pl.Batch(max_size=10))
    def authed(inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        seen.extend(i["key"] for i in inputs)
        return [{"ok": i["x"]} for i in inputs]

    @pl.play(name="secret-input")
    async def play(ctx: pl.Context, input: Any) -> Any:
        key = ctx.secrets.get("API_KEY")
        ctx.log(f"using a key of {len(key)} characters")
        return await (
            ctx.dataset("rows", [{"x": i} for i in range(3)], key="x")
            .with_column("r", lambda row, ctx: ctx.tool("t.authed", {"x": row["x"], "key": key}))
            .run()
        )

    db = tmp_path / "s.db"
    first = pl.run(play, store=f"sqlite:///{db}", tools=[authed])
    second = pl.run(play, store=f"sqlite:///{db}", tools=[authed])

    assert first.status == second.status == "completed"
    assert seen == [SECRET] * 3  # the tool got it; the second run was answered from receipts
    assert second.stats.tool_calls_cached == 3
    open_store(f"sqlite:///{db}").close()
    assert SECRET.encode() not in _store_text(db)


def test_a_result_holding_a_secret_fails_its_cell_and_is_not_stored(tmp_path: Path) -> None:
    def echo_key(input: dict[str, Any]) -> dict[str, Any]:
        return {"echo": input["key"]}

    result, db = _run_key_through(tmp_path, "secret-echo", "t.echo_key", echo_key)

    assert result.status == "failed"  # its only row failed
    (error,) = result.output.errors
    assert "secret" in error.message
    assert SECRET.encode() not in _store_text(db)


def test_a_row_whose_key_holds_a_secret_fails_alone_under_another_key(tmp_path: Path) -> None:
    @pl.play(name="secret-row-key")
    async def play(ctx: pl.Context, input: Any) -> Any:
        secret = ctx.secrets.get("API_KEY").reveal()
        return await (
            ctx.dataset(
                "rows",
                [{"x": x} for x in range(3)],
                key=lambda row: f"{row['x']}-{secret}" if row["x"] == 1 else str(row["x"]),
            )
            .with_column("y", lambda row: row["x"] * 2)
            .run()
        )

    db = tmp_path / "s.db"
    result = pl.run(play, store=f"sqlite:///{db}", tools=[])

    assert result.status == "completed_with_errors", result.error
    assert (result.stats.rows, result.stats.rows_failed) == (3, 1)
    rows = {r.key: r for r in open_store(f"sqlite:///{db}").iter_rows(result.run_id, "rows")}
    (refused,) = [r for key, r in rows.items() if key.startswith("secret-")]
    assert refused.status == "failed" and "holds a secret" in (refused.error or "")
    assert {k: r.values["y"] for k, r in rows.items() if r is not refused} == {"0": 0, "2": 4}
    assert SECRET.encode() not in _store_text(db)


@pytest.mark.parametrize(
    "failure",
    [
        lambda key: RuntimeError(f"bad key {key}"),
        lambda key: pl.ToolError("t.refuses", f"key {key} is not allowed", status=403),
        lambda key: pl.ToolError(  # the provider echoes the key in its code and request id
            "t.refuses", "refused", status=401, code=f"bad_{key}", request_id=f"rid-{key}"
        ),
    ],
    ids=["exception", "tool-error", "tool-error-fields"],
)
def test_a_tool_failure_naming_a_secret_is_stored_redacted(tmp_path: Path, failure: Any) -> None:
    # The receipt keeps why the call failed: with the secret's name, never its value.
    @pl.tool("t.refuses")
    def refuses(input: dict[str, Any]) -> dict[str, Any]:
        raise failure(input["key"])

    @pl.play(name="secret-failure")
    async def play(ctx: pl.Context, input: Any) -> Any:
        key = ctx.secrets.get("API_KEY")
        return await (
            ctx.dataset("rows", [{"x": 1}], key="x")
            .with_column("r", lambda row, ctx: ctx.tool("t.refuses", {"key": key, "x": row["x"]}))
            .run()
        )

    db = tmp_path / "s.db"
    result = pl.run(play, store=f"sqlite:///{db}", tools=[refuses])

    (error,) = result.output.errors  # the cell failed; the run and its rows are kept
    assert "[secret API_KEY]" in error.message
    assert SECRET not in f"{error.code} {error.request_id} {result.stats.errors}"
    with closing(sqlite3.connect(db)) as raw:
        [(stored,)] = raw.execute("SELECT error FROM receipts").fetchall()
    assert "[secret API_KEY]" in stored
    open_store(f"sqlite:///{db}").close()
    assert SECRET.encode() not in _store_text(db)


@pytest.mark.parametrize("encode", [json.dumps, repr, lambda s: json.dumps({"k": s})])
def test_a_result_holding_an_escaped_secret_fails_its_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encode: Any
) -> None:
    """A tool that returns the secret already escaped (JSON, repr): stored as JSON, it is
    escaped twice, and still caught."""
    secret = 'sk_live_"quoted"\\back\\slash_0123456789'
    monkeypatch.setenv("PLAYLINE_SECRET_API_KEY", secret)

    def encode_key(input: dict[str, Any]) -> dict[str, Any]:
        return {"v": encode(input["key"])}

    result, db = _run_key_through(tmp_path, "secret-encoded", "t.encode_key", encode_key)

    assert result.status == "failed"  # its only row failed
    stored = _store_text(db)
    escaped = json.dumps(encode(secret))[1:-1].encode()
    assert escaped not in stored and b"0123456789" not in stored


def test_a_short_secret_past_ascii_returned_as_json_dumps_writes_it_fails_its_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``json.dumps`` escapes every character past ASCII (``p\\u00e4ssw...``): a secret too
    short for its pieces to be looked for is caught in that form too."""
    secret = "pässwört99"
    monkeypatch.setenv("PLAYLINE_SECRET_API_KEY", secret)

    def dump_key(input: dict[str, Any]) -> dict[str, Any]:
        return {"v": json.dumps(input["key"])}

    result, db = _run_key_through(tmp_path, "secret-ascii", "t.dump_key", dump_key)

    assert result.status == "failed"  # its only row failed
    assert json.dumps(secret)[1:-1].encode() not in _store_text(db)


def test_a_waterfall_named_with_a_secret_is_refused_and_reaches_no_listener(
    tmp_path: Path,
) -> None:
    """A waterfall's id is stored (in cells, events, the run's stats): one holding a secret's
    value is refused where it is made, and no listener (the --json output) is told it."""
    told: list[str] = []

    @pl.tool("t.plain")
    def plain(input: dict[str, Any]) -> dict[str, Any]:
        return {"v": 1}

    @pl.play(name="secret-waterfall")
    async def play(ctx: pl.Context, input: Any) -> Any:
        value = ctx.secrets.get("API_KEY").reveal()
        named = pl.Waterfall(f"wf-{value}", output="v", steps=[pl.ToolStep("s", "t.plain")])
        return await (
            ctx.dataset("rows", [{"x": 1}], key="x")
            .with_column("a", lambda row, ctx: ctx.waterfall(named, {"x": row["x"]}))
            .run()
        )

    db = tmp_path / "s.db"
    listener = lambda event: told.append(json.dumps(vars(event), default=str))  # noqa: E731
    result = pl.run(play, store=f"sqlite:///{db}", tools=[plain], listeners=[listener])

    assert result.status == "failed"
    assert isinstance(result.exception, pl.SecretLeakError)
    assert "Waterfall id" in str(result.exception)
    assert not any(SECRET in line for line in told)
    assert SECRET.encode() not in _store_text(db)


def test_an_event_whose_data_hold_a_secret_is_told_to_no_listener() -> None:
    told: list[pl.Event] = []
    events = EventLog(open_store("memory://"), "run-1", pl.ManualClock(), [told.append])
    value = Secret("EVENT_KEY", "sk-event-5d1e0b").reveal()

    with pytest.raises(pl.SecretLeakError, match="A waterfall event"):
        events.emit("waterfall", data={"id": f"wf-{value}"})
    assert told == []


@pytest.mark.parametrize(
    "misuse",
    [
        lambda ctx, key: ctx.log(f"the key is {key}"),
        lambda ctx, key: key,  # returned as the play's output
    ],
    ids=["log", "output"],
)
def test_logging_or_returning_a_secret_raises(tmp_path: Path, misuse: Any) -> None:
    @pl.play(name="secret-misuse")
    async def play(ctx: pl.Context, input: Any) -> Any:
        return misuse(ctx, ctx.secrets.get("API_KEY"))

    db = tmp_path / "s.db"
    result = pl.run(play, store=f"sqlite:///{db}", tools=[])

    assert result.status == "failed"
    assert isinstance(result.exception, pl.SecretLeakError)
    assert SECRET.encode() not in _store_text(db)


def test_a_missing_secret_says_how_to_set_it(store_url: str) -> None:
    @pl.play(name="secret-missing")
    async def play(ctx: pl.Context, input: Any) -> Any:
        return ctx.secrets.get("NOT_THERE_XYZ")

    result = pl.run(play, store=store_url, tools=[])

    assert isinstance(result.exception, pl.PlayDefinitionError)
    assert "PLAYLINE_SECRET_NOT_THERE_XYZ" in str(result.exception)


def test_a_secret_read_by_subscript_says_to_use_get(store_url: str) -> None:
    """``ctx.secrets["X"]`` was "TypeError: 'Secrets' object is not subscriptable"."""

    @pl.play(name="secret-subscript")
    async def play(ctx: pl.Context, input: Any) -> Any:
        return ctx.secrets["API_KEY"]

    result = pl.run(play, store=store_url, tools=[])

    assert isinstance(result.exception, pl.PlayDefinitionError)
    assert "ctx.secrets.get('API_KEY')" in str(result.exception)


def test_a_secret_does_not_show_in_its_repr(store_url: str) -> None:
    @pl.play(name="secret-repr")
    async def play(ctx: pl.Context, input: Any) -> Any:
        return repr(ctx.secrets.get("API_KEY"))

    result = pl.run(play, store=store_url, tools=[])

    assert result.output == "Secret('API_KEY')"  # its name, never its value


def test_a_secret_in_a_fetch_header_reaches_the_server_and_nothing_else(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    received: list[str | None] = []

    async def prices(request: Request) -> JSONResponse:
        received.append(request.headers.get("authorization"))
        return JSONResponse({"price": 3})

    app = Starlette(routes=[Route("/prices", prices)])
    events: list[pl.Event] = []
    db = tmp_path / "s.db"
    with serve_asgi(app) as url:

        @pl.play(name="secret-fetch")
        async def play(ctx: pl.Context, input: Any) -> Any:
            key = ctx.secrets.get("API_KEY")
            page = await ctx.fetch("prices", f"{url}/prices", headers={"Authorization": key})
            ctx.log(f"got {page.status}")
            return page.json

        result = pl.run(play, store=f"sqlite:///{db}", tools=[], listeners=[events.append])

    assert result.status == "completed", result.error
    assert result.output == {"price": 3}
    assert received == [SECRET]  # the header carried the value
    open_store(f"sqlite:///{db}").close()
    assert SECRET.encode() not in _store_text(db)  # not in the boundary, its key, the log
    assert not any(SECRET in repr(event) for event in events)
    assert SECRET not in caplog.text
