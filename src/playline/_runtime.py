"""The state of one attempt of a run, shared by the context and the engine parts."""

from __future__ import annotations

import asyncio
import difflib
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from ._calls import CallExecutor, ToolCall
from ._clock import Clock
from ._dispatch import Dispatcher
from ._events import EventLog
from ._ledger import Ledger
from ._limits import Governor, Limits, ToolGates
from ._receipts import auth_scope, receipt_key, stale_bucket, validate_stale_after
from ._scope import current_row
from .errors import PlayDefinitionError
from .store import Store
from .tools import ToolResult, ToolSpec

if TYPE_CHECKING:
    from ._context import Context
    from ._rowrun import DatasetStats

__all__ = ["Runtime"]

DEFAULT_ROW_WINDOW = 1000


class Runtime:
    """Everything an attempt needs; the ``Context`` a play sees delegates here."""

    ctx: Context

    def __init__(
        self,
        *,
        store: Store,
        run_id: str,
        play_name: str,
        clock: Clock,
        tools: Mapping[str, ToolSpec],
        gates: ToolGates,
        events: EventLog,
        ledger: Ledger,
        limits: Limits,
        owner: str,
        resuming: bool,
        spawn: Callable[[Coroutine[Any, Any, None]], object],
        org: str = "local",
        row_window: int = DEFAULT_ROW_WINDOW,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.play_name = play_name
        self.clock = clock
        self.tools = tools
        self.events = events
        self.ledger = ledger
        self.governor = Governor(limits)
        self.resuming = resuming
        self.org = org
        self.row_window = row_window
        self.executor = CallExecutor(
            store=store,
            clock=clock,
            gates=gates,
            governor=self.governor,
            ledger=ledger,
            events=events,
            tools=tools,
            run_id=run_id,
            owner=owner,
        )
        self.dispatcher = Dispatcher(self.executor, spawn)
        self.datasets: dict[str, DatasetStats | None] = {}
        self._auth_scopes: dict[str, str] = {}

    def _auth(self, spec: ToolSpec) -> str:
        scope = self._auth_scopes.get(spec.id)
        if scope is None:
            scope = self._auth_scopes[spec.id] = auth_scope(self.org, spec.auth_scope, spec.id)
        return scope

    def claim_dataset_name(self, name: str) -> None:
        if name in self.datasets:
            raise PlayDefinitionError(
                f"Play {self.play_name!r} already ran a dataset named {name!r} in this run. "
                "Give each ctx.dataset(...) its own name."
            )
        self.datasets[name] = None

    def dataset_finished(self, name: str, stats: DatasetStats) -> None:
        self.datasets[name] = stats

    def tool_spec(self, tool: str) -> ToolSpec:
        spec = self.tools.get(tool)
        if spec is None:
            close = difflib.get_close_matches(tool, list(self.tools), n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise PlayDefinitionError(
                f"Unknown tool {tool!r}.{hint} Define it with @pl.tool({tool!r}), pass it in "
                "tools=[...], or connect the gateway that serves it (pl.Gateway or "
                "PLAYLINE_GATEWAY_URL)."
            )
        return spec

    def call_tool(
        self,
        tool: str,
        input: Mapping[str, Any],
        *,
        label: str | None = None,
        force: bool = False,
        stale_after: int | None = None,
    ) -> Awaitable[ToolResult]:
        """Queue (inside a column) or prepare (outside) a tool call; await the result.

        Inside a column the call joins the dispatcher's queue at once, so several calls a
        resolver makes (``asyncio.gather``) go out in the same pass.
        """
        if not isinstance(tool, str) or not tool:
            raise PlayDefinitionError(
                "ctx.tool needs a tool id, e.g. ctx.tool('sim.email.alpha', {...})."
            )
        if not isinstance(input, Mapping):
            raise PlayDefinitionError(
                f"ctx.tool({tool!r}, ...): the input must be a dict, not {type(input).__name__}."
            )
        spec = self.tool_spec(tool)
        stale = validate_stale_after(stale_after)
        self.governor.spend("tool_calls")
        payload = dict(input)
        key = receipt_key(
            org=self.org,
            tool=spec.id,
            input=payload,
            auth=self._auth(spec),
            version=spec.version,
            bucket=stale_bucket(stale, self.clock.now()),
        )
        scope = current_row.get()
        call = ToolCall(
            spec=spec,
            input=payload,
            key=key,
            future=asyncio.get_running_loop().create_future(),
            label=label,
            force=bool(force),
            scope=scope,
        )
        if scope is None:
            return self._direct(call)
        return self.dispatcher.submit(call, scope)

    async def _direct(self, call: ToolCall) -> ToolResult:
        await self.executor.execute(call.spec, [call])
        return await call.future
