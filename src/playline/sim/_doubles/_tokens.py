"""The LLM doubles' tokenizer: deterministic, offline, and close to what OpenAI's cl100k_base
gives on English text, without its 1.7 MB vocabulary (which would need a download).

How it counts: text is first cut the way cl100k's pre-tokenizer cuts it (the regular
expression tiktoken publishes for cl100k_base, with Python's ``\\w`` classes standing in for
``\\p{L}``/``\\p{N}``): contractions (``'s``, ``'ll``...), a run of letters with at most one
leading space or symbol, numbers in groups of at most 3 digits, runs of punctuation, line
breaks and spaces. Every piece of that cut is at least one BPE token, and a common English
word (with its leading space) is exactly one, so then:

- a run of ASCII letters is one token per started 8 letters (``" tokenization"`` is 2, as in
  cl100k; ``" the"`` 1);
- a run holding other letters (accents, CJK...) is one token per letter (cl100k spends one or
  more per CJK character);
- digits are one token per group of 1 to 3, as in cl100k; punctuation one per started 3.

On English prose this lands within about 10% of cl100k (it cannot know cl100k's rarer words,
which it undercounts, nor its merged punctuation, which it overcounts). The pieces join back
to the text (``"".join(pieces(t)) == t``), so an answer is cut at ``max_tokens`` exactly.

A chat request's prompt adds a fixed overhead per message and per reply, as OpenAI's
cookbook "How to count tokens with tiktoken" documents for its chat models (3 per message,
1 more for a ``name``, 3 to prime the reply); both doubles use it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "PER_MESSAGE",
    "PER_NAME",
    "PER_REPLY",
    "count",
    "pieces",
    "prompt_tokens",
]

PER_MESSAGE = 3  # tokens framing each message (<|start|>{role}\n ... <|end|>)
PER_NAME = 1  # a message's ``name``
PER_REPLY = 3  # every reply is primed with <|start|>assistant<|message|>

# cl100k_base's pre-tokenizer, with \p{L} as [^\W\d_] and \p{N} as \d; "_" is a symbol.
_SPLIT = re.compile(
    r"'(?:[sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])"
    r"|[^\r\n\w]?[^\W\d_]+"
    r"|\d{1,3}"
    r"| ?(?:[^\s\w]|_)+[\r\n]*"
    r"|\s*[\r\n]+"
    r"|\s+(?!\S)"
    r"|\s+"
)
# within one pre-token: runs of up to 8 ASCII letters, any other letter alone, up to 3 digits,
# spaces, up to 3 symbols (a leading space or symbol joins what follows it)
_SEGMENT = re.compile(r"[A-Za-z]{1,8}|[^\W\d_]|\d{1,3}|\s+|(?:[^\s\w]|_){1,3}")


def _split_piece(piece: str) -> list[str]:
    """One pre-token cut into the tokens this tokenizer counts for it."""
    if len(piece) <= 1 or piece.isspace():
        return [piece]
    segments = _SEGMENT.findall(piece)
    out: list[str] = []
    carry = ""
    for index, segment in enumerate(segments):
        leading = index == 0 and len(segments) > 1 and len(segment) == 1
        if leading and not segment.isalnum() and not segments[1].isspace():
            carry = segment  # " word" or "(word": one token, as cl100k merges them
            continue
        out.append(carry + segment)
        carry = ""
    return out


def pieces(text: str) -> list[str]:
    """The text's tokens, in order; they join back to ``text``."""
    return [token for piece in _SPLIT.findall(text) for token in _split_piece(piece)]


def count(text: str) -> int:
    """How many tokens ``text`` is."""
    return len(pieces(text))


def prompt_tokens(messages: Iterable[tuple[str, str, bool]], *, extra: str = "") -> int:
    """A chat prompt's tokens: each ``(role, text, named)`` message with its overhead, the
    reply's priming, and ``extra`` (a schema or tool definitions sent with the request)."""
    total = PER_REPLY + (count(extra) if extra else 0)
    for role, text, named in messages:
        total += PER_MESSAGE + count(role) + count(text) + (PER_NAME if named else 0)
    return total
