"""The exceptions Playline raises.

Every error Playline raises is a ``PlaylineError``; catch that to catch them all::

    PlaylineError
     ├── PlayDefinitionError      misuse of the API, raised at once, says what to do instead
     │    └── SecretLeakError     a secret value was about to be stored, logged or emitted
     ├── ToolError                a tool call failed (tool id, HTTP status, code, request id)
     │    └── LlmAnswerError      a model's answer is unusable: off the schema, cut, refused
     ├── GatewayError             a gateway's tool list could not be fetched
     ├── BudgetExceeded           a credit budget would be exceeded; raised before the call
     ├── GovernanceError          a governance counter (depth, recursion, counts) hit its limit
     ├── ReceiptWaitTimeout       another worker holds a receipt longer than we may wait
     ├── EventTimeout             ctx.wait_for_event(key, timeout=...) ran out of time
     ├── RowFailed                a row failed in a dataset run with on_row_error="raise"
     ├── RunHeld                  another live attempt holds the run; nothing was done
     └── StoreError               the store cannot be opened, read or written

Errors carry their context (play, dataset, row key, column, tool) as attributes and their
messages end with what to do next.
"""

from __future__ import annotations

import re
import time

__all__ = [
    "BudgetExceeded",
    "EventTimeout",
    "GatewayError",
    "GovernanceError",
    "LlmAnswerError",
    "PlayDefinitionError",
    "PlaylineError",
    "ReceiptWaitTimeout",
    "RowFailed",
    "RunHeld",
    "SecretLeakError",
    "StoreError",
    "ToolError",
]


class PlaylineError(Exception):
    """Base class of every error Playline raises."""


class PlayDefinitionError(PlaylineError):
    """The play, dataset, column or call is not valid; the message says how to fix it."""


class SecretLeakError(PlayDefinitionError):
    """A value read from ``ctx.secrets`` was about to be persisted, logged or emitted."""


class ToolError(PlaylineError):
    """A tool call failed.

    ``status`` is the HTTP status for remote tools (None for local ones), ``code`` and
    ``request_id`` are the provider's when it gave them. ``outcome`` is what the provider
    meant, when a declaration says it (``pl.HttpTool``'s outcome rules: ``rate_limited``,
    ``blocked``, ``quota_exhausted``, ``insufficient_credits``, ``retryable``, ``fatal``):
    a provider that answers 403 for "too fast" is rate limited, whatever its status.
    ``key`` names the variable the request's key came from (never its value): what a 401 or
    403 says to check.
    """

    def __init__(
        self,
        tool: str,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        request_id: str | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        outcome: str | None = None,
        key: str | None = None,
    ) -> None:
        self.tool = tool
        self.key = key
        self.retry_after = retry_after
        self.status = status
        self.code = code
        self.request_id = request_id
        self.provider_message = message
        self.retryable = retryable
        self.outcome = outcome
        parts = [f"Tool {tool} failed"]
        if status is not None:
            parts[0] += f" ({status})"
        text = f"{parts[0]}: {message}"
        if code:
            text += f" code={code}"
        if request_id:
            text += f" request_id={request_id}"
        super().__init__(text)

    @property
    def throttled(self) -> bool:
        """The provider said to wait (a 429 unless an outcome rule says otherwise)."""
        if self.outcome is None:
            return self.status == 429
        return self.outcome in ("rate_limited", "blocked")

    @property
    def exhausted(self) -> bool:
        """The account can buy nothing more for now: its quota or credits are used up."""
        return self.outcome in ("quota_exhausted", "insufficient_credits")


class LlmAnswerError(ToolError):
    """``ctx.llm``: the model answered, but its answer cannot be used, so the cell fails.

    ``code`` says why: ``"invalid_answer"`` (it did not match the schema, nor did the
    answers to the re-asks), ``"length"`` (``max_tokens`` cut it before the JSON ended) or
    ``"refusal"`` (the model declined). ``reason`` is the last validation error (or the
    refusal), ``raw`` the last answer as the model wrote it, ``attempts`` how many answers
    were asked for (each a call of its own, with its receipt and its ledger row).
    """

    def __init__(
        self, tool: str, message: str, *, code: str, reason: str, raw: str, attempts: int
    ) -> None:
        super().__init__(tool, message, code=code)
        self.reason = reason
        self.raw = raw
        self.attempts = attempts


class GatewayError(PlaylineError):
    """A gateway could not be reached or answered its tool list with something unusable."""


class BudgetExceeded(PlaylineError):
    """A call would push the run past its credit budget; it was not sent."""

    def __init__(self, message: str, *, spent: float, limit: float, tool: str | None = None):
        self.spent = spent
        self.limit = limit
        self.tool = tool
        super().__init__(message)


class GovernanceError(PlaylineError):
    """A governance counter exceeded its limit (``counter`` and ``limit`` say which)."""

    def __init__(self, message: str, *, counter: str, limit: int):
        self.counter = counter
        self.limit = limit
        super().__init__(message)


class ReceiptWaitTimeout(PlaylineError):
    """Another live worker is executing the same call and did not finish in time."""


class EventTimeout(PlaylineError):
    """No event came for ``ctx.wait_for_event(key, timeout=...)`` in time; a play may catch it."""

    def __init__(self, key: str, timeout: float) -> None:
        self.key = key
        self.timeout = timeout
        super().__init__(
            f"No event {key!r} arrived within {timeout:g}s. Catch pl.EventTimeout to go on "
            "without it, or send it with pl.send_event / `playline event send`."
        )


class RowFailed(PlaylineError):
    """A row failed and the dataset was run with ``on_row_error="raise"``."""

    def __init__(self, dataset: str, row_key: str, column: str, error: BaseException) -> None:
        self.dataset = dataset
        self.row_key = row_key
        self.column = column
        super().__init__(
            f"Dataset {dataset!r}, row {row_key!r}, column {column!r} failed: "
            f"{full_stop(str(error))} "
            'Use on_row_error="record" to record failed rows and let the others finish.'
        )


class RunHeld(PlaylineError):
    """Another live attempt holds the run (``holder``, its lease renewed until ``lease_until``)."""

    def __init__(self, run_id: str, *, holder: str | None, lease_until: float) -> None:
        self.run_id = run_id
        self.holder = holder
        self.lease_until = lease_until
        super().__init__(
            f"Run {run_id} is being run by another process ({holder}, lease renewed until "
            f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(lease_until))}). Wait for "
            "it to finish or stop it (playline runs shows it as "
            "running); a holder that died is taken over once its lease runs out."
        )


class StoreError(PlaylineError):
    """The store could not be opened, read or written."""


def full_stop(text: str) -> str:
    """``text`` ending its sentence once: a message quoted into another ("Cannot import x:
    {error}. Fix the file") may end with its own full stop, and gets no second one."""
    return text if text.rstrip().endswith((".", "!", "?")) else f"{text}."


_REFUSED_KEY = re.compile(r"40[13] from \S+ \((?:[^()]*, )?key ([^ ()]+)\)")


def refused_key(cause: str) -> str | None:
    """The variable holding the key a provider refused, as a failed call's cause names it
    (``401 from hunter.email_finder (fatal, key HUNTER_API_KEY)``: what to check, rather than
    a gateway's token); None when the cause names none."""
    found = _REFUSED_KEY.search(cause)
    return found[1] if found else None
