"""SEMANTICS 31: waiting for events, at play level and inside a column."""

from __future__ import annotations

from typing import Any

import pytest

import playline as pl

from boundhelp import unique


def test_an_event_delivered_to_one_row_while_the_others_finish(run, worker, store):
    @pl.play(name=unique("replies"))
    async def replies(ctx: pl.Context, input: Any) -> Any:
        async def reply(row: Any, ctx: pl.Context) -> Any:
            if row["wait"]:
                return await ctx.wait_for_event(f"reply:{row['email']}")
            return "no reply needed"

        return await (
            ctx.dataset("leads", input, key="email")
            .with_column("reply", reply)
            .with_column("done", lambda row: True)
            .run()
        )

    leads = [
        {"email": "a@x.io", "wait": False},
        {"email": "b@x.io", "wait": True},
        {"email": "c@x.io", "wait": True},
        {"email": "d@x.io", "wait": False},
    ]
    first = run(replies, leads)
    assert first.status == "suspended"
    assert sorted(first.waiting["events"]) == ["reply:b@x.io", "reply:c@x.io"]
    assert first.stats.rows_waiting == 2
    rows = {r.key: r for r in store.iter_rows(first.run_id, "leads")}
    assert {k: r.status for k, r in rows.items()} == {
        "a@x.io": "completed",
        "b@x.io": "waiting",
        "c@x.io": "waiting",
        "d@x.io": "completed",
    }

    assert pl.send_event("reply:b@x.io", {"text": "interested"}, store=store)
    (second,) = worker()
    assert second.status == "suspended"  # c still waits; b has its reply now
    assert second.waiting["events"] == ["reply:c@x.io"]
    assert second.stats.rows_reused == 2

    pl.send_event("reply:c@x.io", {"text": "later"}, store=store)
    (third,) = worker()
    assert third.status == "completed"
    by_email = {row["email"]: row for row in third.output}
    assert by_email["b@x.io"]["reply"] == {"text": "interested"}
    assert by_email["c@x.io"]["reply"] == {"text": "later"}
    assert all(row["done"] for row in third.output)


def test_an_event_sent_before_the_wait_is_kept_and_delivered(run, store):
    pl.send_event("early", {"n": 1}, store=store)

    @pl.play(name=unique("early"))
    async def play(ctx: pl.Context, input: Any) -> Any:
        return await ctx.wait_for_event("early")

    result = run(play)
    assert (result.status, result.output) == ("completed", {"n": 1})


def test_an_event_sent_twice_is_delivered_once(run, store):
    assert pl.send_event("once", "first", store=store) is True
    assert pl.send_event("once", "second", store=store) is False

    @pl.play(name=unique("once"))
    async def play(ctx: pl.Context, input: Any) -> Any:
        return await ctx.wait_for_event("once")

    first = run(play)
    again = run(play)  # a second run waiting for the same key gets nothing
    assert (first.status, first.output) == ("completed", "first")
    assert again.status == "suspended"


def test_a_resumed_run_replays_its_delivered_payload(run, store):
    @pl.play(name=unique("replay"))
    async def play(ctx: pl.Context, input: Any) -> Any:
        got = await ctx.wait_for_event("ping")
        await ctx.wait_for_event("then")
        return got

    first = run(play, run_id="r")
    assert first.status == "suspended"
    pl.send_event("ping", 1, store=store)
    assert run(play, run_id="r").waiting["events"] == ["then"]
    pl.send_event("then", 2, store=store)
    assert run(play, run_id="r").output == 1


def test_a_timeout_resumes_the_wait_with_an_error_the_play_can_catch(run, worker, clock):
    @pl.play(name=unique("timeout"))
    async def play(ctx: pl.Context, input: Any) -> Any:
        try:
            return await ctx.wait_for_event("never", timeout=3600)
        except pl.EventTimeout as exc:
            return f"gave up on {exc.key}"

    first = run(play)
    assert first.status == "suspended"
    assert first.waiting == {"wake_at": clock.now() + 3600, "events": ["never"]}
    assert worker() == []
    clock.advance(3600)
    (resumed,) = worker()
    assert (resumed.status, resumed.output) == ("completed", "gave up on never")


def test_an_uncaught_timeout_fails_the_run_with_a_clear_error(run, worker, clock):
    @pl.play(name=unique("timeout-uncaught"))
    async def play(ctx: pl.Context, input: Any) -> Any:
        return await ctx.wait_for_event("never", timeout=10)

    run(play)
    clock.advance(10)
    (resumed,) = worker()
    assert resumed.status == "failed"
    assert isinstance(resumed.exception, pl.EventTimeout)
    assert "No event 'never' arrived within 10s" in resumed.error


@pytest.mark.parametrize("timeout", [0, float("nan"), float("inf")])
def test_bad_waits_are_clear_errors(run, timeout):
    @pl.play(name=unique("bad-wait"))
    async def play(ctx: pl.Context, input: Any) -> Any:
        await ctx.wait_for_event("x", timeout=timeout)

    assert isinstance(run(play).exception, pl.PlayDefinitionError)
    assert isinstance(pl.run(play, tools=[]).exception, pl.PlayDefinitionError)
    try:
        pl.send_event("", 1)
    except pl.PlayDefinitionError as exc:
        assert "non-empty event key" in str(exc)
    else:
        raise AssertionError("an empty key must be refused")


def test_a_timeout_in_a_column_fails_only_that_row(run, worker, clock):
    @pl.play(name=unique("row-timeout"))
    async def play(ctx: pl.Context, input: Any) -> Any:
        async def reply(row: Any, ctx: pl.Context) -> Any:
            if row["value"] == 2:
                return await ctx.wait_for_event("never-comes", timeout=60)
            return "fine"

        return await ctx.dataset("rows", [1, 2, 3]).with_column("reply", reply).run()

    assert run(play).status == "suspended"
    clock.advance(60)
    (resumed,) = worker()
    assert resumed.status == "completed_with_errors"
    assert [row["reply"] for row in resumed.output] == ["fine", None, "fine"]
    (error,) = resumed.output.errors
    assert "No event 'never-comes' arrived within 60s" in error.message


def test_an_event_key_of_a_document_is_refused_by_sender_and_waiter(run):
    """A 100 KB key was stored, indexed and echoed back whole."""
    # (no run of one letter: a secret another test read, "x" * 16, would be found in it)
    key = "approve:" + "".join(f"{n:04d}" for n in range(500))
    with pytest.raises(pl.PlayDefinitionError, match="2,008 characters; give one of at most 1000"):
        pl.send_event(key, 1)

    @pl.play(name=unique("long-key"))
    async def play(ctx: pl.Context, input: Any) -> Any:
        await ctx.wait_for_event(key)

    failed = run(play)
    assert isinstance(failed.exception, pl.PlayDefinitionError), failed.error
    assert "at most 1000" in (failed.error or "")
