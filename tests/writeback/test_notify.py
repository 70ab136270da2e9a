"""notify=URL / --notify: one Slack-shaped summary when a run ends or is stopped (also when a
worker resumes it), none while it only waits; a dead URL is a warning, never a failed run."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from typer.testing import CliRunner

import playline as pl
from playline.cli import app
from playline.store import open_store

if TYPE_CHECKING:
    from conftest import Receiver

_stop = asyncio.Event()


@pytest.fixture(autouse=True)
def _unsigned(receiver: Receiver) -> None:
    receiver.secret = None  # a notification is not signed (Slack's webhooks take none)


@pl.tool("notify.lookup", cost=pl.Cost(2))
def lookup(input: dict[str, Any]) -> dict[str, Any]:
    if input["n"] == 3 and input.get("stop"):
        _stop.set()  # a person pressing Ctrl-C while row 3 is looked up
    if input["n"] == 4:
        raise pl.ToolError("notify.lookup", "no such person")
    return {"double": input["n"] * 2}


@pl.play(name="notify-play")
async def notify_play(ctx: pl.Context, input: dict[str, Any]) -> pl.Dataset:
    if input.get("sleep"):
        await ctx.sleep(3600)
    rows = [{"n": i} for i in range(input.get("rows", 6))]
    return await (
        ctx.dataset("leads", rows, key="n")
        .with_column(
            "found",
            lambda row, ctx: ctx.tool("notify.lookup", {"n": row["n"], "stop": input.get("stop")}),
        )
        .run()
    )


def _summary(receiver: Receiver) -> dict[str, Any]:
    assert len(receiver.posts) == 1, [p.body for p in receiver.posts]
    body = receiver.posts[0].body
    # what Slack's incoming webhooks take: a fallback text and Block Kit blocks
    assert isinstance(body["text"], str) and body["text"]
    assert [b["type"] for b in body["blocks"]][:2] == ["header", "section"]
    assert body["blocks"][-1]["type"] == "context"
    assert body["metadata"]["event_type"] == "playline_run_ended"
    payload: dict[str, Any] = body["metadata"]["event_payload"]
    return payload


def test_a_completed_run_posts_its_summary_once(tmp_path: Path, receiver: Receiver) -> None:
    result = pl.run(
        notify_play, {}, store=f"sqlite:///{tmp_path}/s.db", tools=[lookup], notify=receiver.url
    )
    assert result.status == "completed_with_errors"
    summary = _summary(receiver)
    assert summary["status"] == "completed_with_errors"
    assert (summary["rows"], summary["failed"]) == (6, 1)
    assert summary["credits_per_tool"] == {"notify.lookup": 10.0}
    assert summary["show"] == f"playline show {result.run_id}"
    text = receiver.posts[0].body["text"]
    assert f"playline show {result.run_id}" in text and "6 rows, 1 failed" in text
    fields = [f["text"] for f in receiver.posts[0].body["blocks"][1]["fields"]]
    assert fields == [
        "*Status*\ncompleted_with_errors",
        "*Rows*\n6",
        "*Failed*\n1",
        "*Credits*\n10",
    ]
    with open_store(f"sqlite:///{tmp_path}/s.db") as db:  # delivered: no warning
        assert not [
            e for e in db.read_events(result.run_id, kinds=["log"]) if "notif" in (e.preview or "")
        ]


def test_a_stopped_run_posts_and_its_resume_posts_again(tmp_path: Path, receiver: Receiver) -> None:
    store = f"sqlite:///{tmp_path}/s.db"
    _stop.clear()

    async def stopped() -> pl.RunResult:
        return await pl.arun(
            notify_play,
            {"stop": True, "rows": 40},
            store=store,
            tools=[lookup],
            stop=_stop,
            row_window=1,
            notify=receiver.url,
        )

    result = asyncio.run(stopped())
    assert result.status == "suspended" and (result.waiting or {}).get("stop") == "stopped"
    summary = _summary(receiver)
    assert summary["status"] == "suspended" and summary["stop"] == "stopped"
    assert "stopped (stopped)" in receiver.posts[0].body["text"]

    # resumed without notify=: the URL the run keeps in its record is used
    _stop.clear()
    done = pl.run(notify_play, run_id=result.run_id, store=store, tools=[lookup])
    assert done.ok, done.error
    assert len(receiver.posts) == 2
    assert receiver.posts[1].body["metadata"]["event_payload"]["rows"] == 40


def test_a_waiting_run_is_not_over_and_the_worker_that_ends_it_notifies(
    tmp_path: Path, receiver: Receiver
) -> None:
    clock = pl.ManualClock()
    store = open_store(f"sqlite:///{tmp_path}/s.db")
    try:
        result = pl.run(
            notify_play,
            {"sleep": True},
            store=store,
            tools=[lookup],
            clock=clock,
            notify=receiver.url,
        )
        assert result.status == "suspended"
        assert receiver.posts == []  # it waits: not over, nothing posted
        clock.advance(3600)
        with pl.Worker(store=store, tools=[lookup], clock=clock) as worker:
            results = asyncio.run(worker.run(burst=True))
        assert [r.status for r in results] == ["completed_with_errors"]
        assert _summary(receiver)["run_id"] == result.run_id
    finally:
        store.close()


def test_a_dead_notify_url_leaves_the_run_completed_with_a_warning(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    store = f"sqlite:///{tmp_path}/s.db"
    result = pl.run(
        notify_play,
        {},
        store=store,
        tools=[lookup],
        notify=f"http://127.0.0.1:{port}/services/T0/B0/token",
    )
    assert result.status == "completed_with_errors"
    with open_store(store) as db:
        lines = [e.preview or "" for e in db.read_events(result.run_id, kinds=["log"])]
    warnings = [line for line in lines if "notification" in line]
    assert len(warnings) == 1, lines
    assert warnings[0].startswith("warning: the notification to http://127.0.0.1 was not")
    assert "token" not in warnings[0]  # a webhook's path may hold its secret


def test_a_receiver_that_refuses_is_a_warning_too(tmp_path: Path, receiver: Receiver) -> None:
    receiver.answer[None] = 500  # type: ignore[index]
    store = f"sqlite:///{tmp_path}/s.db"
    result = pl.run(notify_play, {}, store=store, tools=[lookup], notify=receiver.url)
    assert result.ok
    with open_store(store) as db:
        lines = [e.preview or "" for e in db.read_events(result.run_id, kinds=["log"])]
    assert any("it answered 500" in line for line in lines), lines


def test_the_cli_notifies(tmp_path: Path, receiver: Receiver) -> None:
    play = tmp_path / "play.py"
    play.write_text(
        "import playline as pl\n\n"
        "@pl.play(name='cli-notify')\n"
        "async def cli_notify(ctx, input):\n"
        "    return await ctx.dataset('d', [{'n': 1}], key='n')"
        ".with_column('m', lambda row: 2).run()\n",
        encoding="utf-8",
    )
    store = f"sqlite:///{tmp_path}/s.db"
    done = CliRunner().invoke(
        app, ["run", str(play), "--store", store, "--notify", receiver.url, "--run-id", "r1"]
    )
    assert done.exit_code == 0, done.output
    assert _summary(receiver)["status"] == "completed"
    again = CliRunner().invoke(app, ["resume", "r1", "--store", store, "--notify", receiver.url])
    assert again.exit_code == 0, again.output
    assert len(receiver.posts) == 2


@pytest.mark.parametrize("url", ["ftp://x", "hooks.slack.com/x", 42])
def test_a_bad_notify_url_is_refused(url: Any) -> None:
    with pytest.raises(pl.PlayDefinitionError, match="notify="):
        pl.run(notify_play, {}, store="memory://", tools=[lookup], notify=url)


def test_each_run_of_a_schedule_notifies_when_it_ends(tmp_path: Path, receiver: Receiver) -> None:
    clock = pl.ManualClock(1_767_600_000.0)  # 2026-01-05, a Monday, 08:00 UTC
    store = open_store(f"sqlite:///{tmp_path}/s.db")
    try:
        pl.schedule(
            "notify-weekly",
            notify_play,
            cron="0 9 * * MON",
            timezone="UTC",
            store=store,
            clock=clock,
            notify=receiver.url,
        )
        clock.advance(3600)  # 09:00: the schedule fires
        with pl.Worker(store=store, tools=[lookup], clock=clock) as worker:
            results = asyncio.run(worker.run(burst=True))
        assert [r.status for r in results] == ["completed_with_errors"]
        assert _summary(receiver)["run_id"] == results[0].run_id
    finally:
        store.close()


def test_a_schedule_refuses_a_notify_that_is_no_url(tmp_path: Path) -> None:
    with pytest.raises(pl.PlayDefinitionError, match="notify='slack'"):
        pl.schedule("bad-notify", notify_play, cron="0 9 * * MON", notify="slack",
                    store=f"sqlite:///{tmp_path}/s.db")  # fmt: skip
