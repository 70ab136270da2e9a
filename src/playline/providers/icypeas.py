"""Icypeas: ``icypeas.email_search``, a work email from a name and a domain or company.

Documentation followed (api-doc.icypeas.com):

- https://api-doc.icypeas.com/getting-started (the key alone in ``Authorization``; the
  search and its result, verbatim shapes), https://api-doc.icypeas.com/how-it-works (every
  search is async: submit, then read; at least 3 s between reads);
- https://api-doc.icypeas.com/find-emails/bulk-search and /reference/bulk-search (``POST
  /bulk-search``: ``task``, ``name`` "to find your bulk search later", ``data`` rows
  ``[firstname, lastname, domainOrCompany]``, a blank name allowed, up to 5,000),
  https://api-doc.icypeas.com/reference/bulk-files (``POST /search-files/read``: a file is
  done when ``finished`` is true; 15 calls a minute),
  https://api-doc.icypeas.com/fetch-results/search-item and /reference/get-results (``POST
  /bulk-single-searchs/read`` by ``id``, or ``mode: bulk`` with the ``file``: "rows come
  back in the same order as your data array", 100 a read; each row's ``order``, as in
  /reference/webhook-search-item), https://api-doc.icypeas.com/how-works/pagination;
- https://api-doc.icypeas.com/next/how-works/search_statuses (``NONE``, ``SCHEDULED``,
  ``IN_PROGRESS``, ``DEBITED``/``FOUND``, ``NOT_FOUND``/``DEBITED_NOT_FOUND``,
  ``INSUFFICIENT_FUNDS``, ``BAD_INPUT``, ``ABORTED``),
  https://api-doc.icypeas.com/how-works/certainties (``ultra_sure``/``very_sure``: 99%
  confidence, ``probable``: 95%);
- https://api-doc.icypeas.com/rate-limits (10 searches/s, 1 bulk search/s, 30 result reads
  a minute, 15 file reads a minute), https://api-doc.icypeas.com/errors (401 "Unauthorized
  access.", 429 "You have exceeded the max number of requests per minute.", invalid bodies
  as 200 ``success: false`` with ``validationErrors``, ``UnpaidSubscriptionError``,
  ``SearchNotFoundError``), https://api-doc.icypeas.com/overview ("you only pay for
  results": 1 credit a found email), https://api-doc.icypeas.com/reference/subscription.

One call is one search, sent one of two ways by the size of the request the engine forms.
Alone, it goes to the tool's own form: ``POST /api/email-search`` answers the search's
``_id`` (the job, kept as ``{"single": _id}``), read back by the tool's poll, ``POST
/api/bulk-single-searchs/read {"id"}``. Several (up to 100) go to ``HttpBulk``'s form: one
bulk search, ``POST /api/bulk-search {"task": "email-search", "name": "playline", "data"}``
(every bulk search has the same name: the docs ask for one to find it by in the app, and
say nothing of it being unique), whose ``file`` is watched by the bulk poll, ``POST
/api/search-files/read {"file"}``, until ``finished``; then its rows are fetched with ``POST
/api/bulk-single-searchs/read {"mode": "bulk", "file", "limit": 100}``. Icypeas takes 5,000
rows a bulk search, but reads back 100 results a request: a bulk of at most 100 is read in
one request, whose rows line up with the calls (more would need the pagination, which a
poll cannot follow). Each row's ``status`` is its outcome, and ``DEBITED`` is what Icypeas
says it charged. A row Icypeas refuses (``BAD_INPUT``, ``INSUFFICIENT_FUNDS``...) fails only
its own call; the other rows stand.

What the documentation leaves open, and what this adapter assumes:

- ``probable`` (95%, bounce under 5%) is ``catch_all``; ``ultra_sure``, ``very_sure`` (and
  ``sure``, an older word) are ``valid``; confidence is the documented 99 or 95. Of several
  emails, the first of the surest certainty is the result.
- A miss (``NOT_FOUND``) is free; ``DEBITED_NOT_FOUND`` says Icypeas debited a miss, so it
  is counted at 1 credit. ``FOUND`` (seen in an integration's sample) is ``DEBITED``'s
  twin. ``BAD_INPUT`` and ``ABORTED`` fail the call, uncharged.
- Icypeas needs a domain or company and a name: an input without them fails its own cell
  before any request (no request spent on it). A ``full_name`` is split at its first
  space; given both, ``domain`` is sent, not ``company``; a name not known is sent blank
  (``""``, as the docs' rows and Icypeas' n8n node do). Names are compared case-folded (one
  receipt for ``ADA`` and ``Ada``).
- The rows are matched to the calls by their ``order``, their place in ``data``
  (``HttpBulk(match={"_place": "order"})``), not by where they come in the answer, though
  the docs promise the same order: rows read back in another order still go to their own
  person, and a call whose row is missing fails alone (``missing_item``). ``order`` counts
  from 0 (the docs' sample row has ``"order": 0``). ``custom.externalIds``, the docs' own
  echo, is a list beside ``data`` that ``HttpBulk`` cannot fill, so it is not sent.
- Errors of a 200 ``success: false`` answer: ``InsufficientCredits`` (a bulk search is
  refused unless the credits cover its rows: a community client's observation) is out of
  credits, ``UnpaidSubscriptionError`` a used-up quota, any other (``SearchNotFoundError``
  included) fails the call with Icypeas' message. A 5xx is retried.
- No rate-limit headers or Retry-After are documented: a 429 waits 3 s. The reads are the
  bottleneck (30 result reads and 15 file reads a minute), and the framework paces a tool's
  submissions, not its polls. So the tool sends at most a search or bulk search a second
  (the bulk limit; single searches would allow 10) and 5 a minute, and reads a job 3 s after
  it is sent (Icypeas: at least 3 s between reads), then 6 s later, doubling to a minute: a
  job done within 10 s takes 2 file reads and 1 result read (a search: 2 result reads), so
  5 jobs a minute stay within 15 file reads. That is 500 rows a minute in bulk searches of
  100. Jobs that run longer are read more often and may meet a 429: the engine reads again,
  but a job whose reads fail 6 times fails in doubt (a resume reads it again).
- The account endpoint is a POST that needs the account's email, not only the key, so this
  adapter has no ``Balance`` (``playline providers check`` cannot ask what is left).
- Icypeas' signed mode (``key:signature`` with ``X-ROCK-TIMESTAMP``) is not used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._secrets import Secret
from ..tools import (
    Answer,
    Auth,
    Cost,
    HttpBulk,
    HttpPoll,
    HttpTool,
    Outcome,
    Rate,
    Reported,
)
from ..tools._normalize import KINDS
from ._provider import Provider, ProviderTools
from ._vocab import email_result, status_of

__all__ = ["PROVIDER", "icypeas"]

POLL = 3.0  # seconds before a job's first read, doubling after (Icypeas: 3 s between reads)
PAGE = 100  # results of one read: the most rows a bulk search may hold to be read at once
NAME = "playline"  # every bulk search's name (the docs: a name to find it by, in the app)

_PENDING = ("NONE", "SCHEDULED", "IN_PROGRESS")
_FOUND = ("DEBITED", "FOUND")
_STATUS = {
    "ultra_sure": "valid",
    "very_sure": "valid",
    "sure": "valid",
    "probable": "catch_all",
    "undeliverable": "invalid",
}
_CONFIDENCE = {"ultra_sure": 99, "very_sure": 99, "sure": 99, "probable": 95}
_SUREST = ("ultra_sure", "very_sure", "sure", "probable")
# a bulk search's row: [firstname, lastname, domainOrCompany]; ``_normalized`` always gives
# both names (blank when not known), so no place of the row is ever left out. (``HttpBulk``
# types ``item`` as a mapping; its templates take a list as ``json=`` does.)
_ROW: Any = ["{first_name}", "{last_name}", "{domain}{company}"]


def _says(word: str) -> Any:
    """A 200 ``success: false`` answer naming ``word`` in its errors."""

    def test(body: Any) -> bool:
        if body.get("success") is not False:
            return False
        errors = body.get("validationErrors") or []
        said = [body.get("message"), body.get("error"), body.get("name")]
        said += [e.get(k) for e in errors if isinstance(e, Mapping) for k in ("type", "message")]
        return any(isinstance(s, str) and word in s for s in said)

    test.__name__ = f"says_{word}"
    return test


def _queued(what: str) -> Any:
    """Icypeas' ``success: true`` answer to a search (``item``) or a bulk search (``file``)."""

    def test(body: Any) -> bool:
        return body.get("success") is True and what in body

    test.__name__ = f"queued_{what}"
    return test


# Answers that are not a result, for every route (the /errors page)
_REFUSALS = [
    Outcome("fatal", status=401, message="message"),
    Outcome("rate_limited", status=429, wait=3, message="message"),
    Outcome(
        "insufficient_credits",
        status=200,
        body=_says("InsufficientCredits"),
        message="validationErrors.0.message",
    ),
    Outcome(
        "quota_exhausted",
        status=200,
        body=_says("UnpaidSubscription"),
        message="validationErrors.0.message",
    ),
    Outcome("fatal", status=200, body={"success": False}, message="validationErrors.0.message"),
    Outcome("retryable", status="5xx"),
]


def _status_in(at: str, words: tuple[str, ...], name: str) -> Any:
    """A search whose ``status`` (the search at ``at`` in the answer) is one of ``words``."""

    def test(body: Any) -> bool:
        return _get(body, f"{at}status") in words

    test.__name__ = name
    return test


def _item_rules(at: str) -> list[Outcome]:
    """A search's own status (``at``: the path of the search in the answer)."""
    status = f"{at}status"
    return [
        Outcome("found", status=200, body=_status_in(at, _FOUND, "found_or_debited")),
        Outcome("not_found", status=200, body={status: "NOT_FOUND"}),
        Outcome("not_found", status=200, body={status: "DEBITED_NOT_FOUND"}, credits=1),
        Outcome("insufficient_credits", status=200, body={status: "INSUFFICIENT_FUNDS"},
                message=status),
        Outcome("fatal", status=200, body={status: "BAD_INPUT"}, message=status),
        Outcome("fatal", status=200, body={status: "ABORTED"}, message=status),
    ]  # fmt: skip


def _get(body: Any, path: str) -> Any:
    for part in path.split("."):
        body = body[int(part)] if isinstance(body, list) else body[part]
    return body


def _row(body: Any) -> Any:
    """The search an answer is about: a file's row, or the ``items[0]`` of a read by id."""
    return body["items"][0] if "items" in body else body


def _file_running(body: Any) -> bool:
    """A file Icypeas has not ``finished``."""
    return body["files"][0]["finished"] is False


def _rows_running(body: Any) -> bool:
    """A file's rows read while some still run (a file said finished a moment early)."""
    return any(row["status"] in _PENDING for row in body["items"])


def _debited(answer: Answer) -> float:
    """What Icypeas says it charged for a search: its ``DEBITED`` status, 1 credit."""
    return 1.0 if _row(answer.body)["status"] == "DEBITED" else 0.0


def _normalized(input: dict[str, Any]) -> dict[str, Any]:
    """What Icypeas is asked: both names (a full name split; blank when not known), and the
    domain or else the company; an input it cannot search is refused here, in its own cell."""

    def text(name: str, kind: str) -> str:
        value = input.get(name)
        return KINDS[kind](value) if isinstance(value, str) else ""

    first, last = text("first_name", "name"), text("last_name", "name")
    full = text("full_name", "name")
    if full and not (first or last):
        first, _, last = full.partition(" ")
    domain, company = text("domain", "domain"), text("company", "name")
    if not (first or last) or not (domain or company):
        given = ", ".join(sorted(k for k, v in input.items() if v not in (None, ""))) or "none"
        raise ValueError(
            "icypeas.email_search needs a domain or a company, and a first_name, last_name or "
            f"full_name (given: {given})"
        )
    return {"first_name": first, "last_name": last} | (
        {"domain": domain} if domain else {"company": company}
    )


def _found(answer: Answer) -> dict[str, Any] | None:
    """A search's result: from a file's row, or the ``items[0]`` of a read by id."""
    row = _row(answer.body)
    results = row.get("results") or {}
    emails = [e for e in results.get("emails") or [] if isinstance(e, Mapping)]
    ranked = sorted(
        (e for e in emails if isinstance(e.get("email"), str)),
        key=lambda e: _SUREST.index(e["certainty"]) if e.get("certainty") in _SUREST else 9,
    )
    if not ranked:
        return None
    best = ranked[0]
    certainty = best.get("certainty")
    return email_result(
        row,
        best["email"],
        status_of(certainty, _STATUS),
        _CONFIDENCE.get(certainty) if isinstance(certainty, str) else None,
        first_name=results.get("firstname") or None,
        last_name=results.get("lastname") or None,
        certainty=certainty,
        mx_provider=best.get("mxProvider"),
    )


def _tools(base: str, auth: Auth, account: str | None) -> list[HttpTool]:
    api = f"{base}/api"
    read = f"{api}/bulk-single-searchs/read"
    search = HttpTool(
        "icypeas.email_search",
        "POST",
        f"{api}/email-search",
        json={
            "firstname": "{first_name}",
            "lastname": "{last_name}",
            "domainOrCompany": "{domain}{company}",
        },
        auth=auth,
        account=account,
        outcomes=[
            Outcome("pending", status=200, body=_queued("item"), job="item._id"),
            Outcome("pending", status=200, body=_queued("file"), job="file"),
            *_REFUSALS,
            *_item_rules(""),  # a file's rows
        ],
        # a lone search, read back by its id
        poll=HttpPoll(
            url=read,
            method="POST",
            json={"id": "{job}"},
            outcomes=[
                Outcome("pending", status=200, body=_status_in("items.0.", _PENDING, "running")),
                *_REFUSALS,
                *_item_rules("items.0."),
            ],
            result="items.0",
            interval=POLL,
            backoff=2,
            max_interval=60,
        ),
        # several: one bulk search, its file watched until finished, then its rows read
        bulk=HttpBulk(
            max_size=PAGE,
            url=f"{api}/bulk-search",
            body={"task": "email-search", "name": NAME},
            items="data",
            item=_ROW,
            results="items",
            match={"_place": "order"},  # each row's place in data, as Icypeas echoes it
            poll=HttpPoll(
                url=f"{api}/search-files/read",
                method="POST",
                json={"file": "{job}"},
                outcomes=[
                    Outcome("pending", status=200, body=_file_running),
                    Outcome("fatal", status=200, body={"success": True, "files": []}),
                    Outcome("pending", status=200, body=_rows_running),
                    *_REFUSALS,
                ],
                fetch=read,
                fetch_json={"mode": "bulk", "file": "{job}", "limit": PAGE},
                result="items",
                interval=POLL,
                backoff=2,
                max_interval=60,
            ),
        ),
        response=_found,
        rate=Rate(per_second=1, per_minute=5),
        cost=Cost(1, charge="on_hit"),
        reported=Reported(read=_debited),
        normalize=_normalized,
        description=(
            "Work email from a name (first_name, last_name or full_name) and a domain or "
            "company: {email, confidence, status, certainty}. Async: alone, a search; "
            "together, a bulk search of up to 100."
        ),
    )
    return [search]


PROVIDER = Provider(
    name="icypeas",
    title="Icypeas",
    key="ICYPEAS_API_KEY",
    url="https://app.icypeas.com",
    auth=lambda secret: Auth.header("Authorization", secret),
    build=_tools,
    balance=None,  # a POST that needs the account's email too (see the module's notes)
    docs=(
        "https://api-doc.icypeas.com/getting-started",
        "https://api-doc.icypeas.com/find-emails/bulk-search",
        "https://api-doc.icypeas.com/reference/bulk-files",
        "https://api-doc.icypeas.com/next/how-works/search_statuses",
        "https://api-doc.icypeas.com/rate-limits",
        "https://api-doc.icypeas.com/errors",
    ),
)


def icypeas(
    api_key: str | Secret | None = None, base_url: str | None = None, account: str | None = None
) -> ProviderTools:
    """Icypeas's tool: ``icypeas.email_search`` ({first_name, last_name | full_name, domain |
    company} -> {email, confidence, status, certainty}). The key: ``api_key``, else
    ``ICYPEAS_API_KEY``."""
    return PROVIDER.tools(api_key, base_url, account)
