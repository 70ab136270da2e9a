"""A tool call's life: its states and the only moves between them.

``docs/architecture.md`` draws this table; a test checks the two agree and walks every move.
The main line is queued -> looked up -> claimed -> sent -> (pending job ->) recorded ->
settled. The side states end a call another way: answered from a receipt, shared with an
identical call in flight, held by another worker, counted by a plan, in doubt, failed or
stopped. Every end goes to ``SETTLED`` through ``CallExecutor.settle``, the one place that
resolves a call's future.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Protocol

__all__ = ["ENDS", "NEXT", "CallState", "move", "observing", "settled"]


class CallState(Enum):
    QUEUED = "queued"  # made by a row; its receipt not yet looked up
    LOOKED_UP = "looked up"  # no receipt answers it: waits in its tool's lane
    CLAIMED = "claimed"  # its receipt is this worker's; the budget holds its worst case
    SENT = "sent"  # its request is out
    PENDING_JOB = "pending job"  # an async job the provider accepted, polled to its end
    RECORDED = "recorded"  # its result and charge are in the store
    ANSWERED = "answered"  # a completed receipt answers it, at no cost
    SHARED = "shared"  # an identical call in flight answers it
    HELD = "held"  # another worker holds its receipt: it waits for that result
    PLANNED = "planned"  # a plan counts it instead of sending it
    IN_DOUBT = "in doubt"  # the provider may have charged it with no result kept
    FAILED = "failed"  # not answered, and not charged
    STOPPED = "stopped"  # the attempt stopped before it was answered
    SETTLED = "settled"  # its future is resolved

    # Members are singletons: hashed by identity in C, not by name in Python (Enum's own
    # ``__hash__``), as every move looks its states up twice.
    __hash__ = object.__hash__


_S = CallState
_ABORTS = frozenset({_S.FAILED, _S.STOPPED})  # any live state may fail or stop
ENDS = frozenset(
    {_S.RECORDED, _S.ANSWERED, _S.SHARED, _S.PLANNED, _S.IN_DOUBT, _S.FAILED, _S.STOPPED}
)
NEXT: dict[CallState, frozenset[CallState]] = {
    _S.QUEUED: frozenset({_S.LOOKED_UP, _S.ANSWERED, _S.SHARED}) | _ABORTS,
    _S.LOOKED_UP: frozenset({_S.CLAIMED, _S.ANSWERED, _S.SHARED, _S.HELD, _S.IN_DOUBT, _S.PLANNED})
    | _ABORTS,
    _S.HELD: frozenset({_S.ANSWERED, _S.LOOKED_UP}) | _ABORTS,
    _S.CLAIMED: frozenset({_S.SENT}) | _ABORTS,
    _S.SENT: frozenset({_S.RECORDED, _S.ANSWERED, _S.PENDING_JOB, _S.CLAIMED, _S.IN_DOUBT})
    | _ABORTS,
    _S.PENDING_JOB: frozenset({_S.RECORDED, _S.ANSWERED, _S.IN_DOUBT}) | _ABORTS,
    **{end: frozenset({_S.SETTLED}) for end in ENDS},
    _S.SETTLED: frozenset(),
}


class _Stateful(Protocol):
    state: CallState


Observer = Callable[[CallState, CallState], None]
_observers: list[Observer] = []


def move(call: _Stateful, to: CallState) -> None:
    """Move ``call`` to ``to``; a move the table does not allow is a bug in the engine."""
    was = call.state
    if to not in NEXT[was]:
        raise AssertionError(f"a tool call cannot go from {was.value} to {to.value}")
    call.state = to
    if _observers:
        for observer in _observers:
            observer(was, to)


def settled(call: _Stateful, end: CallState) -> None:
    """Move ``call`` to ``end`` (unless it is there), then to ``SETTLED``: ``move`` twice
    in one step, as every call settles."""
    was = call.state
    if end not in ENDS or (was is not end and end not in NEXT[was]):
        raise AssertionError(f"a tool call cannot end as {end.value} from {was.value}")
    call.state = CallState.SETTLED
    if _observers:
        for observer in _observers:
            if was is not end:
                observer(was, end)
            observer(end, CallState.SETTLED)


@contextmanager
def observing(observer: Observer) -> Iterator[None]:
    """Tell ``observer`` every move while the block runs (the lifecycle's tests)."""
    _observers.append(observer)
    try:
        yield
    finally:
        _observers.remove(observer)
