"""Plays that run themselves: runs queued by schedules and webhooks for a worker to start."""

from ._queue import queue_run, queued_origin
from ._signing import DELIVERY_HEADER, SIGNATURE_HEADER, BadSignature, sign, verify

__all__ = [
    "DELIVERY_HEADER",
    "SIGNATURE_HEADER",
    "BadSignature",
    "queue_run",
    "queued_origin",
    "sign",
    "verify",
]
