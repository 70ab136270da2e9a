"""Runs queued for a worker: how a schedule's fire or a webhook's delivery becomes a run.

A queued run is an ordinary run record, ``suspended`` and due at once (or at its fire time):
the worker that resumes sleeping runs (``pl.Worker``, ``playline worker``) starts it the way it
resumes them, outside whatever queued it. Its id is given by the trigger (a schedule's name and
fire time, a hook's name and delivery id), so the same fire or delivery queued twice, by two
workers or a sender that retried, is one run: ``create_run`` refuses the second, in the same
transaction that would have written it.

``source`` says where the play's code is (``{"file": ..., "function": ...}``, as `playline run`
records it), for workers that find plays by file; ``origin`` says what queued it (shown by
`playline show`, and by the worker when it starts it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .._clock import Clock, SystemClock
from .._json import dumps
from ..errors import PlayDefinitionError
from ..store import RunRecord, RunStatus, Store

__all__ = ["queue_run", "queued_origin"]


def queue_run(
    store: Store,
    *,
    run_id: str,
    play: str,
    input: Any = None,
    at: float | None = None,
    origin: Mapping[str, Any],
    source: Mapping[str, Any] | None = None,
    cwd: str | None = None,
    notify: str | None = None,
    clock: Clock | None = None,
) -> bool:
    """Queue the run ``run_id`` of the play named ``play``, due at ``at`` (default: now).
    False when a run with that id exists (nothing is written: it was queued before).
    ``notify``: the URL the run POSTs its summary to when it ends (``pl.run(notify=)``)."""
    if not isinstance(run_id, str) or not run_id.strip():
        raise PlayDefinitionError("A queued run needs a non-empty run id.")
    now = (clock or SystemClock()).now()
    options: dict[str, Any] = {"cwd": cwd or os.getcwd(), "origin": dict(origin)}
    if source is not None:
        options["source"] = dict(source)
    if notify is not None:
        options["notify"] = notify
    record = RunRecord(
        run_id=run_id,
        play=play,
        status=RunStatus.SUSPENDED,
        input=_stored({} if input is None else input),
        created_at=now,
        updated_at=now,
        waiting={"wake_at": now if at is None else at, "queued": dict(origin)},
        options=options,
    )
    return store.create_run(record)


def queued_origin(record: RunRecord) -> dict[str, Any] | None:
    """What queued ``record`` (a schedule, a hook), or None for a run started another way."""
    origin = record.options.get("origin")
    return dict(origin) if isinstance(origin, Mapping) else None


def _stored(input: Any) -> Any:
    dumps(input, what="The queued run's input")  # raises PlayDefinitionError saying why not
    return input
