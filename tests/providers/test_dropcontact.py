"""Dropcontact's adapter against its double (see contract.py for what every provider keeps),
and Dropcontact's own ways: one async batch for many people, pay on success (credits held at
the submit, given back for the records that came back with no address), role mailboxes,
verification of a sent address, "not ready" for an unknown job, the echo of custom_fields."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from contract import KEY, Case, JobContract, people, run_tool

from playline.errors import ToolError
from playline.providers import named
from playline.providers.dropcontact import qualified
from playline.sim import Simulator
from playline.sim._doubles import Double
from playline.sim._doubles._base import linkedin_of
from playline.sim._doubles.dropcontact import DropcontactDouble
from playline.sim._world import Person


def _found(result: Any, person: Person) -> None:
    assert result["email"] == person.email
    assert result["status"] in ("valid", "catch_all")
    assert result["confidence"] is None  # Dropcontact gives none
    assert result["qualification"] in ("nominative@pro", "catch-all@pro")
    assert result["first_name"] == person.first_name and result["role"] is False


def _by_name(p: Person) -> dict[str, Any]:
    return {"first_name": p.first_name, "last_name": p.last_name, "domain": p.domain}


class TestEnrich(JobContract):
    case = Case(
        tool="dropcontact.enrich",
        ask=_by_name,
        check=_found,
        used_up={"credits": 2},  # a batch of 8 needs 8: refused whole
        used_up_outcome="insufficient_credits",
        left=("credits", 42),
        job_route="enrich",
        poll_route="result",
    )


@pytest.fixture
def double(sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> Any:
    provider = named("dropcontact")
    found = sim.double("dropcontact")
    found.reset()
    monkeypatch.setenv(provider.key, KEY)
    monkeypatch.setenv(provider.url_variable, f"{sim.url}/dropcontact")
    yield found
    found.reset()


def _mailbox(double: Double, person: Person) -> bool:
    assert isinstance(double, DropcontactDouble)
    return double._mailbox(double.company(person.domain)) is not None


def _asking(asks: dict[int, dict[str, Any]]) -> Case:
    return Case(
        tool="dropcontact.enrich",
        ask=lambda p: asks[p.ordinal],
        check=_found,
        used_up={},
        used_up_outcome="",
    )


def test_one_batch_answers_found_refunded_role_only_and_verified_records_as_charged(
    double: Double,
) -> None:
    """Pay on success, per record of one batch: a person found costs 1; a miss is given
    back; a miss whose company's role mailbox came back costs 1 (an address was returned)
    and is still a miss; an address sent to verify costs 1 even when it is invalid. The
    ledger equals what the double charged, and the account gets the misses back."""
    crowd = people(400, offset=6000)
    known = [p for p in crowd if double.knows(p)]
    unknown = [p for p in crowd if not double.knows(p)]
    hit = known[0]
    by_linkedin = known[1]
    refunded = next(p for p in unknown if not _mailbox(double, p))
    role_only = next(p for p in unknown if _mailbox(double, p))
    checked = next(p for p in unknown[5:] if not _mailbox(double, p))
    bad = f"nobody.{checked.ordinal}@{checked.domain}"
    asks = {
        hit.ordinal: _by_name(hit),
        by_linkedin.ordinal: {"linkedin_url": linkedin_of(by_linkedin)},
        refunded.ordinal: _by_name(refunded),
        role_only.ordinal: _by_name(role_only),
        checked.ordinal: {**_by_name(checked), "email": bad},
    }
    asked = [hit, by_linkedin, refunded, role_only, checked]
    double.credits = 100

    result = run_tool(
        _asking(asks), named("dropcontact").tools(), asked, "memory://", double=double
    )

    assert result.status == "completed", result.error
    cells = {row["n"]: row["out"] for row in result.output}
    _found(cells[hit.ordinal], hit)
    _found(cells[by_linkedin.ordinal], by_linkedin)
    assert cells[by_linkedin.ordinal]["linkedin_url"].endswith(
        linkedin_of(by_linkedin).split("/in/", 1)[1]
    )
    assert cells[refunded.ordinal] is None and cells[role_only.ordinal] is None
    if double.company(checked.domain).catch_all:  # type: ignore[union-attr]
        assert cells[checked.ordinal]["status"] == "catch_all"
    else:
        assert cells[checked.ordinal]["email"] == bad
        assert cells[checked.ordinal]["status"] == "invalid"
        assert cells[checked.ordinal]["qualification"] == "invalid@pro"
    assert double.calls["enrich"] == 1  # five people, one batch
    assert double.charged == 4  # all but the refunded miss
    assert result.stats.credits == pytest.approx(double.charged)
    assert double.duplicates == 0
    assert named("dropcontact").tools().remaining() == 100 - 4  # the miss given back


def _post(sim: Simulator, path: str, body: Any = None, key: str = KEY) -> httpx.Response:
    headers = {"X-Access-Token": key}
    if body is None:
        return httpx.get(f"{sim.url}/dropcontact{path}", headers=headers)
    return httpx.post(f"{sim.url}/dropcontact{path}", json=body, headers=headers)


def test_the_submit_takes_a_credit_a_record_and_the_finished_job_gives_back_the_misses(
    sim: Simulator, double: Double
) -> None:
    crowd = people(200, offset=7000)
    hit = next(p for p in crowd if double.knows(p))
    misses = [p for p in crowd if not double.knows(p) and not _mailbox(double, p)][:2]
    records = [{"first_name": p.first_name, "last_name": p.last_name, "website": p.domain}
               for p in [hit, *misses]]  # fmt: skip
    double.credits = 10

    submitted = _post(sim, "/v1/enrich/all", {"data": records, "language": "en"}).json()

    assert submitted["success"] is True and submitted["credits_left"] == 7  # 3 taken
    job = submitted["request_id"]
    assert len(job) == 15 and job.isalpha() and job.islower()
    pending = _post(sim, f"/v1/enrich/all/{job}").json()
    assert pending == {"error": False, "success": False, "reason": pending["reason"]}
    assert "not ready" in pending["reason"]
    assert _post(sim, "/v1/account/credits").json() == {"credits": 7}
    done = _post(sim, f"/v1/enrich/all/{job}").json()
    assert done["success"] is True and done["credits_left"] == 9  # two misses given back
    assert [r.get("email") for r in done["data"][1:]] == [None, None]  # absent: not found
    assert done["data"][0]["email"][0]["email"] == hit.email
    assert done["data"][0]["website"] == f"www.{hit.domain}"
    assert _post(sim, f"/v1/enrich/all/{job}").json()["credits_left"] == 9  # given back once
    assert double.charged == 1


def test_too_few_credits_for_the_batch_refuse_it_whole_and_charge_nothing(
    sim: Simulator, double: Double
) -> None:
    double.credits = 2
    records = [{"first_name": p.first_name, "last_name": p.last_name, "website": p.domain}
               for p in people(3)]  # fmt: skip

    refused = _post(sim, "/v1/enrich/all", {"data": records})

    assert refused.status_code == 403 and refused.json()["success"] is False
    assert "credits" in refused.json()["reason"]
    assert double.credits == 2 and double.charged == 0 and not double.jobs


def test_an_unknown_request_id_answers_not_ready_and_force_results_answers_in_progress(
    sim: Simulator, double: Double
) -> None:
    """The errors page: an unknown id looks like a job in progress (so the adapter keeps
    polling it: pending, never a miss). ``forceResults`` gives the records as they are."""
    unknown = _post(sim, "/v1/enrich/all/qzmxkpvlrtdnhwa")
    assert unknown.status_code == 200 and unknown.json()["success"] is False
    tool = named("dropcontact").tools()["enrich"]
    state = asyncio.run(tool.poll_bulk(tool.spec, "qzmxkpvlrtdnhwa", {0: {"first_name": "a"}}))
    assert not state.done and state.job == "qzmxkpvlrtdnhwa"

    double.pending_polls = 10
    record = {"full_name": "ada lovelace", "website": "https://www.Example.com/about"}
    job = _post(sim, "/v1/enrich/all", {"data": [record]}).json()["request_id"]
    forced = _post(sim, f"/v1/enrich/all/{job}?forceResults=true").json()
    assert forced["status"] == "in_progress" and forced["data"] == [record]
    double.pending_polls = 0
    ready = _post(sim, f"/v1/enrich/all/{job}?forceResults=true").json()
    assert ready["status"] == "ready"
    enriched = ready["data"][0]
    assert (enriched["first_name"], enriched["last_name"]) == ("Ada", "Lovelace")  # split
    assert enriched["website"] == "www.example.com"


def test_a_job_answering_with_another_job_s_records_fails_job_mismatch(
    sim: Simulator, double: Double
) -> None:
    """The records carry their inputs in custom_fields, which Dropcontact returns as sent:
    a job answered with other records is never kept as found."""
    ann, bob = [p for p in people(60, offset=8000) if double.knows(p)][:2]
    tool = named("dropcontact").tools()["enrich"]
    double.pending_polls = 0

    async def mixed_up() -> Any:
        first = await tool.submit_bulk(tool.spec, [_by_name(ann)])
        second = await tool.submit_bulk(tool.spec, [_by_name(bob)])
        double.jobs[first.job]["records"] = double.jobs[second.job]["records"]
        return await tool.poll_bulk(tool.spec, first.job, {0: _by_name(ann)})

    with pytest.raises(ToolError) as failed:
        asyncio.run(mixed_up())
    assert failed.value.code == "job_mismatch"


def test_the_request_carries_dropcontact_s_field_names_and_the_double_checks_them(
    sim: Simulator, double: Double
) -> None:
    person = next(p for p in people(40, offset=9000) if double.knows(p))
    asks = {person.ordinal: {"full_name": f"  {person.first_name}  {person.last_name} ",
                             "domain": f"https://www.{person.domain.upper()}/team"}}  # fmt: skip

    result = run_tool(_asking(asks), named("dropcontact").tools(), [person], "memory://",
                      double=double)  # fmt: skip

    assert result.status == "completed", result.error
    _found(next(iter(result.output))["out"], person)
    (job,) = double.jobs.values()
    (sent,) = job["records"]
    full = f"{person.first_name} {person.last_name}".casefold()
    assert sent == {"full_name": full, "website": person.domain,  # normalised, renamed
                    "custom_fields": {"full_name": full, "domain": person.domain}}  # fmt: skip
    unexpected = _post(sim, "/v1/enrich/all", {"data": [{"domain": "acme.com"}]})
    assert unexpected.status_code == 422
    assert unexpected.json()["detail"][0]["type"] == "unexpected_field"
    assert _post(sim, "/v1/enrich/all", {"data": []}).json()["reason"] == "Missing data in JSON"
    many = _post(sim, "/v1/enrich/all", {"data": [{"website": "acme.com"}] * 251})
    assert many.status_code == 400 and "250" in many.json()["reason"]
    big = _post(sim, "/v1/enrich/all", {"data": [{"website": "acme.com", "job": "x" * 16_000}]})
    assert big.status_code == 400 and "15 kB" in big.json()["reason"]
    assert _post(sim, "/v1/account/credits", key="k-wrong").json() == {"detail": "Unknown account"}


@pytest.mark.parametrize(
    ("qualification", "status", "flag"),
    [
        ("nominative@pro", "valid", None),
        ("nominatif@pro", "valid", None),
        ("catch-all@pro", "catch_all", None),
        ("catch_all@pro", "catch_all", None),
        ("non_confirm@pro", "catch_all", None),
        ("generic@pro", "valid", "role"),
        ("generique@pro", "valid", "role"),
        ("nominative@perso", "valid", "personal"),
        ("non_validated@pro", "unknown", None),
        ("Non_Validé@pro", "unknown", None),
        ("Do_Not_Contact@pro", "invalid", "do_not_contact"),
        ("Ne_Pas_Contacter@pro", "invalid", "do_not_contact"),
        ("random@pro", "invalid", "disposable"),
        ("invalid@pro", "invalid", None),
        ("invalide@domaine invalide", "invalid", None),
        ("nominative@invalid domain", "invalid", None),
        ("nominative@jetable", "invalid", "disposable"),
        ("something_new@pro", "unknown", None),
        (None, "unknown", None),
    ],
)
def test_qualifications_of_both_languages_and_older_docs_read_into_our_vocabulary(
    qualification: Any, status: str, flag: str | None
) -> None:
    read = qualified(qualification)
    assert read["status"] == status
    for name in ("role", "personal", "disposable", "do_not_contact"):
        assert read[name] is (name == flag), name


def test_a_french_answer_reads_as_an_english_one(sim: Simulator, double: Double) -> None:
    person = next(p for p in people(40, offset=9500) if double.knows(p))
    record = {"first_name": person.first_name, "last_name": person.last_name,
              "website": person.domain}  # fmt: skip
    double.pending_polls = 0
    job = _post(sim, "/v1/enrich/all", {"data": [record], "language": "fr"}).json()["request_id"]

    (enriched,) = _post(sim, f"/v1/enrich/all/{job}").json()["data"]

    address = enriched["email"][0]  # the person's (a role mailbox may follow)
    assert address["email"] == person.email
    assert address["qualification"] in ("nominatif@pro", "catch-all@pro")
    assert qualified(address["qualification"])["status"] in ("valid", "catch_all")
