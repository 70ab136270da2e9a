"""The simulator's LLM doubles (``openai``, ``anthropic``) over HTTP on loopback: answers
derived from the prompt (and valid against a schema), token counts and ``max_tokens``, both
providers' rate-limit headers and 429s, a client at the limit meeting none, the faults, the
batch flows, and the ledger's dollars. Time is the doubles' own clock, moved by the tests
(a manual clock, or ``advance`` through the control endpoint): nothing sleeps."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from playline.sim import Simulator, serve
from playline.sim._doubles._answers import validate
from playline.sim._doubles._llm import Bucket, LlmDouble
from playline.sim._doubles._tokens import PER_MESSAGE, PER_REPLY, count, pieces
from playline.sim._doubles.anthropic import AnthropicDouble
from playline.sim._doubles.openai import OpenAIDouble

KEY = "sk-sim-llm-0123456789abcdef"
OPENAI = {"Authorization": f"Bearer {KEY}"}
ANTHROPIC = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "industry": {"type": "string", "enum": ["saas", "hardware", "services", "retail"]},
        "employees": {"type": "integer", "minimum": 1, "maximum": 5000},
        "score": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "b2b": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
        "hq": {"$ref": "#/$defs/place"},
        "parent": {"type": ["string", "null"]},
    },
    "required": ["industry", "employees", "score", "b2b", "tags", "hq", "parent"],
    "additionalProperties": False,
    "$defs": {
        "place": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
            "required": ["city", "country"],
            "additionalProperties": False,
        }
    },
}


class Clock:
    """The doubles' clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with serve(seed=7, latency_ms=0, token=KEY, providers=True) as running:
        yield running


@pytest.fixture
def client(sim: Simulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        yield c


def _double(sim: Simulator, name: str, clock: Clock) -> Iterator[Any]:
    double = sim.double(name)
    assert isinstance(double, LlmDouble)
    before = double.clock
    double.reset()
    double.clock = clock
    yield double
    double.clock = before
    double.reset()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def oa(sim: Simulator, clock: Clock) -> Iterator[OpenAIDouble]:
    yield from _double(sim, "openai", clock)


@pytest.fixture
def an(sim: Simulator, clock: Clock) -> Iterator[AnthropicDouble]:
    yield from _double(sim, "anthropic", clock)


def chat(content: str, **params: Any) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}], **params}


def forced(content: str, **params: Any) -> dict[str, Any]:
    return {
        "model": "claude-3-5-haiku-latest",
        "max_tokens": 400,
        "messages": [{"role": "user", "content": content}],
        "tools": [{"name": "classify", "input_schema": SCHEMA}],
        "tool_choice": {"type": "tool", "name": "classify"},
        **params,
    }


def json_schema(schema: dict[str, Any] = SCHEMA) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "c", "schema": schema, "strict": True}}


def post(client: httpx.Client, body: dict[str, Any]) -> httpx.Response:
    return client.post("/openai/v1/chat/completions", json=body, headers=OPENAI)


def message(client: httpx.Client, body: dict[str, Any]) -> httpx.Response:
    return client.post("/anthropic/v1/messages", json=body, headers=ANTHROPIC)


def content(answer: httpx.Response) -> str:
    assert answer.status_code == 200, answer.text
    text = answer.json()["choices"][0]["message"]["content"]
    assert isinstance(text, str)
    return text


# -- the tokenizer ---------------------------------------------------------------------------


@given(st.text())
def test_the_tokens_join_back_to_the_text(text: str) -> None:
    assert "".join(pieces(text)) == text


def test_the_tokenizer_counts_like_cl100k_on_plain_english() -> None:
    # cl100k_base: "Hello", ",", " world", "!" and "1234567" as "123", "456", "7"
    assert pieces("Hello, world!") == ["Hello", ",", " world", "!"]
    assert count("1234567") == 3
    assert count(" tokenization") == 2
    assert count("The quick brown fox jumps over the lazy dog.") == 10


# -- answers -----------------------------------------------------------------------------


def test_answers_are_the_prompt_s_own(client: httpx.Client, oa: OpenAIDouble) -> None:
    first = content(post(client, chat("Summarise Acme Robotics, a warehouse robot maker")))
    assert content(post(client, chat("Summarise Acme Robotics, a warehouse robot maker"))) == first
    assert "Acme" in first and "\n" not in first
    others = {
        content(post(client, chat("Summarise Globex, a logistics software vendor"))),
        content(post(client, chat("Summarise Acme Robotics, a warehouse robot maker",
                                  temperature=0.7))),
        content(post(client, {**chat("Summarise Acme Robotics, a warehouse robot maker"),
                              "model": "gpt-4.1-mini"})),
    }  # fmt: skip
    assert first not in others and len(others) == 3
    assert oa.snapshot()["duplicates"] == 1  # the same request paid twice


def test_schema_answers_validate_and_follow_the_prompt(
    client: httpx.Client, oa: OpenAIDouble, an: AnthropicDouble
) -> None:
    industries = set()
    for n in range(12):
        prompt = f"Classify company number {n}: Initech {n} makes printers"
        value = orjson.loads(content(post(client, chat(prompt, response_format=json_schema()))))
        assert validate(SCHEMA, value) == [], value
        assert set(value) == set(SCHEMA["properties"]) and set(value["hq"]) == {"city", "country"}
        assert value["industry"] in SCHEMA["properties"]["industry"]["enum"]
        assert isinstance(value["employees"], int) and 1 <= value["employees"] <= 5000
        assert 0 < value["score"] <= 1 and 1 <= len(value["tags"]) <= 3
        industries.add(value["industry"])
        again = orjson.loads(content(post(client, chat(prompt, response_format=json_schema()))))
        assert again == value
        answer = message(client, forced(prompt))
        assert answer.status_code == 200, answer.text
        block = answer.json()["content"][0]
        assert answer.json()["stop_reason"] == "tool_use" and block["type"] == "tool_use"
        assert block["name"] == "classify" and validate(SCHEMA, block["input"]) == []
    assert len(industries) >= 2  # the enum is chosen by the prompt


def test_json_object_needs_the_word_json_and_strict_schemas_must_be_closed(
    client: httpx.Client, oa: OpenAIDouble
) -> None:
    refused = post(client, chat("Classify Acme", response_format={"type": "json_object"}))
    assert refused.status_code == 400 and "json" in refused.json()["error"]["message"]
    answer = orjson.loads(
        content(
            post(client, chat("Classify Acme as JSON", response_format={"type": "json_object"}))
        )
    )
    assert isinstance(answer, dict) and answer
    open_schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    refused = post(client, chat("Classify Acme", response_format=json_schema(open_schema)))
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "invalid_json_schema"  # fmt: skip


def test_usage_counts_the_prompt_and_the_answer(
    client: httpx.Client, oa: OpenAIDouble, an: AnthropicDouble
) -> None:
    body = {"model": "gpt-4o-mini", "messages": [
        {"role": "system", "content": "You classify companies in one line."},
        {"role": "user", "content": "What does Acme Robotics sell, and to whom?"},
    ]}  # fmt: skip
    answer = post(client, body)
    usage = answer.json()["usage"]
    expected = PER_REPLY + sum(PER_MESSAGE + count(m["role"]) + count(m["content"])
                               for m in body["messages"])  # fmt: skip
    assert usage["prompt_tokens"] == expected == oa.prompt_tokens(body)
    assert usage["completion_tokens"] == count(content(answer))
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    ask = {"model": "claude-sonnet-4-20250514", "max_tokens": 100, "system": "Be brief.",
           "messages": [{"role": "user", "content": "What does Acme Robotics sell?"}]}  # fmt: skip
    got = message(client, ask).json()
    assert got["usage"]["input_tokens"] == an.input_tokens(ask)
    assert got["usage"]["output_tokens"] == count(got["content"][0]["text"])
    counted = client.post("/anthropic/v1/messages/count_tokens", headers=ANTHROPIC,
                          json={k: v for k, v in ask.items() if k != "max_tokens"})  # fmt: skip
    assert counted.json() == {"input_tokens": got["usage"]["input_tokens"]}


def test_max_tokens_cuts_the_answer(
    client: httpx.Client, oa: OpenAIDouble, an: AnthropicDouble
) -> None:
    whole = content(post(client, chat("Describe Acme Robotics warehouse automation products")))
    cut = post(client, chat("Describe Acme Robotics warehouse automation products", max_tokens=4))
    assert cut.json()["choices"][0]["finish_reason"] == "length"
    assert cut.json()["usage"]["completion_tokens"] == 4
    assert whole.startswith(content(cut)) and len(content(cut)) < len(whole)
    newer = post(client, chat("Describe Acme Robotics warehouse automation products",
                              max_completion_tokens=4))  # fmt: skip
    assert content(newer) == content(cut)
    schema_cut = post(client, chat("Classify Acme", response_format=json_schema(), max_tokens=6))
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(content(schema_cut))
    said = [{"role": "user", "content": "Describe Acme Robotics products"}]
    ask = {"model": "claude-3-5-haiku-latest", "max_tokens": 3, "messages": said}
    got = message(client, ask).json()
    assert got["stop_reason"] == "max_tokens" and got["usage"]["output_tokens"] == 3
    tool = message(client, forced("Classify Acme", max_tokens=5)).json()
    assert tool["stop_reason"] == "max_tokens" and tool["usage"]["output_tokens"] == 5


# -- limits ------------------------------------------------------------------------------


def test_openai_limits_show_in_headers_and_refuse_past_tpm(
    client: httpx.Client, oa: OpenAIDouble, clock: Clock
) -> None:
    oa.configure({"tpm": 1_000, "rpm": 100})
    body = chat("Summarise Acme Robotics", max_tokens=300)
    reserve = oa.prompt_tokens(body) + 300
    first = post(client, body)
    assert first.headers["x-ratelimit-limit-requests"] == "100"
    assert first.headers["x-ratelimit-limit-tokens"] == "1000"
    assert first.headers["x-ratelimit-remaining-requests"] == "99"
    assert first.headers["x-ratelimit-remaining-tokens"] == str(1_000 - reserve)
    assert first.headers["x-ratelimit-reset-tokens"] == f"{math.ceil(reserve * 60):g}ms" or (
        first.headers["x-ratelimit-reset-tokens"].endswith("s")
    )
    answers = [post(client, body) for _ in range(3)]
    refused = answers[-1]
    assert [a.status_code for a in answers] == [200, 200, 429]
    error = refused.json()["error"]
    assert error["code"] == "rate_limit_exceeded" and error["type"] == "tokens"
    assert "TPM" in error["message"] and "Limit 1000" in error["message"]
    wait = int(refused.headers["retry-after"])
    assert wait >= 1 and int(refused.headers["retry-after-ms"]) <= wait * 1000
    clock.now += wait
    assert post(client, body).status_code == 200
    too_large = post(client, chat("Summarise Acme Robotics", max_tokens=5_000))
    assert too_large.status_code == 429 and "retry-after" not in too_large.headers


def test_anthropic_limits_show_in_headers_and_give_back_unused_output(
    client: httpx.Client, an: AnthropicDouble, clock: Clock
) -> None:
    an.configure({"otpm": 1_000, "itpm": 5_000, "rpm": 50})
    ask = {"model": "claude-3-5-haiku-latest", "max_tokens": 400,
           "messages": [{"role": "user", "content": "Summarise Acme Robotics"}]}  # fmt: skip
    got = message(client, ask)
    used = got.json()["usage"]
    h = got.headers
    assert h["anthropic-ratelimit-requests-limit"] == "50"
    assert h["anthropic-ratelimit-requests-remaining"] == "49"
    assert h["anthropic-ratelimit-input-tokens-limit"] == "5000"
    assert h["anthropic-ratelimit-input-tokens-remaining"] == str(5_000 - used["input_tokens"])
    assert h["anthropic-ratelimit-output-tokens-limit"] == "1000"
    # max_tokens was held while answering, and what the answer did not use came back
    assert h["anthropic-ratelimit-output-tokens-remaining"] == str(1_000 - used["output_tokens"])
    assert h["anthropic-ratelimit-tokens-limit"] == "1000"
    assert h["anthropic-ratelimit-requests-reset"].endswith("Z")
    too_much = message(client, {**ask, "max_tokens": 990})
    assert too_much.status_code == 429
    assert too_much.json()["type"] == "error"
    assert too_much.json()["error"]["type"] == "rate_limit_error"
    clock.now += int(too_much.headers["retry-after"])
    assert message(client, {**ask, "max_tokens": 990}).status_code == 200


def test_a_client_reserving_prompt_and_max_tokens_stays_at_the_limit_with_no_429(
    client: httpx.Client, oa: OpenAIDouble, an: AnthropicDouble, clock: Clock
) -> None:
    """A client with buckets of the documented size that reserves the prompt's tokens and
    max_tokens before each request (and, for Anthropic, takes back the output it did not use)
    runs minutes of traffic at the token bound and is never refused."""
    oa.configure({"tpm": 3_000, "rpm": 1_000})
    an.configure({"itpm": 3_000, "otpm": 2_000, "rpm": 1_000})
    start = clock.now
    mine = {"tokens": Bucket(3_000, start), "requests": Bucket(1_000, start)}
    anth = {"input_tokens": Bucket(3_000, start), "output_tokens": Bucket(2_000, start),
            "requests": Bucket(1_000, start)}  # fmt: skip
    reserved = 0
    refused = 0
    for n in range(300):
        body = chat(f"Classify company {n}: " + "robots " * (n % 40), max_tokens=20 + n % 90)
        cost = {"tokens": oa.prompt_tokens(body) + body["max_tokens"], "requests": 1}
        ask = {"model": "claude-3-5-haiku-latest", "max_tokens": 20 + n % 60,
               "messages": body["messages"]}  # fmt: skip
        cost_a = {"input_tokens": an.input_tokens(ask), "output_tokens": ask["max_tokens"],
                  "requests": 1}  # fmt: skip
        wait = max(
            *(mine[k].wait(v, clock.now) for k, v in cost.items()),
            *(anth[k].wait(v, clock.now) for k, v in cost_a.items()),
        )
        clock.now += wait
        for buckets, costs in ((mine, cost), (anth, cost_a)):
            for k, v in costs.items():
                buckets[k].wait(v, clock.now)
                buckets[k].level -= v
        reserved += cost["tokens"]
        refused += post(client, body).status_code == 429
        got = message(client, ask)
        refused += got.status_code == 429
        if got.status_code == 200:
            unused = ask["max_tokens"] - got.json()["usage"]["output_tokens"]
            bucket = anth["output_tokens"]
            bucket.level = min(bucket.capacity, bucket.level + unused)
    assert refused == 0
    assert oa.snapshot()["throttled"] == an.snapshot()["throttled"] == 0
    # and at the limit, not below it: the time is what the tokens past the first minute's
    # bucket take at 3,000 a minute (the Anthropic buckets are not the tighter ones here)
    bound = (reserved - 3_000) / 50
    assert clock.now - start == pytest.approx(bound, rel=0.05)
    assert clock.now - start > 360  # minutes of traffic, not one bucketful


# -- faults ------------------------------------------------------------------------------


def test_a_storm_then_outages_then_recovery(
    client: httpx.Client, oa: OpenAIDouble, an: AnthropicDouble
) -> None:
    oa.configure({"storm": 2, "down": 1})
    answers = [post(client, chat("Summarise Acme")) for _ in range(4)]
    assert [a.status_code for a in answers] == [429, 429, 503, 200]
    assert answers[0].json()["error"]["code"] == "rate_limit_exceeded"
    assert answers[0].headers["retry-after"] == "1"
    assert answers[2].json()["error"]["type"] == "server_error"
    an.configure({"storm": 1, "down": 1})
    answers = [message(client, forced("Classify Acme")) for _ in range(3)]
    assert [a.status_code for a in answers] == [429, 529, 200]
    assert answers[0].json()["error"]["type"] == "rate_limit_error"
    assert answers[1].json()["error"]["type"] == "overloaded_error"


def _wrong(text: str) -> bool:
    try:
        return bool(validate(SCHEMA, orjson.loads(text)))
    except orjson.JSONDecodeError:
        return True


def test_invalid_json_answers_for_the_next_n_and_for_a_share(
    client: httpx.Client, oa: OpenAIDouble, an: AnthropicDouble
) -> None:
    oa.configure({"invalid_json": 3})
    oa.configure({"tpm": 10_000_000})  # many requests at one instant of the doubles' clock
    texts = [content(post(client, chat(f"Classify firm {n}", response_format=json_schema())))
             for n in range(5)]  # fmt: skip
    assert [_wrong(t) for t in texts] == [True, True, True, False, False]
    asked_again = content(post(client, chat("Classify firm 0", response_format=json_schema())))
    assert not _wrong(asked_again)  # asking again is how a client recovers
    oa.configure({"invalid_json_rate": 0.5})
    wrong = sum(
        _wrong(content(post(client, chat(f"Classify co {n}", response_format=json_schema()))))
        for n in range(60)
    )
    assert 15 <= wrong <= 45 and oa.snapshot()["llm"]["spoiled"] == 3 + wrong
    plain = content(post(client, chat("Summarise Acme")))
    assert plain.startswith(tuple("ISABMN"))  # a text answer is never spoiled
    an.configure({"invalid_json": 1})
    inputs = [message(client, forced(f"Classify firm {n}")).json()["content"][0]["input"]
              for n in range(2)]  # fmt: skip
    assert validate(SCHEMA, inputs[0]) and not validate(SCHEMA, inputs[1])


def test_keys_and_versions_are_checked(client: httpx.Client, oa: OpenAIDouble) -> None:
    url = "/openai/v1/chat/completions"
    missing = client.post(url, json=chat("hi"))
    assert missing.status_code == 401 and "API key" in missing.json()["error"]["message"]
    wrong = client.post(url, json=chat("hi"), headers={"Authorization": "Bearer sk-wrong-key"})
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_api_key"
    wrong = client.post("/anthropic/v1/messages", json=forced("hi"),
                        headers={**ANTHROPIC, "x-api-key": "nope"})  # fmt: skip
    assert wrong.status_code == 401 and wrong.json()["error"]["type"] == "authentication_error"
    versionless = client.post("/anthropic/v1/messages", json=forced("hi"),
                              headers={"x-api-key": KEY})  # fmt: skip
    assert versionless.status_code == 400 and "anthropic-version" in versionless.text
    no_max = message(client, {k: v for k, v in forced("hi").items() if k != "max_tokens"})
    assert no_max.status_code == 400 and "max_tokens" in no_max.json()["error"]["message"]


# -- batches -----------------------------------------------------------------------------


def _advance(client: httpx.Client, name: str, seconds: float) -> None:
    answer = client.post(f"/{name}/__double", json={"advance": seconds})
    assert answer.status_code == 200, answer.text


def test_the_openai_batch_flow(client: httpx.Client, oa: OpenAIDouble) -> None:
    oa.configure({"batch_delay": 3_600})
    bodies = [chat(f"Classify company {n}: Vandelay Industries imports latex",
                   response_format=json_schema(), max_tokens=300) for n in range(20)]  # fmt: skip
    lines = [{"custom_id": f"row-{n}", "method": "POST", "url": "/v1/chat/completions",
              "body": body} for n, body in enumerate(bodies)]  # fmt: skip
    lines.append({"custom_id": "row-bad", "method": "POST", "url": "/v1/chat/completions",
                  "body": {"model": "gpt-4o-mini", "messages": []}})  # fmt: skip
    jsonl = b"\n".join(orjson.dumps(line) for line in lines)
    upload = client.post("/openai/v1/files", headers=OPENAI, data={"purpose": "batch"},
                         files={"file": ("rows.jsonl", jsonl, "application/jsonl")})  # fmt: skip
    assert upload.status_code == 200, upload.text
    assert upload.json()["purpose"] == "batch" and upload.json()["bytes"] == len(jsonl)
    created = client.post("/openai/v1/batches", headers=OPENAI, json={
        "input_file_id": upload.json()["id"], "endpoint": "/v1/chat/completions",
        "completion_window": "24h"})  # fmt: skip
    assert created.status_code == 200, created.text
    batch = created.json()
    assert batch["status"] == "validating" and batch["object"] == "batch"
    seen = []
    for step in (600, 1_500, 1_300, 300):  # 10, 35, 56.7 and 61.7 minutes in
        _advance(client, "openai", step)
        polled = client.get(f"/openai/v1/batches/{batch['id']}", headers=OPENAI).json()
        seen.append(polled["status"])
        assert oa.snapshot()["llm"]["batch"] == {} or polled["status"] == "completed"
    assert seen == ["in_progress", "in_progress", "finalizing", "completed"]
    assert polled["request_counts"] == {"total": 21, "completed": 20, "failed": 1}
    charged = oa.snapshot()["usd"]
    output = client.get(f"/openai/v1/files/{polled['output_file_id']}/content", headers=OPENAI)
    results = [orjson.loads(line) for line in output.content.splitlines()]
    assert [r["custom_id"] for r in results] == [f"row-{n}" for n in range(20)]
    for result, body in zip(results, bodies, strict=True):
        assert result["response"]["status_code"] == 200 and result["error"] is None
        answer = result["response"]["body"]["choices"][0]["message"]["content"]
        assert validate(SCHEMA, orjson.loads(answer)) == []
        assert answer == content(post(client, body))  # the same answer as live
    errors = client.get(f"/openai/v1/files/{polled['error_file_id']}/content", headers=OPENAI)
    (error,) = [orjson.loads(line) for line in errors.content.splitlines()]
    assert error["custom_id"] == "row-bad" and error["response"]["status_code"] == 400
    again = client.get(f"/openai/v1/batches/{batch['id']}", headers=OPENAI).json()
    assert again["output_file_id"] == polled["output_file_id"]
    ledger = oa.snapshot()["llm"]
    assert ledger["batch"]["gpt-4o-mini"]["requests"] == 20  # computed once, charged once
    usage = [r["response"]["body"]["usage"] for r in results]
    tokens_in = sum(u["prompt_tokens"] for u in usage)
    tokens_out = sum(u["completion_tokens"] for u in usage)
    assert ledger["batch"]["gpt-4o-mini"]["input_tokens"] == tokens_in
    assert charged == pytest.approx((tokens_in * 0.15 + tokens_out * 0.60) / 1e6 / 2)
    assert ledger["live"]["gpt-4o-mini"]["usd"] == pytest.approx(2 * charged)
    _advance(client, "openai", 31 * 86_400)  # kept 30 days
    gone = client.get(f"/openai/v1/files/{polled['output_file_id']}/content", headers=OPENAI)
    assert gone.status_code == 404


def test_an_openai_batch_file_that_does_not_validate_fails(
    client: httpx.Client, oa: OpenAIDouble
) -> None:
    jsonl = b'{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {}}\n'
    jsonl += b"not json\n"
    upload = client.post("/openai/v1/files", headers=OPENAI, data={"purpose": "batch"},
                         files={"file": ("rows.jsonl", jsonl)}).json()  # fmt: skip
    batch = client.post("/openai/v1/batches", headers=OPENAI, json={
        "input_file_id": upload["id"], "endpoint": "/v1/chat/completions",
        "completion_window": "24h"}).json()  # fmt: skip
    _advance(client, "openai", 60)
    polled = client.get(f"/openai/v1/batches/{batch['id']}", headers=OPENAI).json()
    assert polled["status"] == "failed"
    assert [e["code"] for e in polled["errors"]["data"]] == ["invalid_json_line"]
    assert oa.snapshot()["usd"] == 0


def test_the_anthropic_batch_flow(client: httpx.Client, an: AnthropicDouble) -> None:
    an.configure({"batch_delay": 7_200})
    asks = [forced(f"Classify company {n}: Kramerica makes oil tankers") for n in range(12)]
    requests = [{"custom_id": f"row-{n}", "params": ask} for n, ask in enumerate(asks)]
    requests.append({"custom_id": "row-bad", "params": {"model": "claude-3-5-haiku-latest",
                     "messages": [{"role": "user", "content": "hi"}]}})  # fmt: skip
    created = client.post("/anthropic/v1/messages/batches", headers=ANTHROPIC,
                          json={"requests": requests})  # fmt: skip
    assert created.status_code == 200, created.text
    batch = created.json()
    assert batch["type"] == "message_batch" and batch["processing_status"] == "in_progress"
    assert batch["request_counts"]["processing"] == 13 and batch["results_url"] is None
    early = client.get(f"/anthropic/v1/messages/batches/{batch['id']}/results", headers=ANTHROPIC)
    assert early.status_code == 400
    _advance(client, "anthropic", 7_200)
    polled = client.get(f"/anthropic/v1/messages/batches/{batch['id']}", headers=ANTHROPIC)
    ended = polled.json()
    assert ended["processing_status"] == "ended" and ended["ended_at"].endswith("Z")
    assert ended["request_counts"] == {"processing": 0, "succeeded": 12, "errored": 1,
                                       "canceled": 0, "expired": 0}  # fmt: skip
    assert ended["results_url"].startswith(f"{client.base_url}/anthropic/v1/messages/batches/")
    results = client.get(ended["results_url"], headers=ANTHROPIC)
    lines = [orjson.loads(line) for line in results.content.splitlines()]
    by_id = {line["custom_id"]: line["result"] for line in lines}
    assert by_id["row-bad"]["type"] == "errored"
    assert by_id["row-bad"]["error"]["error"]["type"] == "invalid_request_error"
    usd = 0.0
    for n, ask in enumerate(asks):
        result = by_id[f"row-{n}"]
        assert result["type"] == "succeeded"
        block = result["message"]["content"][0]
        assert validate(SCHEMA, block["input"]) == []
        live = message(client, ask).json()
        assert live["content"][0]["input"] == block["input"]
        u = result["message"]["usage"]
        usd += (u["input_tokens"] * 0.80 + u["output_tokens"] * 4.00) / 1e6 / 2
    again = client.get(ended["results_url"], headers=ANTHROPIC)
    assert again.content == results.content
    ledger = an.snapshot()["llm"]
    assert ledger["batch"]["claude-3-5-haiku-latest"]["requests"] == 12
    assert ledger["batch"]["claude-3-5-haiku-latest"]["usd"] == pytest.approx(usd)
    assert ledger["live"]["claude-3-5-haiku-latest"]["usd"] == pytest.approx(2 * usd)
    _advance(client, "anthropic", 29 * 86_400)
    archived = client.get(f"/anthropic/v1/messages/batches/{batch['id']}", headers=ANTHROPIC)
    assert archived.json()["archived_at"] and archived.json()["results_url"] is None
    assert client.get(ended["results_url"], headers=ANTHROPIC).status_code == 404


def test_a_batch_past_the_24_hour_window_expires_unpaid(
    client: httpx.Client, an: AnthropicDouble
) -> None:
    an.configure({"batch_delay": 30 * 3600})
    requests = [{"custom_id": "only", "params": forced("Classify Acme")}]
    batch = client.post("/anthropic/v1/messages/batches", headers=ANTHROPIC,
                        json={"requests": requests}).json()  # fmt: skip
    _advance(client, "anthropic", 24 * 3600)
    ended = client.get(f"/anthropic/v1/messages/batches/{batch['id']}", headers=ANTHROPIC).json()
    assert ended["processing_status"] == "ended" and ended["request_counts"]["expired"] == 1
    lines = client.get(ended["results_url"], headers=ANTHROPIC).content.splitlines()
    assert orjson.loads(lines[0])["result"] == {"type": "expired"}
    assert an.snapshot()["usd"] == 0


# -- the ledger --------------------------------------------------------------------------


def test_the_ledger_s_dollars_are_usage_times_the_price_table(
    client: httpx.Client, oa: OpenAIDouble, an: AnthropicDouble
) -> None:
    expected = 0.0
    for model, (price_in, price_out) in {"gpt-4o-mini": (0.15, 0.60),
                                         "gpt-4.1-mini-2025-04-14": (0.40, 1.60),
                                         "some-local-model": (0.15, 0.60)}.items():  # fmt: skip
        usage = post(client, {**chat(f"Summarise Acme for {model}"), "model": model}).json()
        expected += (usage["usage"]["prompt_tokens"] * price_in
                     + usage["usage"]["completion_tokens"] * price_out) / 1e6  # fmt: skip
    snapshot = oa.snapshot()
    assert snapshot["usd"] == pytest.approx(expected) and snapshot["charged"] > 0
    assert set(snapshot["llm"]["live"]) == {"gpt-4o-mini", "gpt-4.1-mini-2025-04-14",
                                           "some-local-model"}  # fmt: skip
    got = message(client, forced("Classify Acme", model="claude-sonnet-4-20250514")).json()
    cost = (got["usage"]["input_tokens"] * 3 + got["usage"]["output_tokens"] * 15) / 1e6
    assert an.snapshot()["llm"]["usd"] == pytest.approx(cost)
    served = client.get("/anthropic/__double").json()
    assert served["llm"]["live"]["claude-sonnet-4-20250514"]["requests"] == 1
    assert served["llm"]["prices_date"] == "2025-08"


def test_the_control_endpoint_refuses_what_it_cannot_set(
    client: httpx.Client, oa: OpenAIDouble
) -> None:
    for doc in ({"tpm": 0}, {"itpm": 5}, {"invalid_json_rate": 2}, {"advance": -1},
                {"model_limits": {"gpt-4o-mini": {"rpm": "x"}}}):  # fmt: skip
        assert client.post("/openai/__double", json=doc).status_code == 400, doc
    set_ = client.post("/openai/__double", json={"model_limits": {"gpt-4o": {"tpm": 9_000}}})
    assert set_.json()["llm"]["model_limits"] == {"gpt-4o": {"tokens": 9_000}}
    answer = post(client, {**chat("hi"), "model": "gpt-4o"})
    assert answer.headers["x-ratelimit-limit-tokens"] == "9000"
    assert post(client, chat("hi")).headers["x-ratelimit-limit-tokens"] == "200000"
