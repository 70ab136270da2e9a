"""Run ids a person gives (``pl.run(run_id=...)``, ``playline run --run-id``): checked before a
new run takes one.

A run id ends up in shell commands Playline prints (``playline resume <id>``), in file names
and in URLs, so a new one is kept to a charset none of them needs to quote: letters, digits,
``.``, ``_``, ``-`` and ``:``, not starting with ``-`` (a command would read it as an option),
at most ``MAX_LENGTH`` characters. The prefixes the runtime gives its own runs (a webhook's
``hook:<name>:<delivery>``, a schedule's ``sched-<name>-<fire time>``) are refused for a new
run: a run taken under such an id beforehand would make the real delivery or fire a duplicate
that never runs. A run that exists keeps its id whatever it is, and resumes by it.
"""

from __future__ import annotations

import re

from .errors import PlayDefinitionError

__all__ = [
    "HOOK_PREFIX",
    "MAX_LENGTH",
    "RESERVED_PREFIXES",
    "SCHEDULE_PREFIX",
    "check_new_run_id",
]

MAX_LENGTH = 200
HOOK_PREFIX = "hook:"  # a webhook delivery's run: hook:<hook name>:<delivery id>
SCHEDULE_PREFIX = "sched-"  # a schedule fire's run: sched-<name>-<fire time>
RESERVED_PREFIXES = (HOOK_PREFIX, SCHEDULE_PREFIX)

_SAFE = re.compile(r"[A-Za-z0-9._:][A-Za-z0-9._:-]*")


def check_new_run_id(run_id: str) -> str:
    """``run_id`` if a new run may take it; else a PlayDefinitionError saying why, and what
    to give instead."""
    if len(run_id) > MAX_LENGTH or not _SAFE.fullmatch(run_id):
        raise PlayDefinitionError(
            f"run_id={run_id[: MAX_LENGTH + 20]!r} cannot name a new run: give letters, digits, "
            f"'.', '_', '-' or ':', not starting with '-', at most {MAX_LENGTH} characters "
            "(e.g. 'leads-2026-01-05'), or no run id for a new one."
        )
    for prefix in RESERVED_PREFIXES:
        if run_id.lower().startswith(prefix):
            made_by = "a webhook delivery" if prefix == HOOK_PREFIX else "a schedule's fire"
            raise PlayDefinitionError(
                f"run_id={run_id!r} cannot name a new run: ids starting with {prefix!r} are "
                f"those of runs {made_by} queues, and taking one would make that delivery or "
                "fire a duplicate that never runs. Give another id (e.g. without the prefix), "
                "or no run id for a new one; a run that exists with this id resumes by it."
            )
    return run_id
