"""What to do when a call to a tool fails (SEMANTICS.md 25), decided from the error alone.

- ``429`` (rate-limited) and ``409 idempotency_in_progress`` (the provider is still working
  on this very request): wait, then send the same request again.
- A request that never reached the provider (refused connection, connect timeout): safe to
  send again, with backoff.
- A request that may have reached it is sent again only when that cannot pay twice. A 5xx:
  when the tool declares its 5xx safe to retry (they strike before the work), or its provider
  honours idempotency keys (``in_doubt="resend"``: the repeat carries the same key). No answer
  (a read timeout, a dropped connection): only with idempotency keys, as the provider may still
  be doing the work, whatever its 5xx are. Otherwise the call fails *in doubt*: its receipt
  says it may have been charged, and only the user decides to buy it again.
- Anything else (400, 401, 404, a local tool's exception): the provider said no; the call
  fails with its cause.

An error with an ``outcome`` (an HTTP tool's outcome rules said what its answer means) is
decided by it instead of its status: ``rate_limited`` and ``blocked`` wait, ``retryable`` is
sent again with backoff (the rule says the provider did no work), the others fail.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..errors import ToolError
from ._spec import ToolSpec

__all__ = ["BACKOFF", "MAX_ATTEMPTS", "Verdict", "decide", "maybe_charged", "provider_failure"]

MAX_ATTEMPTS = 3  # sends of one request that failed for the provider's reasons
BACKOFF = 0.25  # seconds before the first repeat; doubles each time

NEVER_SENT = frozenset({"connection_error"})
MAYBE_SENT = frozenset({"timeout", "protocol_error"})


class Verdict(Enum):
    WAIT = "wait"  # the provider asked us to wait: same request again afterwards
    REPEAT = "repeat"  # a transient failure: same request again after a backoff
    FAIL = "fail"  # the provider said no (nothing was charged)
    FAIL_IN_DOUBT = "fail_in_doubt"  # it may have been charged: never repeated blindly


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    delay: float = 0.0


def provider_failure(error: ToolError) -> bool:
    """A failure of the provider's (down, overloaded, unreachable): what trips a breaker."""
    return (error.status or 0) >= 500 or error.code in NEVER_SENT or error.code in MAYBE_SENT


def maybe_charged(error: ToolError, spec: ToolSpec) -> bool:
    """Whether a failed request may have reached the provider and been charged: it gave no
    answer, or a 5xx of a tool whose 5xx may strike after the work (unless an outcome rule
    said what the 5xx means)."""
    if error.code in MAYBE_SENT:
        return True
    return (error.status or 0) >= 500 and not spec.retry_safe and error.outcome is None


def decide(error: ToolError, spec: ToolSpec, sends: int) -> Decision:
    """What to do after the ``sends``-th send of a request failed with ``error``."""
    status = error.status or 0
    if error.throttled or (status == 409 and error.code == "idempotency_in_progress"):
        return Decision(Verdict.WAIT, 1.0 if error.retry_after is None else error.retry_after)
    backoff = BACKOFF * 2 ** (sends - 1)
    if error.outcome is not None:  # an outcome rule said what the answer means
        if error.outcome == "retryable" and sends < MAX_ATTEMPTS:
            return Decision(Verdict.REPEAT, backoff)
        return Decision(Verdict.FAIL)
    if error.code in NEVER_SENT:
        return Decision(Verdict.REPEAT if sends < MAX_ATTEMPTS else Verdict.FAIL, backoff)
    if error.code in MAYBE_SENT:  # no answer: the provider may still be doing the work
        if spec.in_doubt == "resend" and sends < MAX_ATTEMPTS:
            return Decision(Verdict.REPEAT, backoff)  # the same key: it is not paid twice
        return Decision(Verdict.FAIL_IN_DOUBT)
    if status >= 500:  # the provider answered that it failed
        if spec.retry_safe or spec.in_doubt == "resend":
            if sends < MAX_ATTEMPTS:
                return Decision(Verdict.REPEAT, backoff)
            return Decision(Verdict.FAIL if spec.retry_safe else Verdict.FAIL_IN_DOUBT)
        return Decision(Verdict.FAIL_IN_DOUBT)
    return Decision(Verdict.FAIL)
