"""ZeroBounce (API v2): ``zerobounce.validate``, one address per ``GET /v2/validate``, up to
100 per ``POST /v2/validatebatch``. A set of declarations: the key is ``pl.Auth.body``
(validate's query, the batch's body), a batch's rows are matched to their addresses by
``HttpBulk(match=)``, and its host is computed when the tools are built.

Documentation followed:

- https://www.zerobounce.net/docs/email-validation-api-quickstart/v2-validate-emails (the
  ``api_key``, ``email`` and ``ip_address`` query, "can be blank, but parameter required";
  the answer's fields; 1 to 30 seconds an answer; "will never consume a credit for any
  unknown result"; the sandbox addresses, which cost no credits)
- https://zerobounce.net/docs/email-validation-api-quickstart/v2-batch-validate-emails (the
  JSON body ``{"api_key", "email_batch": [{"email_address", "ip_address"}]}`` on
  ``bulkapi.zerobounce.net``; "up to 200 emails at a time", "rate limited to 5 uses per
  minute, if you exceed the rate limit, you will be blocked for 10 minutes", "up to 70
  seconds"; the answer ``{"email_batch": [...], "errors": [...]}``)
- https://www.zerobounce.net/docs/api-dashboard/api-rate-limits/ (blocks, not throttling:
  validate past its limit is blocked 1 minute; validatebatch 10 minutes; a bad key 200 times
  an hour, 1 hour; getcredits 1 day) and https://www.zerobounce.in/docs/api-dashboard/api-error-codes
  (429 "Too Many Requests", 500 platform error, 520/524 transport errors)
- https://www.zerobounce.net/docs/email-validation-api-quickstart/v2-credit-balance
  (``GET /v2/getcredits`` -> ``{"Credits": 2375323}``; "If a -1 is returned, that means your
  API Key is invalid")
- https://www.zerobounce.net/docs/email-list-validation/status-codes (the statuses and sub
  statuses), and the official SDKs: zerobounce/zerobouncego (``utility.go``: the sandbox table;
  ``Credits`` as a string), zerobounce/zero-bounce-python-sdk-setup (tests: the error
  ``"Invalid API key or your account ran out of credits"`` on validate and getcredits, and
  ``{"email_batch": [], "errors": [{"email_address": "all", ...}]}`` on a batch)

What the documentation leaves open, and what this adapter assumes:

- **Bad key or no credits.** ZeroBounce answers both with one sentence (validate: ``{"error":
  "Invalid API key or your account ran out of credits"}``; a batch: its ``errors`` entry for
  ``"all"``), with HTTP 200. The adapter reads it as ``insufficient_credits``: either way no
  call to the account can succeed in this run, so its other calls fail unsent (200 bad-key
  calls an hour would block the key for an hour) and a waterfall goes on with its next step.
  The cell keeps ZeroBounce's words; ``playline providers check`` tells the two apart, as the
  docs advise, with ``getcredits`` (-1: the key is wrong, 0: no credits left).
- **Blocks.** A key past a limit is blocked, not throttled; the answer while blocked is a 429
  whose body is not documented (read as nothing). It is ``blocked``: nothing goes to the
  account until the block ends. The documented blocks are 60 seconds after too many
  validations and 600 after too many batches, but a 429 says neither which endpoint it
  answers nor how long (its body is not JSON, the same for both; an ``Answer`` carries no
  URL), so one rule cannot tell them apart: every 429 waits 600 s, the longer block (a
  ``Retry-After`` would win). Waiting 60 s after a batch's block would send it again nine
  times into the block; waiting 600 s after validate's loses at most nine minutes, and only
  when another program spent validate's 50,000 per 10 s, since this tool alone never comes
  near it. The tool's rate is the batch's documented 5 requests a minute (the rate-limits
  page says 20; the endpoint's own page says 5), shared by both forms (one ``Rate`` covers a
  tool), so neither limit is ever reached by this tool alone. Each request carries every call
  queued by the time the gate lets it out: up to 500 addresses a minute. The rate-limits
  page's "bulk API unknowns" block (a second batch answer in an hour with more than 20
  unknowns other than greylisted/antispam) depends on the addresses, not the pace: with many
  unknowns, expect a one-hour block (waited out).
- **Batch size.** 100 per request (older copies of the batch page and the Python SDK say
  100; the current page 200).
- **Batch host.** ``bulkapi.zerobounce.net`` (the batch page) when the base URL is one of
  ZeroBounce's API hosts; ``PLAYLINE_ZEROBOUNCE_BULK_URL`` sets another; a base URL of any
  other host (a proxy, the double) serves the batch too. Computed once, as the tools are
  built (``_batch_url``).
- **Where the key goes.** ``pl.Auth.body("api_key")``: ``?api_key=`` on validate and
  getcredits (requests without a body), the body's ``api_key`` on a batch (only there: never
  in the batch's URL). It is added as the request is sent and is never part of an input, a
  receipt or a message.
- **Batch rows** are matched to the addresses asked by their ``address`` (trimmed, any case:
  ``HttpBulk(match=)``); the order of the answer is not documented. An address ZeroBounce
  answers only in ``errors``, or not at all, fails its own cell (``missing_item``, nothing
  charged; the other rows stand); ZeroBounce's words for it under ``errors`` are not kept
  (the framework reads the rows at one path). ZeroBounce drops a leading dot of a gmail.com
  address (``leading_period_removed``) and may echo the address without it; in a batch such
  an address finds no row and fails its cell the same way (a lone address is answered
  directly).
- **Costs.** 1 credit per validated address; ``unknown`` and the sandbox addresses
  (``valid@example.com``...) are free; every other verdict (``valid``, ``invalid``,
  ``catch-all``, ``spamtrap``, ``abuse``, ``do_not_mail``) costs 1 (not documented
  otherwise). No answer reports its charge.
- **Statuses.** ``valid`` -> ``valid``; ``catch-all`` -> ``catch_all``; ``unknown`` (and an
  empty status) -> ``unknown``; ``invalid``, ``spamtrap``, ``abuse`` and ``do_not_mail`` ->
  ``invalid``. ``disposable`` is true for the sub status ``disposable``, ``role`` for
  ``role_based``, ``role_based_catch_all`` and ``role_based_accept_all``; both are false for
  other definite verdicts and None for ``unknown``. No confidence: ZeroBounce gives none.
- **Errors.** 500 and 503 are sent again (the platform failed before the work); 520 and 524
  (a proxy lost the answer) are left in doubt; any 4xx fails its cell with the provider's
  ``error`` or ``Message``.
"""

from __future__ import annotations

import os
import urllib.parse
from typing import Any

from .._secrets import Secret
from ..tools import Answer, Auth, Cost, HttpBulk, HttpTool, Outcome, Rate
from ._provider import Balance, Provider, ProviderTools
from ._vocab import status_of, verification

__all__ = ["BATCH_SIZE", "BLOCKED", "PROVIDER", "SANDBOX", "zerobounce"]

BATCH_SIZE = 100
BLOCKED = 600.0  # seconds after any 429: validatebatch's block (validate's is 60)
BULK_HOST = "https://bulkapi.zerobounce.net"
_API_HOSTS = ("api.zerobounce.net", "api-us.zerobounce.net", "api-eu.zerobounce.net")

_STATUS = {
    "valid": "valid",
    "catch-all": "catch_all",
    "unknown": "unknown",
    "invalid": "invalid",
    "spamtrap": "invalid",
    "abuse": "invalid",
    "do_not_mail": "invalid",
}
_ROLE = frozenset({"role_based", "role_based_catch_all", "role_based_accept_all"})

# The sandbox addresses (at example.com): answered with a fixed verdict, never charged.
SANDBOX = frozenset(
    {
        "disposable", "invalid", "valid", "toxic", "donotmail", "spamtrap", "abuse",
        "unknown", "catch_all", "antispam_system", "does_not_accept_mail",
        "exception_occurred", "failed_smtp_connection", "failed_syntax_check",
        "forcible_disconnect", "global_suppression", "greylisted", "leading_period_removed",
        "mail_server_did_not_respond", "mail_server_temporary_error",
        "mailbox_quota_exceeded", "mailbox_not_found", "no_dns_entries", "possible_trap",
        "possible_typo", "role_based", "timeout_exceeded", "unroutable_ip_address",
        "free_email", "role_based_catch_all",
    }
)  # fmt: skip


def _sandbox(address: Any) -> bool:
    """A sandbox address (trimmed, any case, leading dots of the local part dropped)."""
    if not isinstance(address, str):
        return False
    local, _, domain = address.strip().casefold().lstrip(".").partition("@")
    return domain == "example.com" and local in SANDBOX


def _refusal_words(said: Any) -> bool:
    """ZeroBounce's one sentence for a wrong key and for an account out of credits."""
    text = said.casefold() if isinstance(said, str) else ""
    return "invalid api key" in text or "ran out of credits" in text


def _said(body: Any, key: str) -> bool:
    """An answer that is only the provider's words (no verdict, no batch): ``error`` or
    ``Message``."""
    return (
        isinstance(body, dict)
        and key in body
        and not {"status", "email_batch", "email_address"} & body.keys()
    )


def _refused_all(body: Any) -> list[dict[str, Any]]:
    """A batch refused as a whole: its ``errors`` entries for ``"all"``."""
    if not isinstance(body, dict) or not isinstance(body.get("errors"), list):
        return []
    return [
        e
        for e in body["errors"]
        if isinstance(e, dict) and str(e.get("email_address", "")).casefold() == "all"
    ]


def _refused_key(body: Any) -> bool:
    """validate's answer to a wrong key or an empty account."""
    return _said(body, "error") and _refusal_words(body["error"])


def _refused_batch(body: Any) -> bool:
    """A batch's answer to a wrong key or an empty account."""
    return any(_refusal_words(e.get("error")) for e in _refused_all(body))


def _verdict(body: Any) -> bool:
    """A verdict: validate's answer, or a row of a batch's."""
    return isinstance(body, dict) and "status" in body


def _free(body: Any) -> bool:
    """A verdict ZeroBounce does not charge: ``unknown``, or a sandbox address."""
    return _verdict(body) and (
        status_of(body["status"], _STATUS) == "unknown" or _sandbox(body.get("address"))
    )


OUTCOMES = [
    # blocked for a while; a 429 does not say after which endpoint: the longer block
    Outcome("blocked", status=429, wait=BLOCKED),
    # a wrong key or no credits: one sentence for both, with 200 (see the module docstring)
    Outcome("insufficient_credits", body=_refused_key, message="error"),
    Outcome("insufficient_credits", body=_refused_batch, message="errors.0.error"),
    Outcome("fatal", body=lambda b: bool(_refused_all(b)), message="errors.0.error"),
    Outcome("retryable", status=[500, 503]),
    Outcome("fatal", body=lambda b: _said(b, "Message"), message="Message"),
    Outcome("fatal", body=lambda b: _said(b, "error"), message="error"),
    Outcome("fatal", status="4xx"),
    # verdicts (validate's answer, a batch's rows): unknown and sandbox addresses free, the
    # others 1; a batch's whole answer is found by the framework's 2xx rule
    Outcome("found", status="2xx", body=_free, credits=0),
    Outcome("found", status="2xx", body=_verdict),
]


def _flag(value: Any) -> bool | None:
    """``mx_found`` is the text ``"true"`` or ``"false"``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().casefold() in ("true", "false"):
        return value.strip().casefold() == "true"
    return None


def _validated(answer: Answer) -> dict[str, Any] | None:
    """A validate answer (or a batch row) in the one vocabulary."""
    row = answer.body
    word = row.get("status")
    sub = row.get("sub_status") if isinstance(row.get("sub_status"), str) else ""
    status = status_of(word, _STATUS)
    definite = status != "unknown"
    return verification(
        row,
        row.get("address"),
        status,
        disposable=sub == "disposable" if definite else None,
        role=sub in _ROLE if definite else None,
        free_email=row.get("free_email") if isinstance(row.get("free_email"), bool) else None,
        did_you_mean=row.get("did_you_mean") or None,
        mx_found=_flag(row.get("mx_found")),
        provider_status=word,
        sub_status=sub or None,
        error=None,
    )


def _batch_url(base: str) -> str:
    """Where batches go: ``PLAYLINE_ZEROBOUNCE_BULK_URL``, else the documented bulk host
    beside ZeroBounce's API hosts, else the base URL (a proxy or a double serves both)."""
    given = os.environ.get("PLAYLINE_ZEROBOUNCE_BULK_URL")
    if given:
        origin = given.rstrip("/")
    elif urllib.parse.urlsplit(base).netloc in _API_HOSTS:
        origin = BULK_HOST
    else:
        origin = base
    return f"{origin}/v2/validatebatch"


def _tools(base: str, auth: Auth, account: str | None) -> list[HttpTool]:
    return [
        HttpTool(
            "zerobounce.validate",
            "GET",
            f"{base}/v2/validate",
            query={"email": "{email}", "ip_address": ""},  # "can be blank, but required"
            auth=auth,  # validate's query, the batch's body
            account=account,
            outcomes=OUTCOMES,
            response=_validated,
            bulk=HttpBulk(  # a lone address goes to validate, several in one batch
                max_size=BATCH_SIZE,
                url=_batch_url(base),
                items="email_batch",
                item={"email_address": "{email}", "ip_address": None},
                results="email_batch",
                match={"email": "address"},  # the rows' order is not documented
            ),
            rate=Rate(per_minute=5),
            cost=Cost(1, charge="on_hit"),
            timeout=90,  # a batch may take 70 s
            normalize={"email": "email"},
            description="Whether an address is deliverable: valid, catch_all, unknown, "
            "invalid, with disposable and role flags (unknown is free).",
        )
    ]


def _left(body: Any) -> float | None:
    """``{"Credits": 2375323}`` (or ``"2375323"``); -1, or the refusal sentence, for a key
    ZeroBounce does not know."""
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        raise PermissionError(f"ZeroBounce refused the key ({body['error']}): check {_KEY}.")
    credits = float(body["Credits"])
    if credits < 0:
        raise PermissionError(
            f"ZeroBounce does not know the key (Credits {credits:g}): check {_KEY}."
        )
    return credits


_KEY = "ZEROBOUNCE_API_KEY"

PROVIDER = Provider(
    name="zerobounce",
    title="ZeroBounce",
    key=_KEY,
    url="https://api.zerobounce.net",
    auth=lambda secret: Auth.body("api_key", secret),
    build=_tools,
    balance=Balance("/v2/getcredits", _left, unit="credits"),
    docs=(
        "https://www.zerobounce.net/docs/email-validation-api-quickstart/v2-validate-emails",
        "https://zerobounce.net/docs/email-validation-api-quickstart/v2-batch-validate-emails",
        "https://www.zerobounce.net/docs/api-dashboard/api-rate-limits/",
        "https://www.zerobounce.net/docs/email-validation-api-quickstart/v2-credit-balance",
    ),
)


def zerobounce(
    api_key: str | Secret | None = None, base_url: str | None = None, account: str | None = None
) -> ProviderTools:
    """ZeroBounce's tool: ``zerobounce.validate`` ({email} -> {email, status, disposable,
    role, free_email, did_you_mean, mx_found, provider_status, sub_status, error}), one
    address per request or up to 100 in a batch. The key: ``api_key``, else
    ``ZEROBOUNCE_API_KEY``."""
    return PROVIDER.tools(api_key, base_url, account)
