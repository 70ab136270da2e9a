"""How many tokens a request is before it is sent, and the most a call may cost.

The estimate is what limits and budgets reserve before a request goes out (then corrected by
the answer's ``usage``): the characters of each message / 4, rounded up (a character that is not
ASCII counts one), plus the framing OpenAI's cookbook ("How to count tokens with tiktoken")
documents for chat models (3 tokens a message, 1 for its role, 3 to prime the reply), and
the schema's JSON when one is sent, at 3 characters a token (JSON is dense in punctuation,
which BPE vocabularies cut finer than words). When
``tiktoken`` is importable (it is not a dependency), its encoding for the model counts the
text instead (``o200k_base`` or ``cl100k_base`` for a model it does not know; Claude's
tokenizer is not published, so Anthropic's models are counted by characters).

The worst case of a call: the estimated prompt tokens at the input price plus ``max_tokens``
(the adapter's default when the input sets none) at the output price: what a budget holds
for the call while it is in flight (``pl.Cost(0, unit="usd", worst=...)``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from ._prices import PriceTable

__all__ = ["PER_MESSAGE", "PER_REPLY", "estimate_tokens", "text_tokens", "worst_usd"]

PER_MESSAGE = 4  # 3 framing tokens and 1 for the role
PER_REPLY = 3  # <|start|>assistant<|message|>


@functools.cache
def _encoding(model: str) -> Callable[[str], int] | None:
    """tiktoken's counter for ``model`` when tiktoken is installed, else None."""
    if model.startswith("claude"):
        return None
    try:
        import tiktoken  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    try:
        encoding = tiktoken.encoding_for_model(model)
    except KeyError:
        try:
            encoding = tiktoken.get_encoding("o200k_base")
        except Exception:  # an encoding that cannot be loaded (offline): count characters
            return None
    except Exception:
        return None

    def count(text: str) -> int:
        return len(encoding.encode(text, disallowed_special=()))

    return count


def text_tokens(text: str, model: str = "", *, per_token: int = 4) -> int:
    """The tokens of ``text``: tiktoken's count for the model when installed, else its
    ASCII characters / ``per_token`` (4 for prose; 3 for JSON, dense in punctuation),
    rounded up, and one a character for the others (accented and CJK letters are a token
    or more each in every BPE vocabulary)."""
    counter = _encoding(model)
    if counter is not None:
        return counter(text)
    other = sum(1 for ch in text if ord(ch) > 127)
    return math.ceil((len(text) - other) / per_token) + other


def estimate_tokens(input: Mapping[str, Any], *, overhead: int = 0) -> int:
    """The prompt tokens of an LLM tool's input (``{"model", "messages", "system",
    "schema"...}``): each message's text and framing, the system text, the schema's JSON,
    the reply's priming and ``overhead`` (Anthropic's tool-use system prompt)."""
    model = str(input.get("model") or "")
    total = PER_REPLY + overhead
    system = input.get("system")
    if isinstance(system, str) and system:
        total += PER_MESSAGE + text_tokens(system, model)
    for message in input.get("messages") or ():
        content = message.get("content") if isinstance(message, Mapping) else message
        text = content if isinstance(content, str) else orjson.dumps(content).decode()
        total += PER_MESSAGE + text_tokens(text, model)
    schema = input.get("schema")
    if schema is not None:
        total += text_tokens(orjson.dumps(schema).decode(), model, per_token=3)
    return total


def worst_usd(
    prices: PriceTable,
    input: Mapping[str, Any],
    default_max_tokens: int,
    *,
    batch: bool = False,
    overhead: int = 0,
) -> float | None:
    """The most one call may cost: the estimated prompt at the input price and
    ``max_tokens`` at the output price; None when the model has no price (the call then
    fails, saying how to give one) or the input is not an LLM call's."""
    model = input.get("model")
    if not isinstance(model, str):
        return None
    price = prices.find(model)
    if price is None:
        return None
    max_tokens = input.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        max_tokens = default_max_tokens
    try:
        prompt = estimate_tokens(input, overhead=overhead)
    except (TypeError, orjson.JSONEncodeError):
        return None
    return price.usd(prompt, max_tokens, batch=batch)
