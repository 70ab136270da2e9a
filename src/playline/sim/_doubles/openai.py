"""OpenAI's API (and the many servers compatible with it), as its documentation describes:
the chat completions reference (platform.openai.com/docs/api-reference/chat/create), the
structured outputs guide (/docs/guides/structured-outputs), the rate limits guide
(/docs/guides/rate-limits, "rate limits in headers" and "error mitigation"), the error codes
guide, the Batch guide and reference (/docs/guides/batch, /docs/api-reference/batch and
/files) and the pricing page (/docs/pricing). Read from stored copies: a mirror of
guides/rate-limits.md, community.openai.com threads quoting it, the Batch object as the
reference and its client libraries list it.

- ``POST /v1/chat/completions`` with ``Authorization: Bearer <key>`` (401
  ``invalid_api_key`` otherwise, in OpenAI's words): ``model``, ``messages`` (``role``,
  ``content`` as text or text parts, ``name``), ``temperature`` (0 to 2), ``max_tokens`` or
  ``max_completion_tokens``, ``response_format`` ``{"type": "text" | "json_object" |
  "json_schema", "json_schema": {"name", "schema", "strict"}}``; answers ``{"id":
  "chatcmpl-...", "object": "chat.completion", "created", "model", "choices": [{"index": 0,
  "message": {"role": "assistant", "content", "refusal": null}, "logprobs": null,
  "finish_reason": "stop" | "length"}], "usage": {"prompt_tokens", "completion_tokens",
  "total_tokens"}, "system_fingerprint"}``. ``json_object`` needs the word "json" in the
  messages (400 otherwise, as documented); a ``strict`` schema needs ``additionalProperties:
  false`` and every property required in each object (400 ``invalid_json_schema``).
- Limits per model (defaults 500 RPM and 200,000 TPM, gpt-4o-mini's at usage tier 1): a
  request counts its prompt tokens plus ``max_tokens`` (``DEFAULT_MAX_TOKENS`` when it sets
  none) against TPM. The guide says the limit is "calculated as the maximum of max_tokens and
  the estimated number of tokens based on the character count of your request"; OpenAI's
  staff explain that the estimate is added to max_tokens, and it is not given back after
  the answer, so a client must not hand back what the answer did not use. Every answer
  carries ``x-ratelimit-limit-requests``, ``x-ratelimit-limit-tokens``,
  ``x-ratelimit-remaining-requests``, ``x-ratelimit-remaining-tokens``,
  ``x-ratelimit-reset-requests`` and ``x-ratelimit-reset-tokens`` (a duration until the
  bucket is full: ``12ms``, ``1.5s``, ``6m0s``); past a limit ``429 {"error": {"message":
  "Rate limit reached for <model> ... on tokens per min (TPM): Limit L, Used U, Requested R.
  Please try again in 1.2s. ...", "type": "tokens" | "requests", "param": null, "code":
  "rate_limit_exceeded"}}`` with ``retry-after`` (seconds) and ``retry-after-ms``. A request
  larger than the limit itself is refused 429 "Request too large", with no ``retry-after``.
- ``POST /v1/files`` (multipart: ``purpose``, ``file``), ``GET /v1/files/{id}`` and ``GET
  /v1/files/{id}/content``; ``POST /v1/batches`` ``{"input_file_id", "endpoint":
  "/v1/chat/completions", "completion_window": "24h", "metadata"}``, ``GET
  /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``. The input is JSONL of ``{"custom_id",
  "method": "POST", "url": "/v1/chat/completions", "body"}``, one model for all. A batch is
  ``validating`` for its first 5% of ``batch_delay``, then ``in_progress`` (its counts
  growing), ``finalizing`` for the last 10%, then ``completed`` with ``output_file_id``
  (JSONL of ``{"id", "custom_id", "response": {"status_code": 200, "request_id", "body"},
  "error": null}``) and ``error_file_id`` (requests the API refuses: ``status_code`` 400 and
  the error body), or ``failed`` (``errors.data``: a line that is not JSON, without
  ``custom_id``, a ``custom_id`` twice, another url or model), or ``expired`` when the delay
  passes the 24 h window (each request ``batch_expired`` in the error file), or
  ``cancelled``. The answers are computed once, when it completes, charged at half price;
  polling again reads the same files. Files are kept ``RETENTION`` (30 days), then 404.
- Faults: ``storm`` answers 429 ``rate_limit_exceeded``; ``down`` 503 ``server_error``;
  ``credits`` (dollars) spent: 429 ``insufficient_quota``.

What the documentation leaves open, and what this double assumes: ``model`` is echoed as
asked (OpenAI answers a dated snapshot name); any model name is served (compatible servers
name their own), at the price of its longest prefix in the table, else gpt-4o-mini's; the
schema (or ``json_object``'s instruction) counts as prompt text; ``n``, ``tools``, ``seed``,
``stop`` and streaming are not served (``stream: true`` is refused 400).
"""

from __future__ import annotations

import email.parser
import email.policy
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from . import _answers, _tokens
from ._base import Refusal
from ._llm import LlmDouble, Price

__all__ = ["OpenAIDouble"]

# parameters that do not change the answer (max_tokens only cuts it)
_NOT_ASKED = frozenset({"max_tokens", "max_completion_tokens", "user", "metadata", "store"})
_PURPOSES = frozenset({"batch", "assistants", "fine-tune", "vision", "user_data", "evals"})


def _error(
    status: int,
    message: str,
    type: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body = {"error": {"message": message, "type": type, "param": param, "code": code}}
    return JSONResponse(body, status, dict(headers or {}))


def _bad(message: str, code: str | None = None, param: str | None = None) -> Refusal:
    return Refusal(_error(400, message, code=code, param=param))


def duration(seconds: float) -> str:
    """A wait as OpenAI's reset headers say it: ``12ms``, ``1.5s``, ``6m0s``."""
    if seconds < 1:
        return f"{max(0, math.ceil(seconds * 1000))}ms"
    if seconds < 60:
        return f"{math.ceil(seconds * 1000) / 1000:g}s"
    minutes, rest = divmod(math.ceil(seconds), 60)
    return f"{minutes}m{rest}s"


@dataclass(frozen=True, kw_only=True)
class Chat:
    """A chat completions request, read."""

    model: str
    messages: tuple[tuple[str, str, bool], ...]  # (role, text, named)
    mode: str  # "text", "json_object" or "json_schema"
    schema: Mapping[str, Any] | None
    max_tokens: int | None
    seed: bytes  # digest of everything that changes the answer
    prompt_tokens: int

    @property
    def last_user(self) -> str:
        return next((text for role, text, _ in reversed(self.messages) if role == "user"), "")


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            if isinstance(part, dict) and part.get("type") == "text"
            else orjson.dumps(part).decode()
            for part in content
        )
    raise _bad(
        f"Invalid type for 'messages.content': expected a string or an array, "
        f"but got {type(content).__name__} instead.",
        "invalid_type",
    )


def _strict_faults(schema: Any, path: tuple[str, ...] = ()) -> str | None:
    """What a strict schema lacks (every object closed, every property required)."""
    if isinstance(schema, list):
        return next((f for i, s in enumerate(schema) if (f := _strict_faults(s, path))), None)
    if not isinstance(schema, dict):
        return None
    properties = schema.get("properties")
    if schema.get("type") == "object" or isinstance(properties, dict):
        where = f"In context={path!r}, "
        if schema.get("additionalProperties") is not False:
            return where + "'additionalProperties' is required to be supplied and to be false."
        missing = [p for p in properties or {} if p not in schema.get("required", [])]
        if missing:
            return (
                where + "'required' is required to be supplied and to be an array "
                f"including every key in properties. Missing '{missing[0]}'."
            )
    for key, sub in schema.items():
        if isinstance(sub, dict | list):
            found = _strict_faults(sub, (*path, key))
            if found:
                return found
    return None


class OpenAIDouble(LlmDouble):
    name = "openai"
    LIMIT_NAMES: ClassVar[dict[str, str]] = {"rpm": "requests", "tpm": "tokens"}
    DEFAULT_LIMITS: ClassVar[dict[str, int]] = {"requests": 500, "tokens": 200_000}
    DEFAULT_MAX_TOKENS = 4096  # reserved against TPM by a request that sets no max_tokens
    # USD per million tokens, standard tier, from openai.com's pricing page as quoted by
    # pages dated April to June 2026 (aumiqx.com, aimodelcalc, tokenmath.io); batch is half
    PRICES_DATE = "2026-06"
    PRICES: ClassVar[dict[str, Price]] = {
        "gpt-4o-mini": Price(input=0.15, output=0.60),
        "gpt-4o": Price(input=2.50, output=10.00),
        "gpt-4.1-nano": Price(input=0.10, output=0.40),
        "gpt-4.1-mini": Price(input=0.40, output=1.60),
        "gpt-4.1": Price(input=2.00, output=8.00),
    }
    DEFAULT_PRICE = Price(input=0.15, output=0.60)
    MAX_REQUESTS = 50_000  # requests in one batch file

    # -- OpenAI's own answers --------------------------------------------------------------

    def rate_limited(self, wait: float) -> Response:
        return _error(
            429,
            "Rate limit reached: too many requests right now. Please try again in 1s.",
            "requests",
            "rate_limit_exceeded",
            headers={"retry-after": "1", "retry-after-ms": "1000"},
        )

    def unavailable(self) -> Response:
        return _error(503, "The server is overloaded or not ready yet.", "server_error")

    def _admit(self, request: Request) -> None:
        header = request.headers.get("authorization", "")
        if not header:
            raise self.refuse(
                "auth",
                _error(
                    401,
                    "You didn't provide an API key. You need to "
                    "provide your API key in an Authorization header using Bearer "
                    "auth (i.e. Authorization: Bearer YOUR_KEY).",
                ),
            )
        given = header.removeprefix("Bearer ").strip()
        if given != self.key:
            shown = f"{given[:3]}***{given[-4:]}" if len(given) > 8 else "***"
            raise self.refuse(
                "auth",
                _error(
                    401,
                    f"Incorrect API key provided: {shown}. You "
                    "can find your API key at https://platform.openai.com/account/"
                    "api-keys.",
                    code="invalid_api_key",
                ),
            )

    async def _json(self, request: Request) -> dict[str, Any]:
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            raise _bad(
                "We could not parse the JSON body of your request. (HINT: This likely "
                "means you aren't using your HTTP library correctly.)"
            ) from None
        if not isinstance(body, dict):
            raise _bad("The body of your request must be a JSON object.")
        return body

    def headers(self, model: str) -> dict[str, str]:
        """The rate-limit headers of an answer for ``model``."""
        standing = self.standing(model)
        out = {}
        for kind in ("requests", "tokens"):
            limit, left, reset = standing[kind]
            out[f"x-ratelimit-limit-{kind}"] = str(limit)
            out[f"x-ratelimit-remaining-{kind}"] = str(left)
            out[f"x-ratelimit-reset-{kind}"] = duration(reset)
        return out

    # -- chat completions ------------------------------------------------------------------

    def read(self, body: Mapping[str, Any]) -> Chat:
        """A chat request read and checked (``Refusal`` 400 in OpenAI's words)."""
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise _bad("you must provide a model parameter")
        raw = body.get("messages")
        if raw is None:
            raise _bad(
                "Missing required parameter: 'messages'.", "missing_required_parameter", "messages"
            )
        if not isinstance(raw, list) or not raw:
            raise _bad(
                "Invalid 'messages': empty array. Expected an array with minimum length "
                "1, but got an empty array instead.",
                "empty_array",
                "messages",
            )
        messages = []
        for index, message in enumerate(raw):
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                raise _bad(
                    f"Missing required parameter: 'messages[{index}].role'.",
                    "missing_required_parameter",
                    f"messages[{index}].role",
                )
            text = _text_of(message.get("content"))
            if message.get("tool_calls"):
                text += orjson.dumps(message["tool_calls"]).decode()
            messages.append((message["role"], text, bool(message.get("name"))))
        if body.get("stream"):
            raise _bad("The simulator does not stream: leave 'stream' out.", param="stream")
        temperature = body.get("temperature", 1)
        if not isinstance(temperature, int | float) or not 0 <= temperature <= 2:
            raise _bad(
                f"Invalid 'temperature': expected a number from 0 to 2, but got "
                f"{temperature!r} instead.",
                "decimal_above_max_value",
                "temperature",
            )
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise _bad(
                f"Invalid 'max_tokens': integer below minimum value. Expected a value "
                f">= 1, but got {max_tokens!r} instead.",
                "integer_below_min_value",
                "max_tokens",
            )
        mode, schema, extra = self._format(body.get("response_format"), messages)
        return Chat(
            model=model,
            messages=tuple(messages),
            mode=mode,
            schema=schema,
            max_tokens=max_tokens,
            seed=_answers.digest({k: v for k, v in body.items() if k not in _NOT_ASKED}),
            prompt_tokens=_tokens.prompt_tokens(messages, extra=extra),
        )

    def _format(
        self, fmt: Any, messages: Sequence[tuple[str, str, bool]]
    ) -> tuple[str, Mapping[str, Any] | None, str]:
        """The answer's form: mode, schema, and the text it adds to the prompt."""
        if fmt is None or (isinstance(fmt, dict) and fmt.get("type") == "text"):
            return "text", None, ""
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        if kind == "json_object":
            if not any("json" in text.casefold() for _, text, _ in messages):
                raise _bad(
                    "'messages' must contain the word 'json' in some form, to use "
                    "'response_format' of type 'json_object'.",
                    param="messages",
                )
            return "json_object", None, ""
        if kind != "json_schema":
            raise _bad(
                f"Invalid value: {kind!r}. Supported values are: 'text', 'json_object' "
                "and 'json_schema'.",
                "invalid_value",
                "response_format.type",
            )
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict):
            raise _bad(
                "Missing required parameter: 'response_format.json_schema'.",
                "missing_required_parameter",
                "response_format.json_schema",
            )
        if not isinstance(spec.get("name"), str) or not spec["name"]:
            raise _bad(
                "Missing required parameter: 'response_format.json_schema.name'.",
                "missing_required_parameter",
                "response_format.json_schema.name",
            )
        schema = spec.get("schema", {})
        if not isinstance(schema, dict):
            raise _bad(
                "Invalid 'response_format.json_schema.schema': expected an object.",
                "invalid_type",
                "response_format.json_schema.schema",
            )
        if spec.get("strict") and (fault := _strict_faults(schema)):
            raise _bad(
                f"Invalid schema for response_format '{spec['name']}': {fault}",
                "invalid_json_schema",
                "response_format",
            )
        return "json_schema", schema, orjson.dumps(schema).decode()

    def reserve(self, chat: Chat) -> int:
        """The tokens a request reserves against TPM: its prompt and its ``max_tokens``."""
        return chat.prompt_tokens + (chat.max_tokens or self.DEFAULT_MAX_TOKENS)

    def prompt_tokens(self, body: Mapping[str, Any]) -> int:
        """The prompt tokens this double counts for a request body (as ``usage`` says)."""
        return self.read(body).prompt_tokens

    def complete(self, chat: Chat, *, batch: bool = False) -> dict[str, Any]:
        """The completion for ``chat``, counted in the ledger."""
        words = _answers.keywords(" ".join(t for role, t, _ in chat.messages if role == "user"))
        if chat.mode == "json_schema":
            assert chat.schema is not None
            good = _answers.value(chat.schema, chat.seed, words)
            text = orjson.dumps(good).decode()
            if self.spoil(chat.seed.hex()):
                text = _answers.spoiled(chat.schema, good, chat.seed + b"spoil")
        elif chat.mode == "json_object":
            text = orjson.dumps({"answer": _answers.line(chat.seed, chat.last_user)}).decode()
        else:
            text = _answers.line(chat.seed, chat.last_user)
        tokens = _tokens.pieces(text)
        finish = "stop"
        if chat.max_tokens is not None and len(tokens) > chat.max_tokens:
            tokens, finish = tokens[: chat.max_tokens], "length"
            text = "".join(tokens)
        self.record(chat.model, chat.prompt_tokens, len(tokens), batch=batch, item=chat.seed.hex())
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(self.epoch()),
            "model": chat.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": finish,
                }
            ],
            "usage": {
                "prompt_tokens": chat.prompt_tokens,
                "completion_tokens": len(tokens),
                "total_tokens": chat.prompt_tokens + len(tokens),
            },
            "system_fingerprint": "fp_playline_sim",
        }

    async def chat(self, request: Request) -> Response:
        self._admit(request)
        chat = self.read(await self._json(request))
        if self.broke():
            raise self.refuse(
                "credits",
                _error(
                    429,
                    "You exceeded your current quota, please check your plan and billing details.",
                    "insufficient_quota",
                    "insufficient_quota",
                ),
            )
        costs = {"requests": 1, "tokens": self.reserve(chat)}
        refused = self.admit(chat.model, costs)
        if refused is not None:
            return self._limited(chat.model, *refused, costs)
        body = self.complete(chat)
        return JSONResponse(
            body, headers=self.headers(chat.model) | {"x-request-id": f"req_{uuid.uuid4().hex}"}
        )

    def _limited(self, model: str, kind: str, wait: float, costs: Mapping[str, int]) -> Response:
        limit, left, _ = self.standing(model)[kind]
        unit = "tokens per min (TPM)" if kind == "tokens" else "requests per min (RPM)"
        headers = self.headers(model)
        if math.isinf(wait):
            return _error(
                429,
                f"Request too large for {model} on {unit}: Limit {limit}, "
                f"Requested {costs[kind]}. The input or output tokens must be "
                "reduced in order to run successfully.",
                kind,
                "rate_limit_exceeded",
                headers=headers,
            )
        headers |= {
            "retry-after": str(max(1, math.ceil(wait))),
            "retry-after-ms": str(math.ceil(wait * 1000)),
        }
        return _error(
            429,
            f"Rate limit reached for {model} in organization org-playline-sim "
            f"on {unit}: Limit {limit}, Used {limit - left}, Requested {costs[kind]}. "
            f"Please try again in {duration(wait)}. Visit https://platform.openai."
            "com/account/rate-limits to learn more.",
            kind,
            "rate_limit_exceeded",
            headers=headers,
        )

    # -- files -----------------------------------------------------------------------------

    async def upload(self, request: Request) -> Response:
        self._admit(request)
        kind = request.headers.get("content-type", "")
        if not kind.startswith("multipart/form-data"):
            raise _bad("Invalid request: a file upload is multipart/form-data.")
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + kind.encode() + b"\r\n\r\n" + await request.body()
        )
        fields: dict[str, tuple[str | None, bytes]] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            if isinstance(name, str) and isinstance(payload, bytes):
                fields[name] = (part.get_filename(), payload)
        purpose = fields.get("purpose", (None, b""))[1].decode(errors="replace").strip()
        if "file" not in fields:
            raise _bad("Missing required parameter: 'file'.", "missing_required_parameter", "file")
        if purpose not in _PURPOSES:
            raise _bad(f"Invalid value for 'purpose': {purpose!r}.", "invalid_value", "purpose")
        filename, content = fields["file"]
        return JSONResponse(self.store_file(content, filename or "upload.jsonl", purpose))

    def store_file(self, content: bytes, filename: str, purpose: str) -> dict[str, Any]:
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        file: dict[str, Any] = {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": int(self.epoch()),
            "expires_at": None,
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
            "status_details": None,
        }
        with self.lock:
            self.files[file_id] = {"meta": file, "content": content, "at": self.now()}
        return file

    def _file(self, request: Request) -> dict[str, Any]:
        self._admit(request)
        file_id = request.path_params["file_id"]
        with self.lock:
            found = self.files.get(file_id)
            if found is not None and self.now() - found["at"] > self.RETENTION:
                del self.files[file_id]  # kept no longer
                found = None
        if found is None:
            raise Refusal(_error(404, f"No such File object: {file_id}", param="id"))
        return found

    def file_meta(self, request: Request) -> Response:
        return JSONResponse(self._file(request)["meta"])

    def file_content(self, request: Request) -> Response:
        return Response(self._file(request)["content"], media_type="application/octet-stream")

    # -- batches ---------------------------------------------------------------------------

    async def create_batch(self, request: Request) -> Response:
        self._admit(request)
        body = await self._json(request)
        for field in ("input_file_id", "endpoint", "completion_window"):
            if not isinstance(body.get(field), str):
                raise _bad(
                    f"Missing required parameter: '{field}'.", "missing_required_parameter", field
                )
        if body["endpoint"] != "/v1/chat/completions":
            raise _bad(
                f"Invalid value: '{body['endpoint']}'. The simulator's batches serve "
                "'/v1/chat/completions' only.",
                "invalid_value",
                "endpoint",
            )
        if body["completion_window"] != "24h":
            raise _bad(
                f"Invalid value: '{body['completion_window']}'. Supported values are: '24h'.",
                "invalid_value",
                "completion_window",
            )
        with self.lock:
            file = self.files.get(body["input_file_id"])
        if file is None:
            raise Refusal(
                _error(404, f"No such File object: {body['input_file_id']}", param="input_file_id")
            )
        if file["meta"]["purpose"] != "batch":
            raise _bad("The input file must have purpose 'batch'.", param="input_file_id")
        requests, errors = self._lines(file["content"])
        now = self.now()
        batch_id = f"batch_{uuid.uuid4().hex[:24]}"
        with self.lock:
            self.jobs[batch_id] = {
                "id": batch_id,
                "at": now,
                "epoch": self.epoch(),
                "delay": self.batch_delay,
                "body": body,
                "requests": requests,
                "errors": errors,
                "done": None,
                "cancelled_at": None,
                "output": None,
                "error": None,
            }
        return JSONResponse(self._batch_object(self.jobs[batch_id]))

    def _lines(self, content: bytes) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The batch file's requests, and what makes it fail validation."""
        requests: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        seen: set[str] = set()
        models: set[str] = set()

        def fault(code: str, message: str, line: int, param: str | None = None) -> None:
            errors.append({"code": code, "message": message, "param": param, "line": line})

        for number, raw in enumerate(content.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                item = orjson.loads(raw)
            except orjson.JSONDecodeError:
                fault("invalid_json_line", "This line is not parseable as valid JSON.", number)
                continue
            if not isinstance(item, dict) or not isinstance(item.get("custom_id"), str):
                fault(
                    "missing_required_parameter",
                    "Missing required parameter: 'custom_id'.",
                    number,
                    "custom_id",
                )
                continue
            if item["custom_id"] in seen:
                fault(
                    "duplicate_custom_id",
                    "The custom_id for this request is a duplicate of another request.",
                    number,
                    "custom_id",
                )
            if item.get("url") != "/v1/chat/completions" or item.get("method") != "POST":
                fault(
                    "mismatched_endpoint",
                    "The provided method and url do not match the "
                    "batch's endpoint: POST /v1/chat/completions.",
                    number,
                    "url",
                )
            body = item.get("body")
            model = body.get("model") if isinstance(body, dict) else None
            models.add(str(model))
            if len(models) > 1:
                fault(
                    "mismatched_model",
                    "The provided model does not match the model of the "
                    "other requests in this batch.",
                    number,
                    "body.model",
                )
            seen.add(item["custom_id"])
            requests.append(item)
        if not requests and not errors:
            fault("empty_file", "The batch input file is empty.", 0)
        if len(requests) > self.MAX_REQUESTS:
            fault("too_many_requests", f"A batch holds at most {self.MAX_REQUESTS:,} requests.", 0)
        return requests, errors[:1000]

    def _status(self, job: dict[str, Any]) -> str:
        """The batch's status now; its answers are computed (and charged) the first time it
        is seen completed."""
        elapsed = self.now() - job["at"]
        delay = job["delay"]
        if job["cancelled_at"] is not None:
            return "cancelled" if self.now() > job["cancelled_at"] else "cancelling"
        if elapsed < delay * 0.05:
            return "validating"
        if job["errors"]:
            return "failed"
        if delay > self.BATCH_WINDOW and elapsed >= self.BATCH_WINDOW:
            self._finish(job, expired=True)
            return "expired"
        if elapsed < delay * 0.9:
            return "in_progress"
        if elapsed < delay:
            return "finalizing"
        self._finish(job, expired=False)
        return "completed"

    def _finish(self, job: dict[str, Any], *, expired: bool) -> None:
        with self.lock:
            if job["done"] is not None:
                return
            job["done"] = "running"
        outputs: list[bytes] = []
        failures: list[bytes] = []
        for item in job["requests"]:
            request_id = f"req_{uuid.uuid4().hex}"
            line = {"id": f"batch_req_{uuid.uuid4().hex[:24]}", "custom_id": item["custom_id"]}
            if expired:
                failures.append(
                    orjson.dumps(
                        {
                            **line,
                            "response": None,
                            "error": {
                                "code": "batch_expired",
                                "message": "This request could not be executed "
                                "before the completion window expired.",
                            },
                        }
                    )
                )
                continue
            try:
                body = self.complete(self.read(item["body"]), batch=True)
            except Refusal as refusal:
                answer = {
                    "status_code": refusal.response.status_code,
                    "request_id": request_id,
                    "body": orjson.loads(bytes(refusal.response.body)),
                }
                failures.append(orjson.dumps({**line, "response": answer, "error": None}))
                continue
            answer = {"status_code": 200, "request_id": request_id, "body": body}
            outputs.append(orjson.dumps({**line, "response": answer, "error": None}))
        name = job["id"]
        output = (
            self.store_file(b"\n".join(outputs) + b"\n", f"{name}_output.jsonl", "batch_output")
            if outputs
            else None
        )
        error = (
            self.store_file(b"\n".join(failures) + b"\n", f"{name}_error.jsonl", "batch_output")
            if failures
            else None
        )
        with self.lock:
            job.update(
                done="expired" if expired else "completed",
                completed=len(outputs),
                failed=len(failures),
                output=output and output["id"],
                error=error and error["id"],
            )

    def _batch_object(self, job: dict[str, Any]) -> dict[str, Any]:
        status = self._status(job)
        start, delay = job["epoch"], job["delay"]

        def at(fraction: float, reached: bool = True) -> int | None:
            return int(start + delay * fraction) if reached else None

        total = len(job["requests"])
        if job["done"] in ("completed", "expired"):
            counts = {"total": total, "completed": job["completed"], "failed": job["failed"]}
        else:
            share = min(1.0, max(0.0, (self.now() - job["at"]) / delay - 0.05) / 0.85)
            done = math.floor(total * share) if status in ("in_progress", "finalizing") else 0
            counts = {"total": total, "completed": done, "failed": 0}
        cancelled = job["cancelled_at"]
        return {
            "id": job["id"],
            "object": "batch",
            "endpoint": job["body"]["endpoint"],
            "errors": {"object": "list", "data": job["errors"]} if status == "failed" else None,
            "input_file_id": job["body"]["input_file_id"],
            "completion_window": "24h",
            "status": status,
            "output_file_id": job["output"],
            "error_file_id": job["error"],
            "created_at": int(start),
            "in_progress_at": at(0.05, status not in ("validating", "failed")),
            "expires_at": int(start + self.BATCH_WINDOW),
            "finalizing_at": at(0.9, status in ("finalizing", "completed")),
            "completed_at": at(1.0, status == "completed"),
            "failed_at": at(0.05, status == "failed"),
            "expired_at": int(start + self.BATCH_WINDOW) if status == "expired" else None,
            "cancelling_at": int(start + cancelled - job["at"]) if cancelled else None,
            "cancelled_at": int(start + cancelled - job["at"]) if status == "cancelled" else None,
            "request_counts": counts,
            "metadata": job["body"].get("metadata"),
        }

    def _job(self, request: Request) -> dict[str, Any]:
        self._admit(request)
        batch_id = request.path_params["batch_id"]
        with self.lock:
            job = self.jobs.get(batch_id)
        if job is None or self.now() - job["at"] > self.RETENTION:
            raise Refusal(_error(404, f"No batch found with id '{batch_id}'.", param="id"))
        return job

    def get_batch(self, request: Request) -> Response:
        return JSONResponse(self._batch_object(self._job(request)))

    def cancel_batch(self, request: Request) -> Response:
        job = self._job(request)
        status = self._status(job)
        if status not in ("validating", "in_progress", "finalizing"):
            raise _bad(f"Cannot cancel a batch with status '{status}'.")
        with self.lock:
            job["cancelled_at"] = self.now()
        return JSONResponse(self._batch_object(job))

    def routes(self) -> list[BaseRoute]:
        return [
            self.route("/v1/chat/completions", self.chat, "chat", "POST"),
            self.route("/v1/files", self.upload, "files", "POST"),
            self.route("/v1/files/{file_id}", self.file_meta, "file", "GET"),
            self.route("/v1/files/{file_id}/content", self.file_content, "file_content", "GET"),
            self.route("/v1/batches", self.create_batch, "batches", "POST"),
            self.route("/v1/batches/{batch_id}", self.get_batch, "batch", "GET"),
            self.route("/v1/batches/{batch_id}/cancel", self.cancel_batch, "cancel", "POST"),
        ]
