"""Schedules on SQL (the ``ScheduleStore`` role), for both dialects: one row per schedule.

A worker moves a schedule on with one ``UPDATE ... WHERE next_fire = ?``: the row's lock (the
database's write lock on SQLite) makes it a compare-and-set, so of two workers that fired the
same time only one advances it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ..._json import dumps, loads
from .._records import ScheduleRecord
from ._cursor import Cursor

__all__ = ["ScheduleRows"]

_COLUMNS = (
    "name, play, source, cron, timezone, input, catch_up, paused, next_fire, cwd, created_at, "
    "updated_at, last_fire, last_run_id, notify"
)
_INSERT = f"INSERT INTO schedules ({_COLUMNS}) VALUES ({','.join('?' * 15)})"
_UPSERT = (
    _INSERT
    + " ON CONFLICT (name) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS.split(", ")[1:])
)


def _params(s: ScheduleRecord) -> tuple[Any, ...]:
    source = None if s.source is None else dumps(s.source, what="A schedule's source").decode()
    return (
        s.name,
        s.play,
        source,
        s.cron,
        s.timezone,
        dumps(s.input, what=f"The input of schedule {s.name!r}").decode(),
        s.catch_up,
        int(s.paused),
        s.next_fire,
        s.cwd,
        s.created_at,
        s.updated_at,
        s.last_fire,
        s.last_run_id,
        s.notify,
    )


def _record(row: Sequence[Any]) -> ScheduleRecord:
    return ScheduleRecord(
        name=row[0],
        play=row[1],
        source=None if row[2] is None else loads(row[2]),
        cron=row[3],
        timezone=row[4],
        input=loads(row[5]),
        catch_up=row[6],
        paused=bool(row[7]),
        next_fire=row[8],
        cwd=row[9],
        created_at=row[10],
        updated_at=row[11],
        last_fire=row[12],
        last_run_id=row[13],
        notify=row[14],
    )


class ScheduleRows:
    """The schedule methods of ``SQLStore``; the dialect supplies its transactions."""

    if TYPE_CHECKING:  # the dialect's (see SQLStore)

        def _transaction(self, what: str, *, write: bool) -> AbstractContextManager[Cursor]: ...

    def save_schedule(self, schedule: ScheduleRecord, *, replace: bool) -> bool:
        params = _params(schedule)
        with self._transaction(f"save schedule {schedule.name}", write=True) as cur:
            if replace:
                cur.execute(_UPSERT, params)
                return True
            cur.execute(_INSERT + " ON CONFLICT (name) DO NOTHING", params)
            return bool(cur.rowcount)

    def get_schedule(self, name: str) -> ScheduleRecord | None:
        with self._transaction(f"read schedule {name}", write=False) as cur:
            row = cur.execute(f"SELECT {_COLUMNS} FROM schedules WHERE name = ?", (name,))
            found = row.fetchone()
        return None if found is None else _record(found)

    def list_schedules(self) -> list[ScheduleRecord]:
        with self._transaction("list the schedules", write=False) as cur:
            rows = cur.execute(f"SELECT {_COLUMNS} FROM schedules ORDER BY name").fetchall()
        return [_record(row) for row in rows]

    def pause_schedule(
        self, name: str, paused: bool, *, now: float, next_fire: float | None = None
    ) -> bool:
        what = f"{'pause' if paused else 'resume'} schedule {name}"
        with self._transaction(what, write=True) as cur:
            cur.execute(
                "UPDATE schedules SET paused = ?, updated_at = ?, "
                "next_fire = COALESCE(?, next_fire) WHERE name = ?",
                (int(paused), now, next_fire, name),
            )
            return bool(cur.rowcount)

    def delete_schedule(self, name: str) -> bool:
        with self._transaction(f"delete schedule {name}", write=True) as cur:
            cur.execute("DELETE FROM schedules WHERE name = ?", (name,))
            return bool(cur.rowcount)

    def advance_schedule(
        self,
        name: str,
        *,
        expected_next: float,
        next_fire: float,
        last_fire: float | None,
        last_run_id: str | None,
    ) -> bool:
        with self._transaction(f"advance schedule {name}", write=True) as cur:
            cur.execute(
                "UPDATE schedules SET next_fire = ?, last_fire = COALESCE(?, last_fire), "
                "last_run_id = COALESCE(?, last_run_id) WHERE name = ? AND next_fire = ?",
                (next_fire, last_fire, last_run_id, name, expected_next),
            )
            return bool(cur.rowcount)

    def due_schedules(self, *, now: float, limit: int = 100) -> list[ScheduleRecord]:
        with self._transaction("find the schedules that are due", write=False) as cur:
            rows = cur.execute(
                f"SELECT {_COLUMNS} FROM schedules WHERE paused = 0 AND next_fire <= ? "
                "ORDER BY next_fire, name LIMIT ?",
                (now, limit),
            ).fetchall()
        return [_record(row) for row in rows]
