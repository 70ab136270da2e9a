"""A declared HTTP tool in words (``playline tools describe``): its outcome rules, its poll
and where its provider reports a charge, as JSON a reader can check against the provider's
documentation. Never a key's value: an ``Auth`` is named by its secret's name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._http_forms import HttpPoll
from ._outcomes import Outcome, Reported


def _rule_doc(rule: Outcome) -> str:
    """A rule in words: ``status 403, body {'error': 'x'}: rate_limited (wait 60 s)``."""
    when = []
    if rule.codes is not None:
        codes = sorted(rule.codes)
        when.append(
            f"status {codes[0] // 100}xx"
            if len(codes) == 100 and codes[0] % 100 == 0
            else f"status {', '.join(map(str, codes))}"
        )
    if rule.body is not None:
        when.append(
            f"body {dict(rule.body)!r}"
            if isinstance(rule.body, Mapping)
            else f"body passes {getattr(rule.body, '__name__', 'a function')}"
        )
    extra = [f"{k} {v}" for k, v in (("job at", rule.job), ("wait", rule.wait)) if v is not None]
    if rule.wait_from:
        extra.append(f"wait from {rule.wait_from}")
    return f"{', '.join(when) or 'any answer'}: {rule.outcome}" + (
        f" ({', '.join(map(str, extra))})" if extra else ""
    )


def _poll_doc(polling: HttpPoll | None) -> dict[str, Any] | None:
    if polling is None:
        return None
    return {
        "url": polling.url,
        "interval": polling.interval,
        "backoff": polling.backoff,
        "max_interval": polling.max_interval,
        "max_wait": polling.max_wait,
        "outcomes": [_rule_doc(rule) for rule in polling.outcomes],
        "result": polling.result,
        "echo": dict(polling.echo),
        "expired": [_rule_doc(rule).rsplit(": ", 1)[0] for rule in polling.expired],
        "json": polling.json,
        "fetch": polling.fetch,
        "fetch_format": polling.fetch_format,
        "fetch_json": polling.fetch_json,
    }


def _reported_doc(reported: Reported) -> str:
    if reported.header is not None:
        return f"header {reported.header}"
    if reported.path is not None:
        flag = f" (charged when it is {reported.debited!r})" if reported.debited is not None else ""
        return f"body {reported.path}{flag}"
    return f"function {getattr(reported.read, '__name__', 'read')}"


def _plain(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: dict(v) if isinstance(v, Mapping) else v for k, v in values.items()}
