"""Prospeo: ``prospeo.email_finder``, on Prospeo's Enrich Person API (one person a request, or
up to 50 in a bulk request).

Prospeo's former ``POST /email-finder`` (``{first_name, last_name, company}`` answered with
``response.email`` and an ``email_status`` of ``VALID`` or ``CATCH_ALL``, catch-all answers
free) is gone: Prospeo's own MCP server and n8n node call only Enrich Person, and a
third-party reference dates the removal of the finder, verifier and domain search endpoints
2026-03-01. This adapter follows the current API, and so Enrich Person's charging rules.

Documentation followed:

- https://prospeo.io/api-docs/enrich-person (stored as prospeostaging.net/api-docs/enrich-person:
  ``POST /enrich-person``, ``{only_verified_email, enrich_mobile, data: {first_name,
  last_name, full_name, linkedin_url, email, company_name, company_website, ...}}``; 1 credit
  a match, nothing without one, a re-enrichment of the same record free for the account's
  lifetime; ``only_verified_email`` to pay only when a verified email exists)
- https://prospeo.io/api-docs/bulk-enrich-person (the same, up to 50 records under ``data``,
  each with an ``identifier`` of ours; answered by ``matched`` (with the identifier),
  ``not_matched`` and ``invalid_datapoints`` (identifiers), and ``total_cost``)
- https://prospeo.io/api-docs/authentication (``X-KEY``, JSON bodies; 200, 400, 401, 429; a
  found answer ``{error: false, free_enrichment, person: {email: {status, revealed, email}},
  company}``) and https://prospeo.io/api-docs/account-information (``GET
  /account-information``: ``response.remaining_credits``; ``INVALID_API_KEY`` 401,
  ``RATE_LIMITED`` 429, ``INVALID_REQUEST`` and ``INTERNAL_ERROR`` 400)
- https://prospeo.io/mcp-docs/errors (``NO_MATCH``, ``INVALID_DATAPOINTS``,
  ``INSUFFICIENT_CREDITS``, ``ACCOUNT_RESTRICTED``, ``RATE_LIMITED``)
- https://help.prospeo.io/en/article/api-rate-limits-19vqf50 (enrich endpoints: Starter 5 a
  second, 300 a minute, 2,000 a day; a bulk request counts one request per record; the day a
  rolling 24 hours; past a limit 429 ``RATE_LIMITED``)
- github prospeo-v2/prospeo-mcp-server ``src/types.ts`` (``email.status``: ``VERIFIED`` or
  ``UNVERIFIED``), ``src/schemas.ts`` (the minimum input)

What the documentation leaves open, and what this adapter assumes:

- every request asks ``only_verified_email``: a person whose email Prospeo could not verify
  (catch-all domains among them) is ``NO_MATCH``, not found and free; the legacy finder's
  free catch-all answers have no counterpart in Enrich Person, whose unverified matches
  would be charged. A match is therefore ``valid``; an ``UNVERIFIED`` one, should it come,
  is ``unknown`` (Prospeo does not say catch-all); there is no confidence score (None);
- ``free_enrichment: true`` (a re-enrichment) is found at 0 credits; a match is otherwise 1
  credit (no mobile is asked for); a match without a revealed email is not found, 1 credit;
- ``NO_MATCH``, ``INSUFFICIENT_CREDITS`` and the other codes are read from ``error_code``,
  whatever the HTTP status (400 for most, by third-party clients); ``INTERNAL_ERROR`` is
  400 yet retryable; ``RATE_LIMIT_EXCEEDED`` (another page's word) is a rate limit too;
- an input short of the documented minimum (a LinkedIn URL, an email, or a name with a
  domain or company) fails its cell unsent, as Prospeo would answer ``INVALID_DATAPOINTS``;
- the rate declared is the Starter plan's (the lowest with API access), counted per record;
  a 429 names no wait (no ``Retry-After``), so the tool waits a second; the undocumented
  ``x-minute-request-left`` headers other clients read are not read;
- in bulk, each record's ``identifier`` is its place in the request (``"0"``, ``"1"``...);
  the answer's ``matched`` records (at its top level, as documented) are found by the
  identifier they echo, and a record in no ``matched`` entry is not found, free: Prospeo's
  ``not_matched`` and also its ``invalid_datapoints`` (nothing is charged for either; a
  single request's ``INVALID_DATAPOINTS`` fails its cell, a bulk record's reads as not
  found, since ``pl.HttpBulk`` reads one list of answers and a bare identifier in another
  list cannot say an outcome). The documented minimum is checked before sending, so such a
  record is one Prospeo's stricter rules refuse;
- a bulk answer of another shape (its lists under ``response``, as one third-party client
  reads them, or a whole ``NO_MATCH``) holds no ``matched`` list: the request fails
  (``misaligned_batch``), never read as nothing found;
- ``total_cost`` is the request's, and a record is read alone: a bulk match reports no
  charge of its own, and the ledger keeps the declared credit (a re-enrichment in bulk,
  free at Prospeo, is counted 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._secrets import Secret
from ..tools import Answer, Auth, Cost, HttpBulk, HttpTool, Outcome, Rate, Reported
from ._provider import Balance, Provider, ProviderTools
from ._vocab import compared, email_result, findable, status_of

__all__ = ["PROVIDER", "prospeo"]

BULK_SIZE = 50
_STATUS = {"verified": "valid", "unverified": "unknown"}
_FLAGS = {"only_verified_email": True}  # pay only for an email Prospeo could verify
_DATA = {  # our fields in Prospeo's names
    "first_name": "{first_name}",
    "last_name": "{last_name}",
    "full_name": "{full_name}",
    "linkedin_url": "{linkedin_url}",
    "email": "{email}",
    "company_website": "{domain}",
    "company_name": "{company}",
}


def _normalized(input: dict[str, Any]) -> dict[str, Any]:
    """Our fields compared as Prospeo compares them; an input short of its minimum fails
    its cell here, unsent (Prospeo would answer ``INVALID_DATAPOINTS``)."""
    out = compared(input)
    findable(out, "Prospeo", input)
    return out


# -- answers ----------------------------------------------------------------------------


def _match(body: Any) -> Mapping[str, Any] | None:
    """The match an answer holds: a single answer's body (``error: false``), or a bulk
    answer's ``matched`` entry (the same person and company, with our ``identifier``)."""
    if not isinstance(body, Mapping) or body.get("error") is True:
        return None
    return body if isinstance(body.get("person"), Mapping) else None


def _email(match: Mapping[str, Any]) -> str | None:
    info = (match.get("person") or {}).get("email")
    if not isinstance(info, Mapping) or info.get("revealed") is False:
        return None  # masked
    email = info.get("email")
    return email.strip() if isinstance(email, str) and "@" in email else None


def _without_email(body: Any) -> bool:
    match = _match(body)
    return match is not None and _email(match) is None


def _found(answer: Answer) -> dict[str, Any] | None:
    match = _match(answer.body)
    if match is None:
        return None
    person: Mapping[str, Any] = match.get("person") or {}
    company: Mapping[str, Any] = match.get("company") or {}
    said = person.get("email")
    info: Mapping[str, Any] = said if isinstance(said, Mapping) else {}
    return email_result(
        match,
        _email(match),
        status_of(info.get("status"), _STATUS),
        None,  # Prospeo gives no score
        first_name=person.get("first_name"),
        last_name=person.get("last_name"),
        full_name=person.get("full_name"),
        linkedin_url=person.get("linkedin_url"),
        title=person.get("current_job_title"),
        person_id=person.get("person_id"),
        company=company.get("name"),
        domain=company.get("domain"),
        verification_method=info.get("verification_method"),
    )


def _charged(answer: Answer) -> float | None:
    """What Prospeo says a single answer cost: nothing for a re-enrichment
    (``free_enrichment: true``), else 1 credit; None where it says nothing (a bulk
    answer's records: its ``total_cost`` is the request's, and an item is read alone)."""
    body = answer.body
    free = body.get("free_enrichment") if isinstance(body, Mapping) else None
    return None if not isinstance(free, bool) else 0.0 if free else 1.0


# Prospeo's answers, in the order tried (a bulk answer's ``matched`` records each go through
# them too, with the request's status), by ``error_code`` whatever the status
_OUTCOMES = [
    # re-enriched: free, unless our earlier request (its answer lost) was the one charged
    Outcome("found", status=200, body={"free_enrichment": True}, credits=0, repeat=True),
    Outcome("not_found", status=200, body=_without_email, credits=1),  # a match, paid
    Outcome("not_found", body={"error": True, "error_code": "NO_MATCH"}),
    Outcome("rate_limited", body={"error_code": "RATE_LIMITED"}, wait=1),
    Outcome("rate_limited", body={"error_code": "RATE_LIMIT_EXCEEDED"}, wait=1),
    Outcome("insufficient_credits", body={"error_code": "INSUFFICIENT_CREDITS"}),
    Outcome("retryable", body={"error_code": "INTERNAL_ERROR"}),  # a 400, yet retryable
    Outcome("fatal", status="4xx", message="error_code"),
    Outcome("retryable", status="5xx"),
]


def _tools(base: str, auth: Auth, account: str | None) -> list[HttpTool]:
    return [
        HttpTool(
            "prospeo.email_finder",
            "POST",
            f"{base}/enrich-person",
            json={**_FLAGS, "data": _DATA},
            auth=auth,
            account=account,
            outcomes=_OUTCOMES,
            response=_found,
            bulk=HttpBulk(
                max_size=BULK_SIZE,
                url=f"{base}/bulk-enrich-person",
                items="data",
                item={"identifier": "{_place}", **_DATA},  # its place: "0", "1"...
                body=_FLAGS,
                results="matched",  # the matched records, each with its identifier
                match={"_place": "identifier"},
                missing="not_found",  # not_matched, invalid_datapoints: free, as at Prospeo
            ),
            rate=Rate(per_second=5, per_minute=300, per_day=2000, per_record=True),
            cost=Cost(1, charge="on_hit"),
            # a record enriched before is free for the account's lifetime (free_enrichment):
            # a call whose answer was lost is asked again, not left in doubt
            repeat_free=True,
            reported=Reported(read=_charged),
            normalize=_normalized,
            description=(
                "A verified work email (Prospeo Enrich Person) from a LinkedIn URL, an email, "
                "or a name with a domain or company; 1 credit a match, unverified and no "
                "match free."
            ),
        ),
    ]


def _left(body: Any) -> float | None:
    left = (body.get("response") or {}).get("remaining_credits")
    return None if left is None else float(left)


PROVIDER = Provider(
    name="prospeo",
    title="Prospeo",
    key="PROSPEO_API_KEY",
    url="https://api.prospeo.io",
    auth=lambda secret: Auth.header("X-KEY", secret),
    build=_tools,
    balance=Balance("/account-information", _left, unit="credits"),
    docs=(
        "https://prospeo.io/api-docs/enrich-person",
        "https://prospeo.io/api-docs/bulk-enrich-person",
        "https://prospeo.io/api-docs/authentication",
        "https://prospeo.io/api-docs/account-information",
        "https://help.prospeo.io/en/article/api-rate-limits-19vqf50",
    ),
)


def prospeo(
    api_key: str | Secret | None = None, base_url: str | None = None, account: str | None = None
) -> ProviderTools:
    """Prospeo's tools: ``prospeo.email_finder`` ({linkedin_url | email | first_name,
    last_name | full_name with domain | company} -> {email, confidence, status, ...}). The
    key: ``api_key``, else ``PROSPEO_API_KEY``."""
    return PROVIDER.tools(api_key, base_url, account)
