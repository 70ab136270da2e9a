"""Whether the tools a plan counts can be called: the credentials behind them.

A plan sends nothing, so a gateway that refuses its token, or a provider key that is not set,
would only show when the run fails its rows. ``refusals`` asks before: each gateway the
counted tools come from is checked once (``Gateway.check``: reachable, token taken), and each
key they read is looked up (an ``HttpTool``'s ``auth`` variable, a ``@pl.tool``'s
``secrets=``), without reading anything from a provider.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ._plan import Plan
from ._runner import resolve_tools
from ._secrets import Secrets
from .errors import GatewayError, PlayDefinitionError
from .tools import Gateway, HttpTool, LocalTransport, ToolSpec

__all__ = ["Refusal", "refusals"]


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """What refuses some of the counted tools (``why``, with what to do), and which."""

    why: str
    tools: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {"why": self.why, "tools": list(self.tools)}


def refusals(estimate: Plan, tools: Iterable[Any] | None) -> list[Refusal]:
    """Why the tools the plan would pay for (its calls not answered by receipts) could not
    be called, one ``Refusal`` per cause, in the order the tools were counted; ``tools`` as
    the plan was given them."""
    table = resolve_tools(tools)
    found: dict[str, list[str]] = {}
    checked: dict[int, str | None] = {}  # per gateway object: why it refuses, or None
    for planned in estimate.tools:
        spec = table.get(planned.tool)
        if spec is None or not planned.calls:
            continue
        for why in _causes(spec, checked):
            found.setdefault(why, []).append(spec.id)
    for why, refused in estimate.refused:  # a provider refused the key itself (its balance)
        found.setdefault(why, []).extend(t for t in refused if t not in found.get(why, ()))
    return [Refusal(why=why, tools=tuple(tools)) for why, tools in found.items()]


def _causes(spec: ToolSpec, checked: dict[int, str | None]) -> Iterable[str]:
    transport = spec.transport
    gateway = getattr(transport, "gateway", None)
    if isinstance(gateway, Gateway):
        if id(gateway) not in checked:
            checked[id(gateway)] = _refused(gateway)
        why = checked[id(gateway)]
        if why is not None:
            yield why
    for name, is_set in keys_read(spec):
        if not is_set:
            yield (
                f"the key {name} is not set: export PLAYLINE_SECRET_{name} (or {name}) where "
                "the run will run"
            )


def keys_read(spec: ToolSpec) -> list[tuple[str, bool]]:
    """The variables a tool reads its keys from (an ``HttpTool``'s ``auth``, a ``@pl.tool``'s
    ``secrets=``), each with whether this environment sets it (``PLAYLINE_SECRET_<NAME>`` or
    ``<NAME>``; a key given as a value is set). Never a value."""
    transport = spec.transport
    if isinstance(transport, HttpTool) and transport.auth is not None:
        secret = transport.auth.secret
        if isinstance(secret, str):
            return [(secret, _is_set(secret))]
        return [(transport.auth.label, True)]
    if isinstance(transport, LocalTransport):
        return [(name, _is_set(name)) for name in dict.fromkeys(transport.secrets)]
    return []


def _refused(gateway: Gateway) -> str | None:
    try:
        gateway.check()
    except GatewayError as exc:
        return str(exc)
    return None


def _is_set(name: str) -> bool:
    try:
        Secrets().get(name)
    except PlayDefinitionError:
        return False
    return True
