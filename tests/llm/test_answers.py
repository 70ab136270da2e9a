"""ctx.llm's answers as functions: read (text, a pydantic model, a JSON Schema dict), the
re-ask message, and ``ask``'s loop over a scripted tool: re-asks with the error, at most
two, then a failure carrying the reason and the raw answer; a refusal and an answer cut by
max_tokens fail at once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from pydantic import BaseModel, Field

import playline as pl
from playline._llm import REASKS, Invalid, Reader, ask, build, read, reask
from playline.tools import Execution, ToolResult

TOOLS: dict[str, Any] = dict.fromkeys(["openai.chat"])


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Company(BaseModel):
    industry: str
    employees: int = Field(ge=1)


SCHEMA = {
    "type": "object",
    "properties": {
        "industry": {"type": "string", "enum": ["saas", "retail"]},
        "employees": {"type": "integer", "minimum": 1},
    },
    "required": ["industry", "employees"],
    "additionalProperties": False,
}


def _reader(schema: Any) -> Reader:
    return build("x", tools=TOOLS, model="m", schema=schema).reader


# -- read --------------------------------------------------------------------------------


def test_without_a_schema_the_answer_is_its_text() -> None:
    assert read("Acme sells software.", Reader()) == "Acme sells software."


def test_a_pydantic_answer_is_the_model_object() -> None:
    value = read('{"industry": "saas", "employees": 40}', _reader(Company))
    assert value == Company(industry="saas", employees=40)


def test_a_dict_schema_answer_is_the_validated_dict() -> None:
    text = '{"industry": "saas", "employees": 40}'
    assert read(text, _reader(SCHEMA)) == {"industry": "saas", "employees": 40}


def test_json_in_a_code_fence_is_read_from_inside_it() -> None:
    text = '```json\n{"industry": "saas", "employees": 40}\n```'
    assert read(text, _reader(SCHEMA))["industry"] == "saas"
    assert read(text, _reader(Company)).employees == 40


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("Acme is a SaaS company.", "not JSON"),
        ('{"industry": "saas"', "not JSON"),
        ('{"industry": "saas"}', "'employees' is a required property"),
        ('{"industry": "mining", "employees": 4}', "at $.industry: 'mining' is not one of"),
        ('{"industry": "saas", "employees": 0}', "at $.employees: 0 is less than"),
        ('{"industry": "saas", "employees": 4, "x": 1}', "Additional properties"),
    ],
)
def test_a_dict_schema_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(Invalid, match=None) as raised:
        read(text, _reader(SCHEMA))
    assert says in str(raised.value)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("Acme is a SaaS company.", "Invalid JSON"),
        ('{"industry": "saas"}', "at employees: Field required"),
        ('{"industry": "saas", "employees": 0}', "at employees: Input should be greater"),
    ],
)
def test_a_pydantic_schema_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(Invalid, match=None) as raised:
        read(text, _reader(Company))
    assert says in str(raised.value)
    assert "errors.pydantic.dev" not in str(raised.value)  # the model reads no URLs


def test_the_reask_holds_the_answer_and_the_error() -> None:
    first = [{"role": "user", "content": "Classify acme.com"}]
    again = reask(first, '{"industry": "mining"}', "at $.industry: 'mining' is not one of")
    assert again == [
        {"role": "user", "content": "Classify acme.com"},
        {"role": "assistant", "content": '{"industry": "mining"}'},
        {
            "role": "user",
            "content": "Your answer did not match the schema: at $.industry: 'mining' is not "
            "one of. Answer again with only the JSON object.",
        },
    ]
    assert first == [{"role": "user", "content": "Classify acme.com"}]  # not changed
    assert reask(first, "", "it is not JSON")[1]["content"] == "(no answer)"


# -- ask: a scripted tool ------------------------------------------------------------------


class Scripted:
    """A tool answering the texts it is given in turn, each with 10 input and 5 output
    tokens and $0.01; it keeps the inputs it was called with."""

    def __init__(self, *texts: str, finish: str = "stop", source: str = "live") -> None:
        self.texts = list(texts)
        self.finish = finish
        self.source = source
        self.inputs: list[dict[str, Any]] = []

    async def __call__(self, tool: str, input: Mapping[str, Any], **options: Any) -> ToolResult:
        self.inputs.append(dict(input))
        text = self.texts[min(len(self.inputs), len(self.texts)) - 1]
        data = {
            "text": text,
            "model": input["model"],
            "finish_reason": self.finish,
            "usage": {"input_tokens": 10, "output_tokens": 5},
            "usd": 0.01,
        }
        cost = 0.01 if self.source == "live" else 0.0
        return ToolResult(tool=tool, data=data, cost=cost, execution=Execution(self.source))  # type: ignore[arg-type]


GOOD = '{"industry": "saas", "employees": 40}'
BAD = '{"industry": "mining", "employees": 0}'


async def _ask(tool: Scripted, schema: Any = SCHEMA, **options: Any) -> ToolResult:
    return await ask(
        tool, build("Classify acme.com", tools=TOOLS, model="m", schema=schema, **options)
    )


@pytest.mark.anyio
async def test_a_valid_answer_is_asked_once() -> None:
    tool = Scripted(GOOD)
    result = await _ask(tool)
    assert result.data == {"industry": "saas", "employees": 40}
    assert (result.tool, result.cost, result.raw) == ("openai.chat", 0.01, GOOD)
    assert result.usage == {"input_tokens": 10, "output_tokens": 5, "attempts": 1}
    assert result.execution.source == "live" and len(tool.inputs) == 1


@pytest.mark.anyio
async def test_an_invalid_answer_is_asked_again_with_the_error() -> None:
    tool = Scripted(BAD, GOOD)
    result = await _ask(tool, Company, key="acme")
    assert result.data == Company(industry="saas", employees=40)
    first, second = tool.inputs
    assert second["messages"][:2] == [
        *first["messages"],
        {"role": "assistant", "content": BAD},
    ]
    assert second["messages"][2]["role"] == "user"
    assert second["messages"][2]["content"].startswith("Your answer did not match the schema")
    assert {k: v for k, v in second.items() if k != "messages"} == {
        k: v for k, v in first.items() if k != "messages"
    }
    assert result.cost == pytest.approx(0.02)  # what this ctx.llm paid, its re-ask included
    assert result.usage == {"input_tokens": 20, "output_tokens": 10, "attempts": 2}


@pytest.mark.anyio
async def test_after_two_reasks_the_call_fails_with_the_reason_and_the_raw_answer() -> None:
    tool = Scripted(BAD)
    with pytest.raises(pl.LlmAnswerError) as raised:
        await _ask(tool)
    error = raised.value
    assert len(tool.inputs) == 1 + REASKS == error.attempts == 3
    assert (error.code, error.raw, error.tool) == ("invalid_answer", BAD, "openai.chat")
    assert "'mining' is not one of" in error.reason
    assert "after 3 attempts" in str(error) and BAD in str(error)
    assert isinstance(error, pl.ToolError)  # a row error: the cell fails, the run goes on
    assert len(tool.inputs[-1]["messages"]) == 5  # each re-ask goes on from the last


@pytest.mark.anyio
async def test_a_long_raw_answer_is_cut_in_the_message_but_kept_whole() -> None:
    long = "x" * 5000
    with pytest.raises(pl.LlmAnswerError) as raised:
        await _ask(Scripted(long))
    assert raised.value.raw == long and len(str(raised.value)) < 2500


@pytest.mark.anyio
async def test_an_answer_cut_by_max_tokens_fails_at_once() -> None:
    tool = Scripted('{"industry": "sa', finish="length")
    with pytest.raises(pl.LlmAnswerError, match="max_tokens=5 cut the answer") as raised:
        await _ask(tool, max_tokens=5)
    assert raised.value.code == "length" and len(tool.inputs) == 1


@pytest.mark.anyio
async def test_a_text_answer_cut_by_max_tokens_is_the_answer() -> None:
    result = await _ask(Scripted("Acme sells", finish="length"), None, max_tokens=2)
    assert result.data == "Acme sells" == result.raw


@pytest.mark.anyio
async def test_a_refusal_fails_at_once_with_its_text() -> None:
    tool = Scripted("I can't help with that.", finish="refusal")
    with pytest.raises(pl.LlmAnswerError, match=r'refused: "I can\'t help with that\."'):
        await _ask(tool)
    assert len(tool.inputs) == 1


@pytest.mark.anyio
async def test_answers_from_receipts_cost_nothing_and_say_so() -> None:
    result = await _ask(Scripted(GOOD, source="cache"))
    assert (result.cost, result.execution.source, result.execution.cached) == (0, "cache", True)
    assert result.usage == {"input_tokens": 10, "output_tokens": 5, "attempts": 1}


@pytest.mark.anyio
async def test_a_planned_call_is_no_answer_at_no_cost() -> None:
    result = await _ask(Scripted(GOOD, source="planned"))
    assert (result.data, result.found, result.cost) == (None, False, 0)


@pytest.mark.anyio
async def test_a_result_without_answer_text_fails_the_call() -> None:
    async def broken(tool: str, input: Mapping[str, Any], **options: Any) -> ToolResult:
        return ToolResult(tool=tool, data={"answer": 1})

    with pytest.raises(pl.LlmAnswerError, match="no answer text"):
        await ask(broken, build("x", tools=TOOLS, model="m"))
