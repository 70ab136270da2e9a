"""ToolResult (API 2): what a call returns, live or from the store alike."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

import playline as pl
from playline._json import dumps, loads

from .helpers import call_tool, dataset_play, json_text, json_values, run_play

OUTPUTS = {"domain": ["domain", "company.domain"], "emails": "contacts.emails"}


@pytest.fixture
def company_tool(registry):
    """``t.company`` answers whatever the input's ``answer`` is; it costs 3 credits on a hit."""

    @registry.tool(
        "t.company",
        cost=pl.Cost(3, charge="on_hit"),
        outputs=OUTPUTS,
        lists={"phones": "contacts.phones"},
    )
    def company(input):
        return input["answer"]

    return registry


def call_each(answers: list[Any], captured: list[pl.ToolResult]):
    """A play calling ``t.company`` once per answer, keeping every result in ``captured``."""

    async def play(ctx, input):
        for answer in answers:
            captured.append(await ctx.tool("t.company", {"answer": answer}))

    return play


def results_for(registry, answers: list[Any], **options: Any) -> list[pl.ToolResult]:
    captured: list[pl.ToolResult] = []
    result = run_play(call_each(answers, captured), tools=[registry], **options)
    assert result.status == "completed", result.error
    return captured


FOUND = {
    "domain": "  ",
    "company": {"domain": "acme.io", "name": "Acme"},
    "contacts": {"emails": ["a@acme.io"], "phones": ["+1 555"]},
}


def test_a_found_result(company_tool):
    (result,) = results_for(company_tool, [FOUND])

    assert (result.status, result.found, result.data) == ("completed", True, FOUND)
    assert result.tool == "t.company"
    assert result.cost == 3
    assert result.execution.source == "live"
    assert result.execution.cached is False


@pytest.mark.parametrize("answer", [None, {}, [], "", "   "])
def test_an_empty_answer_is_no_result_and_costs_nothing_on_hit(company_tool, answer):
    (result,) = results_for(company_tool, [answer])

    assert (result.status, result.found) == ("no_result", False)
    assert result.cost == 0
    assert result.get("domain") is None
    assert result.list("emails") == []


def test_get_reads_declared_outputs_first_meaningful_path_wins(company_tool):
    first_path = {"domain": "first.io", "company": {"domain": "second.io"}}
    (blank_first, both) = results_for(company_tool, [FOUND, first_path])

    assert blank_first.get("domain") == "acme.io"  # a blank string is not a value
    assert both.get("domain") == "first.io"
    assert blank_first.get("company.name") == "Acme"  # an undeclared name is a dotted path
    assert blank_first.get("missing", "fallback") == "fallback"


def test_list_reads_declared_lists_and_outputs(company_tool):
    (result,) = results_for(company_tool, [FOUND])

    assert result.list("phones") == ["+1 555"]
    assert result.list("emails") == ["a@acme.io"]
    assert result.list("company") == []  # not a list


@pytest.mark.parametrize(("charge", "expected"), [("on_hit", [2, 0]), ("per_call", [2, 2])])
def test_cost_follows_the_tools_cost_rule(registry, charge, expected):
    @registry.tool("t.priced", cost=pl.Cost(2, charge=charge))
    def priced(input):
        return input["answer"]

    captured: list[pl.ToolResult] = []

    async def play(ctx, input):
        for answer in ({"hit": True}, None):
            captured.append(await ctx.tool("t.priced", {"answer": answer}))

    result = run_play(play, tools=[registry])

    assert [r.cost for r in captured] == expected
    assert result.stats.credits == sum(expected)


def test_sources_live_cache_and_in_flight(company_tool):
    captured: list[str] = []

    async def play(ctx, input):
        async def resolve(row, ctx):
            result = await ctx.tool("t.company", {"answer": {"n": 1}})
            captured.append(result.execution.source)
            return result

        await ctx.dataset("rows", [{"id": 1}, {"id": 2}], key="id").with_column("r", resolve).run()
        again = await ctx.tool("t.company", {"answer": {"n": 1}})
        captured.append(again.execution.source)
        assert again.execution.cached

    result = run_play(play, tools=[company_tool])

    assert result.status == "completed", result.error
    assert captured == ["live", "in_flight", "cache"]


def test_a_result_from_the_store_behaves_like_the_live_one(company_tool, store):
    (live,) = results_for(company_tool, [FOUND], store=store)
    (stored,) = results_for(company_tool, [FOUND], store=store)

    assert stored.execution.source == "cache"
    assert stored.cost == 0  # nothing was charged for this call
    for name in ("tool", "status", "found", "data"):
        assert getattr(stored, name) == getattr(live, name)
    for name in ("domain", "company.name", "missing"):
        assert stored.get(name) == live.get(name)
    for name in ("phones", "emails"):
        assert stored.list(name) == live.list(name)


results = st.builds(
    lambda tool, data, cost, source: pl.ToolResult(
        tool=tool,
        data=data,
        cost=cost,
        execution=pl.Execution(source),
        outputs={"name": ("name", "profile.name")},
    ),
    tool=json_text,
    data=json_values,
    cost=st.floats(min_value=0, max_value=1e6),
    source=st.sampled_from(["live", "cache", "checkpoint", "in_flight"]),
)


@given(result=results)
def test_a_result_round_trips_through_json(result):
    outputs = {"name": ("name", "profile.name")}

    back = pl.ToolResult.from_json(result.to_json(), outputs=outputs)
    stored = pl.ToolResult.from_json(loads(dumps(result.to_json())), outputs=outputs)

    for copy in (back, stored):
        assert copy == result
        assert (copy.status, copy.found, copy.cost) == (result.status, result.found, result.cost)
        assert copy.execution == result.execution
        assert copy.get("name") == result.get("name")


# --- results that cannot be stored as they are -----------------------------------------


def test_a_result_whose_keys_collide_as_json_text_fails_its_cell(registry, store):
    """{1: "a", "1": "b"} is {"1": ..., "1": ...} in JSON, which keeps one of the two: the
    cell fails saying so, where "b" was kept silently; a result with number keys alone is
    stored with them as text, as before."""

    @registry.tool("t.keyed")
    def keyed(input):
        return {1: "a", "1": "b"} if input["x"] == 1 else {1: "a", 2: "b"}

    play = dataset_play([{"x": 0}, {"x": 1}], {"out": call_tool("t.keyed")}, key="x")
    result = run_play(play, tools=[registry], store=store)

    assert result.status == "completed_with_errors", result.error
    (error,) = result.output.errors
    assert (error.row_key, error.column, error.tool, error.code) == (
        "1", "out", "t.keyed", "invalid_result"
    )  # fmt: skip
    assert "The result of tool t.keyed cannot be stored as it is" in error.message
    assert "its keys 1 and '1' are both '1'" in error.message
    assert "Give each key its own text" in error.message
    rows = {r.key: r for r in store.iter_rows(result.run_id, "rows")}
    assert rows["0"].values["out"] == {"1": "a", "2": "b"}
    assert (rows["1"].status, rows["1"].values["out"]) == ("failed", None)


def test_a_paid_result_that_cannot_be_stored_is_not_bought_again_on_every_run(registry, store):
    """A charged answer the store cannot keep (a set inside) fails its cell; later runs fail
    it as it is instead of paying for it again each time, until the user asks."""
    sent: list[int] = []

    @registry.tool("t.setty", cost=pl.Cost(1))
    def setty(input):
        sent.append(input["x"])
        return {"emails": {"a@x.io"}}

    play = dataset_play([{"x": 0}], {"out": call_tool("t.setty")}, key="x")
    first = run_play(play, tools=[registry], store=store)
    again = run_play(play, tools=[registry], store=store)

    assert sent == [0] and first.stats.credits == 1 and again.stats.credits == 0
    (error,) = again.output.errors
    assert "It was charged: it is not bought again unless asked" in error.message
    retried = run_play(play, tools=[registry], store=store, run_id=again.run_id,
                       retry_failed=True)  # fmt: skip
    assert sent == [0, 0] and retried.stats.credits == 1


@pytest.mark.parametrize(
    "value",
    [
        {1: "a", "1": "b"},
        {"outer": [{"x": 0}, {2.5: 1, "2.5": 2}]},
        {True: 1, "true": 2},
        {None: 1, "null": 2},
    ],
    ids=["int", "nested", "bool", "none"],
)
@pytest.mark.parametrize("ordered", [False, True], ids=["sorted", "ordered"])
def test_keys_that_collide_as_json_text_are_refused(value, ordered):
    with pytest.raises(pl.PlayDefinitionError, match="cannot be stored as it is"):
        dumps(value, what="The value", ordered=ordered)


_mixed_keys = st.recursive(
    json_text | st.integers(-(2**63), 2**63 - 1) | st.booleans() | st.none(),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(json_text | st.integers(-99, 99) | st.booleans(), children, max_size=4)
    ),
    max_leaves=10,
)


@given(value=_mixed_keys)
def test_keys_that_are_no_text_are_written_as_before_unless_they_collide(value):
    """The bytes stored for keys that do not collide are orjson's with OPT_NON_STR_KEYS, as
    they were: stored rows and receipt keys stay the same."""
    for ordered, option in ((False, orjson.OPT_SORT_KEYS), (True, 0)):
        before = orjson.dumps(value, option=option | orjson.OPT_NON_STR_KEYS)
        try:
            written = dumps(value, ordered=ordered)
        except pl.PlayDefinitionError as exc:
            assert "cannot be stored as it is" in str(exc)
            assert len(before) > len(orjson.dumps(loads(before)))  # a key was lost
        else:
            assert written == before
