"""Token limits (tokens a minute) shared by every process on one store.

A provider counts an account's tokens whoever sends them: OpenAI's limits "are defined at
the organization level and at the project level, not user level"
(https://platform.openai.com/docs/guides/rate-limits), Anthropic's are the organization's,
per model (https://docs.anthropic.com/en/api/rate-limits). Processes that each count their
own tokens against the whole limit (``TokenGate``, ``_tokens.py``) send up to N times it
together, and learn of it only from the headers of the answers: a storm of 429s at start.

So a tool whose gate is shared (``SharedToolGate``) has its token buckets in the store as
well, one per limit and scope (the model): each is a gate row of its own (``store/_gates.py``),
keyed ``"{gate key}|tokens|{scope}|{kind}"``, refilled at the limit every minute and
``WINDOW_MARGIN``, holding at most the limit, with no cap and no windows. The rules are
the local bucket's:

- **The estimate before the call**, first come, first served: a lease asks for all of it
  (``lease_gate(wanted=estimate, ahead=RESERVE)``). A lease grants what the bucket holds
  when it holds a token or more (maybe less than asked), else *reserves* up to ``ahead``
  seconds of tokens: the bucket goes into debt and the grant says when they are due. So a
  call takes what there is, then reserves the rest (a second lease), and sleeps until it is
  due: one or two transactions a call, however many processes wait, and the reservations go
  in the order they were made (a debt deeper than ``RESERVE``, from calls that used far
  more than their estimates, is waited out first). A call with several limits (Anthropic's
  input and output) reserves in each and goes when the last is due (the tokens of the
  other wait with it). Cancelled before it goes, it gives its tokens back. An estimate over
  a whole limit fails at once (``too_many_tokens``).
- **Corrected after the answer** by what it used (``Spend.settle``): the difference goes
  back (never past the limit; not when ``Rate(tokens_returned=False)``), or is taken too
  (the bucket may owe: every process's next calls wait for the refill). A 429 gives its
  estimate back. Corrections are written in the background (``settle`` is synchronous), in
  order, those of one bucket in one transaction.
- **The provider's headers** (``x-ratelimit-remaining-tokens``, ...) bring the shared bucket
  down to the provider's count, less this process's tokens in flight and the reservations
  not sent yet (the bucket's debt): another process's tokens in flight are not known here,
  and a count lowered too little is lowered again by the next answer's header.
- A new bucket starts full, as a process's own does (``GateConfig(start=1)``; a new gate of
  requests starts half full): it holds a minute of tokens, and half of it cost every run on
  a new store half a minute (``python -m bench llm``: 1.33x the bound instead of 1.02x). An
  account used elsewhere a moment ago is brought down by the first answers' headers.
- **Clocks differ** between machines: a bucket's time is the latest stamp seen on it, as
  for the request gates (``_time``), or a late clock would wait out its lag every time.

Four processes on one SQLite store, splitting the ``llm`` bench's 2,000 classifications at
200,000 tokens a minute, took 1.023x the least time the limit allows with no 429; with a
bucket each, 1,696 answers were 429 and no run completed (``python -m bench.llm_shared``).

A kind the tool declares no limit for keeps the local rule (what the provider says is left,
heard by this process); so does a tool whose gate is not shared.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import replace
from typing import Any

from .._clock import Clock
from ..errors import PlaylineError
from ..store import GateConfig, GateGrant, GateState, Store, StoreIO
from ._declared import WINDOW_MARGIN
from ._spec import ToolSpec
from ._tokens import KINDS, MINUTE, TokenBucket, TokenGate, Tokens, token_gate

__all__ = ["RESERVE", "SharedTokenGate", "bucket_config", "shared_token_gate", "tokens_key"]

SPAN = MINUTE + WINDOW_MARGIN  # seconds a bucket takes to refill its limit
RESERVE = 10 * SPAN  # seconds of tokens a lease may reserve ahead (a debt deeper waits)
MIN_WAIT = 1e-3  # seconds: a shorter wait would not move a wall clock at epoch scale

Change = Callable[[GateState], GateState | None]
Spawn = Callable[[Coroutine[Any, Any, None]], "asyncio.Task[None]"]


def tokens_key(gate_key: str, scope: str, kind: str) -> str:
    """The store key of the shared bucket of ``kind`` in ``scope`` of the gate ``gate_key``."""
    return f"{gate_key}|tokens|{scope}|{kind}"


def bucket_config(limit: int) -> GateConfig:
    """A shared token bucket of ``limit`` tokens a minute, as a gate row: refilled at the
    limit every ``SPAN``, holding the limit at most, full when new."""
    return GateConfig(ceiling=limit / SPAN, burst=limit, start=1.0)


class SharedTokenGate(TokenGate):
    """A tool's token buckets in the store, shared by every process on it (see the module
    docstring). ``store``, ``holder``, ``now`` and ``spawn`` are its ``SharedToolGate``'s: the
    store to use now, who leases, the gate's wall-clock time, and how background writes are
    started (``SharedToolGate.flush`` waits for them)."""

    def __init__(
        self,
        spec: ToolSpec,
        clock: Clock,
        estimate: Callable[[Mapping[str, Any]], Any],
        *,
        key: str,
        store: Callable[[], Store],
        holder: str,
        now: Callable[[], float],
        spawn: Spawn,
    ) -> None:
        super().__init__(spec, clock, estimate)
        self.key = key
        self._store = store
        self._holder = holder
        self._now = now
        self._spawn = spawn
        self._limits = spec.rate.token_limits
        self._configs: dict[str, GateConfig] = {}  # per bucket key, as declared
        self._changes: dict[str, list[Change]] = {}  # what to write, per bucket, in order
        self._writing: asyncio.Task[None] | None = None
        self._behind = 0.0  # how far this clock was seen behind a bucket's stamp (seconds)

    def _time(self) -> float:
        """The buckets' time: the gate's (``SharedToolGate._now``), moved up to the latest
        stamp seen on a bucket. A clock running late would see every bucket as emptier by
        its lag (its refill counts from the stamp), and wait that out at each reservation."""
        return max(self._now(), self._clock.now() + self._behind)

    def _saw(self, state: GateState) -> None:
        # a bucket is never paused: a stamp ahead of this clock is another clock's
        self._behind = max(self._behind, state.stamp - self._clock.now())

    def _kinds(self, scope: str) -> list[tuple[int, TokenBucket]]:
        # this process's buckets: only those of kinds with no declared limit (what the
        # provider said is left); the declared ones are in the store
        return [
            (index, bucket)
            for index, kind in enumerate(KINDS)
            if self._limits[index] is None
            and (bucket := self._said_only.get((scope, kind))) is not None
        ]

    async def _take(self, tokens: Tokens, scope: str) -> dict[int, list[float]]:
        """This process's buckets in turn, then a reservation in each shared one (under the
        lock: this process's calls reserve in the order they came), then the wait until the
        last is due (not under it: the next call reserves behind this one meanwhile)."""
        async with self._lock:
            local = await self._in_turn(tokens, scope)
            shared: dict[int, list[float]] = {}
            try:
                for index, kind in enumerate(KINDS):
                    limit = self._limits[index]
                    if limit is not None:
                        key = tokens_key(self.key, scope, kind)
                        config = self._configs.setdefault(key, bucket_config(limit))
                        due = await self._reserve(key, config, tokens[index])
                        shared[index] = [due, float(tokens[index])]
            except BaseException:
                self._give_back(local, shared, scope)
                raise
        try:
            due = max((entry[0] for entry in shared.values()), default=0.0)
            if due > self._time():
                await self._clock.sleep(due - self._time())
        except BaseException:
            self._give_back(local, shared, scope)
            raise
        return {**local, **shared}

    def _give_back(
        self, local: dict[int, list[float]], shared: dict[int, list[float]], scope: str
    ) -> None:
        """The call will not go: what it took goes back."""
        for index, entry in {**local, **shared}.items():
            self.correct(index, scope, entry, 0)

    async def _reserve(self, key: str, config: GateConfig, wanted: int) -> float:
        """Take ``wanted`` tokens from the shared bucket ``key``: what it holds, then the rest
        reserved; returns when the last of them is due (0: at once)."""
        got, due = 0, 0.0
        try:
            while got < wanted:
                now = self._time()
                grant = await self._lease(key, config, wanted - got, now)
                self._saw(grant.state)
                got += grant.granted
                due = max(due, grant.due)
                if got < wanted:
                    # What the bucket held is taken: the next lease reserves the rest. In
                    # debt deeper than RESERVE, it comes back when the rest is within reach.
                    state = grant.state
                    wait = state.due() - RESERVE - now + (wanted - got) / state.rate
                    if wait > 0 or not grant.granted:
                        await self._clock.sleep(max(wait, MIN_WAIT))
        except BaseException:
            if got:
                self._change(key, _corrected(got, self._time()))
            raise
        return due

    async def _lease(self, key: str, config: GateConfig, wanted: int, now: float) -> GateGrant:
        store = self._store()
        leasing = asyncio.ensure_future(
            StoreIO(store)(
                store.lease_gate,
                key,
                wanted,
                config=config,
                holder=self._holder,
                lease_until=now,
                now=now,
                ahead=RESERVE,
                slots=False,
            )
        )
        try:
            return await asyncio.shield(leasing)
        except asyncio.CancelledError:
            # cancelled while the store granted: what it grants goes back when it answers
            leasing.add_done_callback(lambda done: self._lost(key, done))
            raise

    def _lost(self, key: str, leasing: asyncio.Future[GateGrant]) -> None:
        if not leasing.cancelled() and leasing.exception() is None:
            granted = leasing.result().granted
            if granted:
                self._change(key, _corrected(granted, self._time()))

    def correct(self, index: int, scope: str, entry: list[float], amount: float) -> None:
        if self._limits[index] is None:
            super().correct(index, scope, entry, amount)
            return
        back = entry[1] - amount
        entry[1] = float(amount)
        if back:
            self._change(tokens_key(self.key, scope, KINDS[index]), _corrected(back, self._time()))

    def said(self, kind: str, left: int, reset: float, scope: str = "", counted: int = 0) -> None:
        index = KINDS.index(kind)
        if self._limits[index] is None:
            super().said(kind, left, reset, scope, counted)
            return
        in_flight = self._flying.get((scope, index), 0) - counted
        self._change(tokens_key(self.key, scope, kind), _lowered(left - in_flight, self._time()))

    # the writes, in the background and in order
    def _change(self, key: str, change: Change) -> None:
        self._changes.setdefault(key, []).append(change)
        if self._writing is None or self._writing.done():
            self._writing = self._spawn(self._write())

    async def _write(self) -> None:
        while self._changes:
            changes, self._changes = self._changes, {}
            for key, each in changes.items():
                store = self._store()
                try:
                    made = await StoreIO(store)(store.tune_gate, key, _all(each))
                    config = self._configs.get(key)
                    if made is None and config is not None:
                        # no row yet (the call's estimate was 0 there): made, then changed
                        await self._lease(key, config, 0, self._time())
                        await StoreIO(store)(store.tune_gate, key, _all(each))
                except PlaylineError:
                    continue  # lost: the bucket is off until the provider's headers say


def _all(changes: list[Change]) -> Change:
    """``changes`` one after the other, in one transaction (None: none changed the gate)."""

    def change(gate: GateState) -> GateState | None:
        changed = None
        for one in changes:
            changed = one(changed or gate) or changed
        return changed

    return change


def _corrected(back: float, now: float) -> Change:
    """``back`` tokens given back to a bucket at ``now`` (never past its limit), or taken
    from it when negative (it may owe)."""

    def change(gate: GateState) -> GateState:
        tokens = min(float(gate.burst), gate.available(now) + back)
        return replace(gate, tokens=tokens, stamp=max(gate.stamp, now))

    return change


def _lowered(left: float, now: float) -> Change:
    """The provider says ``left`` tokens remain at ``now`` (less those in flight): a bucket
    that holds more goes down to it. In debt, the debt is reservations the provider has not
    counted yet: they come off its count too."""

    def change(gate: GateState) -> GateState | None:
        held = gate.available(now)
        target = left - max(0.0, -held)
        if held <= target:
            return None
        return replace(gate, tokens=target, stamp=max(gate.stamp, now))

    return change


def shared_token_gate(
    spec: ToolSpec,
    clock: Clock,
    *,
    key: str,
    store: Callable[[], Store],
    holder: str,
    now: Callable[[], float],
    spawn: Spawn,
) -> TokenGate | None:
    """The token gate of a shared gate's tool: its buckets in the store when it declares a
    token limit; else this process's (``token_gate``: None without an estimate)."""
    if all(limit is None for limit in spec.rate.token_limits):
        return token_gate(spec, clock)
    shared = functools.partial(
        SharedTokenGate, key=key, store=store, holder=holder, now=now, spawn=spawn
    )
    return token_gate(spec, clock, shared)
