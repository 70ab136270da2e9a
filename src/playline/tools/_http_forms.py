"""The bulk and async forms of a declared HTTP tool: ``HttpBulk`` (many inputs in one
request, the per-item answers mapped back) and ``HttpPoll`` (a job a ``pending`` answer named,
asked again until it is done). Declarations only, checked when made; ``_http.py`` sends them.

They sit below the modules that read answers (``_http_answer.py``) and describe tools
(``_http_doc.py``), which name them, so the package keeps no import cycle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import PlayDefinitionError
from ._http_request import _METHODS, _bulk_url_checked
from ._outcomes import Outcome
from ._spec import Batch

__all__ = ["HttpBulk", "HttpPoll"]


@dataclass(frozen=True, kw_only=True)
class HttpBulk:
    """Many inputs in one request. ``items``: the body path the list of items goes to
    (``""``: the body is the list); each item is built by ``item`` (a template, as ``json=``)
    or is the input. ``results``: the answer's path to the list of per-item answers, aligned
    with the items; ``item_status``: each one's status path (per-item statuses go through
    the outcome rules); ``item_result``: where each one's result is. ``body``: fixed fields
    sent beside the items (NeverBounce's ``{"input_location": "supplied"}``). ``match``: the
    answers are found by what they echo (input field -> answer path; ``_place`` is the
    item's place in the request, which an ``item`` template can send as ``"{_place}"``), not
    by position; an input no answer is for fails its call (``missing="fail"``) or is not
    found (``missing="not_found"``: Prospeo lists only the records it matched). ``poll``: a
    bulk job's poll, when it differs from the single one's."""

    max_size: int
    url: str | None = None  # the bulk endpoint, when it is not the single one
    method: str = "POST"
    items: str = "items"
    item: Mapping[str, Any] | None = None
    results: str = "results"
    item_status: str | None = None
    item_result: str | None = None
    max_wait: float | None = None  # seconds a partial batch may wait for more (pl.Batch)
    body: Mapping[str, Any] | None = None  # fixed fields of the request's body, beside items
    poll: HttpPoll | None = None  # a bulk job's poll, when it is not the single one's
    match: Mapping[str, str] | None = None  # input field -> answer path: answers matched by it
    missing: Literal["fail", "not_found"] = "fail"  # an input no matched answer is for

    def __post_init__(self) -> None:
        Batch(max_size=self.max_size, max_wait=self.max_wait)  # the same rules
        if not isinstance(self.method, str) or self.method.upper() not in _METHODS:
            raise PlayDefinitionError(
                f"HttpBulk(method={self.method!r}): one of {sorted(_METHODS)}."
            )
        if self.url is not None:
            if not isinstance(self.url, str) or not self.url.startswith(("http://", "https://")):
                raise PlayDefinitionError(
                    f"pl.HttpBulk(url={self.url!r}): the bulk endpoint's URL, starting with "
                    "http:// or https://, e.g. 'https://api.acme.com/v1/bulk'."
                )
            _bulk_url_checked(f"pl.HttpBulk(url={self.url!r})", self.url, own=True)


@dataclass(frozen=True, kw_only=True)
class HttpPoll:
    """An async job's poll: ``url`` with ``{job}`` for the job id a ``pending`` answer gave,
    asked every ``interval`` seconds; its answers go through ``outcomes`` (a poll that says
    "not ready" is ``pending``) and the result is at ``result``. ``echo`` maps input fields
    to where the answer repeats them: an answer for another input fails the call
    (``job_mismatch``) instead of being kept as found. ``expired``: rules (any outcome name;
    only their status and body are read) for an answer that says the job's result is no
    longer kept (Apollo keeps one 30 days): the call fails with ``job_expired``, and is bought
    again only when the run is resumed with ``--retry-failed``. ``fetch``: where a finished
    job's results are, when the poll only says it is done (a URL with ``{job}``);
    ``fetch_format="csv"`` reads them as a file of rows (one per item, in order).
    ``max_wait``: a job still pending that long after its submit is left in doubt (its
    provider may have lost it: Dropcontact answers a lost job "not ready" for ever); a resume
    polls it again. ``json``
    and ``fetch_json``: the JSON bodies of the poll and of the fetch (templates taking
    ``{job}``), for providers that are asked by POST (Icypeas: ``{"id": "{job}"}``); a fetch
    with a body is a POST."""

    url: str
    method: str = "GET"
    json: Any = None
    interval: float = 1.0
    backoff: float = 1.0  # each wait that many times the one before
    max_interval: float | None = None  # the longest wait between polls
    max_wait: float | None = None  # seconds after which a job still pending is left in doubt
    outcomes: Sequence[Outcome] = ()
    result: str | None = None
    echo: Mapping[str, str] = field(default_factory=dict)  # input field -> answer path
    expired: Sequence[Outcome] = ()
    fetch: str | None = None
    fetch_format: Literal["json", "csv"] = "json"
    fetch_json: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.method, str) or self.method.upper() not in _METHODS:
            raise PlayDefinitionError(
                f"HttpPoll(method={self.method!r}): one of {sorted(_METHODS)}."
            )
        if not isinstance(self.url, str) or not self.url.startswith(("http://", "https://")):
            raise PlayDefinitionError(
                f"HttpPoll(url={self.url!r}): the poll's URL, with {{job}} for the job id, "
                "e.g. 'https://api.acme.com/v1/jobs/{job}'."
            )
        if not (isinstance(self.interval, int | float) and 0 < self.interval < float("inf")):
            raise PlayDefinitionError(f"HttpPoll(interval={self.interval!r}): seconds, > 0.")
        if not (isinstance(self.backoff, int | float) and 1 <= self.backoff < float("inf")):
            raise PlayDefinitionError(
                f"HttpPoll(backoff={self.backoff!r}): each wait that many times the one "
                "before, a number >= 1 (1: the same wait each time)."
            )
        if self.max_interval is not None and not (
            isinstance(self.max_interval, int | float) and self.max_interval >= self.interval
        ):
            raise PlayDefinitionError(
                f"HttpPoll(max_interval={self.max_interval!r}): the longest wait in seconds, "
                f"at least interval ({self.interval})."
            )
        if self.max_wait is not None and not (
            isinstance(self.max_wait, int | float) and self.max_wait >= self.interval
        ):
            raise PlayDefinitionError(
                f"HttpPoll(max_wait={self.max_wait!r}): the seconds a job may stay pending, "
                f"at least interval ({self.interval})."
            )
        if not all(isinstance(o, Outcome) for o in self.outcomes):
            raise PlayDefinitionError(
                "HttpPoll(outcomes=...): a list of pl.Outcome rules, e.g. "
                '[pl.Outcome("pending", body={"status": "IN_PROGRESS"})].'
            )
        if self.fetch is not None and not (
            isinstance(self.fetch, str) and self.fetch.startswith(("http://", "https://"))
        ):
            raise PlayDefinitionError(
                f"HttpPoll(fetch={self.fetch!r}): the URL of a finished job's results, with "
                "{job} for the job id, e.g. 'https://api.acme.com/v1/jobs/{job}/results'."
            )
        if self.fetch_format not in ("json", "csv"):
            raise PlayDefinitionError(
                f"HttpPoll(fetch_format={self.fetch_format!r}): 'json' or 'csv'."
            )
        if not all(isinstance(o, Outcome) for o in self.expired):
            raise PlayDefinitionError(
                "HttpPoll(expired=...): a list of pl.Outcome rules for the answers that say "
                'the result is gone, e.g. [pl.Outcome("fatal", status=410)].'
            )
