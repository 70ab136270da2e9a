"""What LLM tokens cost: a dated table of US dollars per million input and output tokens per
model, the Batch APIs' price (half, as both providers document), and overrides in code
(``prices={"model": (input, output)}`` or ``Price(...)``) or in a file
(``PLAYLINE_LLM_PRICES=path.json`` or ``.toml``).

The built-in figures are the simulator's (``sim/_doubles/openai.py``, ``anthropic.py``), so
a run's ledger equals the doubles' usage x price, with their sources:

- OpenAI, standard tier, as openai.com/api/pricing (platform.openai.com/docs/pricing) is
  quoted by pages dated April to June 2026; o4-mini at $1.10 / $4.40
  (platform.openai.com/docs/models/o4-mini, as quoted by modelpedia.dev and
  yingtu.ai, July 2026). Batch: "50% off" (platform.openai.com/docs/guides/batch).
- Anthropic, docs.anthropic.com/en/docs/about-claude/pricing (a stored copy listing Claude
  Opus 4.1 as the newest model, about August 2025) and the Batch prices of
  docs.anthropic.com/en/docs/build-with-claude/batch-processing (half of each); Claude Haiku
  4.5 at $1 / $5 (platform.claude.com/docs/en/models/haiku-4-5/overview) and Sonnet 4.5 at
  Sonnet 4's $3 / $15.

A model is priced by its entry, else by the longest entry it starts with followed by ``-``
or ``@`` (a dated snapshot: ``gpt-4o-mini-2024-07-18``, ``claude-3-5-haiku-20241022``,
Vertex's ``claude-3-5-haiku@20241022``), else by ``"*"`` when a table gives one (a local
server's models: ``prices={"*": (0, 0)}``). A model no entry prices is an error that says
how to give it a price: no call is sent at a price nobody knows.

Left out: cached input tokens (priced lower by both providers) are counted at the full input
price, so the ledger may be a little above the bill, never below it.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PlayDefinitionError

__all__ = [
    "ANTHROPIC_PRICES",
    "OPENAI_PRICES",
    "PRICES_DATE",
    "PRICES_VARIABLE",
    "Price",
    "PriceTable",
    "prices_from_file",
    "usd",
]

PRICES_VARIABLE = "PLAYLINE_LLM_PRICES"
PRICES_DATE = {"openai": "2026-06", "anthropic": "2025-08"}  # when the figures were read


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens: ``input`` and ``output``; in a batch
    ``batch_input``/``batch_output`` (default: half of each, as both providers charge)."""

    input: float
    output: float
    batch_input: float | None = None
    batch_output: float | None = None

    def __post_init__(self) -> None:
        for name in ("input", "output", "batch_input", "batch_output"):
            value = getattr(self, name)
            if value is None and name.startswith("batch"):
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise PlayDefinitionError(
                    f"Price({name}={value!r}): US dollars per million tokens, a number >= 0, "
                    "e.g. Price(input=0.15, output=0.60)."
                )
            if value != value or value == float("inf"):
                raise PlayDefinitionError(f"Price({name}={value!r}): a finite number.")

    def usd(self, input_tokens: int, output_tokens: int, *, batch: bool = False) -> float:
        """What so many tokens cost, live or in a batch."""
        if batch:
            per_in = self.input / 2 if self.batch_input is None else self.batch_input
            per_out = self.output / 2 if self.batch_output is None else self.batch_output
        else:
            per_in, per_out = self.input, self.output
        return (input_tokens * per_in + output_tokens * per_out) / 1_000_000


OPENAI_PRICES: dict[str, Price] = {
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1": Price(2.00, 8.00),
    "o4-mini": Price(1.10, 4.40),
    "o3-mini": Price(1.10, 4.40),
}
ANTHROPIC_PRICES: dict[str, Price] = {
    "claude-3-haiku": Price(0.25, 1.25),
    "claude-3-5-haiku": Price(0.80, 4.00),
    "claude-3-5-sonnet": Price(3.00, 15.00),
    "claude-3-7-sonnet": Price(3.00, 15.00),
    "claude-sonnet-4": Price(3.00, 15.00),
    "claude-sonnet-4-5": Price(3.00, 15.00),
    "claude-opus-4": Price(15.00, 75.00),
    "claude-opus-4-1": Price(15.00, 75.00),
    "claude-haiku-4-5": Price(1.00, 5.00),
}

PricesGiven = Mapping[str, "Price | tuple[float, float] | list[float] | Mapping[str, float]"]


def _price(model: str, given: Any, where: str) -> Price:
    """One price as given: a ``Price``, ``(input, output)``, or ``{"input", "output"[,
    "batch_input", "batch_output"]}``."""
    if isinstance(given, Price):
        return given
    if isinstance(given, tuple | list) and len(given) == 2:
        return Price(*given)
    if isinstance(given, Mapping) and {"input", "output"} <= set(given):
        extra = set(given) - {"input", "output", "batch_input", "batch_output"}
        if not extra:
            return Price(**given)
    raise PlayDefinitionError(
        f"{where}: the price of {model!r} is {given!r}; give US dollars per million tokens "
        'as (input, output), e.g. {"gpt-4o-mini": (0.15, 0.60)}, or '
        '{"input": 0.15, "output": 0.60} (batch_input/batch_output: default half).'
    )


def _table(given: Any, where: str) -> dict[str, Price]:
    if not isinstance(given, Mapping) or not all(
        isinstance(model, str) and model.strip() for model in given
    ):
        raise PlayDefinitionError(
            f"{where}: a table of model name -> price, e.g. "
            '{"gpt-4o-mini": (0.15, 0.60)} (US dollars per million input and output tokens).'
        )
    return {model.strip(): _price(model, price, where) for model, price in given.items()}


def prices_from_file(path: str | os.PathLike[str]) -> dict[str, Price]:
    """A price table from a JSON or TOML file: ``{"model": {"input": 0.15, "output": 0.6}}``
    or ``{"model": [0.15, 0.6]}`` (TOML: ``[gpt-4o-mini]`` tables or ``"gpt-4o-mini" =
    [0.15, 0.6]``); a top-level ``prices`` table is read when present."""
    file = Path(path)
    where = f"{PRICES_VARIABLE}={str(path)!r}"
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise PlayDefinitionError(f"{where}: cannot read the price file ({exc}).") from None
    try:
        doc: Any = tomllib.loads(text) if file.suffix.lower() == ".toml" else json.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise PlayDefinitionError(f"{where}: not valid {file.suffix or 'JSON'} ({exc}).") from None
    if isinstance(doc, Mapping) and isinstance(doc.get("prices"), Mapping):
        doc = doc["prices"]
    return _table(doc, where)


_FILES: dict[tuple[str, float], dict[str, Price]] = {}


def _file_prices() -> dict[str, Price]:
    """The table of ``PLAYLINE_LLM_PRICES``, if set (read again when the file changes)."""
    path = os.environ.get(PRICES_VARIABLE, "").strip()
    if not path:
        return {}
    try:
        stamp = Path(path).stat().st_mtime
    except OSError:
        stamp = -1.0
    key = (path, stamp)
    if key not in _FILES:
        _FILES.clear()
        _FILES[key] = prices_from_file(path)
    return _FILES[key]


class PriceTable:
    """The prices an adapter uses: its provider's table, then the file's, then the ones
    given in code (each overriding the one before, model by model)."""

    def __init__(
        self, builtin: Mapping[str, Price], given: Any = None, *, provider: str = "llm"
    ) -> None:
        self.provider = provider
        self.date = PRICES_DATE.get(provider)
        self._builtin = dict(builtin)
        self._given = {} if given is None else _table(given, f"{provider}(prices=...)")

    def check(self) -> PriceTable:
        """Read the price file now: a bad one is an error where the adapter is declared
        (not when ``playline`` is imported)."""
        _file_prices()
        return self

    @property
    def table(self) -> dict[str, Price]:
        return {**self._builtin, **_file_prices(), **self._given}

    def find(self, model: str) -> Price | None:
        """``model``'s price, or None when nothing prices it."""
        table = self.table
        if model in table:
            return table[model]
        prefixes = [
            name
            for name in table
            if name != "*" and model.startswith(name) and model[len(name)] in "-@"
        ]
        if prefixes:
            return table[max(prefixes, key=len)]
        return table.get("*")

    def of(self, model: str) -> Price:
        """``model``'s price; an error saying how to give one when nothing prices it."""
        price = self.find(model)
        if price is None:
            raise PlayDefinitionError(
                f"No price for the model {model!r} ({self.provider}'s table has "
                f"{', '.join(sorted(self._builtin)) or 'none'}). Give one in US dollars per "
                f"million tokens: playline.providers.{self.provider}(prices={{{model!r}: "
                f"(input, output)}}), or a file {PRICES_VARIABLE}=prices.json holding "
                f'{{"{model}": [input, output]}} ({{"*": [0, 0]}} prices every model, for a '
                "local server)."
            )
        return price

    def usd(
        self, model: str, input_tokens: int, output_tokens: int, *, batch: bool = False
    ) -> float:
        return self.of(model).usd(input_tokens, output_tokens, batch=batch)


_DEFAULT = {**OPENAI_PRICES, **ANTHROPIC_PRICES}


def usd(model: str, input_tokens: int, output_tokens: int, batch: bool = False) -> float:
    """What ``input_tokens`` and ``output_tokens`` of ``model`` cost in US dollars, live or
    in a batch (half), by the built-in table and ``PLAYLINE_LLM_PRICES``; an error saying how
    to give a price for a model neither has."""
    return PriceTable(_DEFAULT).usd(model, input_tokens, output_tokens, batch=batch)
