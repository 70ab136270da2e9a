"""Anthropic's Messages API: ``anthropic.messages``, one answer now, and ``anthropic.batch``,
the same calls gathered into one Message Batch at half the price.

Documentation followed:

- https://docs.anthropic.com/en/api/messages (``x-api-key``, ``anthropic-version:
  2023-06-01``, ``max_tokens`` required, ``system`` a top-level field, ``temperature`` 0 to
  1; ``content`` blocks, ``stop_reason`` end_turn, max_tokens, stop_sequence, tool_use,
  refusal; ``usage.input_tokens``/``output_tokens``)
- https://docs.anthropic.com/en/docs/build-with-claude/tool-use (a forced tool,
  ``tool_choice: {type: tool, name}``, whose ``input`` follows its ``input_schema``: the
  structured answer; the tool-use system prompt the pricing page counts, 313 tokens with a
  forced tool)
- https://docs.anthropic.com/en/api/errors (400 invalid_request_error, 401
  authentication_error, 402 billing_error, 403 permission_error, 404 not_found_error, 413
  request_too_large, 429 rate_limit_error, 500 api_error, 529 overloaded_error)
- https://docs.anthropic.com/en/api/rate-limits (RPM, ITPM and OTPM per model, token
  buckets; OTPM is estimated from ``max_tokens`` and adjusted to the output used at the end;
  ``retry-after`` on a 429; ``anthropic-ratelimit-*-remaining``/``-reset``, the reset an
  RFC 3339 time; tier 1 for Claude Sonnet 4: 50 RPM, 30,000 ITPM, 8,000 OTPM)
- https://docs.anthropic.com/en/docs/build-with-claude/batch-processing and
  /en/api/creating-message-batches, retrieving-message-batches,
  retrieving-message-batch-results (``requests: [{custom_id, params}]``, up to 100,000
  requests or 256 MB; ``processing_status`` in_progress, canceling, ended; ``results_url``
  once ended, JSONL in any order, matched by ``custom_id``; result types succeeded,
  errored, canceled, expired, only succeeded charged; results kept 29 days; 50% off)
- https://docs.anthropic.com/en/docs/about-claude/pricing (``playline.llm._prices``)

What the documentation leaves open, and what this adapter assumes:

- with a schema, the answer is the input of a forced tool named ``schema_name`` (default
  ``answer``): ``text`` is its JSON; ``end_turn``, ``tool_use`` and ``stop_sequence`` are
  ``finish_reason: "stop"``, ``max_tokens`` is ``"length"``, ``refusal`` ``"refusal"``;
- "Your credit balance is too low" (a 400 invalid_request_error) and 402 billing_error are
  the account out of credits; 529 and 5xx are sent again;
- a 429 without ``retry-after`` waits until the exhausted bucket's reset;
- tokens: a call reserves its estimated input against ITPM and its ``max_tokens`` against
  OTPM, and is corrected to the answer's ``usage`` (the output not used goes back);
- a batch holds up to 10,000 calls (well under the 256 MB a batch may weigh with prompts of
  up to 25 kB), gathered for up to ``batch_wait`` seconds; its job is its id. An errored
  request fails its call with Anthropic's words; an expired or canceled one fails with
  ``batch_expired``/``batch_canceled`` (resume with ``--retry-failed`` to ask again); a
  batch archived (past 29 days) before its results were read is ``job_expired``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import urllib.parse
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson

from .._secrets import Secret
from ..errors import ToolError
from ..llm._adapter import (
    LlmBatchTool,
    LlmCall,
    LlmHttpTool,
    answer,
    asked_model,
    check_options,
    read_call,
    schema_name,
    tokens_of,
)
from ..llm._estimate import estimate_tokens, text_tokens, worst_usd
from ..llm._prices import ANTHROPIC_PRICES, PriceTable
from ..tools import (
    Answer,
    Auth,
    Cost,
    HttpBulk,
    HttpPoll,
    JobState,
    Outcome,
    Rate,
    Reported,
    ToolSpec,
)
from ..tools._http_send import _Request
from ..tools._outcomes import match
from ._provider import Provider, ProviderTools

__all__ = ["PROVIDER", "anthropic"]

VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024
TOOL_PROMPT = 313  # tokens of the tool-use system prompt with a forced tool (pricing page)
BATCH_SIZE = 10_000
BATCH_WAIT = 5.0
POLL_INTERVAL = 60.0
POLL_MAX_WAIT = 25 * 3600.0  # a batch ends within 24 h ("expired" past it)
TIER_1 = Rate(per_minute=50, tokens_per_minute=30_000, output_tokens_per_minute=8_000)
_STOPS = {"end_turn": "stop", "tool_use": "stop", "stop_sequence": "stop", "max_tokens": "length"}


def _type(*types: str) -> Any:
    return lambda body: body["error"]["type"] in types


def _broke(body: Any) -> bool:
    return "credit balance" in str(body["error"]["message"]).casefold()


_REFUSALS = [
    Outcome("insufficient_credits", status=400, body=_broke, message="error.message"),
    Outcome("insufficient_credits", status=402, message="error.message"),  # billing_error
    Outcome("rate_limited", status=429, wait=1, message="error.message"),
    Outcome("retryable", status=529, message="error.message"),  # overloaded_error
    Outcome("fatal", status=[400, 401, 403, 404, 413], message="error.message"),
    Outcome("retryable", status="5xx", message="error.message"),
    Outcome("fatal", status="4xx", message="error.message"),
]


def messages_body(call: LlmCall) -> dict[str, Any]:
    """The Messages request of a call."""
    body: dict[str, Any] = {
        "model": call.model,
        "max_tokens": call.max_tokens,
        "messages": [{"role": m["role"], "content": m["content"]} for m in call.messages],
    }
    if call.system:
        body["system"] = call.system
    if call.temperature is not None:
        body["temperature"] = call.temperature
    if call.schema is not None:
        body["tools"] = [
            {
                "name": call.schema_name,
                "description": _DESCRIBED,
                "input_schema": dict(call.schema),
            }
        ]
        body["tool_choice"] = {"type": "tool", "name": call.schema_name}
    return body


def message(body: Any) -> tuple[str, str, int, int]:
    """``(text, finish_reason, input tokens, output tokens)`` of a message: a forced tool's
    input as JSON, else the text blocks joined."""
    blocks = [b for b in body["content"] if isinstance(b, Mapping)]
    used = next((b for b in blocks if b.get("type") == "tool_use"), None)
    if used is not None:
        text = orjson.dumps(used.get("input", {})).decode()
    else:
        text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    stop = str(body.get("stop_reason") or "end_turn")
    used_in, used_out = tokens_of(body.get("usage"), "input_tokens", "output_tokens")
    return text, _STOPS.get(stop, stop), used_in, used_out


def _reset_wait(headers: Mapping[str, str]) -> float | None:
    """Seconds until an exhausted bucket refills, from ``anthropic-ratelimit-*-reset``."""
    now = datetime.now().astimezone()
    waits = []
    for kind in ("requests", "input-tokens", "output-tokens", "tokens"):
        left = headers.get(f"anthropic-ratelimit-{kind}-remaining")
        reset = headers.get(f"anthropic-ratelimit-{kind}-reset")
        if left is None or left.strip() != "0" or not reset:
            continue
        try:
            when = datetime.fromisoformat(reset.strip().replace("Z", "+00:00"))
        except ValueError:
            continue
        waits.append((when - now).total_seconds())
    return max(waits) if waits else None


_DESCRIBED = "Answer with this tool: its input is the answer."


def _overhead(input: Mapping[str, Any]) -> int:
    """The prompt tokens a schema adds besides its own: the tool-use system prompt and the
    tool's name and description around it (``estimate_tokens`` counts the schema)."""
    if input.get("schema") is None:
        return 0
    around = {"name": schema_name(input.get("schema_name")), "description": _DESCRIBED}
    return TOOL_PROMPT + text_tokens(orjson.dumps(around).decode(), per_token=3) + 6


class _Messages:
    """``anthropic.messages``' request, answer and cost, for one price table."""

    def __init__(self, tool: str, prices: PriceTable, max_tokens: int) -> None:
        self.tool = tool
        self.prices = prices
        self.max_tokens = max_tokens

    def request(self, input: dict[str, Any]) -> Mapping[str, Any]:
        call = read_call(self.tool, input, self.max_tokens)
        self.prices.of(call.model)  # no price: the call fails before it is sent
        return {"json": messages_body(call)}

    def result(self, got: Answer) -> dict[str, Any]:
        text, finish, used_in, used_out = message(got.body)
        model = asked_model(got)
        usd = self.prices.usd(model, used_in, used_out)
        return answer(text, str(got.body.get("model") or model), finish, used_in, used_out, usd)

    def usd(self, got: Answer) -> float | None:
        _, _, used_in, used_out = message(got.body)
        return self.prices.usd(asked_model(got), used_in, used_out)

    def worst(self, input: Mapping[str, Any]) -> float:
        return worst_usd(self.prices, input, self.max_tokens, overhead=_overhead(input)) or 0.0

    def tokens(self, input: Mapping[str, Any]) -> tuple[int, int]:
        """What a call reserves: its estimated input (ITPM) and its ``max_tokens`` (OTPM)."""
        most = input.get("max_tokens")
        most = most if isinstance(most, int) and not isinstance(most, bool) else self.max_tokens
        return estimate_tokens(input, overhead=_overhead(input)), most

    def tokens_used(self, got: Answer) -> tuple[int, int] | None:
        used = tokens_of(got.body.get("usage"), "input_tokens", "output_tokens")
        return used if any(used) else None


class AnthropicBatch(LlmBatchTool):
    """``anthropic.batch``: the calls of many rows as one Message Batch, polled until it
    has ended, its results read from ``results_url``, at the batch price."""

    def __init__(
        self,
        base: str,
        auth: Auth,
        account: str | None,
        prices: PriceTable,
        max_tokens: int,
        *,
        batch_wait: float,
        poll_interval: float,
    ) -> None:
        self.prices = prices
        self.default_max_tokens = max_tokens
        self.base = base
        super().__init__(
            "anthropic.batch",
            "POST",
            f"{base}/v1/messages/batches",
            headers={"anthropic-version": VERSION},
            auth=auth,
            account=account,
            outcomes=_REFUSALS,
            bulk=HttpBulk(max_size=BATCH_SIZE, max_wait=batch_wait),
            poll=HttpPoll(
                url=f"{base}/v1/messages/batches/{{job}}",
                interval=poll_interval,
                max_wait=max(POLL_MAX_WAIT, poll_interval),
                outcomes=_REFUSALS,
            ),
            rate=Rate(per_minute=50),
            cost=Cost(0, unit="usd", worst=self._worst),
            timeout=300.0,
            description=(
                "An LLM answer through Message Batches (half price, within 24 h): input "
                "{model, messages, system?, temperature?, max_tokens?, schema?} -> {text, "
                "model, finish_reason, usage, usd}."
            ),
        )
        self.spec = dataclasses.replace(self.spec, in_doubt="fail")

    def _worst(self, input: Mapping[str, Any]) -> float:
        return (
            worst_usd(
                self.prices,
                input,
                self.default_max_tokens,
                batch=True,
                overhead=_overhead(input),
            )
            or 0.0
        )

    async def submit_bulk(
        self, spec: ToolSpec, inputs: Sequence[Mapping[str, Any]], keys: Sequence[str] = ()
    ) -> JobState:
        calls, refused = self.sendable(inputs)
        if not calls:
            return JobState(done=True, result=[refused[place] for place in range(len(inputs))])
        requests = [
            {"custom_id": str(place), "params": messages_body(call)}
            for place, call in calls.items()
        ]
        got = await self._send(
            _Request("POST", f"{self.base}/v1/messages/batches", json={"requests": requests}),
            None,
        )
        rule = match(self.outcomes, got, "id")
        if rule is None or rule.outcome != "found":
            if rule is not None and rule.outcome == "not_found":
                raise self._reading.failure(got, "answered the batch without its id", "bad_answer")
            raise self._reading.refusal(rule, got)
        return JobState(done=False, job=str(got.body["id"]))

    async def poll_bulk(
        self, spec: ToolSpec, job: Any, inputs: Mapping[int, Mapping[str, Any]]
    ) -> JobState:
        if not isinstance(job, str) or not job:
            raise self.item_error(f"the job {job!r} is not a batch of this tool", "bad_job")
        url = f"{self.base}/v1/messages/batches/{urllib.parse.quote(job, safe='')}"
        got = await self._send(_Request("GET", url), None)
        if got.status == 404:
            raise ToolError(
                self.id,
                f"Anthropic no longer knows the batch {job} ({got.text[:200]})",
                status=404,
                code="unknown_job",
                outcome="fatal",
            )
        rule = match(self.outcomes, got, "processing_status")
        if rule is None or rule.outcome != "found":
            raise self._reading.refusal(rule, got)
        state = got.body
        if state.get("processing_status") != "ended":
            return JobState(done=False, job=job)
        lines = await self._results(job, state)
        results: dict[int, Any] = {}
        for place, input in inputs.items():
            checked = self.checked(input)
            if isinstance(checked, ToolError):  # never sent
                results[place] = checked
                continue
            line = lines.get(str(place))
            results[place] = (
                self._line(line, checked.model)
                if line is not None
                else self.item_error("the batch ended with no result for this call", "missing_item")
            )
        return JobState(done=True, result=results)

    async def _results(self, job: str, state: Mapping[str, Any]) -> dict[str, Any]:
        url = state.get("results_url")
        if not isinstance(url, str) or not url:
            raise ToolError(
                self.id,
                f"Anthropic no longer keeps the results of batch {job} (archived "
                f"{state.get('archived_at') or 'or never given'}); resume the run with "
                "--retry-failed to ask again",
                code="job_expired",
                outcome="fatal",
            )
        got = await self._send(_Request("GET", url), None, json=False)
        if got.status == 404:
            raise ToolError(
                self.id,
                f"Anthropic no longer keeps the results of batch {job}; resume the run with "
                "--retry-failed to ask again",
                status=404,
                code="job_expired",
                outcome="fatal",
            )
        if not 200 <= got.status < 300:
            raise self._reading.refusal(match(self.outcomes, got, None), got)
        lines: dict[str, Any] = {}
        for raw in got.text.splitlines():
            if raw.strip():
                with contextlib.suppress(orjson.JSONDecodeError):
                    line = orjson.loads(raw)
                    if isinstance(line, Mapping) and isinstance(line.get("custom_id"), str):
                        lines[line["custom_id"]] = line
        return lines

    def _line(self, line: Mapping[str, Any], model: str) -> Any:
        result = line.get("result")
        kind = result.get("type") if isinstance(result, Mapping) else None
        if kind == "succeeded":
            assert isinstance(result, Mapping)
            try:
                text, finish, used_in, used_out = message(result.get("message"))
            except (KeyError, TypeError, AttributeError):
                return self.item_error(f"an answer it cannot read: {str(line)[:300]}", "bad_answer")
            return self.charged(model, text, finish, used_in, used_out)
        if kind == "errored":
            assert isinstance(result, Mapping)
            error = result.get("error")
            inner = error.get("error") if isinstance(error, Mapping) else None
            inner = inner if isinstance(inner, Mapping) else {}
            code = str(inner.get("type") or "errored")
            if code == "invalid_request_error" and "credit balance" in str(inner.get("message")):
                return ToolError(
                    self.id, str(inner.get("message")), code="insufficient_credits",
                    outcome="insufficient_credits",
                )  # fmt: skip
            return self.item_error(str(inner.get("message") or code), code)
        if kind in ("canceled", "expired"):
            return self.item_error(
                f"the batch {kind} this request before it was done; resume the run with "
                "--retry-failed to ask again",
                f"batch_{kind}",
            )
        return self.item_error(f"a result it cannot read: {str(line)[:300]}", "bad_answer")


def _tools(
    base: str,
    auth: Auth,
    account: str | None,
    *,
    rate: Rate,
    prices: PriceTable,
    max_tokens: int,
    batch_wait: float,
    poll_interval: float,
) -> list[Any]:
    base = base.removesuffix("/v1")
    ask = _Messages("anthropic.messages", prices, max_tokens)
    tool = LlmHttpTool(
        "anthropic.messages",
        "POST",
        f"{base}/v1/messages",
        headers={"anthropic-version": VERSION},
        auth=auth,
        account=account,
        outcomes=_REFUSALS,
        response=ask.result,
        rate=rate,
        cost=Cost(0, unit="usd", worst=ask.worst),
        reported=Reported(read=ask.usd),
        tokens=ask.tokens,
        tokens_used=ask.tokens_used,
        timeout=600.0,
        description=(
            "An LLM answer: input {model, messages, system?, temperature?, max_tokens?, "
            "schema?, schema_name?} -> {text, model, finish_reason, usage, usd}."
        ),
        reset_wait=_reset_wait,
        max_tokens_field=lambda body: body.get("max_tokens"),
    )(ask.request)
    batch = AnthropicBatch(
        base,
        auth,
        account,
        prices,
        max_tokens,
        batch_wait=batch_wait,
        poll_interval=poll_interval,
    )
    return [tool, batch]


PROVIDER = Provider(
    name="anthropic",
    title="Anthropic",
    key="ANTHROPIC_API_KEY",
    url="https://api.anthropic.com",
    auth=lambda secret: Auth.header("x-api-key", secret),
    build=functools.partial(
        _tools,
        rate=TIER_1,
        prices=PriceTable(ANTHROPIC_PRICES, provider="anthropic"),
        max_tokens=DEFAULT_MAX_TOKENS,
        batch_wait=BATCH_WAIT,
        poll_interval=POLL_INTERVAL,
    ),
    docs=(
        "https://docs.anthropic.com/en/api/messages",
        "https://docs.anthropic.com/en/docs/build-with-claude/tool-use",
        "https://docs.anthropic.com/en/api/errors",
        "https://docs.anthropic.com/en/api/rate-limits",
        "https://docs.anthropic.com/en/docs/build-with-claude/batch-processing",
        "https://docs.anthropic.com/en/docs/about-claude/pricing",
    ),
)


def anthropic(
    api_key: str | Secret | None = None,
    base_url: str | None = None,
    *,
    rate: Rate | None = None,
    prices: Mapping[str, Any] | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    batch_wait: float = BATCH_WAIT,
    poll_interval: float = POLL_INTERVAL,
    account: str | None = None,
) -> ProviderTools:
    """Anthropic's tools: ``anthropic.messages`` ({model, messages, system?, temperature?,
    max_tokens?, schema?} -> {text, model, finish_reason, usage, usd}) and
    ``anthropic.batch`` (the same as one Message Batch, at half the price, within 24 h).

    The key: ``api_key``, else ``ANTHROPIC_API_KEY``. ``rate``: the account's limits
    (default: tier 1 for Claude Sonnet 4, 50 requests, 30,000 input and 8,000 output tokens
    a minute). ``prices``: US dollars per million tokens by model, over the built-in table
    (``{"claude-new": (3, 15)}``). ``max_tokens``: what a call whose input sets none may
    answer (and reserves; Anthropic requires one)."""
    check_options(
        "playline.providers.anthropic",
        rate,
        "pl.Rate(per_minute=1000, tokens_per_minute=450_000, output_tokens_per_minute=90_000)",
        max_tokens=max_tokens,
        batch_wait=batch_wait,
        poll_interval=poll_interval,
    )
    provider = dataclasses.replace(
        PROVIDER,
        build=functools.partial(
            _tools,
            rate=rate or TIER_1,
            prices=PriceTable(ANTHROPIC_PRICES, prices, provider="anthropic").check(),
            max_tokens=max_tokens,
            batch_wait=float(batch_wait),
            poll_interval=float(poll_interval),
        ),
    )
    return provider.tools(api_key, base_url, account)
