"""Child plays (SEMANTICS.md 32): a play run by another, as a run of its own.

A child shares its parent's store, receipts, holder and drain; its id extends the parent's
(``parent/key.xxxxxx``), so a resumed parent finds it again and the parent's budget counts
what it spent. Its output is checkpointed at a boundary of the parent: a replay does not run
it again. Recursion (``a -> b -> a``), depth and the counts of the play tree are governed.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from .._json import dumps, loads
from .._play import Play
from .._secrets import check_no_secret
from ..errors import GovernanceError, PlayDefinitionError
from ..store import Store, StoreIO
from .boundaries import Boundaries
from .events import EventLog
from .governance import Governor, Lineage
from .scope import current_row
from .suspension import Suspension

__all__ = ["ChildOutcome", "ChildPlays"]


class ChildOutcome(Protocol):
    @property
    def status(self) -> str: ...
    @property
    def stored(self) -> Any:  # the output as stored: JSON (a dataset as its reference)
        ...

    @property
    def exception(self) -> BaseException | None: ...
    @property
    def waiting(self) -> dict[str, Any] | None: ...


StartChild = Callable[[str, Play, Any, Lineage], Coroutine[Any, Any, ChildOutcome]]


class ChildPlays:
    def __init__(
        self,
        *,
        run_id: str,
        play: Play,
        store: Store,
        boundaries: Boundaries,
        events: EventLog,
        governor: Governor,
        lineage: Lineage,
        start: StartChild,
    ) -> None:
        self._run_id = run_id
        self._play = play
        self._store = store
        self._io = StoreIO(store)
        self._boundaries = boundaries
        self._events = events
        self._governor = governor
        self._lineage = lineage
        self._start = start

    async def run(self, key: str, target: Play, input: Any) -> Any:
        """Run ``target`` as a child and return its output as stored (JSON)."""
        if not isinstance(key, str) or not key:
            raise PlayDefinitionError("ctx.run_play needs a non-empty key as its first argument.")
        check_no_secret(key, "The key of ctx.run_play")  # it names the child's run
        chain = self._lineage.chain
        if target.name in chain:
            path = " -> ".join((*chain, target.name))
            raise GovernanceError(
                f"Recursive play graph detected: {path}. A play may not call itself, directly "
                "or through others.",
                counter="recursion",
                limit=0,
            )
        depth, limit = len(chain), self._play.limits.depth
        if limit is not None and depth > limit:
            raise GovernanceError(
                f"Play-call depth exceeded ({depth}/{limit}) while calling {target.name}.",
                counter="depth",
                limit=limit,
            )
        boundary = self._boundaries.key("child", key)
        stored = await self._boundaries.get(boundary)
        if stored is not None and stored.status == "completed" and stored.output is not None:
            return loads(stored.output)  # counted when it ran
        child_id = f"{self._run_id}/{key}.{boundary[-6:]}"
        if await self._io(self._store.get_run, child_id) is None:
            # a new child: counted once, not again by each attempt that replays or resumes it
            # (the counts carry over: a run resumed 16 times stopped at its 16 children)
            self._governor.spend("children_per_parent")
            self._lineage.tree.spend("child_plays")
            self._lineage.tree.spend("descendants")
        # The child is a play of its own: not inside this row's column, whatever called it.
        context = contextvars.copy_context()
        context.run(current_row.set, None)
        self._events.emit("child", status="running", data={"run_id": child_id, "play": target.name})
        async with self._lineage.concurrent:
            outcome: ChildOutcome = await asyncio.get_running_loop().create_task(
                self._start(child_id, target, input, self._lineage.child(target)),
                context=context,
            )
        self._events.emit(
            "child",
            status=outcome.status,
            error=None if outcome.exception is None else str(outcome.exception),
            data={"run_id": child_id, "play": target.name},
        )
        if outcome.status == "suspended":
            raise Suspension(**(outcome.waiting or {}))
        if outcome.status == "failed":
            assert outcome.exception is not None
            raise outcome.exception
        await self._boundaries.put(
            self._boundaries.record(
                boundary, "child", output=dumps(outcome.stored, what="A child play's output")
            )
        )
        return outcome.stored
