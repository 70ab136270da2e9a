"""Dropcontact's API (``https://api.dropcontact.com``): one operation, an async batch that
finds, verifies and qualifies work emails (``dropcontact.enrich``).

Documentation followed:

- https://developer.dropcontact.com/en/quickstart/ (submit, then fetch the result)
- https://developer.dropcontact.com/llms.mdx/en/authentication.md (``X-Access-Token``)
- https://developer.dropcontact.com/llms.mdx/en/reference/enrich-a-batch-of-records.md,
  .../reference/fetch-enrichment-results.md, .../reference/input-record.md,
  .../reference/enriched-record.md, .../reference/get-credits.md
- https://developer.dropcontact.com/en/errors/ (the ``reason`` and ``detail`` bodies; "not
  ready yet" is a 200 with ``success: false``, for an unknown ``request_id`` as well)
- https://developer.dropcontact.com/en/rate-limits/ (60 requests/s, 250 records a request,
  15 kB a record, poll every 30 s)
- https://developer.dropcontact.com/en/credits/ (pay on success; 403 for a batch the credits
  do not cover; ``credits_left``)
- https://developer.dropcontact.com (the older one-page docs: the qualification words and a
  complete enriched record), https://support.dropcontact.com/article/225-what-is-the-email-
  qualification

The tool: ``POST /v1/enrich/all {"data": [record...]}`` with up to 250 records answers
``{"request_id", "credits_left", "success": true}``; ``GET /v1/enrich/all/{request_id}`` is
polled every 30 s, ``{"success": false, "reason": "Request not ready yet..."}`` until
``{"success": true, "data": [enriched record...]}``, one per record in the order sent. Our
inputs map to the record's ``first_name``, ``last_name``, ``full_name``, ``company``,
``website`` (``domain``), ``linkedin`` (``linkedin_url``) and ``email``, which Dropcontact
then verifies. The result is an email finder's: ``{email, confidence (None: Dropcontact
gives none), status, qualification, role, personal, disposable, do_not_contact, emails,
first_name, last_name, full_name, civility, job, company, website, linkedin_url,
company_phone, nb_employees, raw}``.

What the documentation leaves open, and what this adapter assumes:

- Which records are charged. The credits page: a record is charged 1 credit when a verified
  email is returned, refunded otherwise, and a record sent with an ``email`` costs 1 (its
  verification) whatever comes back. Assumed: a record is charged when its ``email`` list
  holds any address (so a sent email, always returned qualified, costs 1), and free when the
  list is absent, null or empty.
- The not-found record. No example is published; by "only populated attributes are present"
  its ``email`` key is absent. Absent, null and ``[]`` all read as not found.
- Role addresses. A record whose only addresses are generic (``contact@``, ``support@``) has
  not found the person: the cell is empty, and since an address came back it is charged
  (``Outcome("not_found", credits=1)``), unless the record asked for the verification of
  that very address (then it is the result, ``role: true``).
- The qualification words (``<local>@<domain>``) are localised and have changed over time:
  ``nominative``/``nominatif``, ``catch-all``/``catch_all``/``non_confirm``,
  ``generic``/``generique``, ``non_validated``/``non_validé``, ``Do_Not_Contact``/
  ``Ne_Pas_Contacter``, ``random``, ``invalid``/``invalide``; domains ``pro``, ``perso``,
  ``school``, ``disposable``/``jetable``, ``invalid domain``/``domaine invalide``. All are
  read case- and accent-insensitively, ``-``, ``_`` and spaces alike: nominative and generic
  are ``valid``, catch-all ``catch_all``, non-validated and unknown words ``unknown``;
  invalid, random, do-not-contact and any disposable or invalid domain ``invalid``. Of
  several addresses the best is kept: nominative, catch-all, non-validated, then the rest;
  pro before school before perso.
- Confidence: none is documented (None).
- The request's ``language``: ``HttpBulk`` builds the body ``{"data": [...]}`` only, so the
  request cannot say ``"language": "en"``; both languages' words are read (see the note on
  the framework).
- Echo: Dropcontact re-capitalises names, splits a full name and rewrites the website and
  LinkedIn URL, but returns ``custom_fields`` as sent. Each record carries its inputs (our
  vocabulary's names) in ``custom_fields``, and the poll checks them against the call's input
  (``echo``): a job answered with another's records fails ``job_mismatch``.
- A job is never declared failed, and an unknown or lost ``request_id`` answers "not ready",
  like a pending one: a job still pending an hour after its submit (a batch takes minutes)
  fails its calls in doubt, its job kept for a resume to poll (``max_wait``).
- 429 carries no ``Retry-After``: waited 2 s. 429 also means a temporary problem of theirs.
- A bad key: 401, or 403 with ``reason`` "Unknown account" (a third-party client's test):
  both fatal. Any other 403 on the submit is the credits refusal (its words are not
  documented): ``insufficient_credits``, the whole batch refused, nothing charged.
- 5xx: sent again (``retryable``), as the docs give no sign the work was done; 404 and 422
  (FastAPI's ``{"detail": ...}``) fatal.
- ``GET /v1/account/credits`` is the ``Balance`` (``{"credits": N}``, free).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

from .._secrets import Secret
from ..tools import Answer, Auth, Cost, HttpBulk, HttpPoll, HttpTool, Outcome, Rate
from ._provider import Balance, Provider, ProviderTools
from ._vocab import INPUTS, email_result

__all__ = ["PROVIDER", "dropcontact", "qualified"]

MAX_RECORDS = 250  # records per request (rate-limits page)

# the local part's words (en, fr, older docs) -> one word each
_LOCAL = {
    "nominative": "nominative",
    "nominatif": "nominative",
    "catch_all": "catch_all",
    "non_confirm": "catch_all",
    "generic": "generic",
    "generique": "generic",
    "non_validated": "non_validated",
    "non_valide": "non_validated",
    "do_not_contact": "do_not_contact",
    "ne_pas_contacter": "do_not_contact",
    "random": "random",
    "aleatory": "random",
    "aleatoire": "random",
    "invalid": "invalid",
    "invalide": "invalid",
}
_DOMAIN = {
    "pro": "pro",
    "perso": "perso",
    "school": "school",
    "ecole": "school",
    "disposable": "disposable",
    "jetable": "disposable",
    "invalid": "invalid",
    "invalide": "invalid",
    "invalid_domain": "invalid",
    "domaine_invalide": "invalid",
}
_LOCAL_RANK = {"nominative": 0, "catch_all": 1, "non_validated": 2, "generic": 4, "random": 5,
               "do_not_contact": 6, "invalid": 7}  # fmt: skip
_DOMAIN_RANK = {"pro": 0, "school": 1, "perso": 2, "disposable": 4, "invalid": 5}


def _word(text: str) -> str:
    """``"Non_Validé"`` -> ``"non_valide"``: no accents, case-folded, ``-`` and spaces ``_``."""
    bare = unicodedata.normalize("NFKD", text)
    bare = "".join(ch for ch in bare if not unicodedata.combining(ch))
    return "_".join(bare.casefold().replace("-", " ").replace("_", " ").split())


def qualified(qualification: Any) -> dict[str, Any]:
    """A qualification (``"nominative@pro"``, ``"catch-all@pro"``, ``"nominatif@perso"``) in
    our vocabulary: ``{"status", "local", "domain", "role", "personal", "disposable",
    "do_not_contact"}``; ``local``/``domain`` are None for a word not known."""
    text = qualification if isinstance(qualification, str) else ""
    head, _, tail = text.rpartition("@") if "@" in text else (text, "", "")
    local, domain = _LOCAL.get(_word(head)), _DOMAIN.get(_word(tail))
    if domain in ("invalid", "disposable") or local in ("invalid", "random", "do_not_contact"):
        status = "invalid"
    elif local == "catch_all":
        status = "catch_all"
    elif local in ("nominative", "generic"):
        status = "valid"
    else:
        status = "unknown"  # non_validated, or a word this adapter does not know
    return {
        "status": status,
        "local": local,
        "domain": domain,
        "role": local == "generic",
        "personal": domain == "perso",
        "disposable": domain == "disposable" or local == "random",
        "do_not_contact": local == "do_not_contact",
    }


def _addresses(record: Any) -> list[dict[str, Any]]:
    """The record's addresses (``email``: a list of ``{email, qualification}``; a bare string
    is read as one unqualified address), each with its reading, in the order given."""
    emails = record.get("email") if isinstance(record, Mapping) else None
    if isinstance(emails, str):
        emails = [{"email": emails}]
    if not isinstance(emails, list):
        return []
    out = []
    for entry in emails:
        if not isinstance(entry, Mapping):
            continue
        address = entry.get("email")
        if isinstance(address, str) and "@" in address:
            read = qualified(entry.get("qualification"))
            out.append({"email": address.strip(), "qualification": entry.get("qualification"),
                        **read})  # fmt: skip
    return out


def _rank(address: Mapping[str, Any]) -> tuple[float, float]:
    return (
        _LOCAL_RANK.get(address["local"], 3) if address["local"] else 3,
        _DOMAIN_RANK.get(address["domain"], 3) if address["domain"] else 3,
    )


def _sent_email(record: Any) -> str | None:
    """The address the record asked to verify (ours, echoed in ``custom_fields``)."""
    custom = record.get("custom_fields") if isinstance(record, Mapping) else None
    sent = custom.get("email") if isinstance(custom, Mapping) else None
    return sent.strip().casefold() if isinstance(sent, str) and sent.strip() else None


def _pick(record: Any) -> dict[str, Any] | None:
    """The person's address among the record's: the best that is not a role address; a
    role address only when it is the one the record asked to verify. None: not found."""
    addresses = _addresses(record)
    personal = [a for a in addresses if not a["role"]]
    if personal:
        return min(personal, key=_rank)
    sent = _sent_email(record)
    asked = [a for a in addresses if a["email"].casefold() == sent]
    return asked[0] if asked else None


def _no_address(record: Any) -> bool:
    return isinstance(record, Mapping) and "success" not in record and not _addresses(record)


def _only_roles(record: Any) -> bool:
    return isinstance(record, Mapping) and "success" not in record and _pick(record) is None


def _not_ready(body: Any) -> bool:
    """A poll's "not ready yet" (also an unknown id's, and their temporary trouble's)."""
    return body.get("success") is False and body.get("error") is not True


def _linkedin(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    url = value.strip()
    return url if url.startswith(("http://", "https://")) else f"https://{url}"


def _found(answer: Answer) -> dict[str, Any] | None:
    record = answer.body
    best = _pick(record)
    if best is None:
        return None
    return email_result(
        record,
        best["email"],
        best["status"],
        None,  # Dropcontact gives no confidence
        qualification=best["qualification"],
        role=best["role"],
        personal=best["personal"],
        disposable=best["disposable"],
        do_not_contact=best["do_not_contact"],
        emails=[
            {"email": a["email"], "status": a["status"], "qualification": a["qualification"]}
            for a in _addresses(record)
        ],
        first_name=record.get("first_name"),
        last_name=record.get("last_name"),
        full_name=record.get("full_name"),
        civility=record.get("civility"),
        job=record.get("job"),
        company=record.get("company"),
        website=record.get("website"),
        linkedin_url=_linkedin(record.get("linkedin")),
        company_phone=record.get("phone"),
        nb_employees=record.get("nb_employees"),
    )


# Dropcontact's refusals (errors page), on the submit and on the poll alike
_ERROR = Outcome("fatal", status=200, body={"error": True}, message="reason")
_BAD_KEY = [
    Outcome(
        "fatal",
        status=[401, 403],
        body=lambda body: "unknown account" in str(body.get("reason", "")).casefold(),
        message="reason",
    ),
    Outcome("fatal", status=401, message="reason"),
]
_OTHERS = [
    Outcome("rate_limited", status=429, wait=2, message="reason"),  # no Retry-After
    Outcome("fatal", status=[404, 422], message="detail"),
    Outcome("retryable", status="5xx"),
]

# what goes to Dropcontact for one input: the record, and our inputs in custom_fields (echoed)
_RECORD = {
    "first_name": "{first_name}",
    "last_name": "{last_name}",
    "full_name": "{full_name}",
    "company": "{company}",
    "website": "{domain}",
    "linkedin": "{linkedin_url}",
    "email": "{email}",
    "custom_fields": {name: "{" + name + "}" for name in INPUTS},
}


def _tools(base: str, auth: Auth, account: str | None) -> list[HttpTool]:
    names = {"first_name": "name", "last_name": "name", "full_name": "name", "company": "name"}
    return [
        HttpTool(
            "dropcontact.enrich",
            "POST",
            f"{base}/v1/enrich/all",
            auth=auth,
            account=account,
            outcomes=[
                # the submit: accepted as a job, or refused
                Outcome("pending", status=200, body={"success": True}, job="request_id"),
                Outcome("fatal", status=200, body={"success": False}, message="reason"),
                _ERROR,
                *_BAD_KEY,
                Outcome("insufficient_credits", status=403, message="reason"),  # whole batch
                *_OTHERS,
                Outcome("fatal", status=400, message="reason"),
                # each enriched record of the finished job
                Outcome("not_found", body=_no_address, credits=0),  # refunded
                Outcome("not_found", body=_only_roles, credits=1),  # an address came back
            ],
            bulk=HttpBulk(max_size=MAX_RECORDS, items="data", item=_RECORD, results="data"),
            poll=HttpPoll(
                url=f"{base}/v1/enrich/all/{{job}}",
                interval=30,
                # a lost or expired request_id is "not ready" for ever: after an hour (a
                # batch takes minutes) the calls are left in doubt, for a resume to poll
                max_wait=3600,
                outcomes=[
                    Outcome("pending", status=200, body=_not_ready),
                    _ERROR,
                    *_BAD_KEY,
                    *_OTHERS,
                ],
                result="data",  # one enriched record per record sent, in order
                echo={name: f"custom_fields.{name}" for name in INPUTS},
            ),
            response=_found,
            rate=Rate(per_second=60),
            cost=Cost(1, charge="on_hit"),
            normalize={**names, "domain": "domain", "email": "email", "linkedin_url": "text"},
            description=(
                "Work email (found, or verified when given) from a name and a domain or "
                "company, or a LinkedIn URL: valid, catch_all, unknown, invalid. Async "
                "batches of up to 250; pay on success."
            ),
        )
    ]


def _credits(body: Any) -> float | None:
    credits = body.get("credits") if isinstance(body, Mapping) else None
    if isinstance(credits, bool) or not isinstance(credits, int | float):
        return None
    return float(credits)


PROVIDER = Provider(
    name="dropcontact",
    title="Dropcontact",
    key="DROPCONTACT_API_KEY",
    url="https://api.dropcontact.com",
    auth=lambda secret: Auth.header("X-Access-Token", secret),
    build=_tools,
    balance=Balance("/v1/account/credits", _credits),
    docs=(
        "https://developer.dropcontact.com/en/quickstart/",
        "https://developer.dropcontact.com/en/errors/",
        "https://developer.dropcontact.com/en/rate-limits/",
        "https://developer.dropcontact.com/en/credits/",
        "https://developer.dropcontact.com/llms.mdx/en/reference/enriched-record.md",
    ),
)


def dropcontact(
    api_key: str | Secret | None = None, base_url: str | None = None, account: str | None = None
) -> ProviderTools:
    """Dropcontact's tool: ``dropcontact.enrich`` ({first_name, last_name | full_name, domain |
    company} or {linkedin_url}, and an ``email`` to verify -> {email, confidence, status,
    qualification, ...}), an async batch of up to 250. The key: ``api_key``, else
    ``DROPCONTACT_API_KEY``."""
    return PROVIDER.tools(api_key, base_url, account)
