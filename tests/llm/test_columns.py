"""ctx.llm through the engine, over a model tool of the test's own (``openai.chat`` in a
registry, answering as the LLM tool contract says): receipts, re-asks as calls of their own,
the cell's cost and status, a pydantic answer stored as its JSON, and the play body."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import BaseModel

import playline as pl
from playline.store import Store
from playline.tools import Charged

PRICE = 0.001  # dollars a call of the test's tool costs


class Industry(BaseModel):
    industry: str
    b2b: bool


ROWS = [{"domain": "acme.com"}, {"domain": "globex.io"}]


class Model:
    """``openai.chat`` of the test: answers a schema request with the JSON of
    ``{"industry": <the prompt's domain>, "b2b": true}`` and others with a line of text;
    the first ``wrong`` answers to each conversation (told apart by the first message) are
    ``{"industry": 1}``. ``calls`` keeps every input it was sent."""

    def __init__(self, registry: pl.ToolRegistry, *, wrong: int = 0) -> None:
        self.wrong = wrong
        self.calls: list[dict[str, Any]] = []
        self.asked: dict[str, int] = {}
        registry.tool("openai.chat", cost=pl.Cost(0, unit="usd"))(lambda i: self.answer(i))

    def answer(self, input: dict[str, Any]) -> Charged:
        self.calls.append(input)
        first = input["messages"][0]["content"]
        self.asked[first] = self.asked.get(first, 0) + 1
        domain = re.search(r"[\w-]+\.\w+", first)
        if "schema" not in input:
            text = f"{domain and domain[0]} sells things."
        elif self.asked[first] <= self.wrong:
            text = '{"industry": 1}'
        else:
            text = f'{{"industry": "{domain and domain[0]}", "b2b": true}}'
        data = {
            "text": text,
            "model": input["model"],
            "finish_reason": "stop",
            "usage": {"input_tokens": 20, "output_tokens": 8},
            "usd": PRICE,
        }
        return Charged(data, reported=PRICE)


def _classify(row: Any, ctx: pl.Context) -> Any:
    return ctx.llm(f"Classify {row['domain']}", model="gpt-4o-mini", schema=Industry)


def _play(*columns: tuple[str, Any]) -> Any:
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        builder = ctx.dataset("companies", ROWS, key="domain")
        for name, resolver in columns:
            builder = builder.with_column(name, resolver)
        return await builder.run()

    return play


def _run(play: Any, registry: pl.ToolRegistry, store: Store) -> pl.RunResult:
    return pl.run(play, tools=[registry], store=store, clock=pl.ManualClock())


def _cells(store: Store, run: pl.RunResult, column: str) -> list[dict[str, Any]]:
    return [dict(r.cells[column]) for r in store.iter_rows(run.run_id, "companies")]


def test_a_column_gets_the_object_and_a_second_run_pays_nothing(
    registry: pl.ToolRegistry, store: Store
) -> None:
    model = Model(registry)
    play = _play(
        ("industry", _classify),
        ("kind", lambda row: type(row["industry"].data).__name__),  # the object, in the run
    )
    first = _run(play, registry, store)
    assert first.status == "completed"
    assert first.output.to_list() == [
        {
            "domain": "acme.com",
            "industry": {"industry": "acme.com", "b2b": True},
            "kind": "Industry",
        },
        {
            "domain": "globex.io",
            "industry": {"industry": "globex.io", "b2b": True},
            "kind": "Industry",
        },
    ]
    cells = _cells(store, first, "industry")
    assert [(c["status"], c["provider"]) for c in cells] == [("completed", "openai.chat")] * 2
    assert [c["cost"] for c in cells] == [pytest.approx(PRICE)] * 2
    assert len(model.calls) == 2

    second = _run(play, registry, store)
    assert len(model.calls) == 2  # receipts answered every call
    assert second.output.to_list() == first.output.to_list()
    assert [(c["status"], c.get("cost", 0)) for c in _cells(store, second, "industry")] == [
        ("cached", 0)
    ] * 2


def test_a_new_temperature_or_force_asks_again(registry: pl.ToolRegistry, store: Store) -> None:
    model = Model(registry)
    _run(_play(("industry", _classify)), registry, store)
    warm = _play(
        (
            "industry",
            lambda row, ctx: ctx.llm(
                f"Classify {row['domain']}", model="gpt-4o-mini", schema=Industry, temperature=0.7
            ),
        )
    )
    _run(warm, registry, store)
    _run(warm, registry, store)  # a sampled answer is kept too
    assert len(model.calls) == 4
    forced = _play(
        (
            "industry",
            lambda row, ctx: ctx.llm(
                f"Classify {row['domain']}", model="gpt-4o-mini", schema=Industry, force=True
            ),
        )
    )
    _run(forced, registry, store)
    assert len(model.calls) == 6


def test_an_invalid_answer_is_asked_again_each_attempt_a_call_of_the_cell(
    registry: pl.ToolRegistry, store: Store
) -> None:
    model = Model(registry, wrong=1)
    run = _run(_play(("industry", _classify)), registry, store)
    assert run.status == "completed"
    assert [r["industry"]["industry"] for r in run.output.to_list()] == ["acme.com", "globex.io"]
    assert len(model.calls) == 4
    (again, _) = [c["messages"] for c in model.calls if len(c["messages"]) > 1]
    assert again[1] == {"role": "assistant", "content": '{"industry": 1}'}
    assert again[2]["content"].startswith("Your answer did not match the schema: at industry")
    cells = _cells(store, run, "industry")
    assert [c["cost"] for c in cells] == [pytest.approx(2 * PRICE)] * 2  # both attempts
    assert run.stats.tool_calls_live == 4


def test_an_answer_that_never_validates_fails_its_cell_with_the_raw_answer(
    registry: pl.ToolRegistry, store: Store
) -> None:
    model = Model(registry, wrong=3)
    play = _play(("industry", _classify))
    run = _run(play, registry, store)
    assert len(model.calls) == 6  # 3 attempts a row
    cells = _cells(store, run, "industry")
    assert [c["status"] for c in cells] == ["failed"] * 2
    assert all("after 3 attempts" in c["error"] and '{"industry": 1}' in c["error"] for c in cells)
    assert cells[0]["code"] == "invalid_answer" and cells[0]["provider"] == "openai.chat"
    # the run's summary says why its rows failed (its calls did not: they were answered)
    (cause,) = run.stats.cell_errors
    assert cause.startswith("LlmAnswerError in column 'industry': Tool openai.chat failed: the")
    assert "see the failed cells" not in (run.error or "")
    again = _run(play, registry, store)  # the same answers, from their receipts: no new call
    assert len(model.calls) == 6
    assert [c["status"] for c in _cells(store, again, "industry")] == ["failed"] * 2


def test_in_a_play_body_a_text_answer(registry: pl.ToolRegistry, store: Store) -> None:
    model = Model(registry)

    async def play(ctx: pl.Context, input: Any) -> Any:
        result = await ctx.llm("Describe acme.com", model="gpt-4o-mini", system="Be brief.")
        return {
            "text": result.data,
            "raw": result.raw,
            "usage": result.usage,
            "cost": result.cost,
            "source": result.execution.source,
        }

    run = _run(play, registry, store)
    assert run.output == {
        "text": "acme.com sells things.",
        "raw": "acme.com sells things.",
        "usage": {"input_tokens": 20, "output_tokens": 8, "attempts": 1},
        "cost": pytest.approx(PRICE),
        "source": "live",
    }
    assert model.calls[0]["system"] == "Be brief."
    again = _run(play, registry, store)
    assert (again.output["cost"], again.output["source"]) == (0, "cache")
    assert len(model.calls) == 1


def test_misuse_stops_the_run_at_once(registry: pl.ToolRegistry, store: Store) -> None:
    model = Model(registry)
    play = _play(("industry", lambda row, ctx: ctx.llm("Classify", model="claude-3-5-haiku")))
    run = _run(play, registry, store)
    assert run.status == "failed" and isinstance(run.exception, pl.PlayDefinitionError)
    assert "no tool anthropic.messages" in str(run.exception)
    assert model.calls == []
