"""LeadMagic (api.leadmagic.io, the ``/v1`` routes): ``leadmagic.email_finder``,
``leadmagic.email_validate`` and ``leadmagic.mobile_finder``.

Documentation followed:

- https://leadmagic.io/docs/v1/authentication (the ``X-API-Key`` header, any case)
- https://leadmagic.io/docs/v1/making-api-calls and https://leadmagic.mintlify.app/v1/making-api-calls
  (JSON ``POST`` bodies, limits per endpoint and per minute, RFC 9457 problem errors, 402 =
  out of credits, 429 with ``Retry-After``)
- https://leadmagic.io/docs/v1/developer-experience (``RateLimit-Limit``/``-Remaining``/
  ``-Reset`` and ``X-Credits-Cost``/``X-Credits-Remaining`` on every answer)
- https://leadmagic.io/docs/reference/email-finder (``POST /v1/people/email-finder``: a name
  field and a company field; ``status`` ``valid``/``valid_catch_all``/``catch_all``/
  ``not_found``; ``credits_consumed``; a miss is 200 with ``email`` null, free)
- https://leadmagic.io/docs/reference/email-validation and
  https://leadmagic.mintlify.app/v1/reference/email-validation (``POST
  /v1/people/email-validation``: ``email_status``; 0.05 credits; ``catch_all`` and
  ``unknown`` free; an address that fails RFC syntax is a 200 ``invalid``)
- LeadMagic's Mobile Finder page (``POST /v1/people/mobile-finder``: ``profile_url``,
  ``work_email`` or ``personal_email``; ``mobile_number``, null when not found; 5 credits
  when found, else free), as indexed from the LeadMagic docs sources
- https://leadmagic.io/docs/v1/credits ("risky emails always free: catch_all, unknown")
- https://leadmagic.io/docs/v1/reference/check-credits (``GET /v1/credits``: free, not
  rate limited) and LeadMagic/leadmagic-openapi ``llms-full.txt`` (its full shape:
  ``credits``, ``credits_liquid``, ``is_frozen``...)
- https://leadmagic.io/docs/v1/reference/email-to-profile (the vendor OpenAPI: the problem
  envelope ``{success, errors: [{type, title, status, code, detail, context}], meta}``, the
  401/402/429 codes and titles; 300 requests a minute, bursts of ~5 a second)

What the documentation leaves open, and what this adapter assumes:

- the limits: copies say 3,000 or 300 (or 1,000) requests a minute per endpoint, and "soft
  mode" lets excess through while 429 is documented too. Declared: the newest, 300 a minute
  at ~5 a second, 5 in flight, and the account-wide gateway's 500,000 a day (each tool
  alone: the runtime has no window shared by several tools). The runtime reads
  ``RateLimit-Remaining``/``RateLimit-Reset`` itself and holds before the window is spent;
  a 429 waits ``Retry-After``, else ``RateLimit-Reset``, else a minute. A used-up daily
  gateway cap is not documented: assumed a 429 with a long ``Retry-After`` (waited out);
- prices: validation is 0.05 credits (leadmagic.io) or 0.25 (the mintlify copy, the
  OpenAPI repository). Declared 0.05: the provider reports each charge (``X-Credits-Cost``,
  else the body's ``credits_consumed``) and the ledger counts the higher of the declared and
  the reported figures, so a 0.25 charge is still counted as 0.25, where declaring 0.25
  would count 0.25 for every 0.05 charge for good;
- free answers: a finder's ``catch_all`` (unverifiable) address is free, as the credits page
  says of risky emails ("always free"), although the finder page prices it at 1 credit
  (if charged, the reported figure says so and is counted); a finder's ``valid_catch_all``
  (catch-all domain, engagement data) costs 1. A validation's ``catch_all`` and ``unknown``
  are free, ``valid``, ``valid_catch_all`` and ``invalid`` (malformed addresses included)
  cost 0.05;
- ``valid_catch_all`` is our ``catch_all`` (a waterfall's catch-all policy decides), kept as
  ``provider_status``; LeadMagic gives no confidence score (``confidence`` is None), no
  ``disposable`` flag (None); ``role`` is ours, from the address's local part (``info@``,
  ``sales@``...), as LeadMagic does not say;
- the not-found bodies are not shown in full: a miss is read from ``email`` /
  ``mobile_number`` being null, never from ``message``; a 404 (``profile_not_found``) on
  the finders is a miss too;
- errors come in three shapes (problem ``errors[0]``, ``{"error", "detail"}``,
  ``{"error": {"message"}}``): classified by status; the cell's message is
  ``errors.0.title`` (``errors.0.detail`` for a 400), else the body's text. A 400 (a
  request the provider refuses, such as a validation without an address) fails the cell;
  500/502/503 are sent again;
- a 402 is per request ("need 5, have 2.50"): the account's other calls in the run stop,
  cheaper ones included; resume the run once credits are added;
- our ``email`` is sent to the mobile finder as ``work_email`` (the vocabulary has one
  email), ``linkedin_url`` as ``profile_url`` (``https://www.linkedin.com/in/<slug>``, the
  tracking query dropped, as the docs advise); the inputs it does not send are not part of
  its receipts;
- the mobile number comes as ``+1-555-123-4567`` or ``+1234567890``: it is normalised to
  E.164 (``+15551234567``); a number without its country code (no ``+`` or ``00``) cannot
  be, and is ``phone: None`` (the answer is kept under ``raw``); no phone type or validity
  is documented;
- the bulk API (``/bulk/submit``, jobs and webhooks) is not used: its limits, statuses and
  result format are not documented; the single endpoints are called under the rate limits;
- ``GET /v1/credits`` says what is left: ``credits_liquid`` when present (credits not
  frozen), else ``credits``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .._secrets import Secret
from ..tools import Answer, Auth, Cost, HttpTool, Outcome, Rate, Reported
from ._provider import Balance, Provider, ProviderTools
from ._vocab import email_result, status_of, verification

__all__ = ["PROVIDER", "e164", "leadmagic"]

_STATUS = {
    "valid": "valid",
    "valid_catch_all": "catch_all",
    "catch_all": "catch_all",
    "unknown": "unknown",
    "invalid": "invalid",
}
_FREE_VERDICTS = ("catch_all", "unknown")  # a validation's inconclusive answers
_ROLES = frozenset((
    "accounting", "accounts", "admin", "billing", "careers", "contact", "enquiries", "finance",
    "hello", "help", "hr", "info", "inquiries", "jobs", "legal", "marketing", "media",
    "no-reply", "noreply", "office", "press", "privacy", "sales", "security", "support",
    "team", "webmaster",
))  # fmt: skip

# the provider's refusals, in the order tried: by status first, whatever the body's shape
_REFUSALS = [
    Outcome("insufficient_credits", status=402, message="errors.0.title"),
    Outcome("rate_limited", status=429, wait=60, message="errors.0.title"),
    Outcome("fatal", status=[400, 422], message="errors.0.detail"),
    Outcome("fatal", status=[401, 403], message="errors.0.title"),
    Outcome("retryable", status="5xx"),
]
_MISS = Outcome("not_found", status=404)  # profile_not_found / resource_not_found


def _charged(answer: Answer) -> float | None:
    """What LeadMagic says the answer cost: ``X-Credits-Cost``, else ``credits_consumed``."""
    said: Any = next((v for k, v in answer.headers.items() if k.lower() == "x-credits-cost"), None)
    if said is None and isinstance(answer.body, Mapping):
        said = answer.body.get("credits_consumed")
    if said is None or isinstance(said, bool):
        return None
    return float(said)


def _unverifiable_email(body: Any) -> bool:
    """A finder's ``catch_all`` address (free: "risky emails are always free")."""
    return bool(body["status"] == "catch_all" and body["email"])


def _inconclusive(body: Any) -> bool:
    """A validation's ``catch_all`` or ``unknown`` verdict (free)."""
    return bool(body["email_status"] in _FREE_VERDICTS)


def _said(body: Any, name: str) -> Any:
    return body.get(name) if isinstance(body, Mapping) else None


def _role(email: Any) -> bool | None:
    if not isinstance(email, str) or "@" not in email:
        return None
    return email.rsplit("@", 1)[0].strip().casefold() in _ROLES


def _found(answer: Answer) -> dict[str, Any] | None:
    body = answer.body
    return email_result(
        body,
        body.get("email"),
        status_of(body.get("status"), _STATUS),
        None,  # LeadMagic gives no score
        provider_status=body.get("status"),
        first_name=body.get("first_name"),
        last_name=body.get("last_name"),
        domain=body.get("domain"),
        company=body.get("company_name"),
        employment_verified=body.get("employment_verified"),
        mx_provider=body.get("mx_provider"),
    )


def _verified(answer: Answer) -> dict[str, Any] | None:
    body = answer.body
    email = body.get("email")
    catch_all = body.get("is_domain_catch_all")
    if not isinstance(catch_all, bool):
        catch_all = body.get("email_status") in ("catch_all", "valid_catch_all") or None
    return verification(
        body,
        email,
        status_of(body.get("email_status"), _STATUS),
        disposable=None,  # LeadMagic does not say
        role=_role(email),
        provider_status=body.get("email_status"),
        catch_all_domain=catch_all,
        mx_provider=body.get("mx_provider"),
        mx_security_gateway=body.get("mx_security_gateway"),
    )


_EXTENSION = re.compile(r"\s*(?:ext\.?|extension|x|#)\s*\d+\s*$", re.IGNORECASE)
_SEPARATORS = re.compile(r"[\s().\-/]")


def e164(number: Any) -> str | None:
    """A phone number as LeadMagic writes it (``+1-555-123-4567``, ``+44 (0)20 7946 0958``,
    ``0049 30 1234567``) in E.164 (``+15551234567``); None without a country code."""
    if not isinstance(number, str):
        return None
    text = _EXTENSION.sub("", number.strip()).replace("(0)", "")
    if text.startswith("00"):
        text = "+" + text[2:]
    if not text.startswith("+"):
        return None
    digits = _SEPARATORS.sub("", text[1:])
    if not (digits.isascii() and digits.isdigit() and 7 <= len(digits) <= 15):
        return None
    return None if digits[0] == "0" else "+" + digits


def _mobile(answer: Answer) -> dict[str, Any] | None:
    number = _said(answer.body, "mobile_number")
    if not isinstance(number, str) or not number.strip():
        return None
    return {"phone": e164(number), "raw": answer.body}


_SLUG = re.compile(r"^(?:https?://)?(?:[a-z]{2,3}\.)?linkedin\.com/in/([^/?#\s]+)", re.IGNORECASE)


def _profile(url: str) -> str:
    """A LinkedIn profile as one text: ``https://www.linkedin.com/in/<slug>`` (no query, no
    trailing slash), or the username as given."""
    text = url.strip()
    found = _SLUG.match(text)
    if found:
        return f"https://www.linkedin.com/in/{found.group(1).casefold()}"
    return text.rstrip("/")


def _mobile_input(input: dict[str, Any]) -> dict[str, Any]:
    """What the mobile finder is sent (and its receipts keyed on): the profile, the email."""
    out: dict[str, Any] = {}
    url, email = input.get("linkedin_url"), input.get("email")
    if isinstance(url, str) and url.strip():
        out["linkedin_url"] = _profile(url)
    if isinstance(email, str) and email.strip():
        out["email"] = email.strip().casefold()
    return out


def _tools(base: str, auth: Auth, account: str | None) -> list[HttpTool]:
    # 300 a minute per endpoint at ~5 a second (the newest copy), the gateway's day
    rate = Rate(per_second=5, per_minute=300, per_day=500_000, concurrency=5)
    reported = Reported(read=_charged)
    names = {"first_name": "name", "last_name": "name", "full_name": "name"}
    return [
        HttpTool(
            "leadmagic.email_finder",
            "POST",
            f"{base}/v1/people/email-finder",
            json={
                "first_name": "{first_name}",
                "last_name": "{last_name}",
                "full_name": "{full_name}",
                "domain": "{domain}",
                "company_name": "{company}",
            },
            auth=auth,
            account=account,
            outcomes=[
                Outcome("found", status=200, body=_unverifiable_email, credits=0),
                _MISS,
                *_REFUSALS,
            ],
            result="email",  # 200 with a null email: not found, free
            response=_found,
            rate=rate,
            cost=Cost(1, charge="on_hit"),
            reported=reported,
            normalize={**names, "domain": "domain", "company": "name"},
            description="Work email from a name (or full name) and a domain (or company name).",
        ),
        HttpTool(
            "leadmagic.email_validate",
            "POST",
            f"{base}/v1/people/email-validation",
            json={"email": "{email}"},
            auth=auth,
            account=account,
            outcomes=[
                Outcome("found", status=200, body=_inconclusive, credits=0),
                *_REFUSALS,
            ],
            result="email_status",
            response=_verified,
            rate=rate,
            cost=Cost(0.05),
            reported=reported,
            normalize={"email": "email"},
            description="Whether an address is deliverable: valid, catch_all, unknown, invalid.",
        ),
        HttpTool(
            "leadmagic.mobile_finder",
            "POST",
            f"{base}/v1/people/mobile-finder",
            json={"profile_url": "{linkedin_url}", "work_email": "{email}"},
            auth=auth,
            account=account,
            outcomes=[_MISS, *_REFUSALS],
            result="mobile_number",  # 200 with a null number: not found, free
            response=_mobile,
            rate=rate,
            cost=Cost(5, charge="on_hit"),
            reported=reported,
            normalize=_mobile_input,
            description="Mobile phone (E.164) from a LinkedIn profile URL or an email.",
        ),
    ]


def _left(body: Any) -> float | None:
    for name in ("credits_liquid", "credits"):
        value = _said(body, name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


PROVIDER = Provider(
    name="leadmagic",
    title="LeadMagic",
    key="LEADMAGIC_API_KEY",
    url="https://api.leadmagic.io",
    auth=lambda secret: Auth.header("X-API-Key", secret),
    build=_tools,
    balance=Balance("/v1/credits", _left),
    docs=(
        "https://leadmagic.io/docs/v1/making-api-calls",
        "https://leadmagic.io/docs/reference/email-finder",
        "https://leadmagic.io/docs/reference/email-validation",
        "https://leadmagic.io/docs/v1/credits",
        "https://leadmagic.io/docs/v1/reference/check-credits",
    ),
)


def leadmagic(
    api_key: str | Secret | None = None, base_url: str | None = None, account: str | None = None
) -> ProviderTools:
    """LeadMagic's tools: ``leadmagic.email_finder`` ({first_name, last_name | full_name,
    domain | company} -> {email, confidence, status}), ``leadmagic.email_validate`` ({email}
    -> {email, status, disposable, role}) and ``leadmagic.mobile_finder`` ({linkedin_url |
    email} -> {phone}). The key: ``api_key``, else ``LEADMAGIC_API_KEY``."""
    return PROVIDER.tools(api_key, base_url, account)
