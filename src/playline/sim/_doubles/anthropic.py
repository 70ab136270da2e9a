"""Anthropic's Messages API, as its documentation describes: the Messages reference
(docs.anthropic.com/en/api/messages, and count_tokens), versions and errors (/en/api/versioning,
/en/api/errors), rate limits (/en/api/rate-limits, read from a stored mirror at
anthropic.mintlify.app), tool use with a forced ``tool_choice``
(/en/docs/build-with-claude/tool-use), Message Batches (/en/api/creating-message-batches,
retrieving-message-batches and retrieving-message-batch-results, read at platform.claude.com
and docs.anthropic.com) and pricing (/en/docs/about-claude/pricing, a stored copy listing
Claude Opus 4.1 as the newest model, so about August 2025).

- ``POST /v1/messages`` with ``x-api-key`` (401 ``authentication_error`` otherwise) and
  ``anthropic-version`` (400 without it): ``model``, ``max_tokens`` (required), ``messages``
  (``content`` as text or blocks), ``system`` (text or text blocks), ``temperature`` (0 to 1),
  ``tools`` ``[{"name", "description", "input_schema"}]`` and ``tool_choice`` ``{"type":
  "tool", "name"}`` (or ``any``: the first tool). Answers ``{"id": "msg_...", "type":
  "message", "role": "assistant", "content": [{"type": "text", "text"}] or [{"type":
  "tool_use", "id": "toolu_...", "name", "input"}], "model", "stop_reason": "end_turn" |
  "max_tokens" | "tool_use", "stop_sequence": null, "usage": {"input_tokens",
  "output_tokens"}}``. ``POST /v1/messages/count_tokens`` answers ``{"input_tokens"}``.
- Limits per model (defaults 500 RPM, 200,000 input and 40,000 output tokens a minute;
  Anthropic's tier 1 is 50 RPM and 30,000 to 50,000 ITPM): a request takes its input tokens
  from ITPM and ``max_tokens`` from OTPM, and the output it did not use goes back to OTPM
  when it is answered, as the rate limits page says ("OTPM rate limits are estimated based
  on max_tokens at the beginning of each request, and the estimate is adjusted at the end").
  Every answer carries ``anthropic-ratelimit-requests-limit``, ``-requests-remaining``,
  ``-requests-reset``, ``anthropic-ratelimit-input-tokens-limit``/``-remaining``/``-reset``,
  ``anthropic-ratelimit-output-tokens-limit``/``-remaining``/``-reset`` and
  ``anthropic-ratelimit-tokens-*`` (the more restrictive of the two), a reset being the RFC 3339
  time the bucket is full again; past a limit ``429 {"type": "error", "error": {"type":
  "rate_limit_error", "message"}}`` with ``retry-after`` in seconds.
- Message Batches: ``POST /v1/messages/batches {"requests": [{"custom_id", "params"}]}``,
  ``GET /v1/messages/batches/{id}`` (``processing_status`` ``in_progress``, ``canceling``,
  ``ended``; ``request_counts`` ``processing``/``succeeded``/``errored``/``canceled``/
  ``expired``; ``results_url`` once ended), ``POST .../{id}/cancel``, ``GET .../{id}/results``
  (JSONL of ``{"custom_id", "result": {"type": "succeeded", "message"} | {"type":
  "errored", "error"} | {"type": "expired"} | {"type": "canceled"}}``). A batch ends after
  ``batch_delay`` (expired requests past 24 h); its answers are computed once, when it ends,
  at half price; its results are kept 29 days from its creation, then it is archived
  (``archived_at``) and its results are 404.
- Faults: ``storm`` answers 429 ``rate_limit_error``; ``down`` 529 ``overloaded_error``;
  ``credits`` (dollars) spent: 400 "Your credit balance is too low".

What the documentation leaves open, and what this double assumes: any model name is served,
at the price of its longest prefix in the table, else Claude Haiku 3.5's; the prompt counts
the system text as a message, the tools' JSON, and the tool-use system prompt the pricing page
lists (313 tokens with a forced tool, 346 otherwise); a tool call cut by ``max_tokens`` has
``input: {}``; results come in the order of the requests; results of a batch not ended are
400; the remaining-tokens headers are exact (Anthropic rounds them).
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from . import _answers, _tokens
from ._base import Refusal
from ._llm import LlmDouble, Price

__all__ = ["AnthropicDouble"]

_NOT_ASKED = frozenset({"max_tokens", "metadata", "stream"})
_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
TOOL_PROMPT = {"forced": 313, "auto": 346}  # tokens of the tool-use system prompt


def _error(
    status: int, type: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    body = {
        "type": "error",
        "error": {"type": type, "message": message},
        "request_id": f"req_{uuid.uuid4().hex[:24]}",
    }
    return JSONResponse(body, status, dict(headers or {}))


def _bad(message: str) -> Refusal:
    return Refusal(_error(400, "invalid_request_error", message))


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _text_of(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _bad(f"{where}: Input should be a valid string or a list of content blocks")
    out = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            out.append(str(block.get("text", "")))
        elif isinstance(block, dict) and block.get("type") == "tool_result":
            inner = block.get("content", "")
            out.append(inner if isinstance(inner, str) else orjson.dumps(inner).decode())
        elif isinstance(block, dict) and block.get("type") == "tool_use":
            out.append(orjson.dumps(block.get("input", {})).decode())
        else:
            out.append(orjson.dumps(block).decode())
    return "".join(out)


@dataclass(frozen=True, kw_only=True)
class Ask:
    """A Messages request, read."""

    model: str
    messages: tuple[tuple[str, str, bool], ...]  # (role, text, named), the system first
    tool: Mapping[str, Any] | None  # the tool the answer must call
    max_tokens: int
    seed: bytes
    input_tokens: int

    @property
    def last_user(self) -> str:
        return next((text for role, text, _ in reversed(self.messages) if role == "user"), "")


class AnthropicDouble(LlmDouble):
    name = "anthropic"
    LIMIT_NAMES: ClassVar[dict[str, str]] = {
        "rpm": "requests",
        "itpm": "input_tokens",
        "otpm": "output_tokens",
    }
    DEFAULT_LIMITS: ClassVar[dict[str, int]] = {
        "requests": 500,
        "input_tokens": 200_000,
        "output_tokens": 40_000,
    }
    # USD per million tokens, from docs.anthropic.com's pricing page (stored copy, about
    # August 2025: Claude Opus 4.1 its newest); batch is half, as that page lists
    PRICES_DATE = "2025-08"
    PRICES: ClassVar[dict[str, Price]] = {
        "claude-3-haiku": Price(input=0.25, output=1.25),
        "claude-3-5-haiku": Price(input=0.80, output=4.00),
        "claude-3-5-sonnet": Price(input=3.00, output=15.00),
        "claude-3-7-sonnet": Price(input=3.00, output=15.00),
        "claude-sonnet-4": Price(input=3.00, output=15.00),
        "claude-opus-4": Price(input=15.00, output=75.00),
    }
    DEFAULT_PRICE = Price(input=0.80, output=4.00)
    RETENTION = 29 * 86_400.0  # results are kept 29 days from a batch's creation
    MAX_REQUESTS = 100_000

    def rate_limited(self, wait: float) -> Response:
        return _error(
            429,
            "rate_limit_error",
            "Number of request tokens has exceeded your per-minute rate limit",
            {"retry-after": "1"},
        )

    def unavailable(self) -> Response:
        return _error(529, "overloaded_error", "Overloaded")

    def _admit(self, request: Request) -> None:
        if request.headers.get("x-api-key") != self.key:
            raise self.refuse("auth", _error(401, "authentication_error", "invalid x-api-key"))
        if not request.headers.get("anthropic-version"):
            raise _bad("anthropic-version: header is required")

    async def _json(self, request: Request) -> dict[str, Any]:
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            raise _bad("There was an issue with your request body: it is not valid JSON") from None
        if not isinstance(body, dict):
            raise _bad("The request body must be a JSON object")
        return body

    def headers(self, model: str) -> dict[str, str]:
        """The rate-limit headers of an answer for ``model``."""
        standing = self.standing(model)
        now = self.epoch()
        out = {}
        for kind, name in (
            ("requests", "requests"),
            ("input_tokens", "input-tokens"),
            ("output_tokens", "output-tokens"),
        ):
            limit, left, reset = standing[kind]
            out[f"anthropic-ratelimit-{name}-limit"] = str(limit)
            out[f"anthropic-ratelimit-{name}-remaining"] = str(left)
            out[f"anthropic-ratelimit-{name}-reset"] = rfc3339(now + reset)
        tighter = min(("input_tokens", "output_tokens"), key=lambda kind: standing[kind][1])
        limit, left, reset = standing[tighter]
        out |= {
            "anthropic-ratelimit-tokens-limit": str(limit),
            "anthropic-ratelimit-tokens-remaining": str(left),
            "anthropic-ratelimit-tokens-reset": rfc3339(now + reset),
        }
        return out

    # -- messages --------------------------------------------------------------------------

    def read(self, body: Mapping[str, Any], *, counting: bool = False) -> Ask:
        """A Messages request read and checked (``Refusal`` 400 in Anthropic's words);
        ``counting``: for count_tokens, which takes no ``max_tokens``."""
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise _bad("model: Field required")
        max_tokens = body.get("max_tokens")
        if counting:
            max_tokens = 1
        elif max_tokens is None:
            raise _bad("max_tokens: Field required")
        elif isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise _bad("max_tokens: Input should be greater than or equal to 1")
        raw = body.get("messages")
        if not isinstance(raw, list) or not raw:
            raise _bad(
                "messages: Field required"
                if raw is None
                else "messages: at least one message is required"
            )
        messages = []
        system = body.get("system")
        if system is not None:
            messages.append(("system", _text_of(system, "system"), False))
        for index, message in enumerate(raw):
            role = message.get("role") if isinstance(message, dict) else None
            if role not in ("user", "assistant"):
                raise _bad(f"messages.{index}.role: Input should be 'user' or 'assistant'")
            assert isinstance(message, dict)
            messages.append((role, _text_of(message.get("content"), f"messages.{index}"), False))
        temperature = body.get("temperature", 1)
        if not isinstance(temperature, int | float) or not 0 <= temperature <= 1:
            raise _bad("temperature: Input should be less than or equal to 1")
        tool, extra, overhead = self._tool(body)
        return Ask(
            model=model,
            messages=tuple(messages),
            tool=tool,
            max_tokens=max_tokens,
            seed=_answers.digest({k: v for k, v in body.items() if k not in _NOT_ASKED}),
            input_tokens=_tokens.prompt_tokens(messages, extra=extra) + overhead,
        )

    def _tool(self, body: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, str, int]:
        """The tool the answer calls (None: text), the tools' text and tool-use overhead."""
        tools = body.get("tools")
        choice = body.get("tool_choice") or {"type": "auto"}
        if tools is None:
            if body.get("tool_choice"):
                raise _bad("tool_choice: may only be specified while providing tools")
            return None, "", 0
        if not isinstance(tools, list) or not all(
            isinstance(t, dict)
            and isinstance(t.get("name"), str)
            and isinstance(t.get("input_schema"), dict)
            for t in tools
        ):
            raise _bad("tools: each tool needs a name and an input_schema object")
        kind = choice.get("type") if isinstance(choice, dict) else None
        extra = orjson.dumps(tools).decode()
        if kind == "tool":
            named = [t for t in tools if t["name"] == choice.get("name")]
            if not named:
                raise _bad(f"tool_choice.name: no tool named {choice.get('name')!r} in tools")
            return named[0], extra, TOOL_PROMPT["forced"]
        if kind == "any" and tools:
            return tools[0], extra, TOOL_PROMPT["forced"]
        if kind not in ("auto", "none", "any"):
            raise _bad("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
        return None, extra, TOOL_PROMPT["auto"]

    def input_tokens(self, body: Mapping[str, Any]) -> int:
        """The input tokens this double counts for a request body (as ``usage`` says)."""
        return self.read(body, counting=True).input_tokens

    def complete(self, ask: Ask, *, batch: bool = False) -> dict[str, Any]:
        """The message answering ``ask``, counted in the ledger."""
        words = _answers.keywords(" ".join(t for role, t, _ in ask.messages if role == "user"))
        content: dict[str, Any]
        if ask.tool is not None:
            schema = ask.tool["input_schema"]
            good = _answers.value(schema, ask.seed, words)
            given = good
            if self.spoil(ask.seed.hex()):
                given = _answers.spoiled_value(schema, good, ask.seed + b"spoil")
            used = _tokens.count(orjson.dumps(given).decode())
            stop = "tool_use"
            if used > ask.max_tokens:
                used, stop, given = ask.max_tokens, "max_tokens", {}
            content = {
                "type": "tool_use",
                "id": f"toolu_{uuid.uuid4().hex[:24]}",
                "name": ask.tool["name"],
                "input": given,
            }
        else:
            tokens = _tokens.pieces(_answers.line(ask.seed, ask.last_user))
            stop = "end_turn"
            if len(tokens) > ask.max_tokens:
                tokens, stop = tokens[: ask.max_tokens], "max_tokens"
            used = len(tokens)
            content = {"type": "text", "text": "".join(tokens)}
        self.record(ask.model, ask.input_tokens, used, batch=batch, item=ask.seed.hex())
        return {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": ask.model,
            "content": [content],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": ask.input_tokens,
                "output_tokens": used,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }

    async def messages(self, request: Request) -> Response:
        self._admit(request)
        ask = self.read(await self._json(request))
        if self.broke():
            raise self.refuse(
                "credits",
                _error(
                    400,
                    "invalid_request_error",
                    "Your credit "
                    "balance is too low to access the Anthropic API. Please go to "
                    "Plans & Billing to upgrade or purchase credits.",
                ),
            )
        costs = {"requests": 1, "input_tokens": ask.input_tokens, "output_tokens": ask.max_tokens}
        refused = self.admit(ask.model, costs)
        if refused is not None:
            return self._limited(ask.model, *refused, costs)
        body = self.complete(ask)
        self.give_back(ask.model, "output_tokens", ask.max_tokens - body["usage"]["output_tokens"])
        return JSONResponse(
            body, headers=self.headers(ask.model) | {"request-id": f"req_{uuid.uuid4().hex[:24]}"}
        )

    def _limited(self, model: str, kind: str, wait: float, costs: Mapping[str, int]) -> Response:
        limit = self.standing(model)[kind][0]
        what = {
            "requests": "requests",
            "input_tokens": "input tokens",
            "output_tokens": "output tokens",
        }[kind]
        headers = self.headers(model)
        if math.isinf(wait):
            return _error(
                429,
                "rate_limit_error",
                f"This request asks for {costs[kind]:,} "
                f"{what}, more than your organization's rate limit of {limit:,} "
                f"{what} per minute for {model} allows.",
                headers,
            )
        headers["retry-after"] = str(max(1, math.ceil(wait)))
        return _error(
            429,
            "rate_limit_error",
            f"This request would exceed the rate limit for "
            f"your organization of {limit:,} {what} per minute for {model}. For "
            "details, refer to: https://docs.claude.com/en/api/rate-limits.",
            headers,
        )

    async def count_tokens(self, request: Request) -> Response:
        self._admit(request)
        return JSONResponse({"input_tokens": self.input_tokens(await self._json(request))})

    # -- message batches -------------------------------------------------------------------

    async def create_batch(self, request: Request) -> Response:
        self._admit(request)
        body = await self._json(request)
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            raise _bad(
                "requests: Field required"
                if requests is None
                else "requests: List should have at least 1 item"
            )
        if len(requests) > self.MAX_REQUESTS:
            raise _bad(f"requests: List should have at most {self.MAX_REQUESTS} items")
        seen: set[str] = set()
        for index, item in enumerate(requests):
            custom_id = item.get("custom_id") if isinstance(item, dict) else None
            if not isinstance(custom_id, str) or not _CUSTOM_ID.match(custom_id):
                raise _bad(f"requests.{index}.custom_id: 1 to 64 letters, digits, - or _")
            if custom_id in seen:
                raise _bad(f"requests.{index}.custom_id: Duplicate custom_id {custom_id!r}")
            if not isinstance(item.get("params"), dict):
                raise _bad(f"requests.{index}.params: Field required")
            seen.add(custom_id)
        batch_id = f"msgbatch_{uuid.uuid4().hex[:24]}"
        with self.lock:
            self.jobs[batch_id] = {
                "id": batch_id,
                "at": self.now(),
                "epoch": self.epoch(),
                "delay": self.batch_delay,
                "requests": requests,
                "done": None,
                "cancelled_at": None,
                "results": None,
                "counts": None,
            }
        return JSONResponse(self._batch_object(self.jobs[batch_id], request))

    def _ended(self, job: dict[str, Any]) -> float | None:
        """The double's time the batch ended (computing its results then), or None."""
        now = self.now()
        if job["cancelled_at"] is not None and now > job["cancelled_at"]:
            end = job["cancelled_at"]
        elif now - job["at"] >= min(job["delay"], self.BATCH_WINDOW):
            end = job["at"] + min(job["delay"], self.BATCH_WINDOW)
        else:
            return None
        self._finish(job)
        return float(end)

    def _finish(self, job: dict[str, Any]) -> None:
        with self.lock:
            if job["done"] is not None:
                return
            job["done"] = "running"
        cancelled = job["cancelled_at"] is not None
        expired = not cancelled and job["delay"] > self.BATCH_WINDOW
        lines = []
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        for item in job["requests"]:
            result: dict[str, Any]
            if cancelled or expired:
                result = {"type": "canceled" if cancelled else "expired"}
            else:
                try:
                    message = self.complete(self.read(item["params"]), batch=True)
                    result = {"type": "succeeded", "message": message}
                except Refusal as refusal:
                    result = {
                        "type": "errored",
                        "error": orjson.loads(bytes(refusal.response.body)),
                    }
            counts[
                {
                    "succeeded": "succeeded",
                    "errored": "errored",
                    "canceled": "canceled",
                    "expired": "expired",
                }[result["type"]]
            ] += 1
            lines.append(orjson.dumps({"custom_id": item["custom_id"], "result": result}))
        with self.lock:
            job.update(done="ended", results=b"\n".join(lines) + b"\n", counts=counts)

    def _batch_object(self, job: dict[str, Any], request: Request) -> dict[str, Any]:
        ended = self._ended(job)
        start, at = job["epoch"], job["at"]
        archived = self.now() - at > self.RETENTION
        if ended is not None:
            status, counts = "ended", dict(job["counts"])
        else:
            status = "canceling" if job["cancelled_at"] is not None else "in_progress"
            counts = {
                "processing": len(job["requests"]),
                "succeeded": 0,
                "errored": 0,
                "canceled": 0,
                "expired": 0,
            }
        url = str(request.url).split("?", 1)[0]
        base = url[: url.rfind("/v1/messages/batches")]
        return {
            "id": job["id"],
            "type": "message_batch",
            "processing_status": status,
            "request_counts": counts,
            "ended_at": rfc3339(start + ended - at) if ended is not None else None,
            "created_at": rfc3339(start),
            "expires_at": rfc3339(start + self.BATCH_WINDOW),
            "archived_at": rfc3339(start + self.RETENTION) if archived else None,
            "cancel_initiated_at": rfc3339(start + job["cancelled_at"] - at)
            if job["cancelled_at"] is not None
            else None,
            "results_url": f"{base}/v1/messages/batches/{job['id']}/results"
            if ended is not None and not archived
            else None,
        }

    def _job(self, request: Request) -> dict[str, Any]:
        self._admit(request)
        batch_id = request.path_params["batch_id"]
        with self.lock:
            job = self.jobs.get(batch_id)
        if job is None:
            raise Refusal(_error(404, "not_found_error", f"No batch found with id {batch_id!r}"))
        return job

    def get_batch(self, request: Request) -> Response:
        return JSONResponse(self._batch_object(self._job(request), request))

    def cancel_batch(self, request: Request) -> Response:
        job = self._job(request)
        if self._ended(job) is None and job["cancelled_at"] is None:
            with self.lock:
                job["cancelled_at"] = self.now()
        return JSONResponse(self._batch_object(job, request))

    def results(self, request: Request) -> Response:
        job = self._job(request)
        if self._ended(job) is None:
            raise _bad(
                f"Message Batch {job['id']} has not yet ended; its results are not available yet."
            )
        if self.now() - job["at"] > self.RETENTION:
            raise Refusal(
                _error(
                    404,
                    "not_found_error",
                    f"The results of {job['id']} are no longer available (archived).",
                )
            )
        return Response(job["results"], media_type="application/x-jsonl")

    def routes(self) -> list[BaseRoute]:
        batches = "/v1/messages/batches"
        return [
            self.route("/v1/messages", self.messages, "messages", "POST"),
            self.route("/v1/messages/count_tokens", self.count_tokens, "count_tokens", "POST"),
            self.route(batches, self.create_batch, "batches", "POST"),
            self.route(f"{batches}/{{batch_id}}", self.get_batch, "batch", "GET"),
            self.route(f"{batches}/{{batch_id}}/cancel", self.cancel_batch, "cancel", "POST"),
            self.route(f"{batches}/{{batch_id}}/results", self.results, "results", "GET"),
        ]
