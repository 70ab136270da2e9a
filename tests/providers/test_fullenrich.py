"""FullEnrich's adapter against its double (see contract.py for what every provider keeps),
and FullEnrich's own ways: one async batch of up to 100 contacts whose rows are each charged
what they found (1 credit an email, 10 a phone) while the batch reports its total, rows
found by the place their ``custom`` echoes, a batch that ends out of credits or canceled, the
same input enriched again for free, a poll of an unfinished batch answered 400 (or 200
IN_PROGRESS), results kept 3 months, and 60 calls a minute that polls share."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from contract import KEY, Case, JobContract, people, run_tool

import playline as pl
from playline.providers import named
from playline.sim import Simulator
from playline.sim._doubles._base import linkedin_of
from playline.sim._doubles.fullenrich import FullEnrichDouble
from playline.sim._world import Person
from playline.store import open_store

from virtual_clock import VirtualClock


def _found(result: Any, person: Person) -> None:
    """A work email, a mobile phone, or both: each the person's own."""
    assert result["email"] in (person.email, None) and result["phone"] in (person.phone, None)
    assert result["email"] or result["phone"]
    assert result["status"] in (("valid", "catch_all") if result["email"] else (None,))
    assert result["confidence"] is None  # FullEnrich gives no score
    assert result["first_name"] == person.first_name


def _by_name(p: Person) -> dict[str, Any]:
    return {"first_name": p.first_name, "last_name": p.last_name, "domain": p.domain}


def _anything(double: Any, p: Person) -> bool:
    return bool(double.knows(p) or double.knows_phone(p))


class TestEnrich(JobContract):
    case = Case(
        tool="fullenrich.enrich",
        ask=_by_name,
        check=_found,
        found=_anything,  # an email or a phone: both are asked for
        used_up={"credits": 3},  # the batch stops at the first contact it cannot pay
        used_up_outcome="insufficient_credits",
        left=("credits", 42),
        rate_calls=6100,  # 61 batches of 100: past the 60 calls of a minute
        job_route="enrich",
        poll_route="result",
    )


CASE = TestEnrich.case


@pytest.fixture
def double(sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> Any:
    provider = named("fullenrich")
    found = sim.double("fullenrich")
    found.reset()
    monkeypatch.setenv(provider.key, KEY)
    monkeypatch.setenv(provider.url_variable, f"{sim.url}/fullenrich")
    yield found
    found.reset()
    found.answers = FullEnrichDouble.answers


def _tools() -> Any:
    return named("fullenrich").tools()


def _ledger(store: str, run_id: str) -> list[Any]:
    return list(open_store(store).read_ledger(run_id))


def _rows_changed(
    double: FullEnrichDouble,
    monkeypatch: pytest.MonkeyPatch,
    change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
) -> None:
    """The double's finished batches answer ``change(rows)`` instead of their rows."""
    finish = double._finish

    def changed(job: dict[str, Any]) -> None:
        finish(job)
        job["result"]["datas"] = change(job["result"]["datas"])

    monkeypatch.setattr(double, "_finish", changed)


def test_one_batch_holds_every_row_each_charged_what_it_found(
    double: FullEnrichDouble, tmp_path: Path
) -> None:
    """30 contacts are one POST (named, every contact asking for emails and phones, ``custom``
    echoing its place and who it is); each row is charged 1 for an email and 10 for a phone,
    as the batch's ``cost.credits`` says in total, and nothing for a miss."""
    asked = people(30, offset=100)
    store = f"sqlite:///{tmp_path}/s.db"

    result = run_tool(CASE, _tools(), asked, store, double=double)

    assert result.status == "completed", result.error
    assert double.calls["enrich"] == 1
    (job,) = double.jobs.values()
    assert job["name"] == "Playline"  # required; one readable name for every batch
    first, last = job["rows"][0], job["rows"][-1]
    assert first["enrich_fields"] == ["contact.emails", "contact.phones"]
    assert first["custom"] == {
        "place": "0",
        "first_name": asked[0].first_name.casefold(),
        "last_name": asked[0].last_name.casefold(),
        "domain": asked[0].domain,
    }
    assert last["custom"]["place"] == "29"
    cells = {row["n"]: row["out"] for row in result.output}
    prices = {
        p.ordinal: (1.0 if double.knows(p) else 0.0) + (10.0 if double.knows_phone(p) else 0.0)
        for p in asked
    }
    assert {1.0, 10.0, 11.0, 0.0} <= set(prices.values()), "every price in one batch"
    for p in asked:
        assert (cells[p.ordinal] is None) == (prices[p.ordinal] == 0)
    entries = _ledger(store, result.run_id)
    assert sorted(e.credits for e in entries if e.found) == sorted(v for v in prices.values() if v)
    assert all(e.reported == e.declared for e in entries if e.found)  # what the row holds
    assert sum(e.reported for e in entries if e.found) == job["result"]["cost"]["credits"]
    assert result.stats.credits == double.charged == job["result"]["cost"]["credits"]
    assert double.duplicates == 0


def test_phones_false_buys_the_work_email_only(double: FullEnrichDouble) -> None:
    asked = [p for p in people(40, offset=200) if double.knows_phone(p)][:6]
    email_only = dataclasses.replace(CASE, ask=lambda p: {**_by_name(p), "phones": False})

    result = run_tool(email_only, _tools(), asked, "memory://", double=double)

    assert result.status == "completed", result.error
    (job,) = double.jobs.values()
    assert all(row["enrich_fields"] == ["contact.emails"] for row in job["rows"])
    for row, p in zip(result.output, asked, strict=True):
        assert row["out"] is None if not double.knows(p) else row["out"]["phone"] is None
    assert result.stats.credits == double.charged == sum(double.knows(p) for p in asked)


def test_a_phone_without_an_email_is_found_and_costs_10(double: FullEnrichDouble) -> None:
    asked = [p for p in people(60, offset=300) if double.knows_phone(p) and not double.knows(p)]
    asked = asked[:2]

    result = run_tool(CASE, _tools(), asked, "memory://", double=double)

    for row, p in zip(result.output, asked, strict=True):
        assert row["out"]["email"] is None and row["out"]["status"] is None
        assert row["out"]["phone"] == p.phone and row["out"]["phones"][0]["number"] == p.phone
    assert result.stats.credits == double.charged == 20


def test_email_statuses_in_our_words(double: FullEnrichDouble) -> None:
    """DELIVERABLE is valid; CATCH_ALL and HIGH_PROBABILITY (a catch-all domain, triple
    verified) are catch_all, the latter flagged; INVALID candidates are kept as invalid."""
    asked = [p for p in people(400, offset=400) if double.knows(p)]
    result = run_tool(CASE, _tools(), asked, "memory://", double=double)

    said = {row["out"]["raw"]["contact"]["most_probable_email_status"]: row["out"]
            for row in result.output}  # fmt: skip
    assert said.keys() == {"DELIVERABLE", "CATCH_ALL", "HIGH_PROBABILITY"}
    assert said["DELIVERABLE"]["status"] == "valid"
    assert said["CATCH_ALL"]["status"] == "catch_all"
    assert not said["CATCH_ALL"]["high_probability"]
    assert said["HIGH_PROBABILITY"]["status"] == "catch_all"
    assert said["HIGH_PROBABILITY"]["high_probability"]
    guesses = [e for row in result.output for e in row["out"]["emails"][1:]]
    assert guesses and {e["status"] for e in guesses} == {"invalid"}


def test_full_name_linkedin_and_variants_of_one_person(double: FullEnrichDouble) -> None:
    """A full name is split (v1 has no field for it); a LinkedIn URL buys the profile too;
    variants of one person are one contact, bought once."""
    p = next(p for p in people(40, offset=500) if double.knows(p))
    asks = {
        1: {"full_name": f"{p.first_name} {p.last_name}", "domain": f"https://www.{p.domain}/"},
        2: {
            "first_name": f" {p.first_name.upper()} ",
            "last_name": p.last_name,
            "domain": p.domain,
        },
        3: {"linkedin_url": linkedin_of(p).upper() + "/?trk=x"},
    }
    case = dataclasses.replace(CASE, ask=lambda q: asks[q.ordinal])
    asked = [Person(n, *p[1:]) for n in asks]

    result = run_tool(case, _tools(), asked, "memory://", double=double)

    assert result.status == "completed", result.error
    (job,) = double.jobs.values()
    assert len(job["rows"]) == 2  # the first two are one contact
    assert job["rows"][0]["firstname"] == p.first_name.casefold()
    assert job["rows"][1]["linkedin_url"] == linkedin_of(p)
    by_name, same, by_profile = (row["out"] for row in result.output)
    assert by_name == same and by_name["email"] == by_profile["email"] == p.email
    assert by_profile["position"] == p.title and by_profile["linkedin_url"] == linkedin_of(p)


def test_an_input_fullenrich_would_refuse_fails_its_own_cell_not_its_batch(
    double: FullEnrichDouble,
) -> None:
    asked = [p for p in people(40, offset=600) if double.knows(p)][:3]
    case = dataclasses.replace(
        CASE, ask=lambda p: _by_name(p) if p != asked[1] else {"first_name": p.first_name}
    )

    result = run_tool(case, _tools(), asked, "memory://", double=double)

    (error,) = result.output.errors
    assert "needs first_name and last_name" in error.message
    assert [row["out"] is not None for row in result.output] == [True, False, True]
    assert not double.refused and len(next(iter(double.jobs.values()))["rows"]) == 2


@pytest.mark.parametrize("answers", ["codes", "statuses"])
def test_a_batch_out_of_credits_keeps_what_was_charged_free_to_enrich_again(
    double: FullEnrichDouble, tmp_path: Path, answers: str
) -> None:
    """Credits run out mid-batch: it ends CREDITS_INSUFFICIENT (402, or 200) and every row
    fails with it. Once credits are added, the contacts charged before are enriched again
    for nothing."""
    asked = [p for p in people(60, offset=700) if double.knows(p) and not double.knows_phone(p)]
    email_only = dataclasses.replace(CASE, ask=lambda p: {**_by_name(p), "phones": False})
    store = f"sqlite:///{tmp_path}/s.db"
    double.credits, double.answers = 3, answers
    tools = _tools()
    tools["enrich"].balance = None  # not told: the provider's answer tells

    short = run_tool(email_only, tools, asked[:5], store, double=double)

    assert {e.code for e in short.output.errors} == {"insufficient_credits"}
    assert len(short.output.errors) == 5 and double.charged == 3
    double.credits = 100
    again = run_tool(
        email_only, _tools(), asked[:5], store, double=double, run_id=short.run_id,
        retry_in_doubt=True,
    )  # fmt: skip
    assert again.status == "completed", again.error
    assert double.charged == 5  # the first three again for nothing, the other two
    assert double.repeats == 3 and double.duplicates == 0  # asked twice, charged once


def test_a_canceled_batch_fails_its_calls(double: FullEnrichDouble) -> None:
    double.canceled = 1

    result = run_tool(CASE, _tools(), people(3, offset=800), "memory://", double=double)

    assert len(result.output.errors) == 3
    assert all("CANCELED" in e.message for e in result.output.errors)
    assert double.charged == 0


def test_a_poll_that_answers_200_in_progress_is_pending_too(double: FullEnrichDouble) -> None:
    double.answers, double.pending_polls = "statuses", 3
    asked = [p for p in people(40, offset=900) if double.knows(p)][:2]

    result = run_tool(CASE, _tools(), asked, "memory://", double=double)

    assert result.status == "completed", result.error
    assert double.calls["result"] == 4
    for row, p in zip(result.output, asked, strict=True):
        _found(row["out"], p)


def test_a_result_older_than_three_months_is_lost(double: FullEnrichDouble) -> None:
    class Aging(pl.ManualClock):  # every wait for a poll is 91 days, for the double
        async def sleep(self, seconds: float) -> None:
            for job in double.jobs.values():
                job["created"] -= 91 * 86_400
            await super().sleep(seconds)

    result = run_tool(CASE, _tools(), people(2, offset=950), "memory://", double=double,
                      clock=Aging())  # fmt: skip

    assert {e.code for e in result.output.errors} == {"job_expired"}
    assert double.refused["unknown_job"] == 1


def test_rows_in_another_order_are_found_by_the_place_they_echo(
    double: FullEnrichDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The order of the rows is not documented: each row is its contact's by ``custom.place``."""
    _rows_changed(double, monkeypatch, lambda rows: rows[::-1])
    asked = [p for p in people(60, offset=1100) if double.knows(p)][:5]

    result = run_tool(CASE, _tools(), asked, "memory://", double=double)

    assert result.status == "completed", result.error
    for row, p in zip(result.output, asked, strict=True):
        _found(row["out"], p)
    assert result.stats.credits == double.charged


def test_a_contact_no_row_answers_fails_alone(
    double: FullEnrichDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch whose answer lacks a contact's row: that contact's cell fails (nothing is
    counted for it), the others are kept."""
    _rows_changed(double, monkeypatch, lambda rows: rows[1:])
    asked = [p for p in people(60, offset=1200) if double.knows(p)][:3]

    result = run_tool(CASE, _tools(), asked, "memory://", double=double)

    (error,) = result.output.errors
    assert error.code == "missing_item"
    assert [row["out"] is not None for row in result.output] == [False, True, True]
    for row, p in zip(list(result.output)[1:], asked[1:], strict=True):
        _found(row["out"], p)


def test_a_row_for_another_person_fails_its_batch(
    double: FullEnrichDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row at a contact's place that names someone else is never kept as that contact's."""

    def swapped(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rows[0]["custom"]["place"], rows[1]["custom"]["place"] = "1", "0"
        return rows

    _rows_changed(double, monkeypatch, swapped)

    result = run_tool(CASE, _tools(), people(3, offset=1300), "memory://", double=double)

    assert {e.code for e in result.output.errors} == {"job_mismatch"}
    assert len(result.output.errors) == 3


def test_a_custom_plan_s_prices_are_not_seen_by_the_ledger(
    double: FullEnrichDouble, tmp_path: Path
) -> None:
    """The provider charges 2 an email where the adapter declares 1. Only the batch's
    ``cost.credits`` says so, and a row's answer does not see it: each row reports what the
    documented prices make of what it holds, and the ledger counts less than was charged."""
    double.prices["email"] = 2.0
    asked = people(20, offset=1000)
    store = f"sqlite:///{tmp_path}/s.db"

    result = run_tool(CASE, _tools(), asked, store, double=double)

    assert result.status == "completed", result.error
    (job,) = double.jobs.values()
    entries = [e for e in _ledger(store, result.run_id) if e.found]
    assert all(e.reported == e.declared for e in entries)
    assert any(e.declared in (1.0, 11.0) for e in entries)  # an email, charged 2
    assert result.stats.credits < double.charged == job["result"]["cost"]["credits"]


def test_the_submits_leave_room_in_the_minute_for_the_polls(double: FullEnrichDouble) -> None:
    """Polls count against the 60 calls of a minute and the engine does not hold them: 31
    batches submitted at once (a wide row window) would meet 429s on their polls."""
    asked = people(3100, offset=10_000)

    result = run_tool(
        CASE, _tools(), asked, "memory://", double=double, clock=VirtualClock(), row_window=10_000
    )

    assert result.status == "completed", result.error
    assert double.calls["enrich"] == 31 and double.calls["result"] == 62
    assert double.throttled == 0


@pytest.mark.parametrize(
    ("headers", "body", "status", "code"),
    [
        ({}, {}, 401, "error.authorization.not_set"),
        ({"Authorization": f"Token {KEY}"}, {}, 401, "error.authorization.not_bearer"),
        ({"Authorization": "Bearer nope"}, {}, 401, "error.api.key"),
        (None, {"datas": [{"firstname": "a"}]}, 400, "error.enrichment.name.empty"),
        (None, {"name": "x", "datas": []}, 400, "error.enrichment.data.empty"),
        (None, {"name": "x", "datas": [{"firstname": "a", "lastname": "b", "domain": "c.io"}]},
         400, "error.enrichment.enrich_fields.empty"),
        (None, {"name": "x", "datas": [{"firstname": "a", "lastname": "b", "domain": "c.io",
                                        "enrich_fields": ["contact.fax"]}]},
         400, "error.enrichment.enrich_field.value"),
        (None, {"name": "x", "datas": [{"firstname": "a", "domain": "c.io",
                                        "enrich_fields": ["contact.emails"]}]},
         400, "error.enrichment.lastname.empty"),
        (None, {"name": "x", "datas": [{"firstname": "a", "lastname": "b",
                                        "enrich_fields": ["contact.emails"]}]},
         400, "error.enrichment.domain.empty"),
        (None, {"name": "x", "datas": [{"linkedin_url": "https://x.com/in/a",
                                        "enrich_fields": ["contact.emails"]}]},
         400, "error.enrichment.linkedin_url.invalid"),
        (None, {"name": "x", "datas": [{"linkedin_url": "https://linkedin.com/in/a",
                                        "enrich_fields": ["contact.emails"], "custom": {"id": 7}}]},
         400, "error.enrichment.custom.value.type"),
        (None, {"name": "x", "datas": [{"linkedin_url": "https://linkedin.com/in/a",
                                        "enrich_fields": ["contact.emails"],
                                        "custom": {"id": "7" * 101}}]},
         400, "error.enrichment.custom.value.exceeded"),
        (None, {"name": "x", "datas": [{"linkedin_url": "https://linkedin.com/in/a",
                                        "enrich_fields": ["contact.emails"]}] * 101},
         400, "error.enrichment.data.exceeded"),
    ],
)  # fmt: skip
def test_the_double_refuses_what_fullenrich_refuses_in_its_words(
    double: FullEnrichDouble,
    sim: Simulator,
    headers: dict[str, str] | None,
    body: dict[str, Any],
    status: int,
    code: str,
) -> None:
    answer = httpx.post(
        f"{sim.url}/fullenrich/api/v1/contact/enrich/bulk",
        headers={"Authorization": f"Bearer {KEY}"} if headers is None else headers,
        json=body,
    )
    assert (answer.status_code, answer.json()["code"]) == (status, code)
    assert not double.jobs


def test_a_running_batch_is_400_in_progress_or_200_with_force_results(
    double: FullEnrichDouble, sim: Simulator
) -> None:
    double.pending_polls = 2
    auth = {"Authorization": f"Bearer {KEY}"}
    base = f"{sim.url}/fullenrich/api/v1"
    row = {"linkedin_url": linkedin_of(people(1)[0]), "enrich_fields": ["contact.emails"]}
    job = httpx.post(f"{base}/contact/enrich/bulk", headers=auth,
                     json={"name": "one", "datas": [row]}).json()["enrichment_id"]  # fmt: skip

    running = httpx.get(f"{base}/contact/enrich/bulk/{job}", headers=auth)
    forced = httpx.get(f"{base}/contact/enrich/bulk/{job}?forceResults=true", headers=auth)
    done = httpx.get(f"{base}/contact/enrich/bulk/{job}", headers=auth)
    unknown = httpx.get(f"{base}/contact/enrich/bulk/nope", headers=auth)

    assert (running.status_code, running.json()["code"]) == (400, "error.enrichment.in_progress")
    assert (forced.status_code, forced.json()["status"]) == (200, "IN_PROGRESS")
    assert (done.status_code, done.json()["status"]) == (200, "FINISHED")
    assert (unknown.status_code, unknown.json()["code"]) == (404, "error.enrichment.not_found")
    assert httpx.get(f"{base}/account/credits", headers=auth).json() == {
        "balance": FullEnrichDouble.PLAN - double.charged
    }
