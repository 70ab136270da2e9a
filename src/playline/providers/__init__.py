"""Real providers, as declared HTTP tools (``docs/guide/providers.md``).

``pl.providers.hunter()`` gives Hunter's tools for the key in ``HUNTER_API_KEY`` (or
``PLAYLINE_SECRET_HUNTER_API_KEY``); ``pl.providers.hunter(api_key=..., base_url=...)`` for
another key or address. A run without ``tools=`` has the tools of every provider whose key is
set (``configured()``). Tool ids are ``<provider>.<operation>``; every provider answers in one
vocabulary (``_vocab.py``) and keeps its own answer under ``raw``.
"""

from __future__ import annotations

from ..errors import PlayDefinitionError
from . import anthropic as _anthropic
from . import apollo as _apollo
from . import dropcontact as _dropcontact
from . import fullenrich as _fullenrich
from . import hunter as _hunter
from . import icypeas as _icypeas
from . import leadmagic as _leadmagic
from . import neverbounce as _neverbounce
from . import openai as _openai
from . import pdl as _pdl
from . import prospeo as _prospeo
from . import zerobounce as _zerobounce
from ._provider import Balance, Provider, ProviderTools, has_key

__all__ = [
    "PROVIDERS",
    "Balance",
    "Provider",
    "ProviderTools",
    "anthropic",
    "apollo",
    "configured",
    "dropcontact",
    "fullenrich",
    "hunter",
    "icypeas",
    "leadmagic",
    "named",
    "neverbounce",
    "openai",
    "pdl",
    "prospeo",
    "zerobounce",
]

# in the order `playline providers list` shows them
PROVIDERS: dict[str, Provider] = {
    module.PROVIDER.name: module.PROVIDER
    for module in (
        _hunter,
        _apollo,
        _pdl,
        _prospeo,
        _leadmagic,
        _dropcontact,
        _icypeas,
        _zerobounce,
        _neverbounce,
        _fullenrich,
        _openai,  # the LLM providers (AI columns), after the data providers
        _anthropic,
    )
}
hunter = _hunter.hunter
apollo = _apollo.apollo
pdl = _pdl.pdl
prospeo = _prospeo.prospeo
leadmagic = _leadmagic.leadmagic
dropcontact = _dropcontact.dropcontact
icypeas = _icypeas.icypeas
zerobounce = _zerobounce.zerobounce
neverbounce = _neverbounce.neverbounce
fullenrich = _fullenrich.fullenrich
openai = _openai.openai
anthropic = _anthropic.anthropic


def named(name: str) -> Provider:
    """The provider called ``name``; a clear error naming the known ones otherwise."""
    provider = PROVIDERS.get(name.strip().casefold()) if isinstance(name, str) else None
    if provider is None:
        raise PlayDefinitionError(
            f"No provider {name!r}; Playline has adapters for {', '.join(PROVIDERS)}."
        )
    return provider


def configured() -> list[ProviderTools]:
    """The tools of every provider whose key is set in the environment."""
    return [provider.tools() for provider in PROVIDERS.values() if has_key(provider)]
