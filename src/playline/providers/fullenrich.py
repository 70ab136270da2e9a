"""FullEnrich's contact enrichment, API v1: a person's work email and mobile phone (the
email only with ``phones: false``) from their name and company, or their LinkedIn profile.
Every enrichment is an async batch: ``POST /api/v1/contact/enrich/bulk`` (up to 100
contacts) answers an ``enrichment_id``, and ``GET /api/v1/contact/enrich/bulk/{id}`` answers
the batch once done.

Documentation pages followed:

- https://docs.fullenrich.com/ (the key as ``Authorization: Bearer``; "a credit will only be
  used if we find a phone number or an email")
- https://docs.fullenrich.com/api/v1/contact/enrich/bulk/post.md (Start Bulk Enrichment:
  inputs, 100 contacts a request, ``custom`` echoed, webhook or polling)
- https://docs.fullenrich.com/api/v1/contact/enrich/bulk/get.md (Get Enrichment Result,
  ``forceResults``)
- https://docs.fullenrich.com/api/v1/account/credits/get.md (``{"balance": n}``)
- https://docs.fullenrich.com/emailstatus (DELIVERABLE, HIGH_PROBABILITY, CATCH_ALL, INVALID;
  ``most_probable_email`` is never INVALID)
- https://docs.fullenrich.com/credit and https://help.fullenrich.com/en/articles/9736469
  (1 credit a work email, 10 a mobile phone, 3 a personal email; nothing found is free;
  the same input enriched again within 3 months is free)
- https://docs.fullenrich.com/ratelimit and /implement-in-product/speed-volume (60 API calls
  a minute, a queue of 100 contacts at a time, 30 to 90 s a contact)
- the v2 reference (https://docs.fullenrich.com/api/v2/..., its openapi.yml as copied in
  api-evangelist/fullenrich) for what the v1 pages do not show: the batch statuses, the error
  envelope and its codes, ``cost.credits``, 400 ``error.enrichment.in_progress``, 402
- FullEnrich/n8n-nodes-fullenrich: the v1 node (commit 277c956: ``datas``, ``firstname``,
  ``enrich_fields``) and ``mapV2ToV1`` with its tests (the v1 result row)

Why v1 and not v2: v1's pages are still published beside v2, FullEnrich's own n8n node keeps
a v1-compatible output (``mapV2ToV1``), and v1's request and row shapes are confirmed by the
vendor's v1 node and by independent v1 clients, while v2 changes every field name (``data``,
``first_name``, ``contact_info.most_probable_work_email.{email,status}``,
``contact.work_emails``). v1 may be retired: its names are kept in one place (``_ITEM``,
``_row_email`` and the rules below) so that moving to v2 is a small change.

What the documentation leaves open, and what this adapter assumes:

- v1's own pages show only their beginning: the batch statuses (``CREATED``,
  ``IN_PROGRESS``, ``FINISHED``, ``CREDITS_INSUFFICIENT``, ``CANCELED``, ``RATE_LIMIT``,
  ``UNKNOWN``), the ``{"code", "message"}`` errors and the batch's ``cost.credits`` are
  taken from v2 as v1's too;
- a poll of an unfinished batch: v2 answers 400 ``error.enrichment.in_progress``; v1 may
  instead answer 200 with ``CREATED``/``IN_PROGRESS``: both are pending. Polls come 30 s
  after the submit (the answer's own "try again in 30 seconds"), then 60, 120, 240, 300 s
  apart (most contacts take 30-90 s; a full queue makes batches wait);
- ``CREDITS_INSUFFICIENT`` (402, or 200) ends the batch: every row fails
  ``insufficient_credits``, in doubt, its rows found before the credits ran out too; once
  credits are added, ``--retry-in-doubt`` buys them again, and FullEnrich enriches the same
  input again for free within 3 months. A row could fail alone, but FullEnrich marks none
  (no per-row status or error): a row left undone is as blank as a miss, and only the
  batch's status, which the rows' rules do not see, tells them apart. ``CANCELED`` and
  ``UNKNOWN`` fail the batch's calls the same way (rows may have been charged).
  ``RATE_LIMIT`` (not described) is waited out like a 429 and polled again;
- a row is found when it holds a ``most_probable_email`` or a ``most_probable_phone``
  (FullEnrich's own ``hasEnrichmentResult``); a row with only INVALID candidates is not
  found and free. The order of the rows is not documented, but ``custom`` comes back
  unchanged with each row (v1 post.md): each contact's ``custom.place`` is its place in
  the batch, and rows are matched to contacts by it (``HttpBulk(match=)``); a contact no
  row answers fails its own cell (``missing_item``). ``custom`` also echoes our
  ``first_name``, ``last_name`` and ``domain``: a row that answers for another person fails
  its batch (``job_mismatch``) instead of being kept;
- the price of a row: 1 credit for its work email, 10 for its phone (one phone charged per
  contact, however many numbers), from the documented prices; the tool declares 11, the
  most a contact costs, which is what budgets and the account's balance reserve per call.
  Each row's reported charge is the same price, read from what the row holds: FullEnrich
  reports only the batch's total ``cost.credits``, which a row's answer cannot see, so a
  custom plan's other prices are not seen by the ledger (the tests hold the ledger to the
  batch's total, at the documented prices);
- phones are asked for unless ``phones: false`` (the brief's "emails and phones", and the
  phone waterfall, which passes only our vocabulary); the personal email (3 credits) never;
- HIGH_PROBABILITY ("triple verified" on a catch-all domain) is our ``catch_all`` with
  ``high_probability: true``: a play may accept it as valid;
- v1 has no full-name field: ``full_name`` is split at its first space. There is no email
  input (the reverse lookup is another endpoint);
- ``name`` is required (v2's schema; v1 clients report ``error.enrichment.name.empty``). It
  is "a readable name for this enrichment (visible in your dashboard)" (v2's schema), and
  FullEnrich's own n8n node sends one name for all its requests: every batch is named
  ``Playline``. No ``webhook_url`` is sent: Playline polls;
- 60 calls a minute count polls too ("60 API calls per minute"); the engine does not count
  polls against a tool's rate, so submits are held to 15 a minute, leaving 45 to the polls
  of those batches (a submit and two polls each, at 30 and 90 s). 15 batches of 100 are
  1,500 contacts a minute where the workspace's queue enriches about 100, so this costs no
  throughput. No rate-limit headers are documented: a 429 (``error.rate.limit``, "Try again
  in 1m") waits 60 s;
- a 5xx (none documented) is sent again; a 402 to a submit (documented for the result only)
  is ``insufficient_credits``; a 404 to a poll is a result no longer kept (3 months).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .._secrets import Secret
from ..tools import Answer, Auth, Cost, HttpBulk, HttpPoll, HttpTool, Outcome, Rate, Reported
from ..tools._normalize import Normalize
from ._provider import Balance, Provider, ProviderTools
from ._vocab import email_result, status_of

__all__ = ["PROVIDER", "fullenrich"]

_BULK = "/api/v1/contact/enrich/bulk"
_EMAILS, _PHONES = "contact.emails", "contact.phones"  # v2: contact.work_emails, contact.phones
_PRICES = {"email": 1.0, "phone": 10.0}  # credits: a work email found, a mobile phone found

_STATUS = {
    "deliverable": "valid",
    "high_probability": "catch_all",
    "catch_all": "catch_all",
    "invalid": "invalid",
    "invalid_domain": "invalid",
}

# One contact of a batch, in v1's names; ``custom`` comes back unchanged with its row: its
# place in the batch ("0", "1"...: how rows find their contacts) and who it is (checked)
_ITEM = {
    "firstname": "{first_name}",
    "lastname": "{last_name}",
    "domain": "{domain}",
    "company_name": "{company}",
    "linkedin_url": "{linkedin_url}",
    "enrich_fields": "{enrich_fields}",
    "custom": {
        "place": "{_place}",
        "first_name": "{first_name}",
        "last_name": "{last_name}",
        "domain": "{domain}",
    },
}
_NAME = "Playline"  # the batch's name on the FullEnrich dashboard (required, not unique)
_ECHO = {
    "first_name": "custom.first_name",
    "last_name": "custom.last_name",
    "domain": "custom.domain",
}


# -- a row of the result ---------------------------------------------------------------------


def _contact(row: Any) -> Mapping[str, Any] | None:
    contact = row.get("contact") if isinstance(row, Mapping) else None
    return contact if isinstance(contact, Mapping) else None


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _row_email(contact: Mapping[str, Any]) -> str | None:
    email = _text(contact.get("most_probable_email"))
    return email if email and "@" in email else None


def _row_phone(contact: Mapping[str, Any]) -> str | None:
    return _text(contact.get("most_probable_phone"))


def _price(row: Any) -> float | None:
    """What the documented prices say a row cost; None for what is not a row."""
    contact = _contact(row)
    if contact is None:
        return None
    email, phone = _row_email(contact), _row_phone(contact)
    return (_PRICES["email"] if email else 0.0) + (_PRICES["phone"] if phone else 0.0)


def _charged(answer: Answer) -> float | None:
    """What a row of a finished batch cost, from what it holds (the documented prices):
    FullEnrich reports only the batch's total, which a row's answer does not see."""
    return _price(answer.body)


def _costing(credits: float) -> Outcome:
    return Outcome("found", body=lambda row: _price(row) == credits, credits=credits)


def _part(parent: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    part = parent.get(key)
    return part if isinstance(part, Mapping) else {}


def _found(answer: Answer) -> dict[str, Any] | None:
    row = answer.body
    contact = _contact(row) or {}
    email, word = _row_email(contact), contact.get("most_probable_email_status")
    candidates = [e for e in contact.get("emails") or [] if isinstance(e, Mapping)]
    if email and not _text(word):  # the status of the most probable one, from the list
        word = next((e.get("status") for e in candidates if e.get("email") == email), None)
    profile = _part(contact, "profile")  # with a linkedin_url asked for
    position = _part(profile, "position")
    company = _part(position, "company")
    linkedin = _text(profile.get("linkedin_url")) or next(
        (
            _text(s.get("url"))
            for s in contact.get("social_medias") or []
            if isinstance(s, Mapping) and str(s.get("type", "")).upper() == "LINKEDIN"
        ),
        None,
    )
    more: dict[str, Any] = {
        "high_probability": str(word or "").upper() == "HIGH_PROBABILITY",
        "emails": [
            {"email": e["email"], "status": status_of(e.get("status"), _STATUS)}
            for e in candidates
            if _text(e.get("email"))
        ],
        "phone": _row_phone(contact),
        "phones": [
            {"number": p.get("number"), "region": p.get("region")}
            for p in contact.get("phones") or []
            if isinstance(p, Mapping) and _text(p.get("number"))
        ],
        "first_name": _text(contact.get("firstname")),
        "last_name": _text(contact.get("lastname")),
        "domain": _text(contact.get("domain")),
        "position": _text(position.get("title")),
        "company": _text(company.get("name")),
        "linkedin_url": linkedin,
    }
    if email is not None:
        return email_result(row, email, status_of(word, _STATUS), None, **more)
    if more["phone"] is None:
        return None
    # a phone and no email: found (and paid for), with no address to have a status
    return {"email": None, "confidence": None, "status": None, **more, "raw": row}


# -- the rules -------------------------------------------------------------------------------

_REFUSALS = [
    Outcome("rate_limited", status=429, wait=60, message="message"),  # "Try again in 1m"
    Outcome("insufficient_credits", status=402, message="message"),
    Outcome("fatal", status=[400, 401, 403, 404], message="message"),
    Outcome("retryable", status="5xx"),
]

_RULES = [
    # the submit: the batch is accepted, to be polled
    Outcome(
        "pending",
        status=200,
        body=lambda body: isinstance(body, Mapping) and "enrichment_id" in body,
        job="enrichment_id",
    ),
    # each row of a finished batch, at its documented price
    _costing(_PRICES["email"] + _PRICES["phone"]),
    _costing(_PRICES["email"]),
    _costing(_PRICES["phone"]),
    Outcome("not_found", body=lambda row: _price(row) == 0),
    *_REFUSALS,
]

_POLL = [
    Outcome("pending", status=400, body={"code": "error.enrichment.in_progress"}),
    Outcome("pending", body=lambda body: body["status"] in ("CREATED", "IN_PROGRESS")),
    Outcome("found", status=200, body={"status": "FINISHED"}),
    Outcome("insufficient_credits", body={"status": "CREDITS_INSUFFICIENT"}, message="status"),
    Outcome("fatal", body={"status": "CANCELED"}, message="status"),
    Outcome("rate_limited", body={"status": "RATE_LIMIT"}, wait=60, message="status"),
    Outcome("fatal", body={"status": "UNKNOWN"}, message="status"),
    *_REFUSALS,
]


# -- the inputs ------------------------------------------------------------------------------

_KINDS = Normalize(
    "fullenrich.enrich",
    {
        "first_name": "name",
        "last_name": "name",
        "full_name": "name",
        "domain": "domain",
        "company": "name",
        "linkedin_url": "text",
    },
)
_PROFILE = re.compile(r"^(?:https?://)?(?:[a-z]{2,3}\.)?linkedin\.com/in/([^/?#\s]+)", re.I)
_ECHOED = 100  # characters a ``custom`` value may hold


def _normalized(input: dict[str, Any]) -> dict[str, Any]:
    """The input as FullEnrich is asked: names and domain in one form, ``full_name`` split,
    a LinkedIn profile as its canonical URL, ``phones`` as the ``enrich_fields`` it buys.
    An input FullEnrich would refuse fails its own cell here, rather than its whole batch."""
    out = _KINDS(input)
    full = out.pop("full_name", None)
    if isinstance(full, str) and " " in full:  # v1 has no full-name field
        first, last = full.split(" ", 1)
        out["first_name"] = out.get("first_name") or first
        out["last_name"] = out.get("last_name") or last
    linkedin = out.get("linkedin_url")
    if isinstance(linkedin, str):
        profile = _PROFILE.match(linkedin)
        out["linkedin_url"] = (
            f"https://www.linkedin.com/in/{profile.group(1).casefold()}" if profile else linkedin
        )
    phones = out.pop("phones", None)
    if phones not in (None, True, False):
        raise ValueError(f"phones={phones!r}: false to buy the work email only, else true")
    if phones is not None or out.get("enrich_fields") not in ([_EMAILS], [_EMAILS, _PHONES]):
        out["enrich_fields"] = [_EMAILS] if phones is False else [_EMAILS, _PHONES]
    if not (
        out.get("linkedin_url")
        or (
            out.get("first_name")
            and out.get("last_name")
            and (out.get("domain") or out.get("company"))
        )
    ):
        raise ValueError(
            "FullEnrich needs first_name and last_name (or full_name) with a domain or "
            "company, or a linkedin_url"
        )
    for name in _ECHO:
        if len(str(out.get(name) or "")) > _ECHOED:
            raise ValueError(f"{name} is longer than {_ECHOED} characters")
    return out


def _tools(base: str, auth: Auth, account: str | None) -> list[HttpTool]:
    return [
        HttpTool(
            "fullenrich.enrich",
            "POST",
            f"{base}{_BULK}",
            auth=auth,
            account=account,
            outcomes=_RULES,
            bulk=HttpBulk(
                max_size=100,
                items="datas",
                item=_ITEM,
                body={"name": _NAME},
                results="datas",
                match={"_place": "custom.place"},  # a contact no row answers fails alone
            ),
            poll=HttpPoll(
                url=f"{base}{_BULK}/{{job}}",
                interval=30,
                backoff=2,
                max_interval=300,
                outcomes=_POLL,
                result="datas",  # one row per contact, matched by custom.place
                echo=_ECHO,
                expired=[Outcome("fatal", status=404)],  # error.enrichment.not_found
            ),
            response=_found,
            rate=Rate(per_minute=15),
            # the most a contact costs (its email and its phone): what budgets reserve; each
            # row is charged what it found, by the found rules
            cost=Cost(_PRICES["email"] + _PRICES["phone"], charge="on_hit"),
            # not repeat_free, though a contact enriched again within 3 months costs 0: a
            # batch in doubt keeps its job, which a resume would poll to the same end (one
            # that ran out of credits), where --retry-in-doubt submits it again
            reported=Reported(read=_charged),
            normalize=_normalized,
            description=(
                "Work email (1 credit when found) and mobile phone (10 credits when found; "
                "phones=false for the email only) from first_name + last_name (or full_name) "
                "+ domain or company, or a linkedin_url; an async batch of up to 100 contacts "
                "(about a minute)."
            ),
        )
    ]


def _balance(body: Any) -> float | None:
    balance = body.get("balance") if isinstance(body, Mapping) else None
    return (
        float(balance)
        if isinstance(balance, int | float) and not isinstance(balance, bool)
        else None
    )


PROVIDER = Provider(
    name="fullenrich",
    title="FullEnrich",
    key="FULLENRICH_API_KEY",
    url="https://app.fullenrich.com",
    auth=lambda secret: Auth.bearer(secret),
    build=_tools,
    balance=Balance("/api/v1/account/credits", _balance),
    docs=(
        "https://docs.fullenrich.com/api/v1/contact/enrich/bulk/post.md",
        "https://docs.fullenrich.com/api/v1/contact/enrich/bulk/get.md",
        "https://docs.fullenrich.com/api/v1/account/credits/get.md",
        "https://docs.fullenrich.com/credit",
    ),
)


def fullenrich(
    api_key: str | Secret | None = None, base_url: str | None = None, account: str | None = None
) -> ProviderTools:
    """FullEnrich's tool: ``fullenrich.enrich`` ({first_name, last_name | full_name, domain |
    company} or {linkedin_url}; ``phones: false`` for the work email only -> {email,
    confidence (None), status, high_probability, emails, phone, phones, position, company,
    linkedin_url}), an async batch of up to 100. The key: ``api_key``, else
    ``FULLENRICH_API_KEY``."""
    return PROVIDER.tools(api_key, base_url, account)
