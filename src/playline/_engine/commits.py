"""Group commit: the claims and the results of concurrent requests reach the store together.

A request about to be sent hands its claims to the ``GroupCommit``; a request that finished
hands its completions and failures; each waits for its part to be durable. While one write
is in progress the next ones queue up and go in the following transaction: a slow request
never holds back the others' writes, and the claims of the requests going out and the
results of those that answered meanwhile share one transaction, not two each.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from ..store import Claim, ClaimResult, Completion, Failure, Store, StoreIO

__all__ = ["GroupCommit"]

T = TypeVar("T")
R = TypeVar("R")


class _Queue(Generic[T, R]):
    """Items waiting for the next write of their kind, and who waits for each batch."""

    def __init__(self) -> None:
        self.items: list[T] = []
        self.waiters: list[tuple[int, asyncio.Future[R]]] = []  # (how many items, waiter)

    def add(self, items: Sequence[T]) -> asyncio.Future[R]:
        waiter: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self.items.extend(items)
        self.waiters.append((len(items), waiter))
        return waiter

    def take(self) -> tuple[list[T], list[tuple[int, asyncio.Future[R]]]]:
        items, self.items = self.items, []
        waiters, self.waiters = self.waiters, []
        return items, waiters


class GroupCommit:
    def __init__(self, store: Store, owner: str, now: Callable[[], float], lease: float) -> None:
        self._store = store
        self._io = StoreIO(store)
        self._owner = owner
        self._now = now
        self._lease = lease
        self._claims: _Queue[Claim, list[ClaimResult]] = _Queue()
        self._results: _Queue[Completion | Failure, dict[str, bytes]] = _Queue()
        self._writing = False

    async def claim(self, claims: Sequence[Claim]) -> list[ClaimResult]:
        """Claim these receipts with whatever else is waiting; results aligned with them."""
        waiter = self._claims.add(claims)
        self._start()
        return await asyncio.shield(waiter)

    async def commit(
        self, completions: Sequence[Completion] = (), failures: Sequence[Failure] = ()
    ) -> dict[str, bytes]:
        """Write these results; returns the results another owner had already stored for
        some keys (they win: see ``complete_receipts``)."""
        if not completions and not failures:
            return {}
        waiter = self._results.add([*completions, *failures])
        self._start()
        return await asyncio.shield(waiter)

    def _start(self) -> None:
        if not self._writing:
            self._writing = True
            asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        try:
            while self._claims.waiters or self._results.waiters:
                await asyncio.sleep(0)  # one turn of the loop: what is about to queue joins
                claims, claimers = self._claims.take()
                results, committers = self._results.take()
                try:
                    kept, claimed = await self._batch(claims, results)
                except Exception as exc:  # every waiter learns of it
                    _fail(claimers, exc)
                    _fail(committers, exc)
                    continue
                start = 0
                for count, claimer in claimers:
                    if not claimer.done():
                        claimer.set_result(claimed[start : start + count])
                    start += count
                for _, committer in committers:
                    if not committer.done():
                        committer.set_result(kept)
        finally:
            self._writing = False

    async def _batch(
        self, claims: list[Claim], results: list[Completion | Failure]
    ) -> tuple[dict[str, bytes], list[ClaimResult]]:
        """The results waiting and the claims waiting, in one transaction (results first:
        their requests were answered before these are sent)."""
        now = self._now()
        return await self._io(
            self._store.write_receipts,
            completions=[r for r in results if isinstance(r, Completion)],
            failures=[r for r in results if isinstance(r, Failure)],
            claims=claims,
            owner=self._owner,
            now=now,
            lease_until=now + self._lease,
        )


def _fail(waiters: Sequence[tuple[int, asyncio.Future[Any]]], error: Exception) -> None:
    for _, waiter in waiters:
        if not waiter.done():
            waiter.set_exception(error)
