"""Apollo (Apollo.io REST API v1): ``apollo.people_match`` and
``apollo.people_match_waterfall``.

Documentation followed:

- Apollo's OpenAPI document (``apollo-rest-api``, the spec behind docs.apollo.io; mirrored
  as api-evangelist/apollo-io ``openapi/_original/apollo-io-apollo-rest-api-openapi.json``):
  the base URL ``https://api.apollo.io/api/v1``, the key in ``x-api-key``, ``POST
  /people/match`` (the person's fields as query parameters), ``POST /people/bulk_match``
  (``details``, up to 10; 400 ``INVALID_REQUEST`` / ``RECORD_LIMIT_EXCEEDED``, 422
  ``UNKNOWN_ERROR``; ``status``, ``missing_records``, ``unique_enriched_records`` and
  ``credits_consumed`` read as its schema says; ``request_id`` a signed 64-bit integer), the
  credit rule ("1 credit for demographics or email, plus 8 credits if a mobile phone is
  returned ... If no credit-consuming data is found, the request consumes 0 credits"),
  ``email_status`` "only ever returns one of three values: verified, extrapolated, or
  unavailable" (``/people/{id}``), ``GET /webhook_result/{request_id}`` (404
  ``result_pending`` with ``retry_after_seconds``; 200 with ``webhook_result``; 404
  ``request_id_unknown``, 410 ``request_id_expired`` after 30 days, 400
  ``invalid_request_id``), 401 ``text/plain``, 403 ``API_INACCESSIBLE``, the 429 body,
  ``/users/api_profile`` and ``/usage_stats/*`` (the windows of ``people/match``: 200 a
  minute, 600 an hour, 6000 a day; of ``people/bulk_match``: 20, 100, 6000)
- https://docs.apollo.io/reference/people-enrichment, https://docs.apollo.io/reference/bulk-people-enrichment
- https://docs.apollo.io/docs/enrich-phone-and-email-using-data-waterfall (the waterfall
  needs first and last name, a LinkedIn URL or an email; settings made in the app)
- https://docs.apollo.io/reference/webhook%20result ("To use polling without a webhook, set
  poll_only to true on the enrichment request and omit webhook_url"),
  https://docs.apollo.io/reference/poll-webhook-result
- https://docs.apollo.io/reference/rate-limits (windows per team and endpoint, a minute, an
  hour and a day; bulk enrichment at a tenth of the single endpoint's rate; the headers
  ``x-rate-limit-*``, ``x-*-usage``, ``x-*-requests-left`` and ``retry-after`` on a 429)

``apollo.people_match`` ({first_name, last_name | full_name, domain | company} or {email} or
{linkedin_url} -> {email, confidence, status, ...}): one input goes to ``/people/match``,
2 to 10 in one request to ``/people/bulk_match``, each match read on its own. A matched
person with an address is found (1 credit); matched without one (``email_status``
``unavailable``) is not found but costs 1 credit (the demographics); nobody matched is not
found and free. ``apollo.people_match_waterfall`` asks Apollo to run the team's email
waterfall (``run_waterfall_email=true&poll_only=true``) and polls
``/webhook_result/{request_id}`` until it is done; its ledger takes what
``webhook_result.credits_consumed`` says.

The rate: one tool has one gate, which cannot keep the two endpoints' windows apart. It
declares the bulk endpoint's (20 requests a minute, 100 an hour, 6000 a day), the tighter in
every window, counted in requests: bulk requests are the tool's usual ones, and a lone input
sent to ``/people/match`` is then held to the bulk pace too (ten times slower than that
endpoint allows). ``Rate(per_record=True)`` with the single endpoint's windows would let
requests of two or three inputs past the bulk endpoint's 20 a minute. Apollo's remaining
headers (``x-minute-requests-left``, ``x-hourly-requests-left``, ``x-24-hour-requests-left``)
slow the gate further, from either endpoint's answers; they never speed it up. Plans differ
(current paid plans allow 1,000 enrichments a minute and no hourly or daily cap): the
declared windows are the usage-stats example's, a conservative floor.

What the documentation leaves open, and what this adapter assumes:

- a match that finds nobody: 200 ``{"person": null}``, and ``null`` at that place of a bulk
  answer's ``matches`` (the answers are read by position; the engine fails a bulk answer whose
  ``matches`` is not one per detail); ``email_not_unlocked@domain.com`` (the placeholder of
  ``/people/{id}``) is no address;
- ``extrapolated`` (a pattern guess), ``unverified`` and ``likely to engage`` are our
  ``unknown``, ``verified`` is ``valid``; Apollo never says ``catch_all`` or ``invalid``;
  ``extrapolated_email_confidence`` (scale not documented) is read as 0-1 when it is at most 1,
  else as 0-100;
- out of credits: not documented. A 4xx whose body mentions credits is
  ``insufficient_credits`` (the double answers 422 ``{"error": "You have insufficient
  credits ..."}``);
- a single match reports no charge; a bulk answer's ``credits_consumed`` is the request's
  total, which the framework cannot share among its items (``Reported`` reads an item's own
  fields, or shares a header): the ledger counts the charging rule (1 per matched input),
  which equals it unless two inputs of one request match the same person (Apollo charges
  once; the ledger counts both);
- a 429 without ``retry-after`` waits 60 s; a 429 for a spent day is waited out like the
  others (Apollo's ``retry-after`` says until when);
- the waterfall: ``webhook_result.credits_consumed`` is the request's whole charge (the
  match's demographics credit and the vendors'), since the bulk schema says the submit
  answer omits it "because enrichment is still running and final credit usage isn't known";
  a submit answer whose ``waterfall.status`` is not ``accepted`` fails its cell with
  ``waterfall.message`` (no result will come); a done result whose person has no
  ``emails`` is not found; ``email_status_cd`` ``Verified`` is ``valid``, anything else
  ``unknown``; ``webhook_status`` ``in_progress`` with no ``webhook_result`` is still
  pending; ``request_id_unknown`` fails the cell (it was never issued); ``poll_only``
  works on every plan. Only single submits: how a bulk waterfall's ``people`` line up with
  its ``details`` is not documented. The poll endpoint's own windows (those of "all other
  APIs") are not declared: the engine paces polls by ``retry_after_seconds``, not by a rate.
- no account balance: Apollo's credit endpoints (``/usage_stats/credit_usage_stats``) are
  POSTs that need a master key, and ``GET /users/api_profile`` says the credits only with
  ``include_credit_usage=true``, a query the provider check does not send (it passes its
  own, empty, parameters). ``credits_left`` reads that answer, for when it can.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from .._secrets import Secret
from ..tools import Answer, Auth, Cost, HttpBulk, HttpPoll, HttpTool, Outcome, Rate, Reported
from ._provider import Provider, ProviderTools
from ._vocab import COMPARED, email_result, status_of

__all__ = ["PROVIDER", "apollo", "credits_left"]

_STATUS = {
    "verified": "valid",
    "extrapolated": "unknown",
    "unverified": "unknown",
    "likely to engage": "unknown",
}
_WATERFALL_STATUS = {"verified": "valid"}  # email_status_cd / a vendor's status; else unknown
_NO_EMAIL = ("email_not_unlocked@domain.com",)
_IDENTIFIERS = {
    "first_name": "{first_name}",
    "last_name": "{last_name}",
    "name": "{full_name}",
    "email": "{email}",
    "domain": "{domain}",
    "organization_name": "{company}",
    "linkedin_url": "{linkedin_url}",
}


def _person(body: Any) -> Any:
    """The person of a single answer (``{"person": ...}``) or of a bulk item (the person
    itself, or null); None for a bulk answer as a whole."""
    if not isinstance(body, Mapping):
        return None
    if "person" in body:
        return body["person"]
    return None if "matches" in body else body


def _email(person: Any) -> str | None:
    if not isinstance(person, Mapping):
        return None
    email, status = person.get("email"), person.get("email_status")
    if not isinstance(email, str) or "@" not in email or email.strip().casefold() in _NO_EMAIL:
        return None
    return None if status == "unavailable" else email


def _has_email(body: Any) -> bool:
    return _email(_person(body)) is not None


def _matched(body: Any) -> bool:
    return isinstance(_person(body), Mapping)


def _mentions_credits(body: Any) -> bool:
    return b"credit" in orjson.dumps(body).lower()


def _scale(confidence: Any) -> float:
    """``extrapolated_email_confidence`` to 0-100: a fraction when it is at most 1."""
    number = confidence if isinstance(confidence, int | float) else None
    return 100.0 if number is not None and number <= 1 else 1.0


# Apollo's answers that are not a result, in the order tried (SPEC's responses)
_REFUSALS = [
    Outcome("insufficient_credits", status="4xx", body=_mentions_credits, message="error"),
    Outcome("fatal", status=401),  # text/plain: "Invalid API key. See ..."
    Outcome("fatal", status=403, message="error"),  # API_INACCESSIBLE: the key's scope, a plan
    Outcome("fatal", status=[400, 422], message="error_message"),
    Outcome("rate_limited", status=429, wait=60, message="message"),
    Outcome("retryable", status="5xx"),
]


def _found(answer: Answer) -> dict[str, Any] | None:
    person = _person(answer.body)
    if not isinstance(person, Mapping):
        return None
    confidence = person.get("extrapolated_email_confidence")
    organization = person.get("organization") or {}
    return email_result(
        person,
        _email(person),
        status_of(person.get("email_status"), _STATUS),
        confidence,
        scale=_scale(confidence),
        apollo_id=person.get("id"),
        first_name=person.get("first_name"),
        last_name=person.get("last_name"),
        title=person.get("title"),
        headline=person.get("headline"),
        linkedin_url=person.get("linkedin_url"),
        company=organization.get("name"),
        domain=organization.get("primary_domain"),
        city=person.get("city"),
        state=person.get("state"),
        country=person.get("country"),
        seniority=person.get("seniority"),
    )


def _waterfall_email(body: Any) -> tuple[str, Any, Any, Any] | None:
    """The address an email waterfall found (its first person's first email, else the first
    a vendor gave): the address, its status word, its confidence, the person's Apollo id."""
    result = body.get("webhook_result") if isinstance(body, Mapping) else None
    people = result.get("people") if isinstance(result, Mapping) else None
    if not isinstance(people, list) or not people or not isinstance(people[0], Mapping):
        return None
    person = people[0]
    for found in person.get("emails") or []:
        if isinstance(found, Mapping) and isinstance(found.get("email"), str):
            confidence = found.get("extrapolated_email_confidence")
            return found["email"], found.get("email_status_cd"), confidence, person.get("id")
    for step in (person.get("waterfall") or {}).get("emails") or []:
        for vendor in step.get("vendors") or []:
            for email in vendor.get("emails") or []:
                if isinstance(email, str):
                    return email, vendor.get("status"), None, person.get("id")
    return None


def _waterfall_found(answer: Answer) -> dict[str, Any] | None:
    found = _waterfall_email(answer.body)
    if found is None:
        return None
    email, status, confidence, apollo_id = found
    result = answer.body["webhook_result"]
    return email_result(
        answer.body,
        email,
        status_of(status, _WATERFALL_STATUS),
        confidence,
        scale=_scale(confidence),
        apollo_id=apollo_id,
        request_id=answer.body.get("request_id") or result.get("request_id"),
    )


def _tools(base: str, auth: Auth, account: str | None) -> list[HttpTool]:
    return [
        HttpTool(
            "apollo.people_match",
            "POST",
            f"{base}/api/v1/people/match",
            query=_IDENTIFIERS,
            auth=auth,
            account=account,
            outcomes=[
                Outcome("found", status=200, body=_has_email),
                Outcome("not_found", status=200, body=_matched, credits=1),  # demographics
                Outcome("not_found", status=200),  # nobody matched: free
                *_REFUSALS,
            ],
            response=_found,
            bulk=HttpBulk(
                max_size=10,
                url=f"{base}/api/v1/people/bulk_match",
                items="details",
                item=_IDENTIFIERS,
                results="matches",
            ),
            rate=Rate(per_minute=20, per_hour=100, per_day=6000),
            cost=Cost(1, charge="on_hit"),
            normalize=COMPARED,
            description="A person's work email and profile from a name and a domain or company "
            "(or an email, or a LinkedIn URL): valid or unknown.",
        ),
        HttpTool(
            "apollo.people_match_waterfall",
            "POST",
            f"{base}/api/v1/people/match",
            query={**_IDENTIFIERS, "run_waterfall_email": "true", "poll_only": "true"},
            auth=auth,
            account=account,
            outcomes=[
                Outcome(
                    "pending", status=200, body={"waterfall.status": "accepted"}, job="request_id"
                ),
                Outcome("fatal", status=200, message="waterfall.message"),  # no result will come
                *_REFUSALS,
            ],
            poll=HttpPoll(
                url=f"{base}/api/v1/webhook_result/{{job}}",
                interval=10,
                outcomes=[
                    Outcome(
                        "pending",
                        status=404,
                        body={"error_code": "result_pending"},
                        wait_from="retry_after_seconds",
                    ),
                    Outcome(
                        "pending",
                        status=200,
                        body={"webhook_result": None, "webhook_status": "in_progress"},
                    ),
                    Outcome(
                        "found", status=200, body=lambda body: _waterfall_email(body) is not None
                    ),
                    Outcome(
                        "not_found",
                        status=200,
                        body=lambda body: isinstance(body.get("webhook_result"), Mapping),
                    ),
                    Outcome("fatal", status=200, message="failure_reason"),
                    *_REFUSALS,
                    Outcome("fatal", status=404),  # request_id_unknown: never issued
                ],
                expired=[Outcome("fatal", status=410)],
            ),
            response=_waterfall_found,
            reported=Reported(path="webhook_result.credits_consumed"),
            rate=Rate(per_minute=200, per_hour=600, per_day=6000),
            cost=Cost(1, charge="on_hit"),
            normalize=COMPARED,
            description="A person's email from Apollo and the team's waterfall vendors "
            "(asynchronous: polled until done); valid or unknown.",
        ),
    ]


def credits_left(profile: Any) -> float | None:
    """The credits ``GET /users/api_profile?include_credit_usage=true`` says are left: on a
    unified-credit plan (lead credits used stay 0 while ``total_unified_credits_used`` moves,
    and ``num_credits_remaining`` may stick at 0) the lead allowance less the unified use,
    else ``num_credits_remaining``; None when it does not say."""
    if not isinstance(profile, Mapping):
        return None

    def number(name: str) -> float | None:
        value = profile.get(name)
        return float(value) if isinstance(value, int | float) and value is not True else None

    allowance, remaining = number("effective_num_lead_credits"), number("num_credits_remaining")
    lead_used = number("num_lead_credits_used") or 0.0
    unified_used = number("total_unified_credits_used") or 0.0
    if allowance is not None and lead_used == 0 and (unified_used > 0 or not remaining):
        return max(0.0, allowance - unified_used)
    return remaining


PROVIDER = Provider(
    name="apollo",
    title="Apollo",
    key="APOLLO_API_KEY",
    url="https://api.apollo.io",
    auth=lambda secret: Auth.header("x-api-key", secret),
    build=_tools,
    docs=(
        "https://docs.apollo.io/reference/people-enrichment",
        "https://docs.apollo.io/reference/bulk-people-enrichment",
        "https://docs.apollo.io/reference/poll-webhook-result",
        "https://docs.apollo.io/reference/rate-limits",
    ),
)


def apollo(
    api_key: str | Secret | None = None, base_url: str | None = None, account: str | None = None
) -> ProviderTools:
    """Apollo's tools: ``apollo.people_match`` ({first_name, last_name | full_name, domain |
    company} or {email} or {linkedin_url} -> {email, confidence, status, title, ...}; up to
    10 a request) and ``apollo.people_match_waterfall`` (the same, through the team's email
    waterfall, polled). The key: ``api_key``, else ``APOLLO_API_KEY``."""
    return PROVIDER.tools(api_key, base_url, account)
