"""LLM calls' money and tokens: the dated price table (``Price``, ``PriceTable``, ``usd``),
the token estimate of a request and the worst case of a call (``estimate_tokens``,
``worst_usd``). The adapters are ``playline.providers.openai`` and ``.anthropic``."""

from ._estimate import estimate_tokens, text_tokens, worst_usd
from ._prices import (
    ANTHROPIC_PRICES,
    OPENAI_PRICES,
    PRICES_DATE,
    PRICES_VARIABLE,
    Price,
    PriceTable,
    prices_from_file,
    usd,
)

__all__ = [
    "ANTHROPIC_PRICES",
    "OPENAI_PRICES",
    "PRICES_DATE",
    "PRICES_VARIABLE",
    "Price",
    "PriceTable",
    "estimate_tokens",
    "prices_from_file",
    "text_tokens",
    "usd",
    "worst_usd",
]
