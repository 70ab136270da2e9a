"""Receipts (SEMANTICS 7, 10, 12-14, 17): a call is keyed by its content and never paid twice."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

import numpy
import pytest
from hypothesis import given
from hypothesis import strategies as st

import playline as pl
from playline._engine.receipts import auth_scope, receipt_key

from .helpers import call_tool, dataset_play, json_ints, json_text, rows_of, run_play


@pytest.fixture
def counting_tool(registry):
    """``t.count``: answers ``{"v": x, "n": <how many calls so far>}``; ``calls`` lists inputs."""
    calls: list[dict[str, Any]] = []

    @registry.tool("t.count")
    def count(input):
        calls.append(input)
        return {"v": input.get("x"), "n": len(calls)}

    return calls


def top_level_call(**options: Any):
    """A play making one call outside any column; it returns the result's data and source."""

    async def play(ctx, input):
        result = await ctx.tool("t.count", {"x": 1}, **options)
        return {"data": result.data, "source": result.execution.source}

    return play


# --- across runs ------------------------------------------------------------------------


def test_a_second_run_of_the_same_play_pays_nothing(registry, store, counting_tool):
    play = dataset_play(rows_of(3), {"out": call_tool("t.count")})

    first = run_play(play, tools=[registry], store=store)
    second = run_play(play, tools=[registry], store=store)

    assert len(counting_tool) == 3
    assert (first.stats.tool_calls_live, first.stats.tool_calls_cached) == (3, 0)
    assert (second.stats.tool_calls_live, second.stats.tool_calls_cached) == (0, 3)
    assert second.stats.rows_executed == 3
    cells = [r.cells["out"]["status"] for r in store.iter_rows(second.run_id, "rows")]
    assert cells == ["cached"] * 3
    assert second.output.to_list() == first.output.to_list()


def test_a_named_memory_store_is_shared_and_a_bare_one_is_not(registry, counting_tool):
    shared = f"memory://receipts-{uuid.uuid4().hex}"
    play = top_level_call()

    sources = [run_play(play, tools=[registry], store=shared).output["source"] for _ in range(2)]
    fresh = [run_play(play, tools=[registry], store="memory://").output["source"] for _ in range(2)]

    assert sources == ["live", "cache"]
    assert fresh == ["live", "live"]


def test_a_new_run_recomputes_edited_columns_from_receipts(registry, store, counting_tool):
    first = run_play(
        dataset_play(rows_of(2), {"out": call_tool("t.count")}), tools=[registry], store=store
    )

    async def edited(row, ctx):
        return (await ctx.tool("t.count", {"x": row["x"]})).data["v"] * 100

    second = run_play(dataset_play(rows_of(2), {"out": edited}), tools=[registry], store=store)

    assert first.status == second.status == "completed"
    assert len(counting_tool) == 2
    assert second.stats.rows_executed == 2
    assert second.stats.tool_calls_cached == 2
    assert [row["out"] for row in second.output] == [0, 100]


def test_a_failed_call_is_not_reused(registry, store):
    attempts: list[int] = []

    @registry.tool("t.once-broken")
    def once_broken(input):
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("flaky")
        return {"ok": True}

    async def play(ctx, input):
        return (await ctx.tool("t.once-broken", {"x": 1})).data

    first = run_play(play, tools=[registry], store=store)
    second = run_play(play, tools=[registry], store=store)

    assert first.status == "failed"
    assert isinstance(first.exception, pl.ToolError)
    assert (second.status, second.output) == ("completed", {"ok": True})
    assert len(attempts) == 2


def test_a_call_with_numpy_numbers_is_answered_by_the_receipt_of_python_ones(
    registry, store, counting_tool
):
    """A pandas row holds numpy.int64 and numpy.bool_: the tool is sent the Python numbers
    they hold, and the call is the one a Python 3 makes (one receipt, paid once)."""

    def play_with(x, flag):
        async def play(ctx, input):
            return (await ctx.tool("t.count", {"x": x, "flag": flag, "at": [x]})).data

        return play

    first = run_play(play_with(numpy.int64(3), numpy.bool_(True)), tools=[registry], store=store)
    second = run_play(play_with(3, True), tools=[registry], store=store)

    assert first.status == "completed", first.error
    assert (first.output, second.output) == ({"v": 3, "n": 1}, {"v": 3, "n": 1})
    assert second.stats.tool_calls_cached == 1
    (sent,) = counting_tool
    assert sent == {"x": 3, "flag": True, "at": [3]}
    assert [type(sent["x"]), type(sent["flag"]), type(sent["at"][0])] == [int, bool, int]


def test_a_numpy_number_may_name_a_call(registry, counting_tool):
    async def play(ctx, input):
        return (await ctx.tool("t.count", {"x": 1}, key=numpy.int64(7))).data

    result = run_play(play, tools=[registry])

    assert result.output == {"v": 1, "n": 1}, result.error


# --- within a run -----------------------------------------------------------------------


def test_a_repeated_call_in_one_run_comes_from_the_receipt(registry, counting_tool):
    async def play(ctx, input):
        first = await ctx.tool("t.count", {"x": 1})
        again = await ctx.tool("t.count", {"x": 1})
        return [first.execution.source, again.execution.source, again.data == first.data]

    result = run_play(play, tools=[registry])

    assert result.output == ["live", "cache", True]
    assert len(counting_tool) == 1


def test_the_label_is_not_part_of_the_receipt(registry, counting_tool):
    async def play(ctx, input):
        first = await ctx.tool("t.count", {"x": 1}, key="lookup-a")
        again = await ctx.tool("t.count", {"x": 1}, key="lookup-b")
        by_keywords = await ctx.tools.execute(id="lookup-c", tool="t.count", input={"x": 1})
        return [r.execution.source for r in (first, again, by_keywords)]

    result = run_play(play, tools=[registry])

    assert result.output == ["live", "cache", "cache"]
    assert len(counting_tool) == 1


def test_force_executes_again_and_replaces_the_receipt(registry, store, counting_tool):
    outputs = [
        run_play(top_level_call(**options), tools=[registry], store=store).output
        for options in ({}, {"force": True}, {})
    ]

    assert outputs == [
        {"data": {"v": 1, "n": 1}, "source": "live"},
        {"data": {"v": 1, "n": 2}, "source": "live"},
        {"data": {"v": 1, "n": 2}, "source": "cache"},
    ]


def test_a_forced_call_is_bought_once_per_run_however_often_the_run_resumes(
    registry, store, counting_tool
):
    broken = {"yes": True}

    async def play(ctx, input):
        found = [(await ctx.tool("t.count", {"x": x}, force=True)).data for x in range(3)]
        if broken["yes"]:
            raise RuntimeError("the play's own bug, after its calls")
        return found

    first = run_play(play, tools=[registry], store=store)
    again = run_play(play, tools=[registry], store=store, run_id=first.run_id)
    broken["yes"] = False
    fixed = run_play(play, tools=[registry], store=store, run_id=first.run_id)

    assert (first.status, again.status, fixed.status) == ("failed", "failed", "completed")
    assert len(counting_tool) == 3  # the resumes were answered by the run's own purchases
    assert fixed.output == [{"v": x, "n": x + 1} for x in range(3)]
    assert fixed.stats.tool_calls_cached == 3
    later = run_play(play, tools=[registry], store=store)  # another run buys them again
    assert later.stats.tool_calls_live == 3 and len(counting_tool) == 6


def test_stale_after_reuses_a_receipt_until_it_is_older_than_that(
    registry, store, clock, counting_tool
):
    """A receipt is stale when it is older than ``stale_after``, wherever the clock stands:
    not when a clock-aligned bucket turns (bought at 59 s, a minute's bucket turned at 60)."""
    play = top_level_call(stale_after=60)  # the clock starts on a whole minute

    def source() -> str:
        return run_play(play, tools=[registry], store=store, clock=clock).output["source"]

    clock.advance(59)
    sources = [source()]  # bought at 59 s
    clock.advance(2)
    sources.append(source())  # 61 s: 2 s old (a minute's bucket turned at 60)
    clock.advance(58)
    sources.append(source())  # 119 s: 60 s old, no older than the limit
    clock.advance(1)
    sources.append(source())  # 120 s: 61 s old: bought again
    sources.append(source())

    assert sources == ["live", "cache", "cache", "live", "cache"]
    assert len(counting_tool) == 2


@pytest.mark.parametrize("stale_after", [0, -5, 1.5, True])
def test_stale_after_must_be_a_positive_whole_number(registry, counting_tool, stale_after):
    result = run_play(top_level_call(stale_after=stale_after), tools=[registry])

    assert result.status == "failed"
    assert isinstance(result.exception, pl.PlayDefinitionError)
    assert "stale_after" in result.error
    assert counting_tool == []


# --- receipt keys -----------------------------------------------------------------------

BASE = {
    "org": "local",
    "tool": "sim.email.alpha",
    "input": {"first_name": "Ada", "last_name": "Lovelace", "domain": "acme.io"},
    "auth": auth_scope("local", "local", "sim.email.alpha"),
    "version": "1",
}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, "0d4d1b01d4ae7650ab0f64b0aadf880ab62d018423fac1671592b6bbfaef0c00"),
        (
            {
                "org": "acme",
                "tool": "acme.company",
                "input": {"domain": "acme.io"},
                "auth": auth_scope("acme", "u1", "acme.company"),
                "version": "2026-01",
            },
            "743983a5ed6d9e113f7d2e76ede20fbbac8d84db1e15ca91758331f81a789559",
        ),
        (
            {"tool": "t.x", "input": {}, "auth": ""},
            "78c266ebc3358d2fbee35714fc9f2ec321225bfdf89cec6bef1f113804f8a39c",
        ),
    ],
)
def test_receipt_key_fixed_vectors(fields, expected):
    assert receipt_key(**{**BASE, **fields}) == expected


def test_the_key_is_the_sha256_of_a_canonical_json_array():
    # the derivation, spelled out with the standard library: anyone can recompute a key
    body = json.dumps(
        ["playline.receipt.v2", "local", "sim.email.alpha", BASE["input"], BASE["auth"], "1", ""],
        sort_keys=True,
        separators=(",", ":"),
    )
    assert receipt_key(**BASE) == hashlib.sha256(body.encode()).hexdigest()


def test_auth_scope_fixed_vector():
    expected = "5b9cb6fe6a3c097224bbe5474bcc8e08a9d5464de442c789c94f1fad7db80a9c"
    assert auth_scope("local", "local", "sim.email.alpha") == expected


@pytest.mark.parametrize(
    ("field", "other"),
    [
        ("org", "acme"),
        ("tool", "sim.email.beta"),
        ("version", "2"),
        ("auth", auth_scope("local", "someone-else", "sim.email.alpha")),
        ("input", {**BASE["input"], "domain": "acme.com"}),
    ],
)
def test_every_part_of_the_content_changes_the_key(field, other):
    assert receipt_key(**{**BASE, field: other}) != receipt_key(**BASE)


inputs = st.dictionaries(
    json_text,
    json_text | json_ints | st.booleans(),
    min_size=1,
    max_size=6,
)
padding = st.text(alphabet=" \t\n", max_size=3)


@given(input=inputs, left=padding, right=padding)
def test_key_order_and_surrounding_whitespace_do_not_change_the_key(input, left, right):
    reordered = dict(reversed(list(input.items())))
    padded = {k: f"{left}{v}{right}" if isinstance(v, str) else v for k, v in reordered.items()}

    assert receipt_key(**{**BASE, "input": padded}) == receipt_key(**{**BASE, "input": input})


@pytest.mark.parametrize(
    ("numpys", "pythons"),
    [
        ({"n": numpy.int64(3)}, {"n": 3}),
        ({"n": numpy.uint16(3), "m": numpy.int8(-1)}, {"n": 3, "m": -1}),
        ({"f": numpy.float64(1.5), "g": numpy.float32(0.5)}, {"f": 1.5, "g": 0.5}),
        ({"b": numpy.bool_(True), "c": numpy.bool_(False)}, {"b": True, "c": False}),
        ({"v": numpy.array([1, 2]), "w": {"x": [numpy.int64(4)]}}, {"v": [1, 2], "w": {"x": [4]}}),
    ],
    ids=["int64", "small-ints", "floats", "bools", "nested"],
)
def test_numpy_numbers_key_a_receipt_as_the_python_ones_they_hold(numpys, pythons):
    numpy_key = receipt_key(**{**BASE, "input": {**BASE["input"], **numpys}})
    assert numpy_key == receipt_key(**{**BASE, "input": {**BASE["input"], **pythons}})


def test_a_null_field_asks_the_same_as_a_missing_one():
    with_null = {**BASE["input"], "middle_name": None}
    assert receipt_key(**{**BASE, "input": with_null}) == receipt_key(**BASE)


def test_an_input_whose_keys_collide_as_text_is_refused_before_it_is_sent(registry, counting_tool):
    """{1: "a", "1": "b"} keyed as {"1": "b"} would be answered by that input's receipt."""
    inputs = {0: {"x": 0, 1: "a", "1": "b"}, 1: {"x": 1, 1: "a", "1": None}}
    play = dataset_play(rows_of(2), {"out": call_tool("t.count", lambda row: inputs[row["x"]])})

    result = run_play(play, tools=[registry])

    assert result.status == "completed_with_errors", result.error
    (error,) = result.output.errors
    assert (error.column, error.tool, error.code) == ("out", "t.count", "invalid_input")
    assert "its keys 1 and '1' are both '1' as text" in error.message
    assert counting_tool == [{"x": 1, 1: "a", "1": None}]  # a null field is no field
    with pytest.raises(pl.PlayDefinitionError, match="are both '1' as text"):
        receipt_key(**{**BASE, "input": {"nested": [{1: "a", "1": "b"}]}})
