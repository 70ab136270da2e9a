"""Making a tool call from what a play passes to ``ctx.tool``: checked, keyed, scoped.

``CallMaker.make`` refuses what cannot be a call (no tool id, an input that is not a dict,
a ``force`` or ``key`` of the wrong kind, an unknown tool), spends the play's ``tool_calls``
limit, and builds the ``ToolCall`` with its receipt key (org, tool, input, auth scope,
version), its row's scope, and the time before which a receipt is stale for it. Where the
call goes then is the attempt's.
"""

from __future__ import annotations

import asyncio
import difflib
from collections.abc import Callable, Mapping
from typing import Any

from .._clock import Clock
from .._json import normalise_input, without_numpy
from ..errors import PlayDefinitionError
from ..providers import PROVIDERS
from ..providers._provider import has_key
from ..tools import ToolSpec
from .calls import ToolCall
from .governance import Governor
from .receipts import auth_scope, keyed_receipt, respelled, validate_stale_after
from .scope import RowScope, current_row, result_sink

__all__ = ["CallMaker", "tool_spec"]

Refuse = Callable[[ToolSpec, PlayDefinitionError], BaseException]


class CallMaker:
    """Checks and builds the tool calls of one attempt.

    ``refuse`` turns an input that cannot be keyed (not JSON) into the error its cell fails
    with; ``refresh`` names the columns bought again in this run (``--refresh``), whose calls
    take receipts completed before ``fresh_since`` (the run's start) as stale.
    """

    def __init__(
        self,
        *,
        tools: Mapping[str, ToolSpec],
        org: str,
        clock: Clock,
        governor: Governor,
        refuse: Refuse,
        refresh: frozenset[str] = frozenset(),
        fresh_since: float = 0.0,
    ) -> None:
        self._tools = tools
        self._org = org
        self._clock = clock
        self._governor = governor
        self._refuse = refuse
        self.refresh = refresh
        self._fresh_since = fresh_since
        self._auth_scopes: dict[str, str] = {}

    def make(
        self,
        tool: str,
        input: Mapping[str, Any],
        *,
        label: str | None = None,
        force: bool = False,
        stale_after: int | None = None,
    ) -> ToolCall:
        """The call ``ctx.tool(tool, input, ...)`` asks for, in the current row's scope."""
        force, label = check_call(tool, input, force, label)
        spec = tool_spec(self._tools, tool)
        stale = None if stale_after is None else validate_stale_after(stale_after)
        self._governor.spend("tool_calls")
        written = without_numpy(dict(input))  # a pandas row's numbers: sent as Python's
        try:
            # variants of one input share its receipt; the tool is sent the normalised one
            payload = written if spec.normalize is None else spec.normalize(written)
            keyed = normalise_input(payload)
            key = keyed_receipt(
                org=self._org,
                tool=spec.id,
                keyed=keyed,
                auth=self._auth(spec),
                version=spec.version,
            )
        except PlayDefinitionError as exc:  # this row's data: its cell fails, not the run
            raise self._refuse(spec, exc) from None
        scope = current_row.get()
        return ToolCall(
            spec=spec,
            input=payload,
            key=key,
            future=asyncio.get_running_loop().create_future(),
            label=label,
            force=force,
            scope=scope,
            column=None if scope is None else scope.column,
            sink=result_sink.get(),
            fresh_since=self._fresh_since_for(scope, stale),
            respelled=respelled(written, keyed),
        )

    def _auth(self, spec: ToolSpec) -> str:
        scope = self._auth_scopes.get(spec.id)
        if scope is None:
            scope = auth_scope(self._org, spec.auth_scope, spec.id)
            self._auth_scopes[spec.id] = scope
        return scope

    def _fresh_since_for(self, scope: RowScope | None, stale_after: int | None) -> float | None:
        """The time before which a receipt is stale for the call (None: any answers), the
        latest of: ``stale_after`` seconds ago; the run's start in a refreshed column
        (``--refresh COLUMN``: bought again once in the run); the limit a column that says
        when to recompute set on the row (``RowScope.fresh_since``)."""
        limits = [] if stale_after is None else [self._clock.now() - stale_after]
        if scope is not None:
            if scope.fresh_since is not None:
                limits.append(scope.fresh_since)
            column, refresh = scope.column, self.refresh
            if refresh and (column in refresh or f"{scope.dataset}.{column}" in refresh):
                limits.append(self._fresh_since)
        return max(limits) if limits else None


def check_call(
    tool: object, input: object, force: object, label: object
) -> tuple[bool, str | None]:
    """``force`` and ``label`` as a call takes them, once ``tool`` and ``input`` can be one."""
    if not isinstance(tool, str) or not tool:
        raise PlayDefinitionError(
            "ctx.tool needs a tool id, e.g. ctx.tool('sim.email.alpha', {...})."
        )
    if type(input) is not dict and not isinstance(input, Mapping):
        raise PlayDefinitionError(
            f"ctx.tool({tool!r}, ...): the input must be a dict, not {type(input).__name__}."
        )
    if force is not False and force is not True:  # the common cases, checked first
        force = _force(tool, force)
    return bool(force), None if label is None else _label(tool, label)


def tool_spec(tools: Mapping[str, ToolSpec], tool: str) -> ToolSpec:
    """The tool ``tool`` names; an unknown one is refused with the closest names."""
    spec = tools.get(tool)
    if spec is None:
        provider = _provider_of(tool)
        if provider is not None:
            raise PlayDefinitionError(f"Unknown tool {tool!r}. {provider}")
        close = difflib.get_close_matches(tool, list(tools), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise PlayDefinitionError(
            f"Unknown tool {tool!r}.{hint} Define it with @pl.tool({tool!r}), pass it in "
            "tools=[...], or connect the gateway that serves it (pl.Gateway or "
            "PLAYLINE_GATEWAY_URL)."
        )
    return spec


def _provider_of(tool: str) -> str | None:
    """How to give the run ``tool`` when it is a shipped provider's (a run without
    ``tools=`` has the providers whose key is set), else None."""
    provider = PROVIDERS.get(tool.partition(".")[0])
    if provider is None:
        return None
    try:
        if tool not in {spec.id for spec in provider.tools().specs()}:  # reads no key
            return None
    except PlayDefinitionError:  # its PLAYLINE_<NAME>_URL is not a URL: said when used
        return None
    given = f"tools=[..., pl.providers.{provider.name}()]"
    if has_key(provider):
        return f"It is {provider.title}'s: a run given tools= has those only; add {given}."
    return (
        f"It is {provider.title}'s, and {provider.key} is not set: export {provider.key} (a "
        "run without tools= has every provider whose key is set), or pass "
        f"tools=[..., pl.providers.{provider.name}(api_key=...)]."
    )


def _force(tool: str, force: object) -> bool:
    kind = type(force)
    if kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_"):
        return bool(force)  # numpy's, as a pandas row holds it
    raise PlayDefinitionError(
        f"ctx.tool({tool!r}, ..., force={force!r}): force is True (buy it again) or "
        "False (the default: a receipt answers it)."
    )


def _label(tool: str, label: object) -> str:
    named: object = without_numpy(label)  # a row's id may come as a number (NumPy's too)
    if isinstance(named, int | float) and not isinstance(named, bool):
        return str(named)
    if not isinstance(named, str):
        raise PlayDefinitionError(
            f"ctx.tool({tool!r}, ...): key= (or description=) names the call: give a "
            f"text or a number, not {label!r}."
        )
    return named
