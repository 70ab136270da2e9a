"""Waterfall, ToolStep and CodeStep validate their arguments; value extraction (SEMANTICS 21)."""

from __future__ import annotations

from typing import Any

import pytest

import playline as pl
from playline._engine.waterfalls import extract


def ok_step(step_id: str = "a") -> pl.ToolStep:
    return pl.ToolStep(step_id, "t.a")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: pl.Waterfall("w", output="email", steps=[]), "has no steps"),
        (lambda: pl.Waterfall("w", output="email", steps=[ok_step(), ok_step()]), "two steps"),
        (lambda: pl.Waterfall("w", output="email", steps=[ok_step()], min_results=0), ">= 1"),
        (lambda: pl.Waterfall("w", output="email", steps=[ok_step()], min_results=True), ">= 1"),
        (lambda: pl.Waterfall("w", output="email", steps=[ok_step()], accept=3), "accept"),
        (lambda: pl.Waterfall("w", output="", steps=[ok_step()]), "output"),
        (lambda: pl.Waterfall("", output="email", steps=[ok_step()]), "Waterfall id"),
        (lambda: pl.Waterfall("w", output="email", steps=["t.a"]), "is not a step"),
        (lambda: pl.Waterfall("w", output="email", steps="t.a"), "must be a list"),
        (lambda: pl.ToolStep("a", "t.a", map_input="first_name"), "map_input"),
        (lambda: pl.ToolStep("a", ""), "tool id"),
        (lambda: pl.ToolStep("", "t.a"), "ToolStep id"),
        (lambda: pl.CodeStep("c", run=None), "run must be a function"),
        (lambda: pl.CodeStep("c", run=lambda a, b, c: None), "takes 3"),
        (lambda: pl.CodeStep("c", lambda i: None, tools="t.a"), "list of tool ids"),
        (lambda: pl.CodeStep("c", lambda i: None, tools=["t.a", ""]), "a tool id"),
    ],
)
def test_bad_definitions_raise_at_once(make, message):
    with pytest.raises(pl.PlayDefinitionError, match=message):
        make()


def test_specs_are_frozen_and_keep_steps_as_a_tuple():
    spec = pl.Waterfall("w", output="email", steps=[ok_step("a"), ok_step("b")])
    assert spec.steps == (ok_step("a"), ok_step("b"))
    with pytest.raises(AttributeError):
        spec.output = "phone"  # type: ignore[misc]


def test_a_waterfall_input_must_be_a_dict(registry):
    spec = pl.Waterfall("w", output="email", steps=[ok_step()])

    @pl.play
    async def bad(ctx: pl.Context, input: Any) -> Any:
        return await ctx.waterfall(spec, ["Ada"])  # type: ignore[arg-type]

    result = pl.run(bad, tools=[registry], store="memory://")

    assert isinstance(result.exception, pl.PlayDefinitionError)
    assert "input must be a dict" in str(result.error)


def result_of(data: Any, outputs: dict[str, tuple[str, ...]] | None = None) -> pl.ToolResult:
    return pl.ToolResult(tool="t", data=data, outputs=outputs)


@pytest.mark.parametrize(
    ("found", "values"),
    [
        (result_of({"email": "a@x"}), ["a@x"]),
        (result_of({"work": {"email": "w@x"}}, {"email": ("work.email",)}), ["w@x"]),
        (result_of({"contact": {"email": "c@x"}}), [{"contact": {"email": "c@x"}}]),
        (result_of({"email": "  "}), []),  # the path is there and blank: nothing
        (result_of({"email": None, "x": 1}), []),
        (result_of({"email": ["a", "", "b"]}), ["a", "b"]),
        (result_of("plain@x"), ["plain@x"]),
        (result_of(None), []),
        ({"email": "code@x"}, ["code@x"]),
        ("from-code", ["from-code"]),
        (["l1", "l2"], ["l1", "l2"]),
        ({}, []),
        ([], []),
        ("", []),
        (None, []),
    ],
)
def test_extract_follows_getters_then_path_then_whole_result(found, values):
    assert extract(found, "email") == values


def test_extract_follows_a_dotted_output():
    assert extract({"person": {"email": "d@x"}}, "person.email") == ["d@x"]
    assert extract({"items": [{"email": "i@x"}]}, "items.0.email") == ["i@x"]
