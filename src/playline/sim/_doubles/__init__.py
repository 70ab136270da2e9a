"""Doubles of the real providers ``playline.providers`` has adapters for, each under its
documented paths below ``/<provider>`` (``playline sim --providers``): point an adapter at
one with ``PLAYLINE_HUNTER_URL=http://127.0.0.1:8765/hunter`` and the simulator's token as
the key, and try it without an account. The LLM doubles (``openai``, ``anthropic``) serve
OpenAI's chat completions and Batch API and Anthropic's Messages and Message Batches the same
way: ``base_url=http://127.0.0.1:8765/openai/v1``."""

from __future__ import annotations

import time
from collections.abc import Callable

from starlette.routing import Mount

from .._world import World
from ._base import Double
from .anthropic import AnthropicDouble
from .apollo import ApolloDouble
from .dropcontact import DropcontactDouble
from .fullenrich import FullEnrichDouble
from .hunter import HunterDouble
from .icypeas import IcypeasDouble
from .leadmagic import LeadMagicDouble
from .neverbounce import NeverBounceDouble
from .openai import OpenAIDouble
from .pdl import PdlDouble
from .prospeo import ProspeoDouble
from .zerobounce import ZeroBounceDouble

__all__ = ["DOUBLES", "Double", "build_doubles", "mounts", "scaled_clock"]

DOUBLES: dict[str, type[Double]] = {
    kind.name: kind
    for kind in (
        HunterDouble,
        ApolloDouble,
        PdlDouble,
        ProspeoDouble,
        LeadMagicDouble,
        DropcontactDouble,
        IcypeasDouble,
        ZeroBounceDouble,
        NeverBounceDouble,
        FullEnrichDouble,
        OpenAIDouble,  # the LLM doubles (AI columns), after the data providers
        AnthropicDouble,
    )
}


def scaled_clock(scale: float = 1.0, origin: float | None = None) -> Callable[[], float]:
    """The doubles' clock: wall time, running ``scale`` times faster from ``origin`` (their
    rate windows and blocks pass that much sooner). A runner with the same scale and origin
    (``bench/crash_providers.py``) keeps the providers' documented rates in a tenth of the
    time, say, and both agree on every window."""
    if scale == 1.0:
        return time.time
    start = time.time() if origin is None else origin
    return lambda: start + (time.time() - start) * scale


def build_doubles(
    world: World, key: str, *, clock: Callable[[], float] | None = None
) -> dict[str, Double]:
    """One double of every provider, sharing ``world``, each taking ``key`` as its key."""
    return {name: kind(world, key, clock=clock) for name, kind in DOUBLES.items()}


def mounts(doubles: dict[str, Double]) -> list[Mount]:
    """Routes serving each double under ``/<name>``."""
    return [
        Mount(f"/{name}", routes=[*double.routes(), *double.control_routes()])
        for name, double in doubles.items()
    ]
