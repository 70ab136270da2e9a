"""What a declared HTTP tool's answer means: found (its result, and what it cost), not
found, pending (a job to poll), or the ``ToolError`` its outcome rule says, with the
provider's own words, code and request id; and, for a bulk answer, each input's part of it
(by position, or by what the provider echoes), refused or found alone.

The rules themselves are ``_outcomes.py``'s; ``Reading`` applies them with what the tool
declares (its bulk form, where its provider reports a charge, its ``response=`` hook).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from .._secrets import redact, reveal
from ..errors import PlaylineError, ToolError
from ._http_forms import HttpBulk, HttpPoll
from ._http_request import _PLACE
from ._outcomes import Answer, Outcome, Reported, match, wait_of
from ._result import Charged, dotted
from ._spec import JobState

CLIPPED = 300  # characters of an unexpected answer's body kept in its error
_USED_UP = frozenset({"quota_exhausted", "insufficient_credits"})
_ABSENT: Any = object()  # a bulk answer's missing item, read as not found
ResponseHook = Callable[[Answer], Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Reading:
    """How one tool reads its answers: ``tool`` (its id), ``key`` (its secret's name, never
    the key: named on an error), ``response`` (its hook, answer -> result), ``bulk`` (its bulk
    form), ``reported`` (where the provider says what it charged), ``credits`` (the
    declared cost a reported one is read against) and ``outcomes`` (the rules a bulk answer's
    items go through)."""

    tool: str
    key: str | None = None
    response: ResponseHook | None = None
    bulk: HttpBulk | None = None
    reported: Reported | None = None
    credits: float = 0.0
    outcomes: tuple[Outcome, ...] = ()

    def state(
        self,
        rules: Sequence[Outcome],
        answer: Answer,
        result: str | None,
        polled: Any = None,
        *,
        reported: float | None = None,
        item: bool = False,
    ) -> JobState:
        """What ``answer`` means: done (a result, or None when not found), pending (the job
        it names, else the one ``polled``), or the ``ToolError`` its outcome is. A done
        answer carries what it cost when the rule or the provider says (``Charged``;
        ``reported``: the provider's figure, ``charged``). An ``item`` of a bulk answer is
        never pending on its own (a bulk job is pending as a whole)."""
        rule = match(rules, answer, result)
        if rule is not None and rule.outcome in ("found", "not_found"):
            data = self.result(answer, result) if rule.outcome == "found" else None
            if rule.credits is not None or reported is not None or rule.repeat:
                declared = None if rule.credits is None else float(rule.credits)
                data = Charged(data, declared, reported, rule.repeat)
            return JobState(done=True, result=data)
        if rule is not None and rule.outcome == "pending" and not item:
            job = dotted(answer.body, rule.job) if rule.job else polled
            if job is not None and job != "":
                return JobState(done=False, job=job, wait=_said_wait(rule, answer))
        raise self.refusal(rule, answer, item=item)

    def result(self, answer: Answer, path: str | None) -> Any:
        if self.response is not None:
            return self.hook(self.response, answer, "response")
        return answer.body if path is None else dotted(answer.body, path)

    def hook(self, hook: Callable[[Any], Any], value: Any, what: str) -> Any:
        """A Python hook's answer; its failure is the call's (the cell fails with it). A
        request hook refusing its input with Playline's own error (an LLM call's model without
        a price) says so in its own words: the input cannot be sent, nothing was."""
        try:
            out = hook(value)
        except Exception as exc:
            if what == "request" and isinstance(exc, PlaylineError):
                refused = ToolError(self.tool, str(exc), code="invalid_input", outcome="fatal")
                raise refused from None
            raise ToolError(
                self.tool,
                f"its {what} function failed: {type(exc).__name__}: {exc}",
                code="exception",
                outcome="fatal",
            ) from exc
        if what == "request" and not isinstance(out, Mapping):
            raise ToolError(
                self.tool,
                f"its request function returned {type(out).__name__}; return the request's "
                "parts as a dict (url, query, json, form, headers)",
                code="exception",
                outcome="fatal",
            )
        return out

    def refusal(self, rule: Outcome | None, answer: Answer, *, item: bool = False) -> ToolError:
        """The error an answer that gives no result is: what its rule says, or that no rule
        says what it means."""
        if rule is None:
            return self.failure(answer, "an answer no outcome rule matches", "unexpected_answer")
        if rule.outcome == "pending":
            why = (
                "answered an item of a bulk answer as pending (a bulk job is pending as a "
                "whole: declare poll= for it)"
                if item
                else f"answered pending without a job id at {rule.job!r}"
            )
            return self.failure(answer, why, "bad_job")
        if rule.outcome in ("found", "not_found"):
            return self.failure(answer, "a bulk answer that is not a list of answers", "bad_answer")
        return self.error(rule, answer)

    def failure(self, answer: Answer, why: str, code: str) -> ToolError:
        return ToolError(
            self.tool,
            f"{why}: {_clip(answer.text) or '(empty body)'}",
            status=answer.status,
            code=code,
            request_id=_request_id(answer),
            outcome="fatal",
            key=self.key,
        )

    def error(self, rule: Outcome, answer: Answer) -> ToolError:
        said = dotted(answer.body, rule.message) if rule.message else None
        words = str(said) if said is not None else _clip(answer.text) or "(empty body)"
        waits = rule.outcome in ("rate_limited", "blocked")
        return ToolError(
            self.tool,
            f"{_MEANING[rule.outcome]}: {words}",
            status=answer.status,
            # a used-up account is named by its outcome (what the run's verdict and hints
            # read); the provider's own code stays in the message
            code=rule.outcome if rule.outcome in _USED_UP else _code(answer) or rule.outcome,
            request_id=_request_id(answer),
            retryable=rule.outcome in ("rate_limited", "blocked", "retryable"),
            retry_after=wait_of(rule, answer) if waits else None,
            outcome=rule.outcome,
            key=self.key,
        )

    def items(
        self, answer: Answer, rule: Outcome | None, inputs: Sequence[Mapping[str, Any]], path: str
    ) -> list[Any]:
        """The per-item results of a bulk answer (its items at ``path``), aligned with
        ``inputs``: by position, or by what the provider echoes (``HttpBulk(match=)``)."""
        if rule is None or rule.outcome not in ("found", "not_found"):
            raise self.refusal(rule, answer)
        answers = answer.body if not path else dotted(answer.body, path)
        assert self.bulk is not None
        if not isinstance(answers, list) or (
            self.bulk.match is None and len(answers) != len(inputs)
        ):
            raise self.misaligned(answer, path, f"{len(inputs)} per-item answers")
        share = None  # a header's charge is the request's: its items share it
        if self.reported is not None and self.reported.header is not None:
            total = self.reported.credits(answer, self.credits)
            share = None if total is None else total / len(inputs)
        parts = self.aligned(answers, dict(enumerate(inputs)))
        return [self.item(answer, parts[i], share) for i in range(len(inputs))]

    def aligned(self, parts: list[Any], places: Mapping[int, Mapping[str, Any]]) -> dict[int, Any]:
        """Each input's part of a bulk answer, by its place in the request or job (``places``):
        at that place, or the part echoing its ``HttpBulk(match=)`` fields. An input with no
        part gets the ``missing_item`` error (its call fails, nothing charged)."""
        assert self.bulk is not None
        paths = self.bulk.match
        if paths is None:
            return {place: parts[place] for place in places}
        by_echo = {_echo_key(part, paths.values()): part for part in parts}
        missing: Any = _ABSENT  # not found
        if self.bulk.missing == "fail":
            missing = ToolError(
                self.tool,
                f"the provider's answer holds no item for this input (matched by {dict(paths)})",
                code="missing_item",
                outcome="fatal",
            )
        return {
            place: by_echo.get(_echo_key({**input, _PLACE: str(place)}, paths.keys()), missing)
            for place, input in places.items()
        }

    def item(self, whole: Answer, item: Any, share: float | None) -> Any:
        """One input's result from its part of a bulk answer (its own status if it has one),
        or the ``ToolError`` the provider refused it with alone (its call fails, the other
        items stand). An item asking to wait or to be sent again fails the whole request, which
        is sent again."""
        bulk = self.bulk
        assert bulk is not None
        if item is _ABSENT:  # no part of the answer is this input's: not found
            return None
        if isinstance(item, ToolError):  # ... and that fails its call
            return item
        status = dotted(item, bulk.item_status) if bulk.item_status else None
        answer = Answer(
            status=status if isinstance(status, int) else whole.status,
            body=item,
            headers=whole.headers,
            text=_text(item),
        )
        reported = share if share is not None else self.charged(answer, item=True)
        try:
            state = self.state(
                self.outcomes, answer, bulk.item_result, reported=reported, item=True
            )
            return state.result
        except ToolError as refused:
            if refused.outcome in ("rate_limited", "blocked", "retryable"):
                raise
            return refused

    def misaligned(self, answer: Answer, path: str | None, wanted: str) -> ToolError:
        return ToolError(
            self.tool,
            f"the bulk answer did not hold {wanted} at {path or 'its top level'!r}: "
            f"{_clip(answer.text)}",
            status=answer.status,
            code="misaligned_batch",
            outcome="fatal",
        )

    def charged(self, answer: Answer, *, item: bool = False) -> float | None:
        """What the provider says it charged for ``answer`` (None: the tool does not read
        it, or the answer does not say); a bulk item's header is its request's (shared)."""
        if self.reported is None or (item and self.reported.header is not None):
            return None
        return self.reported.credits(answer, self.credits)

    def check_echo(self, polling: HttpPoll, answer: Answer, input: Mapping[str, Any]) -> None:
        """A job's answer for another input (a provider that lost the job and numbered a new
        one the same) fails the call: it is never stored as found."""
        for field_name, path in polling.echo.items():
            sent, said = reveal(input.get(field_name)), dotted(answer.body, path)
            if said is not None and _same(sent) != _same(said):
                raise ToolError(
                    self.tool,
                    f"job answered for another input: {field_name} was sent as {sent!r}, the "
                    f"answer at {path!r} says {said!r}; it is not kept as found",
                    status=answer.status,
                    code="job_mismatch",
                    outcome="fatal",
                )


_MEANING = {
    "rate_limited": "rate limited by the provider",
    "blocked": "the provider blocks this account for a while",
    "quota_exhausted": "the account's quota is used up (its other calls in this run are not "
    "sent; resume the run once it is renewed)",
    "insufficient_credits": "the account is out of credits (its other calls in this run are not "
    "sent; add credits and resume the run)",
    "retryable": "the provider asks to try again",
    "fatal": "the provider refused the request",
}


def _text(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return str(value)


def _clip(text: str) -> str:
    """The start of a body for a message: on one line, secrets redacted."""
    flat = " ".join(text.split())
    return redact(flat[:CLIPPED] + ("..." if len(flat) > CLIPPED else ""))


def _code(answer: Answer) -> str | None:
    if isinstance(answer.body, Mapping):
        for name in ("code", "error_code", "error"):
            value = answer.body.get(name)
            if isinstance(value, str) and value and len(value) <= 64:
                return value
    return None


def _request_id(answer: Answer) -> str | None:
    for name in ("x-request-id", "request-id", "x-amzn-requestid"):
        value = answer.headers.get(name)
        if value:
            return str(value)
    return None


def _said_wait(rule: Outcome, answer: Answer) -> float | None:
    """How long a ``pending`` answer asks to wait before the next poll (Apollo's
    ``retry_after_seconds``, a ``Retry-After``), or None when it does not say."""
    headers = {k.lower() for k in answer.headers}
    said = rule.wait_from and dotted(answer.body, rule.wait_from) is not None
    if said or rule.wait is not None or "retry-after" in headers:
        return wait_of(rule, answer)
    return None


def _same(value: Any) -> Any:
    """A value as an echo compares: text trimmed and case-folded."""
    return value.strip().casefold() if isinstance(value, str) else value


def _echo_key(value: Any, paths: Iterable[str]) -> tuple[str, ...]:
    """What an input or an answer says at ``paths``, compared as the providers do (trimmed,
    case-folded): how a bulk answer's items find their inputs (``HttpBulk(match=)``)."""
    return tuple(_said(dotted(value, path)).strip().casefold() for path in paths)


def _said(value: Any) -> str:
    return "" if value is None else str(value)
