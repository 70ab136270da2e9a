"""People Data Labs (Person Enrichment API v5): ``pdl.person_enrich``.

Documentation followed:

- https://docs.peopledatalabs.com/docs/reference-person-enrichment-api (the endpoint, 1 credit
  per match and a 404 not billed, 100 requests a minute for a free key and 1,000 for a paying
  one, bulk "increasing your rate limit by up to a hundred times")
- https://docs.peopledatalabs.com/docs/input-parameters-person-enrichment-api (``first_name``,
  ``last_name``, ``name``, ``company`` -- a name, website or social URL --, ``profile``,
  ``email``, ``min_likelihood``, ``required``; the minimum input; the key in ``X-Api-Key``)
- https://docs.peopledatalabs.com/docs/output-response-person-enrichment-api (``{status,
  likelihood, data}``; likelihood 1-10) and https://docs.peopledatalabs.com/docs/fields
  (``work_email``, ``personal_emails``, ``emails``; data lowercase, URLs without a scheme)
- https://docs.peopledatalabs.com/docs/bulk-enrichment-api (``POST /v5/person/bulk``,
  ``requests: [{params, metadata}]``, 1-100 of them, a JSON array of per-item answers with
  their own ``status``; "Known Limitations": 80 records or fewer, else a possible 502)
- https://docs.peopledatalabs.com/docs/errors (the ``{status, error: {type, message}}``
  envelope: 400, 401, 402 out of credits, 404 not found, 405, 429, 5xx)
- https://docs.peopledatalabs.com/docs/usage-limits (``x-ratelimit-*``, ``x-call-credits-spent``,
  ``x-totallimit-remaining``; reading them with a ``HEAD`` of the endpoint)
- https://docs.peopledatalabs.com/support/billing/how-credits-work (bulk: 1 credit per
  matched item), /support/troubleshooting/out-of-credits (every request 402 until credits
  return), /support/billing/check-credit-usage (no account endpoint)

What the documentation leaves open, and what this adapter assumes:

- the input ``domain`` and ``company`` both go to PDL's one ``company`` parameter; given both,
  the domain is sent (the sharper of the two) and the name dropped, so the receipt holds what
  PDL is sent;
- ``min_likelihood`` is sent as 6 unless the input gives another (the documented default, 2,
  means "10-30 % chance of being the right person"; PDL's Salesforce integration,
  https://docs.peopledatalabs.com/docs/salesforce-integration-enrichment-settings, calls 6
  "the recommended default");
  ``required`` (e.g. ``"work_email"``, to pay only for matches with a work address) is passed
  through when the input has it; both go in each bulk item's ``params`` (a bulk item takes
  the parameters of a single enrichment);
- an input short of PDL's documented minimum (a LinkedIn URL, an email, or a name with a
  domain or company, in our vocabulary) fails its cell before it is sent, with what it
  lacks (PDL would answer 400, its own words, for the request or the bulk item);
- PDL says nothing of an address's deliverability: ``email`` is ``work_email`` with
  ``status`` ``unknown`` and ``confidence`` None (``likelihood``, 1-10, is the person's
  match); a match without a work email is still found, and charged, with ``email`` None;
  a free plan's ``true`` in place of an address is no address; ``phone`` is
  ``mobile_phone``;
- bulk requests carry at most 80 records (the documented advice; 100 is the hard cap), and
  a bulk request counts as one request against the rate;
- the rate declared is the free plan's 100 a minute, which every plan allows (a paying key
  has 1,000; at 80 people a bulk request that is 8,000 people a minute);
- a 429's ``x-ratelimit-reset`` is an ISO time the runtime does not read: the tool waits 60 s,
  the longest a fixed one-minute window can hold it; no ``Retry-After`` is documented;
- ``x-call-credits-spent`` is read as the charge of a single call; a bulk answer's is the
  request's total, which PDL bills per matched item only, so bulk items report nothing
  (sharing it equally would put a charge on the misses);
- there is no account endpoint: the balance is only in response headers, so ``balance`` is
  None and ``playline providers check`` cannot say what is left;
- 5xx is retryable (``api_error``: an internal error).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._secrets import Secret
from ..tools import Answer, Auth, Cost, HttpBulk, HttpTool, Outcome, Rate, Reported
from ._provider import Provider, ProviderTools
from ._vocab import compared, findable

__all__ = ["PROVIDER", "pdl"]

MIN_LIKELIHOOD = 6  # sent unless the input says otherwise
BULK_SIZE = 80  # "Known Limitations": more may answer 502
# one enrichment's parameters, in PDL's names ("{domain}{company}": the normalised input
# has one of them at most)
_PARAMS = {
    "first_name": "{first_name}",
    "last_name": "{last_name}",
    "name": "{full_name}",
    "company": "{domain}{company}",
    "profile": "{linkedin_url}",
    "email": "{email}",
    "min_likelihood": "{min_likelihood}",
    "required": "{required}",
}
_BULK_MARK = {"source": "playline"}  # each bulk item's metadata, which PDL echoes

# PDL's answers that are not a result, in the order tried (docs/errors)
_REFUSALS = [
    Outcome("not_found", status=404, body={"status": 404}),  # not billed
    Outcome("insufficient_credits", status=402, message="error.message"),
    Outcome("rate_limited", status=429, wait=60, message="error.message"),
    Outcome("fatal", status=[400, 401, 403, 405], message="error.message"),
    Outcome("retryable", status="5xx"),
]


def _normalized(input: dict[str, Any]) -> dict[str, Any]:
    """Our fields compared as PDL compares them (names and emails in any case, domains in any
    URL form); the domain in place of a company name; ``min_likelihood`` said. An input short
    of PDL's minimum fails its cell here, unsent (PDL would answer 400)."""
    out = compared(input)
    if out.get("domain"):
        out.pop("company", None)
    out.setdefault("min_likelihood", MIN_LIKELIHOOD)
    findable(out, "People Data Labs", input)
    return out


def _address(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and "@" in value else None


def _person(answer: Answer) -> dict[str, Any] | None:
    """A match (a single answer or a bulk item: both ``{status, likelihood, data}``)."""
    body = answer.body
    data = body.get("data")
    if not isinstance(data, Mapping):
        return None
    work = _address(data.get("work_email"))
    personal = data.get("personal_emails")
    mobile = data.get("mobile_phone")
    return {
        "email": work,  # for waterfalls: the work address, never verified by PDL
        "status": "unknown" if work else None,
        "confidence": None,  # likelihood is the person's match, not the address's
        "work_email": work,
        "personal_emails": [a for a in map(_address, personal) if a]
        if isinstance(personal, list)
        else [],
        "phone": mobile if isinstance(mobile, str) and mobile.strip() else None,
        "likelihood": body.get("likelihood"),
        "pdl_id": data.get("id"),
        "full_name": data.get("full_name"),
        "first_name": data.get("first_name"),
        "last_name": data.get("last_name"),
        "linkedin_url": data.get("linkedin_url"),
        "job_title": data.get("job_title"),
        "job_company_name": data.get("job_company_name"),
        "job_company_website": data.get("job_company_website"),
        "location_name": data.get("location_name"),
        "raw": body,
    }


def _spent(answer: Answer) -> float | None:
    """``x-call-credits-spent`` of a single call; a bulk item's answer (it carries the
    metadata sent) says nothing of its own charge."""
    if isinstance(answer.body, Mapping) and "metadata" in answer.body:
        return None
    said = next((v for k, v in answer.headers.items() if k.lower() == "x-call-credits-spent"), None)
    try:
        return None if said is None else float(said)
    except ValueError:
        return None


def _tools(base: str, auth: Auth, account: str | None) -> list[HttpTool]:
    return [
        HttpTool(
            "pdl.person_enrich",
            "POST",
            f"{base}/v5/person/enrich",
            json=_PARAMS,
            auth=auth,
            account=account,
            outcomes=_REFUSALS,
            result="data",
            response=_person,
            bulk=HttpBulk(
                max_size=BULK_SIZE,
                url=f"{base}/v5/person/bulk",
                items="requests",
                item={"params": _PARAMS, "metadata": _BULK_MARK},
                results="",  # the answer is the array, in request order
                item_status="status",
                item_result="data",
            ),
            rate=Rate(per_minute=100),
            cost=Cost(1, charge="on_hit"),
            reported=Reported(read=_spent),
            normalize=_normalized,
            description=(
                "A person's profile (work_email as email, personal emails, mobile phone, "
                "title, company, LinkedIn) from a LinkedIn URL, an email, or a name with a "
                "domain or company; 1 credit a match, misses free."
            ),
        ),
    ]


PROVIDER = Provider(
    name="pdl",
    title="People Data Labs",
    key="PDL_API_KEY",
    url="https://api.peopledatalabs.com",
    auth=lambda secret: Auth.header("X-Api-Key", secret),
    build=_tools,
    balance=None,  # no account endpoint: the balance is in response headers only
    docs=(
        "https://docs.peopledatalabs.com/docs/reference-person-enrichment-api",
        "https://docs.peopledatalabs.com/docs/input-parameters-person-enrichment-api",
        "https://docs.peopledatalabs.com/docs/bulk-enrichment-api",
        "https://docs.peopledatalabs.com/docs/errors",
        "https://docs.peopledatalabs.com/docs/usage-limits",
        "https://docs.peopledatalabs.com/support/billing/how-credits-work",
    ),
)


def pdl(
    api_key: str | Secret | None = None, base_url: str | None = None, account: str | None = None
) -> ProviderTools:
    """People Data Labs's tools: ``pdl.person_enrich`` ({linkedin_url | email | first_name,
    last_name | full_name with domain | company; min_likelihood, required} -> {email,
    work_email, personal_emails, likelihood, full_name, job_title, ...}). The key:
    ``api_key``, else ``PDL_API_KEY``."""
    return PROVIDER.tools(api_key, base_url, account)
