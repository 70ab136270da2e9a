"""NeverBounce (API v4.2): ``neverbounce.verify``, one address by ``single/check``, many as a
bulk job (``jobs/create``, polled at ``jobs/status``, results from ``jobs/results``).

A batch of addresses (up to 1000, gathered for up to 2 s) is one job, created with
``auto_parse`` and ``auto_start`` so it is paid as it is created, polled every 10 s (then
15, 22... up to 60 s), and read back as one page of ``jobs/results``; an address alone after
those 2 s is checked at once by ``single/check`` (with ``address_info`` and
``credits_info``).

Documentation followed:

- https://developers.neverbounce.com/v4.0/reference (the key as the ``key`` parameter, in the
  query or the body; GET and POST alike) and .../v4.0/reference/encoding-requests
- https://developers.neverbounce.com/docs/verifying-an-email (``single/check``; the verdicts
  valid, invalid, disposable, catchall, unknown; ``address_info`` and ``credits_info``)
- https://developers.neverbounce.com/docs/verifying-a-list,
  https://developers.neverbounce.com/reference/jobs-create (``input_location: supplied``,
  ``auto_parse``, ``auto_start``: "will start the job and deduct the credits"; ``run_sample``),
  https://developers.neverbounce.com/reference/jobs-status (``job_status``: uploading,
  parsing, waiting, waiting_analyzed, queued, running, under_review, complete, failed;
  ``total.billable``), ``jobs/results`` (pages of ``{data, verification}``, up to 1000 a page)
- https://developers.neverbounce.com/reference/error-handling (every application error is
  HTTP 200 with ``status``: auth_failure, throttle_triggered, temp_unavail, general_failure,
  bad_referrer, and a ``message``; 413 for a job too large; 5xx: try again)
- ``account/info`` (``credits_info``: paid and free credits used and remaining), as in the
  ReadMe API definition v4.2 and NeverBounce's SDKs (NeverBounceApi-Python, -Go, -NodeJS,
  -Ruby); https://neverbounce.com/help/pricing-and-billing/how-does-pricing-and-billing-work
  (1 credit a verification)

What the documentation leaves open, and what this adapter assumes:

- the paths are under ``/v4.2`` (the current minor, the SDKs' default; ``/v4`` is served too).
  The key is the ``key`` field of the JSON body of ``jobs/create`` (kept out of its URL) and
  the ``key`` query parameter of the GETs (``single/check``, the polls, ``account/info``);
  ``jobs/status`` and ``jobs/results`` are asked by GET with ``job_id`` in the query, as the
  documentation shows them;
- a single check's answer does not repeat the address unless ``address_info=1``: it is asked
  for, and the result's ``email`` is ``address_info.original_email``;
- rate limits: none are published. The adapter keeps to 5 requests a second (single checks
  and job submissions alike), and waits 5 s on ``throttle_triggered``, which names no wait;
  a ``temp_unavail`` poll is ``retryable``: the job is polled again;
- the words of ``auth_failure`` and of an account out of credits: the outcome is read from
  ``status``; a ``general_failure`` whose message names credits or a payment method is
  ``insufficient_credits``, any other is ``fatal``. A job the balance cannot pay is assumed
  refused when it is created (auto_start takes the credits at once); a job that fails later
  (``job_status: failed``) fails its calls with ``failure_reason``, in doubt (whether it was
  charged is not said);
- the order of ``jobs/results`` is not documented: its items are matched to the addresses
  asked by the address they repeat (``data.email``, trimmed, any case). One page of 1000
  holds a whole job, as jobs are at most 1000 addresses here. An address the results leave
  out fails its cell alone (``missing_item``); the job's other cells stand;
- a job's results live until the job is deleted: a ``general_failure`` to ``jobs/status``
  for a job it created means the job is gone (``job_expired``);
- charges: a single check costs 1 credit whatever its verdict (``credits_info`` is asked for
  and reported); in a job every ``billable`` row costs 1 and a row of bad syntax (flag
  ``bad_syntax``) is not billable, so it is free; duplicates never reach a job (inputs are
  compared as addresses, trimmed and case-folded);
- ``waiting`` is a step a job passes through before ``auto_start`` starts it (pending);
  ``waiting_analyzed`` follows only a sample, which this tool never asks for: it fails;
- the free sample estimate (``run_sample``: a job's ``bounce_estimate`` before paying) is
  left out: it estimates a list, not an address, and its job then waits for a start
  this tool never sends;
- the verdicts in our vocabulary: valid -> valid, catchall -> catch_all, unknown -> unknown,
  invalid -> invalid, disposable -> invalid with ``disposable`` true (so is an address
  flagged ``disposable_email``); ``role`` is the flag ``role_account``, ``free_email`` the
  flag ``free_email_host``;
- the account endpoint answers a wrong key 200 ``auth_failure``: the balance reader raises
  ``PermissionError`` for it (``ValueError`` for another refusal). A monthly-billed account
  has no credits left to count (None).

The tool is one declaration: ``HttpBulk(url=jobs/create)`` sends a lone address to the
tool's own URL (``single/check``, never pending) and several as a job with the fixed fields
``HttpBulk(body=...)``; the tool's ``poll=`` is the job's (it sets the polls' schedule).
What it still cannot say: that a job failing before it started (``job_status: failed``) was
not charged (its cells fail in doubt), and that the 200 ``auth_failure`` of
``account/info`` is a refused key (the balance reader raises ``PermissionError`` itself).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .._secrets import Secret
from ..tools import Answer, Auth, Cost, HttpBulk, HttpPoll, HttpTool, Outcome, Rate, Reported
from ._provider import Balance, Provider, ProviderTools
from ._vocab import status_of, verification

__all__ = ["PROVIDER", "neverbounce"]

VERSION = "/v4.2"
JOB_SIZE = 1000  # a job's addresses: one page of jobs/results (items_per_page <= 1000)
THROTTLE_WAIT = 5.0  # seconds after throttle_triggered, which names none

_STATUS = {
    "valid": "valid",
    "catchall": "catch_all",
    "unknown": "unknown",
    "invalid": "invalid",
    "disposable": "invalid",
}
# job_status values of a job still on its way (waiting: parsed, about to be auto-started)
_RUNNING = ("uploading", "parsing", "waiting", "queued", "running", "under_review")
# the fixed fields of a job of addresses given in the request, started (and paid) at once
_JOB = {"input_location": "supplied", "auto_parse": True, "auto_start": True}


def _said(status: str) -> Callable[[Any], bool]:
    """A body predicate: the API's envelope ``status`` is ``status``."""
    return lambda body: body["status"] == status


def _out_of_credits(body: Any) -> bool:
    message = str(body.get("message") or "").casefold()
    return body["status"] == "general_failure" and ("credit" in message or "payment" in message)


def _job_created(body: Any) -> bool:
    return body["status"] == "success" and body.get("job_id") not in (None, "")


def _not_billable(body: Any) -> bool:
    """A job's item with bad syntax: not in the job's ``billable`` rows."""
    return "bad_syntax" in (body["verification"].get("flags") or [])


# What an answer that is not a verdict means (the API's envelope, then HTTP), in order
_ENVELOPE = [
    Outcome("fatal", body=_said("auth_failure"), message="message"),
    Outcome("rate_limited", body=_said("throttle_triggered"), wait=THROTTLE_WAIT),
    Outcome("retryable", body=_said("temp_unavail")),
    Outcome("insufficient_credits", body=_out_of_credits, message="message"),
    Outcome("fatal", body=_said("general_failure"), message="message"),
    Outcome("fatal", body=_said("bad_referrer"), message="message"),
]
_HTTP = [
    Outcome("fatal", status=413),  # a job too large: split it (JOB_SIZE keeps it small)
    Outcome("retryable", status="5xx"),
    Outcome("fatal", status="4xx"),
]


def _job_status(*values: str) -> Callable[[Any], bool]:
    """A body predicate: the job's ``job_status`` is one of ``values``."""
    return lambda body: body["status"] == "success" and body["job_status"] in values


_POLL = [
    Outcome("fatal", body=_said("auth_failure"), message="message"),
    Outcome("rate_limited", body=_said("throttle_triggered"), wait=THROTTLE_WAIT),
    Outcome("retryable", body=_said("temp_unavail")),  # polled again
    Outcome("fatal", body=_said("general_failure"), message="message"),  # of the fetch
    Outcome("fatal", body=_said("bad_referrer"), message="message"),
    Outcome("pending", body=_job_status(*_RUNNING)),
    Outcome("fatal", body=_job_status("failed"), message="failure_reason"),
    Outcome("fatal", body=_job_status("waiting_analyzed"), message="job_status"),
    Outcome("found", body=_job_status("complete")),  # its results are fetched
    *_HTTP,
]


def _verified(answer: Answer) -> dict[str, Any] | None:
    """A verdict: a single check's answer, or an item of a job's results."""
    body = answer.body
    if "verification" in body:  # {"data": {"email", ...}, "verification": {...}}
        verdict, email = body["verification"], (body.get("data") or {}).get("email")
    else:
        verdict, email = body, None
    info = verdict.get("address_info") or {}
    flags = [flag for flag in verdict.get("flags") or [] if isinstance(flag, str)]
    result = str(verdict.get("result") or "").strip().casefold()
    return verification(
        body,
        email or info.get("original_email"),
        status_of(result, _STATUS),
        disposable=result == "disposable" or "disposable_email" in flags,
        role="role_account" in flags,
        free_email="free_email_host" in flags,
        suggested_correction=verdict.get("suggested_correction") or None,
        flags=flags,
    )


def _charged(answer: Answer) -> float | None:
    """What a single check says it took (``credits_info``); a job's item does not say."""
    info = answer.body.get("credits_info")
    if not isinstance(info, Mapping):
        return None
    return float(info.get("paid_credits_used") or 0) + float(info.get("free_credits_used") or 0)


def _tools(base: str, auth: Auth, account: str | None) -> list[HttpTool]:
    api = f"{base}{VERSION}"
    return [
        HttpTool(
            "neverbounce.verify",
            "GET",
            f"{api}/single/check",
            query={"email": "{email}", "address_info": 1, "credits_info": 1},
            auth=auth,
            account=account,
            outcomes=[
                *_ENVELOPE,
                Outcome("pending", body=_job_created, job="job_id"),  # jobs/create
                Outcome("found", body=_not_billable, credits=0),  # a job's item
                *_HTTP,
            ],
            response=_verified,
            bulk=HttpBulk(  # a lone address goes to single/check, several make a job
                max_size=JOB_SIZE,
                max_wait=2.0,
                url=f"{api}/jobs/create",
                body=_JOB,
                items="input",
                item={"email": "{email}"},
                match={"email": "data.email"},  # the results' order is not documented
            ),
            poll=HttpPoll(  # the job's (single/check answers at once)
                url=f"{api}/jobs/status?job_id={{job}}",
                interval=10,
                backoff=1.5,
                max_interval=60,
                outcomes=_POLL,
                expired=[Outcome("fatal", body=_said("general_failure"))],
                fetch=f"{api}/jobs/results?job_id={{job}}&page=1&items_per_page={JOB_SIZE}",
                result="results",
            ),
            rate=Rate(per_second=5),
            cost=Cost(1),
            reported=Reported(read=_charged),
            normalize={"email": "email"},
            description=(
                "Whether an address is deliverable: valid, catch_all, unknown, invalid "
                "(disposable, role, free_email); many at once as a bulk job."
            ),
        )
    ]


def _left(body: Any) -> float | None:
    status = body.get("status") if isinstance(body, Mapping) else None
    if status == "auth_failure":
        raise PermissionError(
            f"NeverBounce refused the key ({body.get('message')}): check NEVERBOUNCE_API_KEY."
        )
    if status != "success":
        raise ValueError(f"NeverBounce answered {status}: {body.get('message')}")
    credits = body.get("credits_info") or {}
    if credits.get("paid_credits_remaining") is None:  # billed monthly: no credits to count
        return None
    return float(credits["paid_credits_remaining"]) + float(
        credits.get("free_credits_remaining") or 0
    )


PROVIDER = Provider(
    name="neverbounce",
    title="NeverBounce",
    key="NEVERBOUNCE_API_KEY",
    url="https://api.neverbounce.com",
    auth=lambda secret: Auth.body("key", secret),
    build=_tools,
    balance=Balance(f"{VERSION}/account/info", _left),
    docs=(
        "https://developers.neverbounce.com/v4.0/reference",
        "https://developers.neverbounce.com/docs/verifying-an-email",
        "https://developers.neverbounce.com/docs/verifying-a-list",
        "https://developers.neverbounce.com/reference/jobs-create",
        "https://developers.neverbounce.com/reference/jobs-status",
        "https://developers.neverbounce.com/reference/error-handling",
        "https://neverbounce.com/help/pricing-and-billing/how-does-pricing-and-billing-work",
    ),
)


def neverbounce(
    api_key: str | Secret | None = None, base_url: str | None = None, account: str | None = None
) -> ProviderTools:
    """NeverBounce's tool: ``neverbounce.verify`` ({email} -> {email, status, disposable,
    role, free_email, suggested_correction, flags}), one address at once or many as a job.
    The key: ``api_key``, else ``NEVERBOUNCE_API_KEY``."""
    return PROVIDER.tools(api_key, base_url, account)
