"""Plays that run themselves: runs queued by schedules and webhooks for a worker to start."""

from ._queue import queue_run, queued_origin
from ._schedules import (
    CATCH_UP,
    GRACE,
    add_schedule,
    check_cron,
    check_name,
    check_timezone,
    fire_schedules,
    next_fire_time,
    pause,
    schedule,
    schedule_run_id,
)
from ._signing import DELIVERY_HEADER, SIGNATURE_HEADER, BadSignature, sign, verify

__all__ = [
    "CATCH_UP",
    "DELIVERY_HEADER",
    "GRACE",
    "SIGNATURE_HEADER",
    "BadSignature",
    "add_schedule",
    "check_cron",
    "check_name",
    "check_timezone",
    "fire_schedules",
    "next_fire_time",
    "pause",
    "queue_run",
    "queued_origin",
    "schedule",
    "schedule_run_id",
    "sign",
    "verify",
]
