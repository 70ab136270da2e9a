"""Plays that run themselves: runs queued by schedules and webhooks for a worker to start."""

from ._queue import queue_run, queued_origin

__all__ = ["queue_run", "queued_origin"]
