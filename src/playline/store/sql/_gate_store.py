"""The shared rate gates on SQL (the ``GateStore`` role), for both dialects.

A lease is one transaction: under a shared cap, the gate's key is locked (an advisory lock on
PostgreSQL; SQLite's write lock), the live holders' calls in flight are counted (the rows of
holders that are gone are dropped), and the lease's ``UPDATE ... RETURNING`` takes the tokens;
without a shared cap, or for tokens alone (``slots=False``: a reservation behind others'), the
``UPDATE`` is the whole transaction (the row's lock serialises it, for one statement).
``take_slots`` is the other half: the slots of tokens leased alone, under the gate's lock;
asked for none, it is a look at the gate and its calls in flight, under no lock (a process
waiting for a full cap looks until it has room, then leases).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import TYPE_CHECKING

from .._gates import (
    EPSILON,
    GateConfig,
    GateGrant,
    GateState,
    Window,
    count_in_flight,
    window_room,
)
from ._cursor import Cursor
from ._gate_tables import (
    GATE_COLUMNS,
    SQLITE,
    UPSERT_GATE,
    Functions,
    gate_from,
    gate_params,
    lease_sql,
)

__all__ = ["GateRows"]

_UPDATE_GATE = (
    "UPDATE rate_gates SET rate = ?, burst = ?, tokens = ?, stamp = ?, paused_until = ?, "
    "ceiling = ?, declared_cap = ?, cap = ?, cut_until = ?, cap_cut_until = ?, noise_until = ?, "
    "last_rate = ?, last_cap = ?, last_share = ? WHERE key = ?"
)


def _queued(state: GateState, now: float) -> bool:
    """Whether other reservations are ahead of a lease at ``now`` (the bucket is in debt)."""
    return state.rate > 0 and state.available(now) < -EPSILON


class GateRows:
    """The gate methods of ``SQLStore``; the dialect supplies what is declared here."""

    _functions: Functions = SQLITE
    _for_update = ""  # how a read locks the row it will write (PostgreSQL: " FOR UPDATE")

    if TYPE_CHECKING:  # the dialect's (see SQLStore)

        def _transaction(self, what: str, *, write: bool) -> AbstractContextManager[Cursor]: ...
        def _lock_keys(self, cur: Cursor, keys: Sequence[str]) -> None: ...

    def lease_gate(
        self,
        key: str,
        wanted: int,
        *,
        config: GateConfig,
        holder: str,
        lease_until: float,
        now: float,
        ahead: float = 0.0,
        slots: bool = True,
    ) -> GateGrant:
        if config.windows:  # a window's sends are counted when they go: no reservations
            ahead = 0.0
        shared_cap = config.cap > 0 and slots
        with self._transaction(f"take tokens from the rate gate {key}", write=True) as cur:
            in_use, wait = 0, 0.0
            if shared_cap or config.windows:
                self._lock_keys(cur, [f"gate:{key}"])
            if shared_cap:
                in_use = self._in_flight(cur, key, holder, now)
            if config.windows:
                room, wait = self._window_room(cur, key, config.windows, now)
                wanted = min(wanted, room)
            lease = lease_sql(self._functions)
            tokens_alone = (now, wanted, 0, 0.0, ahead, 0, key)
            first = (now, wanted, in_use, float(ahead > 0), 0.0, 1, key) if shared_cap else None
            row = cur.execute(lease, first or tokens_alone).fetchone()
            if row is None and not shared_cap:
                # A new gate: made once, whoever comes first (the others wait for the lock).
                self._lock_keys(cur, [f"gate:{key}"])
                row = cur.execute(lease, tokens_alone).fetchone()
            if row is not None and (state := gate_from(row)).declared_as(config):
                granted = int(row[-1])
                held = granted if shared_cap and state.cap > 0 else 0
                if first and not granted and ahead > 0 and _queued(state, now):
                    # others' reservations are ahead: tokens alone, behind them (GateState.lease)
                    row = cur.execute(lease, tokens_alone).fetchone()
                    state, granted = gate_from(row), int(row[-1])
                grant = GateGrant.of(granted, state, now, wait, slots=held)
            else:  # new, or declared otherwise: start again from what this process declares
                grant = config.fresh(key, now).lease(wanted, now, in_use, ahead=ahead, slots=slots)
                grant = replace(grant, wait=wait)
                cur.execute(UPSERT_GATE, gate_params(grant.state, grant.granted))
            if grant.slots:
                self._hold(cur, key, holder, grant.slots, lease_until)
            if grant.granted and config.windows:
                cur.execute(
                    "INSERT INTO gate_sends (key, at, n) VALUES (?, ?, ?)",
                    (key, now, grant.granted),
                )
        return replace(grant, state=replace(grant.state, in_flight=in_use + grant.slots))

    def take_slots(
        self,
        key: str,
        wanted: int,
        *,
        config: GateConfig,
        holder: str,
        lease_until: float,
        now: float,
    ) -> GateGrant:
        taking = config.cap > 0 and wanted > 0  # else a look, under no lock
        with self._transaction(f"take calls of the rate gate {key}", write=taking) as cur:
            in_use = 0
            if taking:
                self._lock_keys(cur, [f"gate:{key}"])
            row = cur.execute(
                f"SELECT {GATE_COLUMNS} FROM rate_gates WHERE key = ?", (key,)
            ).fetchone()
            state = gate_from(row) if row is not None else config.fresh(key, now)
            if config.cap > 0 and state.cap > 0:
                in_use = self._in_flight(cur, key, holder, now, drop=taking)
            granted = state.slots_for(wanted, now, in_use)
            if granted and state.cap > 0:
                self._hold(cur, key, holder, granted, lease_until)
        return GateGrant(granted, replace(state, in_flight=in_use + granted))

    @staticmethod
    def _hold(cur: Cursor, key: str, holder: str, calls: int, lease_until: float) -> None:
        cur.execute(
            "INSERT INTO gate_slots (key, holder, calls, lease_until) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (key, holder) DO UPDATE SET "
            "calls = gate_slots.calls + excluded.calls, lease_until = excluded.lease_until",
            (key, holder, calls, lease_until),
        )

    @staticmethod
    def _window_room(
        cur: Cursor, key: str, windows: Sequence[Window], now: float
    ) -> tuple[int, float]:
        """``window_room`` over the requests ``gate_sends`` holds for ``key`` (those older
        than its longest window are dropped first)."""
        span = max(seconds for seconds, _ in windows)
        cur.execute("DELETE FROM gate_sends WHERE key = ? AND at <= ?", (key, now - span))
        used = [
            int(cur.execute(
                "SELECT COALESCE(SUM(n), 0) FROM gate_sends WHERE key = ? AND at > ?",
                (key, now - seconds),
            ).fetchone()[0])
            for seconds, _ in windows
        ]  # fmt: skip

        def oldest(window: Window, k: int) -> float:
            seconds = window[0]
            rows = cur.execute(  # each holds one request at least: k rows are enough
                "SELECT at, n FROM gate_sends WHERE key = ? AND at > ? ORDER BY at LIMIT ?",
                (key, now - seconds, k),
            ).fetchall()
            for at, n in rows:
                k -= int(n)
                if k <= 0:
                    return float(at) + seconds - now
            return 0.0

        return window_room(used, windows, oldest)

    @staticmethod
    def _in_flight(cur: Cursor, key: str, holder: str, now: float, *, drop: bool = True) -> int:
        """The calls in flight of ``key``'s live holders; ``drop``: the rows of the holders
        that are gone are deleted (under the gate's lock)."""
        rows = cur.execute(
            "SELECT holder, calls, lease_until FROM gate_slots WHERE key = ?", (key,)
        ).fetchall()
        in_use, gone = count_in_flight(rows, holder, now)
        if gone and drop:
            cur.executemany(
                "DELETE FROM gate_slots WHERE key = ? AND holder = ?", [(key, h) for h in gone]
            )
        return in_use

    def release_gate(self, key: str, count: int, *, holder: str, lease_until: float) -> None:
        with self._transaction(f"release calls of the rate gate {key}", write=True) as cur:
            cur.execute(
                "UPDATE gate_slots SET calls = calls - ?, lease_until = ? "
                "WHERE key = ? AND holder = ?",
                (count, lease_until, key, holder),
            )
            cur.execute(
                "DELETE FROM gate_slots WHERE key = ? AND holder = ? AND calls <= 0",
                (key, holder),
            )

    def renew_gates(self, holder: str, *, lease_until: float) -> int:
        with self._transaction("renew rate gate leases", write=True) as cur:
            cur.execute(
                "UPDATE gate_slots SET lease_until = ? WHERE holder = ?", (lease_until, holder)
            )
            return int(cur.rowcount)

    def tune_gate(
        self, key: str, change: Callable[[GateState], GateState | None]
    ) -> GateState | None:
        with self._transaction(f"tune the rate gate {key}", write=True) as cur:
            self._lock_keys(cur, [f"gate:{key}"])
            row = cur.execute(
                f"SELECT {GATE_COLUMNS} FROM rate_gates WHERE key = ?{self._for_update}", (key,)
            ).fetchone()
            if row is None:
                return None
            state = gate_from(row)
            changed = change(state)
            if changed is None or changed == state:
                return state
            cur.execute(_UPDATE_GATE, (*gate_params(changed)[1:-1], key))
            return replace(changed, key=key, in_flight=0)

    def read_gates(self, *, now: float) -> list[GateState]:
        with self._transaction("read the rate gates", write=False) as cur:
            states = [
                gate_from(row)
                for row in cur.execute(
                    f"SELECT {GATE_COLUMNS} FROM rate_gates ORDER BY key"
                ).fetchall()
            ]
            slots: dict[str, list[tuple[str, int, float]]] = {}
            for key, holder, calls, lease_until in cur.execute(
                "SELECT key, holder, calls, lease_until FROM gate_slots"
            ).fetchall():
                slots.setdefault(key, []).append((holder, int(calls), float(lease_until)))
        return [
            replace(s, in_flight=count_in_flight(slots.get(s.key, []), "", now)[0]) for s in states
        ]
