"""The SQL of the shared rate gates (``store/_gates.py``): the ``rate_gates`` row of each gate,
the ``gate_slots`` of each holder, and the lease that takes tokens in one statement.

The lease is one ``UPDATE ... RETURNING``: every ``SET`` expression reads the row as it was,
so the tokens refilled since ``stamp``, the number granted (or the token reserved) and the
tokens left are computed together, under the row's lock, and the answer comes back in the
same round trip. It must
compute exactly what ``GateState.take`` does (the memory store's); the conformance suite
checks that they agree. Dialects differ only in the names of three functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from .._gates import EPSILON, GateState

__all__ = ["GATE_COLUMNS", "UPSERT_GATE", "Functions", "gate_from", "gate_params", "lease_sql"]

_FIELDS = (
    "key",
    "rate",
    "burst",
    "tokens",
    "stamp",
    "paused_until",
    "ceiling",
    "declared_cap",
    "cap",
    "cut_until",
    "cap_cut_until",
    "noise_until",
    "last_rate",
    "last_cap",
    "last_share",
)
GATE_COLUMNS = ", ".join(_FIELDS)

UPSERT_GATE = (
    f"INSERT INTO rate_gates ({GATE_COLUMNS}, granted) "
    f"VALUES ({', '.join('?' * (len(_FIELDS) + 1))}) ON CONFLICT (key) DO UPDATE SET "
    + ", ".join(f"{name} = excluded.{name}" for name in (*_FIELDS[1:], "granted"))
)


@dataclass(frozen=True)
class Functions:
    """A dialect's names for the two-argument minimum and maximum and for rounding down."""

    least: str
    greatest: str
    floor: str  # a format string with one {} for the (non-negative) argument


SQLITE = Functions(least="MIN", greatest="MAX", floor="CAST({} AS INTEGER)")
POSTGRES = Functions(least="LEAST", greatest="GREATEST", floor="FLOOR({})")


@cache
def lease_sql(fn: Functions) -> str:
    """One pass of a lease (``GateState.take``): parameters ``(now, wanted, in_use, reach,
    ahead, capped, key)``, the reach of a reservation being ``reach`` tokens and ``ahead``
    seconds' worth (``capped``: 1 when a shared cap limits the tokens granted, else 0);
    returns the gate and ``granted``."""
    least, greatest = fn.least, fn.greatest
    refill = (
        f"(CASE WHEN rate <= 0 THEN burst "
        f"ELSE {least}(burst, tokens + {greatest}(0, p.t_now - stamp) * rate) END)"
    )
    ask = (
        f"(CASE WHEN cap > 0 AND p.t_capped = 1 "
        f"THEN {least}(p.t_wanted, {greatest}(0, cap - p.t_in_use)) ELSE p.t_wanted END)"
    )
    whole = fn.floor.format(f"{refill} + {EPSILON!r}")
    now = (
        f"(CASE WHEN paused_until > p.t_now THEN 0 WHEN rate <= 0 THEN {ask} "
        f"WHEN {refill} >= {1 - EPSILON!r} THEN {least}({ask}, {whole}) ELSE 0 END)"
    )
    due = fn.floor.format(f"{greatest}(0, {refill} + (p.t_reach + p.t_ahead * rate) + {EPSILON!r})")
    reserve = (
        f"(CASE WHEN paused_until > p.t_now OR rate <= 0 OR {ask} < 1 "
        f"OR {refill} >= {1 - EPSILON!r} THEN 0 ELSE {least}({ask}, burst, {due}) END)"
    )
    return (
        f"UPDATE rate_gates SET granted = {now} + {reserve}, "
        f"tokens = (CASE WHEN rate <= 0 THEN tokens WHEN {reserve} > 0 "
        f"THEN {refill} - {reserve} "
        f"ELSE {greatest}({least}({refill}, 0), {refill} - {now}) END), "
        f"stamp = {greatest}(stamp, p.t_now) "
        "FROM (SELECT CAST(? AS DOUBLE PRECISION) AS t_now, CAST(? AS BIGINT) AS t_wanted, "
        "CAST(? AS BIGINT) AS t_in_use, CAST(? AS DOUBLE PRECISION) AS t_reach, "
        "CAST(? AS DOUBLE PRECISION) AS t_ahead, CAST(? AS BIGINT) AS t_capped) AS p "
        f"WHERE rate_gates.key = ? RETURNING {GATE_COLUMNS}, granted"
    )


def gate_from(row: Sequence[Any]) -> GateState:
    values = dict(zip(_FIELDS, row, strict=False))
    return GateState(
        key=values["key"],
        rate=float(values["rate"]),
        burst=int(values["burst"]),
        tokens=float(values["tokens"]),
        stamp=float(values["stamp"]),
        paused_until=float(values["paused_until"]),
        ceiling=float(values["ceiling"]),
        declared_cap=int(values["declared_cap"]),
        cap=int(values["cap"]),
        cut_until=float(values["cut_until"]),
        cap_cut_until=float(values["cap_cut_until"]),
        noise_until=float(values["noise_until"]),
        last_rate=float(values["last_rate"]),
        last_cap=int(values["last_cap"]),
        last_share=float(values["last_share"]),
    )


def gate_params(state: GateState, granted: int = 0) -> tuple[Any, ...]:
    return (*(getattr(state, name) for name in _FIELDS), granted)
