"""Notifications: a run's summary POSTed to a URL when it ends or is stopped (``notify=``).

The body is a message Slack's incoming webhooks accept: ``text`` (the fallback that
notifications and screen readers show) and ``blocks`` (a header, the counts as section
fields, the credits per tool, the ``playline show`` command), plus ``metadata`` whose
``event_payload`` holds the same summary as plain values for receivers that are not Slack.
A run that suspends to wait for a time or an event is not over: it notifies when it ends.

Sending is best effort: a receiver that does not answer 2xx (or at all, within 10 seconds)
leaves a warning in the run's log, and the run's status is what it was.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from .errors import PlayDefinitionError
from .store import Event, Store, StoreIO

__all__ = ["EVENT_TYPE", "check_notify", "message", "notify"]

EVENT_TYPE = "playline_run_ended"
TIMEOUT = 10.0
_NOT_A_STOP = ("lease lost",)  # another process holds the run and goes on: it notifies


def check_notify(url: Any) -> str | None:
    """``notify=``: None, or an http(s) URL."""
    if url is None:
        return None
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise PlayDefinitionError(
            f"notify={url!r}: give an http:// or https:// URL to POST the run's summary to "
            "(e.g. a Slack incoming webhook), or leave it out."
        )
    return parts.geturl()


def ended(status: str, waiting: Mapping[str, Any] | None) -> bool:
    """Whether a run that ended its attempt so is over or stopped (not only waiting)."""
    if status != "suspended":
        return True
    stop = (waiting or {}).get("stop")
    return bool(stop) and stop not in _NOT_A_STOP


def message(
    *,
    run_id: str,
    play: str,
    status: str,
    rows: int,
    failed: int,
    credits: float,
    tools: Mapping[str, float],
    error: str | None = None,
    stop: str | None = None,
) -> dict[str, Any]:
    """The Slack-shaped body of a run's summary."""
    shown = f"stopped ({stop})" if stop else status
    show = f"playline show {shlex.quote(run_id)}"
    text = (
        f"Playline run {run_id} of play {play} {shown}: {rows} rows, {failed} failed, "
        f"{credits:g} credits. Details: {show}"
    )
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": f"{play}: {shown}"[:150]}},
        {
            "type": "section",
            "fields": [
                _field("Status", shown),
                _field("Rows", str(rows)),
                _field("Failed", str(failed)),
                _field("Credits", f"{credits:g}"),
            ],
        },
    ]
    if tools:
        lines = [f"• `{_escape(t)}`: {c:g}" for t, c in sorted(tools.items())]
        blocks.append(_section("*Credits per tool*\n" + "\n".join(lines)))
    if error:
        blocks.append(_section(f"*Error*\n{_escape(error)}"))
    blocks.append(
        {"type": "context", "elements": [{"type": "mrkdwn", "text": f"Details: `{show}`"}]}
    )
    payload = {
        "run_id": run_id,
        "play": play,
        "status": status,
        "stop": stop,
        "rows": rows,
        "failed": failed,
        "credits": credits,
        "credits_per_tool": dict(tools),
        "error": error,
        "show": show,
    }
    return {
        "text": text,
        "blocks": blocks,
        "metadata": {"event_type": EVENT_TYPE, "event_payload": payload},
    }


def _escape(text: str) -> str:
    """Text as Slack's mrkdwn shows it (``&``, ``<`` and ``>`` are its markup)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _field(name: str, value: str) -> dict[str, str]:
    return {"type": "mrkdwn", "text": f"*{name}*\n{_escape(value)}"}


def _section(text: str) -> dict[str, Any]:
    # a section's text holds at most 3,000 characters
    short = text if len(text) <= 3000 else text[:2999] + "…"
    return {"type": "section", "text": {"type": "mrkdwn", "text": short}}


async def notify(
    store: Store,
    url: str,
    *,
    run_id: str,
    play: str,
    status: str,
    rows: int,
    failed: int,
    error: str | None,
    waiting: Mapping[str, Any] | None,
    now: float,
) -> bool:
    """POST the run's summary to ``url``; a failure is a warning in the run's log (returns
    whether it was delivered)."""
    io = StoreIO(store)
    tools: dict[str, float] = {}
    for entry in await io(store.read_ledger, run_id):
        tools[entry.tool] = round(tools.get(entry.tool, 0.0) + entry.credits, 6)
    body = message(
        run_id=run_id,
        play=play,
        status=status,
        rows=rows,
        failed=failed,
        credits=round(sum(tools.values()), 6),
        tools=tools,
        error=error,
        stop=(waiting or {}).get("stop"),
    )
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            response = await client.post(url, json=body)
        why = None if response.is_success else f"it answered {response.status_code}"
    except httpx.HTTPError as exc:
        why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if why is None:
        return True
    parts = urlsplit(url)  # the host only: a webhook's path may hold its token
    warning = (
        f"warning: the notification to {parts.scheme}://{parts.hostname} was not delivered "
        f"({why}); the run is {status} all the same. Check the URL (notify= / --notify)."
    )
    log = Event(kind="log", run_id=run_id, at=now, preview=warning, data={"notify": "failed"})
    await io(store.append_events, [log])
    return False
