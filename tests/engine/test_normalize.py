"""normalize=: how a tool's inputs compare, field by field or by a function."""

from __future__ import annotations

from typing import Any

import pytest

import playline as pl
from playline.tools._normalize import Normalize


@pytest.mark.parametrize(
    ("kind", "value", "normal"),
    [
        ("email", "  Ada.Lovelace@Example.COM ", "ada.lovelace@example.com"),
        ("domain", "https://www.Acme.com/about?x=1", "acme.com"),
        ("domain", "WWW.acme.com.", "acme.com"),
        ("domain", "ada@Acme.com", "acme.com"),
        ("domain", "acme.com:8443", "acme.com"),
        ("name", "  MAYA \t  Baker ", "maya baker"),
        ("name", "Jose\u0301", "jos\u00e9"),  # an accent typed apart is the same é
        ("text", "  Chief   Executive ", "Chief Executive"),
    ],
)
def test_each_kind_reduces_the_variants_of_a_value_to_one(
    kind: str, value: str, normal: str
) -> None:
    assert Normalize("t", {"f": kind})({"f": value}) == {"f": normal}


def test_fields_not_declared_and_values_not_text_are_left_as_they_are() -> None:
    normalize = Normalize("t", {"email": "email"})
    given = {"email": None, "n": 3, "other": " X "}
    assert normalize(given) == given


@pytest.mark.parametrize("declared", [{"email": "lower"}, {"email": 1}, "email", [("a", "b")]])
def test_a_declaration_that_names_no_kind_is_refused_with_the_kinds(declared: Any) -> None:
    with pytest.raises(pl.PlayDefinitionError, match="email, domain, name, text"):
        Normalize("@pl.tool('t')", declared)


def test_a_local_tool_gets_its_inputs_normalised_and_variants_share_a_receipt() -> None:
    registry = pl.ToolRegistry()
    seen: list[dict[str, Any]] = []

    @registry.tool("t.find", normalize={"email": "email"}, cost=pl.Cost(1))
    def find(input: dict[str, Any]) -> dict[str, Any]:
        seen.append(input)
        return {"ok": True}

    @registry.tool("t.upper", normalize=lambda i: {**i, "email": i["email"].upper()})
    def upper(input: dict[str, Any]) -> dict[str, Any]:
        return {"sent": input["email"]}

    async def play(ctx: pl.Context, input: Any) -> list[Any]:
        first = await ctx.tool("t.find", {"email": "Ada@Acme.io "})
        again = await ctx.tool("t.find", {"email": " ada@ACME.io"})
        upper_ = await ctx.tool("t.upper", {"email": "ada@acme.io"})
        return [first.execution.source, again.execution.source, upper_.data]

    result = pl.run(pl.play(name="n")(play), store="memory://", tools=[registry])

    assert result.output == ["live", "cache", {"sent": "ADA@ACME.IO"}]
    assert seen == [{"email": "ada@acme.io"}]
    assert result.stats.credits == 1


def test_a_normalize_function_that_fails_fails_the_cell_not_the_run() -> None:
    registry = pl.ToolRegistry()

    @registry.tool("t.bad", normalize=lambda i: i["missing"])
    def bad(input: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        return (
            await ctx.dataset("d", [{"k": 1}], key="k")
            .with_column("v", lambda row, ctx: ctx.tool("t.bad", {"x": 1}))
            .run()
        )

    result = pl.run(pl.play(name="n")(play), store="memory://", tools=[registry])

    assert result.status == "failed"
    assert "invalid_input from t.bad" in str(result.error)  # the cell's cause
