"""Group commit: the results of concurrent requests reach the store together.

A request that finishes hands its completions and failures to the ``Committer`` and waits for
them to be durable before its calls settle. While one write is in progress, the next ones
queue up and go in the following transaction: a slow request never holds back the others'
writes, and a burst of finishing requests costs one transaction, not one each.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from ..store import Completion, Failure, Store, StoreIO

__all__ = ["Committer"]


class Committer:
    def __init__(self, store: Store, owner: str, now: Callable[[], float]) -> None:
        self._store = store
        self._io = StoreIO(store)
        self._owner = owner
        self._now = now
        self._completions: list[Completion] = []
        self._failures: list[Failure] = []
        self._waiters: list[asyncio.Future[dict[str, bytes]]] = []
        self._writing = False

    async def commit(
        self, completions: Sequence[Completion] = (), failures: Sequence[Failure] = ()
    ) -> dict[str, bytes]:
        """Write these with whatever else is waiting; returns the results another owner had
        already stored for some keys (they win: see ``complete_receipts``)."""
        if not completions and not failures:
            return {}
        waiter: asyncio.Future[dict[str, bytes]] = asyncio.get_running_loop().create_future()
        self._completions.extend(completions)
        self._failures.extend(failures)
        self._waiters.append(waiter)
        if not self._writing:
            self._writing = True
            asyncio.get_running_loop().create_task(self._write())
        return await asyncio.shield(waiter)

    async def _write(self) -> None:
        try:
            while self._waiters:
                completions, self._completions = self._completions, []
                failures, self._failures = self._failures, []
                waiters, self._waiters = self._waiters, []
                try:
                    kept = await self._io(self._write_batch, completions, failures)
                except BaseException as exc:  # every waiter learns of it
                    for waiter in waiters:
                        if not waiter.done():
                            waiter.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise
                    continue
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_result(kept)
        finally:
            self._writing = False

    def _write_batch(
        self, completions: list[Completion], failures: list[Failure]
    ) -> dict[str, bytes]:
        now = self._now()
        kept = self._store.complete_receipts(completions, owner=self._owner, now=now)
        self._store.fail_receipts(failures, owner=self._owner, now=now)
        return kept
