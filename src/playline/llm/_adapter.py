"""What the LLM adapters (``providers/openai.py``, ``providers/anthropic.py``) share: the
tool input read and checked, the chat tool's HTTP declaration with what it learns of the
request it sent, and the batch tools' base, a declared HTTP tool whose bulk jobs are the
providers' batch APIs.

The input (what ``ctx.llm`` sends; every field is part of the receipt's key)::

    {"model": str, "messages": [{"role": "user" | "assistant", "content": str}, ...],
     "system": str?, "temperature": float?, "max_tokens": int?, "schema": {...}?,
     "schema_name": str?}

The result (a found answer)::

    {"text": str, "model": str, "finish_reason": "stop" | "length" | "refusal" | ...,
     "usage": {"input_tokens": int, "output_tokens": int}, "usd": float}
"""

from __future__ import annotations

import contextvars
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..errors import PlayDefinitionError, ToolError
from ..tools import Answer, Charged, HttpTool, JobState, Rate, ToolSpec
from ..tools._http_send import _Request
from ._prices import PriceTable

__all__ = ["LlmCall", "LlmHttpTool", "read_call", "schema_name"]

# headers the adapters add to an answer, from the request they sent (never the provider's)
MODEL_HEADER = "x-playline-model"
MAX_TOKENS_HEADER = "x-playline-max-tokens"
_ROLES = ("user", "assistant")
_NAME = re.compile(r"[^a-zA-Z0-9_-]+")


@dataclass(frozen=True)
class LlmCall:
    """An LLM tool's input, read and checked."""

    model: str
    messages: tuple[Mapping[str, Any], ...]
    system: str | None
    temperature: float | None
    max_tokens: int
    schema: Mapping[str, Any] | None
    schema_name: str


def check_options(adapter: str, rate: Any, example: str, **numbers: Any) -> None:
    """An adapter's options, checked where it is declared: ``rate`` a ``pl.Rate`` (None: the
    adapter's default; ``example`` shows one), ``max_tokens`` a whole number >= 1, the other
    ``numbers`` seconds (``batch_wait`` >= 0, ``poll_interval`` > 0)."""
    if rate is not None and not isinstance(rate, Rate):
        raise PlayDefinitionError(f"{adapter}(rate={rate!r}): a pl.Rate, e.g. {example}.")
    least = {"max_tokens": 1, "batch_wait": 0, "poll_interval": 0.001}
    for label, value in numbers.items():
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < least[label]
            or (label == "max_tokens" and not isinstance(value, int))
        ):
            raise PlayDefinitionError(
                f"{adapter}({label}={value!r}): "
                + ("a whole number >= 1." if label == "max_tokens" else "seconds, a number > 0.")
            )


def read_call(tool: str, input: Mapping[str, Any], default_max_tokens: int) -> LlmCall:
    """The input of an LLM call, or a ``PlayDefinitionError`` saying what is wrong."""
    where = f"{tool}: the input"
    model = input.get("model")
    if not isinstance(model, str) or not model.strip():
        raise PlayDefinitionError(f"{where} needs a model name, e.g. 'gpt-4o-mini'.")
    messages = input.get("messages")
    if not isinstance(messages, Sequence) or isinstance(messages, str) or not messages:
        raise PlayDefinitionError(
            f"{where} needs messages: [{{'role': 'user', 'content': 'text'}}, ...]."
        )
    for index, message in enumerate(messages):
        if (
            not isinstance(message, Mapping)
            or message.get("role") not in _ROLES
            or not isinstance(message.get("content"), str)
        ):
            raise PlayDefinitionError(
                f"{where}: messages[{index}] is {message!r}; each message is "
                "{'role': 'user' or 'assistant', 'content': text} (the system text is the "
                "input's 'system')."
            )
    system = input.get("system")
    if system is not None and not isinstance(system, str):
        raise PlayDefinitionError(f"{where}: system is text, or left out.")
    temperature = input.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool) or not isinstance(temperature, int | float)
    ):
        raise PlayDefinitionError(f"{where}: temperature is a number, e.g. 0.")
    max_tokens = input.get("max_tokens")
    if max_tokens is None:
        max_tokens = default_max_tokens
    elif isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise PlayDefinitionError(f"{where}: max_tokens is a whole number >= 1, or left out.")
    schema = input.get("schema")
    if schema is not None and (not isinstance(schema, Mapping) or schema.get("type") != "object"):
        raise PlayDefinitionError(
            f"{where}: schema is a JSON Schema of an object ({{'type': 'object', "
            "'properties': {...}}}): both providers' structured output answers an object."
        )
    return LlmCall(
        model=model.strip(),
        messages=tuple(messages),
        system=system or None,
        temperature=None if temperature is None else float(temperature),
        max_tokens=max_tokens,
        schema=schema,
        schema_name=schema_name(input.get("schema_name")),
    )


def schema_name(name: Any) -> str:
    """A name both providers accept for a schema or a tool (``^[a-zA-Z0-9_-]{1,64}$``)."""
    cleaned = _NAME.sub("_", name.strip()).strip("_")[:64] if isinstance(name, str) else ""
    return cleaned or "answer"


def answer(
    text: str, model: str, finish: str, input_tokens: int, output_tokens: int, usd: float
) -> dict[str, Any]:
    """The result of an LLM call, in the adapters' one shape."""
    return {
        "text": text,
        "model": model,
        "finish_reason": finish,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        "usd": usd,
    }


def tokens_of(usage: Any, input_name: str, output_name: str) -> tuple[int, int]:
    """``(input, output)`` tokens of an answer's ``usage`` (0 where it does not say)."""
    usage = usage if isinstance(usage, Mapping) else {}
    counts = []
    for name in (input_name, output_name):
        value = usage.get(name)
        counts.append(value if isinstance(value, int) and not isinstance(value, bool) else 0)
    return counts[0], counts[1]


class LlmHttpTool(HttpTool):
    """A chat tool: an ``HttpTool`` whose answers also carry, as headers of the adapter's
    own (``x-playline-model``, ``x-playline-max-tokens``), the model asked for and the
    ``max_tokens`` sent, so that the cost is priced by the model the call declared and the
    tokens the provider counted are known; and whose 429s without ``retry-after`` wait what
    the provider's own reset headers say (``reset_wait``)."""

    def __init__(
        self,
        *args: Any,
        reset_wait: Callable[[Mapping[str, str]], float | None],
        max_tokens_field: Callable[[Mapping[str, Any]], Any],
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._reset_wait = reset_wait
        self._max_tokens_field = max_tokens_field

    def tokens_scope(self, input: Mapping[str, Any]) -> str:
        """What a call's tokens count against: its model's limits (the token gate keeps a
        bucket per model, as the providers limit tokens per model)."""
        return str(input.get("model", ""))

    async def _send(self, request: _Request, key: str | None, *, json: bool = True) -> Answer:
        extra: dict[str, str] = {}
        if isinstance(request.json, Mapping):
            model, most = request.json.get("model"), self._max_tokens_field(request.json)
            if isinstance(model, str):
                extra[MODEL_HEADER] = model
            if isinstance(most, int):
                extra[MAX_TOKENS_HEADER] = str(most)
        sent = _SENT.set(extra)  # for tokens_used, read within the send (``_used``)
        try:
            got = await super()._send(request, key, json=json)
        finally:
            _SENT.reset(sent)
        headers = {k.lower(): v for k, v in got.headers.items()}
        if got.status == 429 and "retry-after" not in headers:
            wait = self._reset_wait(headers)
            if wait is not None:
                extra["retry-after"] = f"{max(wait, 0.001):.3f}"
        if not extra:
            return got
        return Answer(got.status, got.body, {**headers, **extra}, got.text)

    def _used(self, answer: Answer) -> Any:
        """What the answer says the call used, read with the request's own headers."""
        extra = _SENT.get()
        if extra:
            answer = Answer(answer.status, answer.body, {**answer.headers, **extra}, answer.text)
        return super()._used(answer)


_SENT: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar(
    "llm_sent", default=MappingProxyType({})
)


def asked_model(answer: Answer) -> str:
    """The model the call asked for (else the one the answer names)."""
    model = answer.headers.get(MODEL_HEADER)
    if not model and isinstance(answer.body, Mapping):
        model = answer.body.get("model")
    return str(model or "")


def asked_max_tokens(answer: Answer) -> int:
    value = answer.headers.get(MAX_TOKENS_HEADER)
    return int(value) if value and value.isdigit() else 0


class LlmBatchTool(HttpTool):
    """A provider's batch API as one bulk async job of many calls (``openai.batch``,
    ``anthropic.batch``): ``submit_bulk`` sends the calls as one batch and keeps its id on
    their receipts (the engine saves it before the first poll, so a restarted worker polls
    it and never submits it again); ``poll_bulk`` asks where it stands and, once it has
    ended, reads its results and gives each call its own, matched by ``custom_id`` (the
    call's place in the batch). Each answer is charged at the batch price.

    Subclasses send the batch (``_create``), read its state (``_state_of``) and its results
    (``_results``); the requests, the auth, the pooled client, the answers' outcome rules
    and the errors are the declared tool's (``HttpTool``)."""

    prices: PriceTable
    default_max_tokens: int

    def checked(self, input: Mapping[str, Any]) -> LlmCall | ToolError:
        """The call an input asks for, or the error it fails with alone, never sent: an
        input that is not an LLM call's, or a model without a price."""
        try:
            call = read_call(self.id, input, self.default_max_tokens)
        except PlayDefinitionError as exc:
            return ToolError(self.id, str(exc), code="invalid_input", outcome="fatal")
        try:
            self.prices.of(call.model)
        except PlayDefinitionError as exc:
            return ToolError(self.id, str(exc), code="no_price", outcome="fatal")
        return call

    def sendable(
        self, inputs: Sequence[Mapping[str, Any]]
    ) -> tuple[dict[int, LlmCall], dict[int, ToolError]]:
        """The inputs' calls to send, and the errors of those that cannot be, by place."""
        calls: dict[int, LlmCall] = {}
        refused: dict[int, ToolError] = {}
        for place, input in enumerate(inputs):
            checked = self.checked(input)
            if isinstance(checked, ToolError):
                refused[place] = checked
            else:
                calls[place] = checked
        return calls, refused

    def charged(
        self, model: str, text: str, finish: str, input_tokens: int, output_tokens: int
    ) -> Charged:
        usd = self.prices.usd(model, input_tokens, output_tokens, batch=True)
        data = answer(text, model, finish, input_tokens, output_tokens, usd)
        return Charged(data, None, usd)

    def item_error(self, message: str, code: str, status: int | None = None) -> ToolError:
        return ToolError(self.id, message, status=status, code=code, outcome="fatal")

    # the transport and single jobs: a batch tool's calls are bulk jobs (the engine sends
    # every call of it, even a lone one, through submit_bulk)
    async def call(
        self, spec: ToolSpec, inputs: Sequence[Mapping[str, Any]], keys: Sequence[str] = ()
    ) -> list[Any]:
        raise ToolError(
            self.id,
            "a batch tool's calls are async jobs that take hours; the engine polls them "
            "(use the chat tool for an answer now)",
            code="no_poll",
            outcome="fatal",
        )

    async def submit(
        self, spec: ToolSpec, input: Mapping[str, Any], key: str | None = None
    ) -> JobState:
        state = await self.submit_bulk(spec, [input], [key] if key else [])
        if state.done:
            return JobState(done=True, result=state.result[0])
        return state

    async def poll(self, spec: ToolSpec, job: Any, input: Mapping[str, Any]) -> JobState:
        state = await self.poll_bulk(spec, job, {0: input})
        if state.done:
            return JobState(done=True, result=state.result[0])
        return state

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "batch_api": type(self).__doc__}
