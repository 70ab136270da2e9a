"""ctx.llm's request, checked before anything is sent: the tool input (which is the receipt
key), the provider's tool chosen from the run's tools, and the misuse refused with what to
do instead."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

import playline as pl
from playline._engine.receipts import receipt_key
from playline._json import canonical
from playline._llm import build, tool_for

TOOLS: dict[str, Any] = dict.fromkeys(
    ["openai.chat", "openai.batch", "anthropic.messages", "anthropic.batch", "ollama.chat"]
)


class Company(BaseModel):
    industry: str
    employees: int


SCHEMA = {
    "type": "object",
    "properties": {"industry": {"type": "string"}},
    "required": ["industry"],
    "additionalProperties": False,
}


def _input(prompt: Any = "Classify acme.com", **options: Any) -> dict[str, Any]:
    options.setdefault("model", "gpt-4o-mini")
    return build(prompt, tools=TOOLS, **options).input


def _key(body: dict[str, Any], tool: str = "openai.chat") -> str:
    return receipt_key(org="o", tool=tool, input=body, auth="a", version="1")


def test_a_prompt_is_one_user_message_and_nones_are_left_out() -> None:
    assert _input() == {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "Classify acme.com"}],
        "temperature": 0.0,
    }


def test_every_parameter_that_changes_the_answer_is_in_the_input() -> None:
    body = _input(system="Be brief.", temperature=0.7, max_tokens=50, schema=Company)
    assert body["system"] == "Be brief."
    assert body["temperature"] == 0.7
    assert body["max_tokens"] == 50
    assert body["schema"] == Company.model_json_schema()
    assert body["schema_name"] == "Company"


def test_a_dict_schema_is_sent_as_given_and_named_answer() -> None:
    body = _input(schema=SCHEMA)
    assert (body["schema"], body["schema_name"]) == (SCHEMA, "answer")


def test_a_change_of_model_prompt_schema_or_temperature_is_another_receipt() -> None:
    base = _key(_input())
    changed = [
        _input(model="gpt-4o"),
        _input("Classify acme.io"),
        _input(schema=SCHEMA),
        _input(temperature=0.2),
        _input(max_tokens=10),
        _input(system="Be brief."),
    ]
    keys = {_key(body) for body in changed}
    assert len(keys) == len(changed) and base not in keys


def test_the_same_request_is_the_same_receipt_whatever_the_label_or_the_number_kind() -> None:
    assert _key(_input(temperature=0)) == _key(_input(temperature=0.0, key="row-1"))
    assert _key(_input()) == _key(_input([{"role": "user", "content": "Classify acme.com"}]))


def test_a_conversation_is_passed_as_given() -> None:
    messages = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Classify acme.com"},
    ]
    assert _input(messages)["messages"] == messages


@pytest.mark.parametrize(
    ("model", "options", "tool"),
    [
        ("gpt-4o-mini", {}, "openai.chat"),
        ("gpt-4o-mini", {"batch": True}, "openai.batch"),
        ("claude-3-5-haiku-latest", {}, "anthropic.messages"),
        ("claude-3-5-haiku-latest", {"batch": True}, "anthropic.batch"),
        ("llama3.1", {"provider": "ollama"}, "ollama.chat"),
    ],
)
def test_the_tool_follows_the_model_or_the_provider(
    model: str, options: dict[str, Any], tool: str
) -> None:
    assert tool_for(TOOLS, model, **options) == tool
    assert build("x", tools=TOOLS, model=model, **options).tool == tool


def test_a_provider_the_run_does_not_have_says_how_to_add_it() -> None:
    with pytest.raises(pl.PlayDefinitionError, match=r"no tool openai\.chat") as raised:
        tool_for({}, "gpt-4o-mini")
    assert "OPENAI_API_KEY" in str(raised.value)
    assert "pl.providers.openai(" in str(raised.value)
    with pytest.raises(pl.PlayDefinitionError, match="ANTHROPIC_API_KEY"):
        tool_for({"openai.chat": None}, "claude-3-5-haiku-latest")  # type: ignore[dict-item]
    with pytest.raises(pl.PlayDefinitionError, match="name='vllm'"):
        tool_for(TOOLS, "qwen", provider="vllm")
    with pytest.raises(pl.PlayDefinitionError, match=r"ollama\.chat, openai\.chat"):
        tool_for({"openai.chat": None, "ollama.chat": None}, "x", provider="vllm")  # type: ignore[dict-item]
    with pytest.raises(pl.PlayDefinitionError, match="provider='ollama'"):
        tool_for({"ollama.chat": None}, "llama3.1")  # type: ignore[dict-item]


@pytest.mark.parametrize(
    ("prompt", "options", "says"),
    [
        ("x", {"model": ""}, "needs model="),
        ("x", {"model": None}, "needs model="),
        (b"x", {}, "as text"),
        ([], {}, "as text"),
        ([{"role": "system", "content": "x"}], {}, "system='...'"),
        ([{"role": "tool", "content": "x"}], {}, "roles are 'user' and 'assistant'"),
        ([{"role": "user", "content": 3}], {}, "give text"),
        ([{"role": "user", "content": "x", "name": "a"}], {}, "nothing else"),
        ([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}], {}, "last"),
        ("x", {"system": 3}, "system prompt is text"),
        ("x", {"temperature": -1}, "from 0"),
        ("x", {"temperature": 3}, "from 0"),
        ("x", {"temperature": float("nan")}, "from 0"),
        ("x", {"temperature": True}, "from 0"),
        ("x", {"max_tokens": 0}, "at least 1"),
        ("x", {"max_tokens": 1.5}, "at least 1"),
        ("x", {"schema": {"type": "string"}}, "must describe an object"),
        ("x", {"schema": {"type": "object", "properties": 3}}, "not a valid JSON Schema"),
        ("x", {"schema": str}, "pydantic model class"),
        ("x", {"schema": "Company"}, "pydantic model class"),
        ("x", {"key": ["a"]}, "names the call"),
        ("x", {"batch": "yes"}, "True or False"),
        ("x", {"force": 1}, "True or False"),
        ("x", {"provider": "open ai"}, "prefix of the provider's tool ids"),
    ],
)
def test_misuse_is_refused_with_what_to_do(prompt: Any, options: dict[str, Any], says: str) -> None:
    options.setdefault("model", "gpt-4o-mini")
    with pytest.raises(pl.PlayDefinitionError, match=None) as raised:
        build(prompt, tools=TOOLS, **options)
    assert says in str(raised.value)


@given(
    prompt=st.text(),
    system=st.none() | st.text(),
    temperature=st.floats(0, 2) | st.integers(0, 2),
    max_tokens=st.none() | st.integers(1, 100_000),
)
def test_the_input_is_json_and_keys_the_same_each_time(
    prompt: str, system: str | None, temperature: float, max_tokens: int | None
) -> None:
    options = {"system": system, "temperature": temperature, "max_tokens": max_tokens}
    body = _input(prompt, schema=SCHEMA, **options)
    assert json.loads(canonical(body)) == body
    assert _key(body) == _key(_input(prompt, schema=SCHEMA, **options))
    assert _key(body) != _key(_input(prompt + "?", schema=SCHEMA, **options))
    # as for every tool, runs of whitespace are one space in the key (the prompt goes as given)
    assert _key(body) == _key(_input(f" {prompt}  ", schema=SCHEMA, **options))
