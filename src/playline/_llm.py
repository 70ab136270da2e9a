"""``ctx.llm``: a prompt to a model as tool calls, its answer checked against a schema.

What ``ctx.llm(prompt | messages, *, model, schema=None, ...)`` does, in three parts:

- **the request** (``build``): a prompt becomes one user message; ``messages`` are checked
  (roles ``user`` and ``assistant``, text content, the last one the user's: the system
  prompt goes in ``system=``); a schema is a pydantic model class (its
  ``model_json_schema()``) or a JSON Schema dict whose root is an object (the providers'
  structured-output modes want one). The tool input is the LLM tool contract
  (``{"model", "messages", "system", "temperature", "max_tokens", "schema",
  "schema_name"}``, None values left out), and so is the receipt key: any change of model,
  prompt, schema or parameter is a new call; the same request is answered by its receipt,
  ``temperature > 0`` too (a sampled answer is kept as it came, not sampled again).
- **the tool** (``tool_for``): the run's ``<provider>.chat`` (``anthropic.messages``), or
  ``<provider>.batch`` with ``batch=True``; the provider is ``provider=`` (a tool id prefix,
  e.g. ``"ollama"`` for ``pl.providers.openai(name="ollama")``), else ``anthropic`` for
  ``claude-*`` models and ``openai`` for the others.
- **the answer** (``read``): with a pydantic model, ``model_validate_json``; with a dict,
  JSON parsed and validated by ``jsonschema`` (Draft 2020-12, the schema's own ``$schema``
  when it names another draft). An answer that does not validate is asked again: the
  messages go on with the model's answer and a user message giving the error, at most
  ``REASKS`` times, each a tool call of its own (its receipt, its ledger row); then the cell
  fails with ``LlmAnswerError`` carrying the reason and the raw answer. A refusal, or an
  answer ``max_tokens`` cut before its JSON ended, fails at once (asking again would meet
  the same refusal or the same limit).

The provider pages this follows: OpenAI's chat completions reference
(https://platform.openai.com/docs/api-reference/chat/create) and structured outputs guide
(https://platform.openai.com/docs/guides/structured-outputs: ``json_schema`` response
formats, refusals, ``finish_reason: "length"``); Anthropic's Messages API
(https://docs.anthropic.com/en/api/messages: a top-level ``system``, alternating
``user``/``assistant`` turns); JSON Schema 2020-12 (https://json-schema.org/draft/2020-12)
as ``jsonschema`` implements it (https://python-jsonschema.readthedocs.io/).
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from .errors import LlmAnswerError, PlayDefinitionError
from .tools import Execution, ToolResult, ToolSpec

__all__ = ["REASKS", "Ask", "Reader", "ask", "build", "read", "reask", "tool_for"]

REASKS = 2  # answers asked for again after one that does not validate
RAW_SHOWN = 2000  # characters of the raw answer an error message shows (all of it: .raw)

CallTool = Callable[..., Awaitable[ToolResult]]
_ROLES = ("user", "assistant")
_FENCE = re.compile(r"\A\s*```(?:json|JSON)?\s*\n(.*?)\n\s*```\s*\Z", re.S)


class Invalid(Exception):
    """An answer that does not validate; the message says why, for the model to read."""


@dataclass(frozen=True, slots=True)
class Reader:
    """How an answer is read: as text (no schema), by a pydantic model, or by a JSON Schema
    dict (``validator``: a ``jsonschema`` validator, made once per ``ctx.llm`` call)."""

    model: Any = None  # a pydantic BaseModel subclass
    validator: Any = None  # a jsonschema validator

    @property
    def structured(self) -> bool:
        return self.model is not None or self.validator is not None


@dataclass(frozen=True, slots=True)
class Ask:
    """A checked ``ctx.llm`` call: the tool, its first input, how to read the answer."""

    tool: str
    input: dict[str, Any]
    reader: Reader
    label: str | None
    force: bool


def build(
    prompt: Any,
    *,
    tools: Mapping[str, ToolSpec],
    model: Any,
    schema: Any = None,
    temperature: Any = 0,
    max_tokens: Any = None,
    system: Any = None,
    key: Any = None,
    batch: Any = False,
    force: Any = False,
    provider: Any = None,
) -> Ask:
    """The call ``ctx.llm(...)`` asks for, checked (``PlayDefinitionError`` otherwise)."""
    if not isinstance(model, str) or not model.strip():
        raise PlayDefinitionError(
            "ctx.llm needs model=, the model's name as the provider spells it, e.g. "
            "ctx.llm('...', model='gpt-4o-mini') or model='claude-3-5-haiku-latest'."
        )
    messages = _messages(prompt)
    body: dict[str, Any] = {"model": model, "messages": messages}
    if system is not None:
        if not isinstance(system, str):
            raise PlayDefinitionError(
                f"ctx.llm(system={type(system).__name__}): the system prompt is text."
            )
        body["system"] = system
    body["temperature"] = _temperature(temperature)
    if max_tokens is not None:
        body["max_tokens"] = _max_tokens(max_tokens)
    reader = Reader()
    if schema is not None:
        json_schema, name, reader = _schema(schema)
        body["schema"] = json_schema
        body["schema_name"] = name
    if key is not None and not isinstance(key, str | int):
        raise PlayDefinitionError(
            f"ctx.llm(key={key!r}): key= names the call (in the run's events and the UI): "
            "give a text or a number. It is not part of the receipt."
        )
    for name, flag in (("batch", batch), ("force", force)):
        if not isinstance(flag, bool):
            raise PlayDefinitionError(f"ctx.llm({name}={flag!r}): True or False.")
    tool = tool_for(tools, model, provider=provider, batch=batch)
    return Ask(
        tool=tool,
        input=body,
        reader=reader,
        label=None if key is None else str(key),
        force=force,
    )


def tool_for(
    tools: Mapping[str, ToolSpec], model: str, *, provider: Any = None, batch: bool = False
) -> str:
    """The run's tool that answers ``model``: ``<provider>.chat`` (``anthropic.messages``),
    or ``<provider>.batch``; a clear error when the run does not have it."""
    chosen = provider is not None
    if provider is None:
        provider = "anthropic" if model.startswith("claude") else "openai"
    elif not isinstance(provider, str) or not re.fullmatch(r"[A-Za-z0-9_-]+", provider):
        raise PlayDefinitionError(
            f"ctx.llm(provider={provider!r}): the prefix of the provider's tool ids, e.g. "
            "'openai', 'anthropic', or the name= given to pl.providers.openai(name='ollama')."
        )
    operation = "batch" if batch else ("messages" if provider == "anthropic" else "chat")
    tool = f"{provider}.{operation}"
    if tool in tools:
        return tool
    if provider == "openai":
        how = "set OPENAI_API_KEY (a run without tools= has it then) or pass "
        how += "tools=[pl.providers.openai(api_key=..., base_url=...)]"
    elif provider == "anthropic":
        how = "set ANTHROPIC_API_KEY (a run without tools= has it then) or pass "
        how += "tools=[pl.providers.anthropic(api_key=..., base_url=...)]"
    else:
        how = (
            f"pass tools=[pl.providers.openai(base_url=..., name={provider!r})] for an "
            "OpenAI-compatible server"
        )
    have = sorted(t for t in tools if t.endswith((".chat", ".messages", ".batch")))
    known = f" The run's model tools: {', '.join(have)}." if have else ""
    others = sorted({t.split(".", 1)[0] for t in have} - {provider})
    also = "" if chosen or not others else f", or ask another: provider={others[0]!r}"
    raise PlayDefinitionError(
        f"ctx.llm(model={model!r}): the run has no tool {tool}.{known} To ask {provider}, "
        f"{how}{also}."
    )


def _messages(prompt: Any) -> list[dict[str, str]]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if not isinstance(prompt, Sequence) or isinstance(prompt, bytes) or not prompt:
        raise PlayDefinitionError(
            f"ctx.llm({type(prompt).__name__}): give the prompt as text, or the conversation "
            "as a list of messages, e.g. [{'role': 'user', 'content': '...'}]."
        )
    messages = []
    for index, message in enumerate(prompt):
        if not isinstance(message, Mapping) or set(message) != {"role", "content"}:
            raise PlayDefinitionError(
                f"ctx.llm: message {index} is {message!r}; each message is "
                "{'role': 'user' | 'assistant', 'content': text}, nothing else."
            )
        role, content = message["role"], message["content"]
        if role == "system":
            raise PlayDefinitionError(
                f"ctx.llm: message {index} has the role 'system'; give the system prompt as "
                "system='...' (both providers take it apart from the conversation)."
            )
        if role not in _ROLES:
            raise PlayDefinitionError(
                f"ctx.llm: message {index} has the role {role!r}; roles are 'user' and 'assistant'."
            )
        if not isinstance(content, str):
            raise PlayDefinitionError(
                f"ctx.llm: message {index}'s content is {type(content).__name__}; give text."
            )
        messages.append({"role": role, "content": content})
    if messages[-1]["role"] != "user":
        raise PlayDefinitionError(
            "ctx.llm: the last message is the assistant's; end the conversation with the "
            "user's message the model is to answer."
        )
    return messages


def _temperature(value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= 2
    ):
        raise PlayDefinitionError(
            f"ctx.llm(temperature={value!r}): a number from 0 (the default: the most likely "
            "answer) to 2 (Anthropic's models take at most 1)."
        )
    return float(value)  # 0 and 0.0 are one receipt


def _max_tokens(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PlayDefinitionError(
            f"ctx.llm(max_tokens={value!r}): the most tokens the answer may take, a whole "
            "number of at least 1 (or None: the provider's default)."
        )
    return value


def _is_model_class(schema: Any) -> bool:
    """A pydantic model class (v2), known by what ctx.llm uses of it: pydantic is optional."""
    return isinstance(schema, type) and all(
        callable(getattr(schema, name, None))
        for name in ("model_json_schema", "model_validate_json")
    )


def _schema(schema: Any) -> tuple[dict[str, Any], str, Reader]:
    """The JSON Schema sent, its name, and how the answer is read."""
    if _is_model_class(schema):
        json_schema = schema.model_json_schema()
        return _object_schema(json_schema, schema.__name__), schema.__name__, Reader(schema)
    if isinstance(schema, Mapping):
        json_schema = _object_schema(dict(schema), "the schema")
        import jsonschema  # only a dict schema needs it (a second or so less to import)

        cls = jsonschema.validators.validator_for(json_schema, jsonschema.Draft202012Validator)
        try:
            cls.check_schema(json_schema)
        except jsonschema.SchemaError as exc:
            where = "/".join(str(p) for p in exc.path) or "its root"
            raise PlayDefinitionError(
                f"ctx.llm(schema=...) is not a valid JSON Schema (at {where}: {exc.message}). "
                "Fix the schema, or give a pydantic model class."
            ) from None
        return json_schema, "answer", Reader(validator=cls(json_schema))
    raise PlayDefinitionError(
        f"ctx.llm(schema={schema!r}): give a pydantic model class (the answer is then an "
        "instance of it) or a JSON Schema dict (the answer is then a dict)."
    )


def _object_schema(schema: dict[str, Any], name: str) -> dict[str, Any]:
    if schema.get("type") != "object":
        raise PlayDefinitionError(
            f"ctx.llm: {name} must describe an object ('type': 'object'); the providers' "
            "structured output answers one. Wrap a single value in a field, e.g. "
            "{'type': 'object', 'properties': {'industry': {...}}, 'required': ['industry']}."
        )
    try:
        orjson.dumps(schema)
    except TypeError as exc:
        raise PlayDefinitionError(f"ctx.llm: {name} is not JSON ({exc}).") from None
    return schema


# -- answers -------------------------------------------------------------------------------


def read(text: str, reader: Reader) -> Any:
    """The answer's value: the text, the pydantic object or the validated dict; raises
    ``Invalid`` (its message for the model to read) when it does not validate."""
    if not reader.structured:
        return text
    fenced = _FENCE.match(text)  # a server without structured output may fence its JSON
    body = fenced.group(1) if fenced else text
    if reader.model is not None:
        from pydantic import ValidationError  # there: the model class is pydantic's

        try:
            return reader.model.model_validate_json(body)
        except ValidationError as exc:
            raise Invalid(_pydantic_errors(exc)) from None
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise Invalid(f"it is not JSON ({exc})") from None
    errors = sorted(reader.validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        shown = "; ".join(f"at {e.json_path}: {e.message}" for e in errors[:5])
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        raise Invalid(shown + more)
    return value


def _pydantic_errors(exc: Any) -> str:
    parts = []
    for error in exc.errors(include_url=False)[:5]:
        where = ".".join(str(p) for p in error["loc"])
        parts.append(f"at {where}: {error['msg']}" if where else error["msg"])
    more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "; ".join(parts) + more


def reask(messages: Sequence[Mapping[str, str]], raw: str, reason: str) -> list[dict[str, str]]:
    """The conversation asked again after an answer that did not validate: the model's
    answer, then the error for it to correct."""
    return [
        *({"role": m["role"], "content": m["content"]} for m in messages),
        {"role": "assistant", "content": raw or "(no answer)"},
        {
            "role": "user",
            "content": f"Your answer did not match the schema: {reason}. "
            "Answer again with only the JSON object.",
        },
    ]


async def ask(call_tool: CallTool, request: Ask) -> ToolResult:
    """Ask the model, re-asking after invalid answers; one ``ToolResult`` for them all:
    ``data`` the value, ``cost`` what the calls were charged now (all of them: 0 when
    receipts answered), ``usage`` their tokens together (``attempts``: how many),
    ``raw`` the last answer's text."""
    body = request.input
    results: list[ToolResult] = []
    tokens = {"input_tokens": 0, "output_tokens": 0}
    while True:
        result = await call_tool(request.tool, body, label=request.label, force=request.force)
        results.append(result)
        answer = result.data
        if result.execution.source == "planned":  # playline plan: nothing was asked
            return _one(request, results, None, tokens, None)
        if not isinstance(answer, Mapping) or not isinstance(answer.get("text"), str):
            raise LlmAnswerError(
                request.tool,
                f"the tool's result has no answer text ({answer!r}); it must return the LLM "
                "tool result ({'text': ..., 'finish_reason': ..., 'usage': ...}).",
                code="invalid_result",
                reason="no text",
                raw="",
                attempts=len(results),
            )
        usage = answer.get("usage")
        if isinstance(usage, Mapping):
            for name in tokens:
                count = usage.get(name)
                if isinstance(count, int):
                    tokens[name] += count
        raw: str = answer["text"]
        finish = answer.get("finish_reason")
        if finish == "refusal":  # the model's words: under "refusal" (OpenAI's), or the text
            said = answer.get("refusal")
            words = said if isinstance(said, str) and said else raw
            raise LlmAnswerError(
                request.tool,
                f"the model refused: {words!r}. Rephrase the prompt, or try another model.",
                code="refusal",
                reason=words,
                raw=raw,
                attempts=len(results),
            )
        try:
            value = read(raw, request.reader)
        except Invalid as exc:
            reason = str(exc)
            if finish == "length":
                limit = body.get("max_tokens")
                raise LlmAnswerError(
                    request.tool,
                    f"max_tokens={limit} cut the answer before its JSON ended ({reason}). "
                    "Raise max_tokens (or leave it unset).",
                    code="length",
                    reason=reason,
                    raw=raw,
                    attempts=len(results),
                ) from None
            if len(results) > REASKS:
                shown = raw if len(raw) <= RAW_SHOWN else raw[:RAW_SHOWN] + "…"
                raise LlmAnswerError(
                    request.tool,
                    f"the answer did not match the schema after {len(results)} attempts: "
                    f"{reason}. The last answer: {shown!r}. Say in the prompt what each "
                    "field holds, loosen the schema, or try another model.",
                    code="invalid_answer",
                    reason=reason,
                    raw=raw,
                    attempts=len(results),
                ) from None
            body = {**body, "messages": reask(body["messages"], raw, reason)}
            continue
        return _one(request, results, value, tokens, raw)


def _one(
    request: Ask,
    results: list[ToolResult],
    value: Any,
    tokens: dict[str, int],
    raw: str | None,
) -> ToolResult:
    """The calls' results as one: the cell that asked counts this one instead of them."""
    sources = {r.execution.source for r in results}
    source = next(iter(sources)) if len(sources) == 1 else "live"
    one = ToolResult(
        tool=request.tool,
        data=value,
        cost=sum(r.cost for r in results),
        execution=Execution(source),
        usage={**tokens, "attempts": len(results)},
        raw=raw,
    )
    return one
