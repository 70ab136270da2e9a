"""OpenAI (and the servers compatible with its chat completions): ``openai.chat``, one answer
now, and ``openai.batch``, the same calls gathered into one Batch API job at half the price.

Documentation followed:

- https://platform.openai.com/docs/api-reference/chat/create (``messages`` with the system
  text first, ``temperature``, ``max_tokens``, deprecated for ``max_completion_tokens``,
  which the o-series reasoning models require; ``choices[0].message.content``/``refusal``,
  ``finish_reason``, ``usage.prompt_tokens``/``completion_tokens``)
- https://platform.openai.com/docs/guides/structured-outputs (``response_format: {type:
  json_schema, json_schema: {name, schema, strict: true}}``; strict needs every object
  closed, ``additionalProperties: false``, and every property required; a refusal comes as
  ``message.refusal``)
- https://platform.openai.com/docs/guides/reasoning (o-series models take
  ``max_completion_tokens``, which counts their reasoning tokens too, and only the default
  temperature)
- https://platform.openai.com/docs/guides/rate-limits (RPM and TPM per model; a request
  counts its prompt and ``max_tokens`` against TPM and gives nothing back; tier 1 for
  gpt-4o-mini: 500 RPM, 200,000 TPM; the ``x-ratelimit-limit/remaining/reset-requests`` and
  ``-tokens`` headers, the reset a duration such as ``6m0s``)
- https://platform.openai.com/docs/guides/error-codes (401 invalid key, 429
  ``rate_limit_exceeded`` or ``insufficient_quota`` "You exceeded your current quota", 500
  and 503: retry after a brief wait)
- https://platform.openai.com/docs/guides/batch and /docs/api-reference/batch, /files (a
  JSONL file of ``{custom_id, method, url, body}`` uploaded with ``purpose=batch``, one model
  per file, up to 50,000 requests and 200 MB; ``POST /v1/batches`` with
  ``completion_window: 24h``; statuses validating, failed, in_progress, finalizing,
  completed, expired, cancelling, cancelled; ``output_file_id`` and ``error_file_id``, whose
  lines are matched by ``custom_id`` as "the output line order may not match the input line
  order"; an expired batch's completed requests are returned and charged, the others have
  the error ``batch_expired``; 50% off)
- https://platform.openai.com/docs/pricing (the prices, ``playline.llm._prices``)

What the documentation leaves open, and what this adapter assumes:

- models whose name starts ``o`` and a digit, or ``gpt-5``, are reasoning models:
  ``max_completion_tokens`` is sent and the temperature is not (they refuse any but the
  default); other models get ``max_tokens``, which compatible servers (vLLM, Ollama) read;
- with a schema, ``strict`` is true when the schema meets strict mode's rules and false
  otherwise (OpenAI then follows it as best it can, and ``ctx.llm`` checks the answer),
  rather than a 400 for a schema written by hand;
- a refusal is a found answer with ``finish_reason: "refusal"``, empty ``text`` and the
  model's words under ``refusal`` (it is charged: the tokens were used);
- a 429 that names no ``retry-after`` waits until the exhausted bucket's
  ``x-ratelimit-reset-*`` says; "Request too large" (a request larger than the TPM limit
  itself) is fatal, as it never fits; ``insufficient_quota`` is the account out of credits;
- tokens: a call reserves its estimated prompt plus ``max_tokens`` against TPM, and is
  corrected to the prompt the answer counted plus that ``max_tokens``: the output not used
  is never given back (``tokens_used`` counts ``max_tokens``, not the completion), while an
  estimate above the prompt OpenAI counted is (our estimate errs high, ~10% on JSON; keeping
  it cost a bench of 2,000 calls 10% of its time). What OpenAI counts is in its headers,
  which hold the gate too;
- a batch: the calls of many rows are one job (up to 50,000, gathered for up to
  ``batch_wait`` seconds); calls for several models make one batch per model, polled as one
  job; the job is ``{"batches": [{"id", "model"}]}``. A batch that fails validation fails
  its calls with its errors (nothing is charged); an expired or cancelled batch gives its
  completed answers and fails the rest (``batch_expired``, ``batch_cancelled``; resume with
  ``--retry-failed`` to ask again). A batch submit answered by a timeout may have been
  created, so its calls are in doubt (never sent twice unasked). The files stay on the
  account (OpenAI keeps them until deleted).
- Azure OpenAI's deployment URLs and ``api-key`` header are not served here: its
  OpenAI-compatible ``/openai/v1`` endpoint is, with ``base_url``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import orjson

from .._json import digest
from .._secrets import Secret
from ..errors import PlayDefinitionError, ToolError
from ..llm._adapter import (
    LlmBatchTool,
    LlmCall,
    LlmHttpTool,
    answer,
    asked_max_tokens,
    asked_model,
    check_options,
    read_call,
    tokens_of,
)
from ..llm._estimate import estimate_tokens, worst_usd
from ..llm._prices import OPENAI_PRICES, PriceTable
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
from ..tools._http_send import _client, _Request, request_or_raise
from ..tools._outcomes import match
from ._provider import Provider, ProviderTools

__all__ = ["PROVIDER", "openai"]

DEFAULT_MAX_TOKENS = 1024  # sent when the input sets none: what a call reserves
BATCH_SIZE = 50_000  # requests in one batch file
BATCH_WAIT = 5.0  # seconds the calls of many rows gather into one batch
POLL_INTERVAL = 60.0
POLL_MAX_WAIT = 25 * 3600.0  # the 24 h completion window, and an hour to finalize
TIER_1 = Rate(per_minute=500, tokens_per_minute=200_000)
_REASONING = re.compile(r"^(o\d|gpt-5)")
_PENDING = ("validating", "in_progress", "finalizing", "cancelling")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def _code(*codes: str) -> Any:
    return lambda body: body["error"]["code"] in codes


def _too_large(body: Any) -> bool:
    return "request too large" in str(body["error"]["message"]).casefold()


_REFUSALS = [
    Outcome(
        "insufficient_credits",
        status=429,
        body=_code("insufficient_quota"),
        message="error.message",
    ),
    Outcome("fatal", status=429, body=_too_large, message="error.message"),
    Outcome("rate_limited", status=429, wait=1, message="error.message"),
    Outcome("fatal", status=[400, 401, 403, 404, 409, 413, 422], message="error.message"),
    Outcome("retryable", status="5xx", message="error.message"),
    Outcome("fatal", status="4xx", message="error.message"),
]


def _reasoning(model: str) -> bool:
    return bool(_REASONING.match(model))


def _strict(schema: Any) -> bool:
    """Whether a schema meets strict mode's rules: every object closed, every property
    required."""
    if isinstance(schema, list):
        return all(_strict(s) for s in schema)
    if not isinstance(schema, Mapping):
        return True
    properties = schema.get("properties")
    if schema.get("type") == "object" or isinstance(properties, Mapping):
        if schema.get("additionalProperties") is not False:
            return False
        if set(properties or {}) - set(schema.get("required") or ()):
            return False
    return all(_strict(sub) for sub in schema.values() if isinstance(sub, Mapping | list))


def chat_body(call: LlmCall) -> dict[str, Any]:
    """The chat completions request of a call."""
    messages = [{"role": "system", "content": call.system}] if call.system else []
    messages += [{"role": m["role"], "content": m["content"]} for m in call.messages]
    body: dict[str, Any] = {"model": call.model, "messages": messages}
    if _reasoning(call.model):
        body["max_completion_tokens"] = call.max_tokens
    else:
        body["max_tokens"] = call.max_tokens
        if call.temperature is not None:
            body["temperature"] = call.temperature
    if call.schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": call.schema_name,
                "schema": dict(call.schema),
                "strict": _strict(call.schema),
            },
        }
    return body


def _max_tokens_of(body: Mapping[str, Any]) -> Any:
    return body.get("max_completion_tokens", body.get("max_tokens"))


def completion(body: Any) -> tuple[str, str, int, int, str | None]:
    """``(text, finish_reason, input tokens, output tokens, refusal)`` of a completion."""
    choice = body["choices"][0]
    message = choice.get("message") or {}
    refusal = message.get("refusal")
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    finish = "refusal" if refusal else str(choice.get("finish_reason") or "stop")
    used_in, used_out = tokens_of(body.get("usage"), "prompt_tokens", "completion_tokens")
    return ("" if refusal else text), finish, used_in, used_out, refusal or None


def _reset_wait(headers: Mapping[str, str]) -> float | None:
    """Seconds until an exhausted bucket refills, from ``x-ratelimit-reset-*``."""
    waits = []
    for kind in ("requests", "tokens"):
        left = headers.get(f"x-ratelimit-remaining-{kind}")
        reset = headers.get(f"x-ratelimit-reset-{kind}")
        if left is not None and left.strip() == "0" and reset:
            waits.append(duration(reset))
    found = [w for w in waits if w is not None]
    return max(found) if found else None


def duration(text: str) -> float | None:
    """``"6m0s"``, ``"1.5s"``, ``"12ms"`` in seconds (None when it is not one)."""
    parts = _DURATION.findall(text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        return None
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    return sum(float(number) * scale[unit] for number, unit in parts)


class _Chat:
    """``<name>.chat``'s request, answer and cost, for one price table."""

    def __init__(self, tool: str, prices: PriceTable, max_tokens: int) -> None:
        self.tool = tool
        self.prices = prices
        self.max_tokens = max_tokens

    def call(self, input: Mapping[str, Any]) -> LlmCall:
        call = read_call(self.tool, input, self.max_tokens)
        self.prices.of(call.model)  # no price: the call fails before it is sent
        return call

    def request(self, input: dict[str, Any]) -> Mapping[str, Any]:
        return {"json": chat_body(self.call(input))}

    def result(self, got: Answer) -> dict[str, Any]:
        text, finish, used_in, used_out, refusal = completion(got.body)
        model = asked_model(got)
        usd = self.prices.usd(model, used_in, used_out)
        data = answer(text, str(got.body.get("model") or model), finish, used_in, used_out, usd)
        if refusal:
            data["refusal"] = refusal
        return data

    def usd(self, got: Answer) -> float | None:
        _, _, used_in, used_out, _ = completion(got.body)
        return self.prices.usd(asked_model(got), used_in, used_out)

    def worst(self, input: Mapping[str, Any]) -> float:
        return worst_usd(self.prices, input, self.max_tokens) or 0.0

    def tokens(self, input: Mapping[str, Any]) -> int:
        """What a call reserves against TPM: its estimated prompt and its ``max_tokens``."""
        most = input.get("max_tokens")
        most = most if isinstance(most, int) and not isinstance(most, bool) else self.max_tokens
        return estimate_tokens(input) + most

    def tokens_used(self, got: Answer) -> int | None:
        """What OpenAI counted: the prompt the answer says and the ``max_tokens`` sent."""
        used_in, _ = tokens_of(got.body.get("usage"), "prompt_tokens", "completion_tokens")
        most = asked_max_tokens(got)
        return used_in + most if used_in and most else None


class OpenAIBatch(LlmBatchTool):
    """``<name>.batch``: the calls of many rows as one Batch API job (a JSONL file uploaded,
    a batch created per model, polled until it ends, its output and error files read),
    at the batch price."""

    def __init__(
        self,
        prefix: str,
        base: str,
        auth: Auth,
        account: str | None,
        prices: PriceTable,
        max_tokens: int,
        *,
        batch_wait: float,
        poll_interval: float,
        max_wait: float,
    ) -> None:
        self.prices = prices
        self.default_max_tokens = max_tokens
        self.base = base
        super().__init__(
            f"{prefix}.batch",
            "POST",
            f"{base}/v1/batches",
            auth=auth,
            account=account,
            outcomes=_REFUSALS,
            bulk=HttpBulk(max_size=BATCH_SIZE, max_wait=batch_wait),
            poll=HttpPoll(
                url=f"{base}/v1/batches/{{job}}",
                interval=poll_interval,
                max_wait=max(max_wait, poll_interval),
                outcomes=_REFUSALS,
            ),
            rate=Rate(per_minute=60),
            cost=Cost(0, unit="usd", worst=self._worst),
            timeout=300.0,  # an upload of up to 200 MB
            description=(
                "An LLM answer through the Batch API (half price, within 24 h): input "
                "{model, messages, system?, temperature?, max_tokens?, schema?} -> {text, "
                "model, finish_reason, usage, usd}."
            ),
        )
        # a submit in doubt may have created a batch: never sent again unasked
        self.spec = dataclasses.replace(self.spec, in_doubt="fail")

    def _worst(self, input: Mapping[str, Any]) -> float:
        return worst_usd(self.prices, input, self.default_max_tokens, batch=True) or 0.0

    async def submit_bulk(
        self, spec: ToolSpec, inputs: Sequence[Mapping[str, Any]], keys: Sequence[str] = ()
    ) -> JobState:
        calls, refused = self.sendable(inputs)
        if not calls:  # nothing to send: each fails alone
            return JobState(done=True, result=[refused[place] for place in range(len(inputs))])
        by_model: dict[str, list[int]] = {}
        for place, call in calls.items():
            by_model.setdefault(call.model, []).append(place)
        made: list[dict[str, str]] = []
        try:
            for model, places in by_model.items():
                lines = [
                    orjson.dumps(
                        {
                            "custom_id": str(place),
                            "method": "POST",
                            "url": "/v1/chat/completions",
                            "body": chat_body(calls[place]),
                        }
                    )
                    for place in places
                ]
                name = digest("batch", *(keys or [str(len(inputs))]))[:16]
                file_id = await self._upload(b"\n".join(lines) + b"\n", f"playline-{name}.jsonl")
                made.append({"id": await self._create(file_id, name), "model": model})
        except BaseException:
            for batch in made:  # the batches made before the failure: nothing asked them
                await self._cancel(batch["id"])
            raise
        return JobState(done=False, job={"batches": made})

    async def poll_bulk(
        self, spec: ToolSpec, job: Any, inputs: Mapping[int, Mapping[str, Any]]
    ) -> JobState:
        batches = job.get("batches") if isinstance(job, Mapping) else None
        if not isinstance(batches, list) or not all(
            isinstance(b, Mapping) and isinstance(b.get("id"), str) for b in batches
        ):
            raise self.item_error(f"the job {job!r} is not a batch job of this tool", "bad_job")
        states = [await self._batch(b["id"]) for b in batches]
        if any(state.get("status") in _PENDING for state in states):
            return JobState(done=False, job=job)
        answers: dict[str, Any] = {}
        ended: dict[str, tuple[str, Mapping[str, Any]]] = {}  # model -> (status, batch)
        for batch, state in zip(batches, states, strict=True):
            status = str(state.get("status"))
            ended[str(batch.get("model"))] = (status, state)
            if status == "failed":
                continue
            for file in ("output_file_id", "error_file_id"):
                if state.get(file):
                    answers.update(await self._lines(str(state[file]), batch["id"]))
        results = {}
        for place, input in inputs.items():
            checked = self.checked(input)
            if isinstance(checked, ToolError):  # never sent
                results[place] = checked
                continue
            line = answers.get(str(place))
            model = str(input.get("model") or "").strip()
            if line is not None:
                results[place] = self._line(line, model)
                continue
            status, state = ended.get(model, ("", {}))
            results[place] = self._missing(status, state)
        return JobState(done=True, result=results)

    # the steps
    async def _upload(self, content: bytes, filename: str) -> str:
        """Upload a batch's JSONL (``POST /v1/files``, multipart, ``purpose=batch``)."""
        headers = {"Accept": "application/json"}
        params: dict[str, Any] = {}
        basic = self.auth.apply(headers, params) if self.auth else None
        url = f"{self.base}/v1/files"
        response = await request_or_raise(
            _client(self.account),
            self.id,
            "POST",
            str(httpx.URL(url).copy_merge_params(params)) if params else url,
            data={"purpose": "batch"},
            files={"file": (filename, content, "application/jsonl")},
            headers=headers,
            auth=basic or httpx.USE_CLIENT_DEFAULT,
            timeout=self.timeout,
        )
        try:
            body = response.json() if response.content else None
        except ValueError:
            body = None
        got = Answer(response.status_code, body, response.headers, response.text)
        return self._said(got, "id", "answered the upload without a file id")

    async def _create(self, file_id: str, name: str) -> str:
        request = _Request(
            "POST",
            f"{self.base}/v1/batches",
            json={
                "input_file_id": file_id,
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
                "metadata": {"playline": name},
            },
        )
        got = await self._send(request, None)
        return self._said(got, "id", "answered the batch's creation without its id")

    async def _cancel(self, batch_id: str) -> None:
        url = f"{self.base}/v1/batches/{urllib.parse.quote(batch_id, safe='')}/cancel"
        with contextlib.suppress(ToolError):  # best effort: the batch fails its calls anyway
            await self._send(_Request("POST", url), None)

    async def _batch(self, batch_id: str) -> Mapping[str, Any]:
        url = f"{self.base}/v1/batches/{urllib.parse.quote(batch_id, safe='')}"
        got = await self._send(_Request("GET", url), None)
        if got.status == 404:
            raise ToolError(
                self.id,
                f"OpenAI no longer knows the batch {batch_id} ({got.text[:200]})",
                status=404,
                code="unknown_job",
                outcome="fatal",
            )
        rule = match(self.outcomes, got, "status")
        if rule is None or rule.outcome != "found":
            raise self._reading.refusal(rule, got)
        return dict(got.body)

    async def _lines(self, file_id: str, batch_id: str) -> dict[str, Any]:
        """A finished batch's output or error file, by ``custom_id``."""
        url = f"{self.base}/v1/files/{urllib.parse.quote(file_id, safe='')}/content"
        got = await self._send(_Request("GET", url), None, json=False)
        if got.status == 404:
            raise ToolError(
                self.id,
                f"OpenAI no longer keeps the results of batch {batch_id} (file {file_id}); "
                "resume the run with --retry-failed to ask again",
                status=404,
                code="job_expired",
                outcome="fatal",
            )
        if not 200 <= got.status < 300:
            raise self._reading.refusal(match(self.outcomes, got, None), got)
        lines: dict[str, Any] = {}
        for raw in got.text.splitlines():
            if not raw.strip():
                continue
            try:
                line = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue  # a line cut short: its call is missing, and fails alone
            if isinstance(line, Mapping) and isinstance(line.get("custom_id"), str):
                lines[line["custom_id"]] = line
        return lines

    def _said(self, got: Answer, path: str, why: str) -> str:
        rule = match(self.outcomes, got, path)
        if rule is not None and rule.outcome == "found":
            return str(got.body[path])
        if rule is not None and rule.outcome == "not_found":
            raise self._reading.failure(got, why, "bad_answer")
        raise self._reading.refusal(rule, got)

    # the answers
    def _line(self, line: Mapping[str, Any], model: str) -> Any:
        """One call's answer from its line of the output or error file."""
        response = line.get("response")
        error = line.get("error")
        if isinstance(response, Mapping) and response.get("status_code") == 200:
            try:
                text, finish, used_in, used_out, refusal = completion(response.get("body"))
            except (KeyError, IndexError, TypeError, AttributeError):
                return self.item_error(f"an answer it cannot read: {str(line)[:300]}", "bad_answer")
            charged = self.charged(model, text, finish, used_in, used_out)
            if refusal:
                charged.data["refusal"] = refusal
            return charged
        if isinstance(response, Mapping):
            status = response.get("status_code")
            got = Answer(status if isinstance(status, int) else 500, response.get("body"), {}, "")
            rule = match(self.outcomes, got, None)
            if rule is not None and rule.outcome not in ("found", "not_found", "pending"):
                return self._reading.error(rule, got)
            return self.item_error(f"the batch answered {str(response)[:300]}", "bad_answer")
        if isinstance(error, Mapping):
            code = str(error.get("code") or "batch_item_failed")
            said = str(error.get("message") or code)
            if code in ("batch_expired", "batch_cancelled"):
                said += "; resume the run with --retry-failed to ask again"
            return self.item_error(said, code)
        return self.item_error(f"a line it cannot read: {str(line)[:300]}", "bad_answer")

    def _missing(self, status: str, state: Mapping[str, Any]) -> ToolError:
        """The error of a call no line answers, by how its batch ended."""
        if status == "failed":
            errors = (state.get("errors") or {}).get("data") or []
            said = (
                "; ".join(f"line {e.get('line')}: {e.get('message')}" for e in errors[:3] if e)
                or "no reason given"
            )
            return self.item_error(f"the batch failed validation: {said}", "batch_failed")
        if status in ("expired", "cancelled"):
            return self.item_error(
                f"the batch {status} before this request was done; resume the run with "
                "--retry-failed to ask again",
                "batch_expired" if status == "expired" else "batch_cancelled",
            )
        return self.item_error(
            f"the batch ended {status or 'without it'} and answered nothing for this call",
            "missing_item",
        )


def _tools(
    base: str,
    auth: Auth,
    account: str | None,
    *,
    prefix: str,
    rate: Rate,
    prices: PriceTable,
    max_tokens: int,
    batch_wait: float,
    poll_interval: float,
) -> list[Any]:
    base = base.removesuffix("/v1")  # the SDKs' base_url convention: "https://api.openai.com/v1"
    chat = _Chat(f"{prefix}.chat", prices, max_tokens)
    tool = LlmHttpTool(
        f"{prefix}.chat",
        "POST",
        f"{base}/v1/chat/completions",
        auth=auth,
        account=account,
        outcomes=_REFUSALS,
        response=chat.result,
        rate=rate,
        cost=Cost(0, unit="usd", worst=chat.worst),
        reported=Reported(read=chat.usd),
        tokens=chat.tokens,
        tokens_used=chat.tokens_used,
        timeout=600.0,  # a long answer of a reasoning model takes minutes
        description=(
            "An LLM answer: input {model, messages, system?, temperature?, max_tokens?, "
            "schema?, schema_name?} -> {text, model, finish_reason, usage, usd}."
        ),
        reset_wait=_reset_wait,
        max_tokens_field=_max_tokens_of,
    )(chat.request)
    batch = OpenAIBatch(
        prefix,
        base,
        auth,
        account,
        prices,
        max_tokens,
        batch_wait=batch_wait,
        poll_interval=poll_interval,
        max_wait=POLL_MAX_WAIT,
    )
    return [tool, batch]


PROVIDER = Provider(
    name="openai",
    title="OpenAI",
    key="OPENAI_API_KEY",
    url="https://api.openai.com",
    auth=Auth.bearer,
    build=functools.partial(
        _tools,
        prefix="openai",
        rate=TIER_1,
        prices=PriceTable(OPENAI_PRICES, provider="openai"),
        max_tokens=DEFAULT_MAX_TOKENS,
        batch_wait=BATCH_WAIT,
        poll_interval=POLL_INTERVAL,
    ),
    docs=(
        "https://platform.openai.com/docs/api-reference/chat/create",
        "https://platform.openai.com/docs/guides/structured-outputs",
        "https://platform.openai.com/docs/guides/rate-limits",
        "https://platform.openai.com/docs/guides/error-codes",
        "https://platform.openai.com/docs/guides/batch",
        "https://platform.openai.com/docs/pricing",
    ),
)
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")


def openai(
    api_key: str | Secret | None = None,
    base_url: str | None = None,
    *,
    name: str = "openai",
    rate: Rate | None = None,
    prices: Mapping[str, Any] | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    batch_wait: float = BATCH_WAIT,
    poll_interval: float = POLL_INTERVAL,
    account: str | None = None,
) -> ProviderTools:
    """OpenAI's tools: ``openai.chat`` ({model, messages, system?, temperature?,
    max_tokens?, schema?} -> {text, model, finish_reason, usage, usd}) and ``openai.batch``
    (the same through the Batch API, at half the price, within 24 h).

    The key: ``api_key``, else ``OPENAI_API_KEY``. ``name``: another prefix for a compatible
    server (``name="ollama"``: ``ollama.chat``, its key ``OLLAMA_API_KEY``, its address
    ``base_url`` or ``PLAYLINE_OLLAMA_URL``). ``rate``: the account's limits (default: tier
    1 for gpt-4o-mini, 500 requests and 200,000 tokens a minute). ``prices``: US dollars per
    million tokens by model, over the built-in table (``{"my-model": (0.2, 0.8)}``; ``"*"``
    prices every other model: ``{"*": (0, 0)}`` for a local server). ``max_tokens``: what a
    call whose input sets none may answer (and reserves)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise PlayDefinitionError(
            f"playline.providers.openai(name={name!r}): the tools' prefix, lower case letters, "
            "digits, - and _ (e.g. 'ollama')."
        )
    check_options(
        "playline.providers.openai",
        rate,
        "pl.Rate(per_minute=5000, tokens_per_minute=2_000_000) for a higher tier",
        max_tokens=max_tokens,
        batch_wait=batch_wait,
        poll_interval=poll_interval,
    )
    provider = PROVIDER
    if name != "openai":
        provider = dataclasses.replace(
            PROVIDER, name=name, title=f"{name} (OpenAI-compatible)", key=f"{name.upper()}_API_KEY"
        )
        if base_url is None and not os.environ.get(provider.url_variable, "").strip():
            raise PlayDefinitionError(
                f"playline.providers.openai(name={name!r}): give the server's address, "
                f"base_url='http://localhost:11434/v1' or {provider.url_variable}."
            )
    provider = dataclasses.replace(
        provider,
        build=functools.partial(
            _tools,
            prefix=name,
            rate=rate or TIER_1,
            prices=PriceTable(OPENAI_PRICES, prices, provider="openai").check(),
            max_tokens=max_tokens,
            batch_wait=float(batch_wait),
            poll_interval=float(poll_interval),
        ),
    )
    return provider.tools(api_key, base_url, account)
