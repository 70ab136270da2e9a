"""The state of one attempt of a run, shared by the context and the engine parts."""

from __future__ import annotations

import asyncio
import contextvars
import difflib
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._boundaries import Boundaries, Suspension
from ._calls import CallExecutor, ToolCall
from ._clock import Clock
from ._dispatch import Dispatcher
from ._events import EventLog, Listener
from ._json import dumps, loads
from ._ledger import Ledger
from ._limits import Governor, ToolGates
from ._play import Play, PlayFn, get_play
from ._receipts import auth_scope, receipt_key, stale_bucket, validate_stale_after
from ._scope import current_row
from .errors import GovernanceError, PlayDefinitionError
from .store import Store
from .tools import ToolResult, ToolSpec

if TYPE_CHECKING:
    from ._context import Context
    from ._rowrun import DatasetStats
    from ._runner import RunResult

__all__ = ["Lineage", "Runtime", "Settings"]

DEFAULT_ROW_WINDOW = 1000
DEFAULT_FOREGROUND_SLEEP = 5.0  # sleeps up to this long are waited out in the process

RunChild = Callable[..., Coroutine[Any, Any, "RunResult"]]


@dataclass(frozen=True, kw_only=True)
class Settings:
    """What every run started by one ``pl.run`` shares, child plays included."""

    store: Store
    clock: Clock
    tools: Mapping[str, ToolSpec]
    gates: ToolGates
    listeners: Sequence[Listener] = ()
    row_window: int = DEFAULT_ROW_WINDOW
    foreground_sleep: float = DEFAULT_FOREGROUND_SLEEP
    org: str = "local"


@dataclass(frozen=True, kw_only=True)
class Lineage:
    """Where a run sits in its tree of plays: the chain of play names from the root, the
    counters the whole tree shares, and the cap on child plays running at once."""

    chain: tuple[str, ...]
    tree: Governor
    concurrent: asyncio.Semaphore

    @classmethod
    def root(cls, play: Play) -> Lineage:
        limit = play.limits.concurrent_child_plays
        return cls(
            chain=(play.name,),
            tree=Governor(play.limits),
            concurrent=asyncio.Semaphore(limit if limit is not None else 1_000_000),
        )

    def child(self, play: Play) -> Lineage:
        return Lineage(chain=(*self.chain, play.name), tree=self.tree, concurrent=self.concurrent)


class Runtime:
    """Everything an attempt needs; the ``Context`` a play sees delegates here."""

    ctx: Context

    def __init__(
        self,
        settings: Settings,
        *,
        run_id: str,
        play: Play,
        events: EventLog,
        ledger: Ledger,
        owner: str,
        resuming: bool,
        spawn: Callable[[Coroutine[Any, Any, None]], object],
        lineage: Lineage,
        run_child: RunChild,
    ) -> None:
        self.settings = settings
        self.store = settings.store
        self.clock = settings.clock
        self.tools = settings.tools
        self.org = settings.org
        self.row_window = settings.row_window
        self.run_id = run_id
        self.play = play
        self.play_name = play.name
        self.events = events
        self.ledger = ledger
        self.governor = Governor(play.limits)
        self.resuming = resuming
        self.lineage = lineage
        self._run_child = run_child
        self.executor = CallExecutor(
            store=settings.store,
            clock=settings.clock,
            gates=settings.gates,
            governor=self.governor,
            ledger=ledger,
            events=events,
            tools=settings.tools,
            run_id=run_id,
            owner=owner,
        )
        self.dispatcher = Dispatcher(self.executor, spawn, settings.clock)
        self.boundaries = Boundaries(self, foreground_sleep=settings.foreground_sleep)
        self.datasets: dict[str, DatasetStats | None] = {}
        self.waterfalls: dict[str, Any] = {}  # waterfall id -> its tally (see _waterfall)
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

    async def run_play(self, key: str, play: Play | PlayFn | str, input: Any) -> Any:
        """Run a child play (SEMANTICS.md 32): checked against the governance limits, its
        result checkpointed so a replay does not run it again."""
        if not isinstance(key, str) or not key:
            raise PlayDefinitionError("ctx.run_play needs a non-empty key as its first argument.")
        target = get_play(play)
        chain = self.lineage.chain
        if target.name in chain:
            path = " -> ".join((*chain, target.name))
            raise GovernanceError(
                f"Recursive play graph detected: {path}. A play may not call itself, directly "
                "or through others.",
                counter="recursion",
                limit=0,
            )
        depth, limit = len(chain), self.play.limits.depth
        if limit is not None and depth > limit:
            raise GovernanceError(
                f"Play-call depth exceeded ({depth}/{limit}) while calling {target.name}.",
                counter="depth",
                limit=limit,
            )
        self.governor.spend("children_per_parent")
        self.lineage.tree.spend("child_plays")
        boundary = self.boundaries.key("child", key)
        stored = self.store.get_boundary(boundary)
        if stored is not None and stored.status == "completed" and stored.output is not None:
            return self._revive(loads(stored.output))
        child_id = f"{self.run_id}/{key}.{boundary[-6:]}"
        if self.store.get_run(child_id) is None:
            self.lineage.tree.spend("descendants")
        # The child is a play of its own: not inside this row's column, whatever called it.
        context = contextvars.copy_context()
        context.run(current_row.set, None)
        self.events.emit("child", status="running", data={"run_id": child_id, "play": target.name})
        async with self.lineage.concurrent:
            result = await asyncio.get_running_loop().create_task(
                self._run_child(
                    self.settings,
                    target,
                    input,
                    run_id=child_id,
                    lineage=self.lineage.child(target),
                    parent_run_id=self.run_id,
                    parent_ledger=self.ledger,
                ),
                context=context,
            )
        self.events.emit(
            "child",
            status=result.status,
            error=result.error,
            data={"run_id": child_id, "play": target.name},
        )
        if result.status == "suspended":
            raise Suspension(**(result.waiting or {}))
        if result.status == "failed":
            assert result.exception is not None
            raise result.exception
        stored_output = self.store.get_run(child_id)
        output = stored_output.output if stored_output else None
        self.store.put_boundary(
            self.boundaries.record(boundary, "child", output=dumps(output, what="A child output"))
        )
        return result.output

    def _revive(self, output: Any) -> Any:
        """A checkpointed child output: a Dataset comes back as a Dataset."""
        if isinstance(output, dict) and "$dataset" in output and "run_id" in output:
            from ._dataset import Dataset
            from ._rowrun import DatasetStats

            return Dataset(
                self.store, output["run_id"], output["$dataset"], DatasetStats(rows=output["rows"])
            )
        return output
