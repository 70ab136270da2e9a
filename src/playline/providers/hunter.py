"""Hunter (hunter.io API v2): ``hunter.email_finder`` and ``hunter.email_verifier``.

Documentation followed:

- https://hunter.io/api-documentation/v2 (base URL, the ``X-API-KEY`` header, the error
  envelope, status codes: 403 = rate limit reached, 429 = usage limit reached, 451 = the
  person asked not to be processed, 202/222 = verification not finished, try again)
- https://help.hunter.io/en/articles/1911617 (credits: a search is counted only when an
  email is returned; verifications are free when unknown; a search or verification repeated
  within the billing month is not counted again, so a call in doubt is sent again)
- hunter-io/browser-extension ``email_finder.coffee`` (not found is 200 with ``data.email``
  null), hunter-io/chatgpt-mcp ``src/tools/account.ts`` (``GET /v2/account``)
- the Email Finder and Email Verifier sections as copied by activepieces' Hunter piece
  (``find-email.ts``, ``verify-email.ts``): 15 requests/s and 500/min for the finder,
  10/s and 300/min for the verifier; the verifier may take 20 s, then answers 202

What the documentation leaves open, and what this adapter assumes:

- the bodies of 403 and 429 (read as Hunter's ``errors`` envelope when present);
- a verifier's 202 is answered again by the same request and counted once: it is sent
  again (``retryable``, up to 3 sends) rather than polled, since it carries no job id;
- verifications that say ``unknown``, ``webmail`` or ``disposable`` are free (Hunter's MCP
  server: "charged only for valid, invalid, or accept_all results");
- a finder result with no verification status is ``unknown``; ``accept_all`` (the domain
  accepts any address) is our ``catch_all``; a ``disposable`` address is ``invalid``.
"""

from __future__ import annotations

from typing import Any

from .._secrets import Secret
from ..tools import Answer, Auth, Cost, HttpTool, Outcome, Rate
from ._provider import Balance, Provider, ProviderTools
from ._vocab import email_result, status_of, verification

__all__ = ["PROVIDER", "hunter"]

_STATUS = {
    "valid": "valid",
    "accept_all": "catch_all",
    "invalid": "invalid",
    "disposable": "invalid",
    "webmail": "unknown",
    "unknown": "unknown",
}
_FREE_VERDICTS = ("unknown", "webmail", "disposable")

# Hunter's answers that are not a result, in the order tried (the status table)
_REFUSALS = [
    Outcome("rate_limited", status=403, wait=1, message="errors.0.details"),
    Outcome("quota_exhausted", status=[429, 402], message="errors.0.details"),
    Outcome("not_found", status=451),  # the person asked Hunter not to process them
    Outcome("retryable", status=[202, 222], wait=3),  # verification still running: ask again
    Outcome("fatal", status=[400, 401], message="errors.0.details"),
    Outcome("retryable", status="5xx"),
]


def _found(answer: Answer) -> dict[str, Any] | None:
    data = answer.body["data"]
    verdict = (data.get("verification") or {}).get("status")
    status = "catch_all" if data.get("accept_all") is True else status_of(verdict, _STATUS)
    return email_result(
        answer.body,
        data.get("email"),
        status,
        data.get("score"),
        first_name=data.get("first_name"),
        last_name=data.get("last_name"),
        position=data.get("position"),
        linkedin_url=data.get("linkedin_url"),
        company=data.get("company"),
        domain=data.get("domain"),
    )


def _verified(answer: Answer) -> dict[str, Any] | None:
    data = answer.body["data"]
    return verification(
        answer.body,
        data.get("email"),
        status_of(data.get("status"), _STATUS),
        disposable=data.get("disposable"),
        role=None,  # Hunter does not say
        webmail=data.get("webmail"),
        score=data.get("score"),
    )


def _tools(base: str, auth: Auth, account: str | None) -> list[HttpTool]:
    names = {"first_name": "name", "last_name": "name", "full_name": "name", "domain": "domain"}
    return [
        HttpTool(
            "hunter.email_finder",
            "GET",
            f"{base}/v2/email-finder",
            query={
                "first_name": "{first_name}",
                "last_name": "{last_name}",
                "full_name": "{full_name}",
                "domain": "{domain}",
                "company": "{company}",
            },
            auth=auth,
            account=account,
            outcomes=_REFUSALS,
            result="data.email",  # 200 with a null email: not found, and not counted
            response=_found,
            rate=Rate(per_second=15, per_minute=500),
            cost=Cost(1, charge="on_hit"),
            repeat_free=True,  # a repeat within the billing month is free: resent if in doubt
            normalize={**names, "company": "name"},
            description="Work email from a name and a domain (or company name).",
        ),
        HttpTool(
            "hunter.email_verifier",
            "GET",
            f"{base}/v2/email-verifier",
            query={"email": "{email}"},
            auth=auth,
            account=account,
            outcomes=[
                Outcome(
                    "found",
                    status=200,
                    body=lambda body: body["data"]["status"] in _FREE_VERDICTS,
                    credits=0,
                ),
                *_REFUSALS,
            ],
            result="data.email",
            response=_verified,
            rate=Rate(per_second=10, per_minute=300),
            cost=Cost(1),
            repeat_free=True,
            normalize={"email": "email"},
            description="Whether an address is deliverable: valid, catch_all, unknown, invalid.",
        ),
    ]


def _left(body: Any) -> float | None:
    searches = body["data"]["requests"]["searches"]
    return float(searches["available"]) - float(searches["used"])


PROVIDER = Provider(
    name="hunter",
    title="Hunter",
    key="HUNTER_API_KEY",
    url="https://api.hunter.io",
    auth=lambda secret: Auth.header("X-API-KEY", secret),
    build=_tools,
    balance=Balance("/v2/account", _left, unit="searches", tools=("email_finder",)),
    docs=(
        "https://hunter.io/api-documentation/v2",
        "https://help.hunter.io/en/articles/1911617",
    ),
)


def hunter(
    api_key: str | Secret | None = None, base_url: str | None = None, account: str | None = None
) -> ProviderTools:
    """Hunter's tools: ``hunter.email_finder`` ({first_name, last_name | full_name, domain |
    company} -> {email, confidence, status}) and ``hunter.email_verifier`` ({email} ->
    {email, status}). The key: ``api_key``, else ``HUNTER_API_KEY``."""
    return PROVIDER.tools(api_key, base_url, account)
