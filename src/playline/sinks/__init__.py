"""Sinks: where a play sends a finished dataset's rows, durably (``pl.sinks.webhook``)."""

from ._webhook import SinkError, WebhookSink, webhook

__all__ = ["SinkError", "WebhookSink", "webhook"]
