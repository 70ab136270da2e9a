"""Apollo's adapter against its double (see contract.py for what every provider keeps)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from contract import KEY, Case, Contract, JobContract, people, run_tool

from playline.errors import ToolError
from playline.providers.apollo import apollo, credits_left
from playline.sim import Simulator
from playline.sim._doubles._base import linkedin_of
from playline.sim._doubles.apollo import ApolloDouble
from playline.sim._world import Person
from playline.tools._outcomes import remaining_of


def _matched(result: Any, person: Person) -> None:
    assert result["email"] == person.email
    assert result["status"] in ("valid", "unknown")
    assert result["confidence"] is None or 0 <= result["confidence"] <= 100
    assert result["title"] == person.title and result["domain"] == person.domain
    assert result["raw"]["email"] == person.email


def _waterfall(result: Any, person: Person) -> None:
    assert result["email"] == person.email
    assert result["status"] in ("valid", "unknown")
    assert result["raw"]["webhook_result"]["people"]


def _by_name(p: Person) -> dict[str, Any]:
    return {"first_name": p.first_name, "last_name": p.last_name, "domain": p.domain}


class TestPeopleMatch(Contract):
    case = Case(
        tool="apollo.people_match",
        ask=_by_name,
        check=_matched,
        found=lambda double, p: isinstance(double, ApolloDouble) and double.finds_email(p),
        used_up={"credits": 3},
        used_up_outcome="insufficient_credits",
        rate_calls=250,  # 25 bulk requests: past the bulk endpoint's 20 a minute
    )


class TestPeopleMatchWaterfall(JobContract):
    case = Case(
        tool="apollo.people_match_waterfall",
        ask=_by_name,
        check=_waterfall,
        found=lambda double, p: isinstance(double, ApolloDouble) and double.waterfall_finds(p),
        used_up={"credits": 3},
        used_up_outcome="insufficient_credits",
        rate_calls=220,  # past people/match's 200 a minute
        job_route="people/match",
        poll_route="webhook_result",
    )


# -- Apollo's own quirks ---------------------------------------------------------------------


@pytest.fixture
def apollo_double(sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[ApolloDouble]:
    double = sim.double("apollo")
    assert isinstance(double, ApolloDouble)
    double.reset()
    monkeypatch.setenv("APOLLO_API_KEY", KEY)
    monkeypatch.setenv("PLAYLINE_APOLLO_URL", f"{sim.url}/apollo")
    yield double
    double.reset()


def _pick(want: Callable[[Person], bool], offset: int = 6000) -> Person:
    return next(p for p in people(400, offset) if want(p))


def _status(double: ApolloDouble, status: str) -> Callable[[Person], bool]:
    return lambda p: double.knows(p) and double.email_status(p) == status


def _ledger(path: Path) -> dict[str, tuple[float, int, float | None]]:
    """The ledger by row: credits counted, found, and what the provider reported."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT row_key, credits, found, reported FROM ledger").fetchall()
    return {row: (credits, found, reported) for row, credits, found, reported in rows}


def _post(sim: Simulator, path: str, *, key: str = KEY, **kwargs: Any) -> httpx.Response:
    return httpx.post(f"{sim.url}/apollo/api/v1{path}", headers={"x-api-key": key}, **kwargs)


def test_one_bulk_request_holds_found_paid_misses_and_free_misses(
    sim: Simulator, apollo_double: ApolloDouble, tmp_path: Path
) -> None:
    double = apollo_double
    verified = _pick(_status(double, "verified"))
    guessed = _pick(_status(double, "extrapolated"))
    no_email = _pick(_status(double, "unavailable"))
    unknown = _pick(lambda p: not double.knows(p))
    asked = [verified, guessed, no_email, unknown]

    result = run_tool(TestPeopleMatch.case, apollo(), asked, f"sqlite:///{tmp_path}/s.db")

    assert result.status == "completed", result.error
    assert double.calls == {"people/bulk_match": 1}  # one request for the four
    cells = {row["n"]: row["out"] for row in result.output}
    assert cells[verified.ordinal]["status"] == "valid"
    assert cells[verified.ordinal]["confidence"] is None
    assert cells[guessed.ordinal]["status"] == "unknown"
    assert 50 <= cells[guessed.ordinal]["confidence"] <= 95  # 0.5-0.95 read as a fraction
    assert cells[no_email.ordinal] is None and cells[unknown.ordinal] is None
    ledger = _ledger(tmp_path / "s.db")
    assert {int(k): (c, f) for k, (c, f, _) in ledger.items()} == {
        verified.ordinal: (1, 1),
        guessed.ordinal: (1, 1),
        no_email.ordinal: (1, 0),  # the demographics are paid for, the address is missing
        unknown.ordinal: (0, 0),  # nobody matched: free
    }
    assert result.stats.credits == double.charged == 3 and double.duplicates == 0

    double.reset()  # what Apollo itself reports for that request
    details = [_by_name(p) for p in asked]
    answer = _post(sim, "/people/bulk_match", json={"details": details}).json()
    assert answer["credits_consumed"] == result.stats.credits
    assert answer["unique_enriched_records"] == 3 and answer["missing_records"] == 1
    assert answer["status"] == "success" and answer["matches"][3] is None


def test_a_lone_input_goes_to_people_match_by_any_identifier(apollo_double: ApolloDouble) -> None:
    double = apollo_double
    person = _pick(double.finds_email)
    company = double.company(person.domain)
    assert company is not None
    for ask in (
        {"full_name": f"{person.first_name} {person.last_name}", "company": company.name},
        {"email": person.email.upper()},
        {"linkedin_url": linkedin_of(person)},
    ):
        double.reset()
        case = replace(TestPeopleMatch.case, ask=lambda p, ask=ask: ask)

        result = run_tool(case, apollo(), [person], "memory://")

        assert result.status == "completed", result.error
        _matched(next(iter(result.output))["out"], person)
        assert double.calls == {"people/match": 1}
    assert apollo()["people_match"].describe()["request"]["query"]["name"] == "{full_name}"


def test_the_windows_count_down_in_apollo_s_headers_and_the_429_is_apollo_s(
    sim: Simulator, apollo_double: ApolloDouble
) -> None:
    apollo_double.clock = lambda: 1_000.0  # one instant: one minute's window
    nobody = {"details": [{"first_name": "No", "last_name": "Body", "domain": "nowhere.test"}]}
    answers = [_post(sim, "/people/bulk_match", json=nobody) for _ in range(20)]

    assert [a.headers["x-minute-requests-left"] for a in answers[:2]] == ["19", "18"]
    last = answers[-1].headers
    assert last["x-rate-limit-minute"] == "20" and last["x-minute-usage"] == "20"
    assert last["x-hourly-requests-left"] == "80" and last["x-24-hour-requests-left"] == "5980"
    assert remaining_of(last) == (0, 60.0)  # what the engine reads: none left this minute
    refused = _post(sim, "/people/bulk_match", json=nobody)
    assert refused.status_code == 429 and refused.headers["retry-after"] == "60"
    assert refused.json()["message"].startswith(
        "The maximum number of api calls allowed for api/v1/people/bulk_match is 20 times per "
        "minute."
    )
    single = _post(sim, "/people/match", params={"first_name": "No", "last_name": "Body"})
    assert single.status_code == 200 and single.json() == {"person": None}  # its own windows
    assert single.headers["x-minute-requests-left"] == "199"


def test_the_double_checks_the_requests_as_apollo_does(
    sim: Simulator, apollo_double: ApolloDouble
) -> None:
    person = _pick(apollo_double.finds_email)
    empty = _post(sim, "/people/bulk_match", json={"details": []})
    assert empty.status_code == 400 and empty.json()["error_code"] == "INVALID_REQUEST"
    many = _post(sim, "/people/bulk_match", json={"details": [{"email": "a@b.c"}] * 11})
    assert many.status_code == 400 and many.json()["error_code"] == "RECORD_LIMIT_EXCEEDED"
    shaped = _post(sim, "/people/bulk_match", json={"details": {"email": "a@b.c"}})
    assert shaped.status_code == 422 and shaped.json()["error_code"] == "UNKNOWN_ERROR"
    as_json = _post(sim, "/people/match", json={"email": person.email})  # the old tutorial's way
    assert as_json.json()["person"]["email"] == person.email
    for headers in ({"x-api-key": "wrong"}, {"Authorization": f"Bearer {KEY}"}):
        refused = httpx.post(
            f"{sim.url}/apollo/api/v1/people/match", params={"email": "a@b.c"}, headers=headers
        )
        assert refused.status_code == 401 and refused.text.startswith("Invalid API key.")
    flags = {"email": "a@b.c", "run_waterfall_email": "true"}
    waterfall = _post(sim, "/people/match", params=flags)
    assert waterfall.status_code == 400  # no webhook_url and no poll_only: nowhere to deliver


def test_a_wrong_key_fails_with_apollo_s_words(
    apollo_double: ApolloDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APOLLO_API_KEY", "k-wrong-key-fedcba9876543210")

    result = run_tool(TestPeopleMatch.case, apollo(), people(1), "memory://")

    assert result.output is not None
    [error] = result.output.errors
    assert error.status == 401 and "Invalid API key" in error.message


def test_a_waterfall_job_pends_then_answers_and_expires(apollo_double: ApolloDouble) -> None:
    double = apollo_double
    double.pending_polls = 2
    tool = apollo()["people_match_waterfall"]
    asked = [p for p in people(40, 6000) if double.waterfall_finds(p)][:4]

    async def lifecycle() -> list[Any]:
        jobs = [await tool.submit(tool.spec, _by_name(p)) for p in asked]
        assert all(not job.done for job in jobs)
        assert any(job.job < 0 for job in jobs)  # signed 64-bit ids, often negative
        first = jobs[0].job
        assert double.charged == sum(double.knows(p) for p in asked)  # the demographics
        pending = await tool.poll(tool.spec, first, _by_name(asked[0]))
        assert not pending.done and pending.wait == 10 and pending.job == first
        await tool.poll(tool.spec, first, _by_name(asked[0]))
        done = await tool.poll(tool.spec, first, _by_name(asked[0]))
        assert done.done
        again = await tool.poll(tool.spec, first, _by_name(asked[0]))  # kept: the same answer
        assert again.result == done.result
        now = double.clock()
        double.clock = lambda: now + 31 * 86400.0
        with pytest.raises(ToolError) as expired:
            await tool.poll(tool.spec, first, _by_name(asked[0]))
        assert expired.value.code == "job_expired"
        errors = []
        for job in (12345, "not-a-number"):
            with pytest.raises(ToolError) as refused:
                await tool.poll(tool.spec, job, _by_name(asked[0]))
            errors.append((refused.value.status, refused.value.code))
        assert errors == [(404, "request_id_unknown"), (400, "invalid_request_id")]
        return [done.result]

    [result] = asyncio.run(lifecycle())
    data = result.data
    assert data["email"] == asked[0].email and data["status"] in ("valid", "unknown")
    assert result.reported == 1 + double.knows(asked[0])  # the match's credit and the vendor's


def test_a_waterfall_s_reported_charge_is_its_ledger(
    apollo_double: ApolloDouble, tmp_path: Path
) -> None:
    double = apollo_double
    matched = _pick(double.knows)
    vendors_only = _pick(lambda p: double.waterfall_finds(p) and not double.knows(p))
    nobody = _pick(lambda p: not double.waterfall_finds(p))
    asked = [matched, vendors_only, nobody]

    result = run_tool(TestPeopleMatchWaterfall.case, apollo(), asked, f"sqlite:///{tmp_path}/s.db")

    assert result.status == "completed", result.error
    assert {int(k): v for k, v in _ledger(tmp_path / "s.db").items()} == {
        matched.ordinal: (2, 1, 2),  # the demographics and the vendor's address
        vendors_only.ordinal: (1, 1, 1),
        nobody.ordinal: (0, 0, 0),
    }
    assert result.stats.credits == double.charged == 3 and double.duplicates == 0
    assert double.calls["people/match"] == 3 and double.calls["webhook_result"] == 6


def test_a_waterfall_apollo_will_not_run_fails_with_its_reason(
    apollo_double: ApolloDouble,
) -> None:
    apollo_double.waterfall_configured = False

    result = run_tool(TestPeopleMatchWaterfall.case, apollo(), people(2, 6000), "memory://")

    assert result.output is not None and len(result.output.errors) == 2
    assert all("not configured" in e.message for e in result.output.errors)
    assert apollo_double.calls["webhook_result"] == 0  # no result will come: none is polled


def test_the_account_endpoints_say_what_is_left(
    sim: Simulator, apollo_double: ApolloDouble
) -> None:
    apollo_double.credits = 42
    profile = httpx.get(
        f"{sim.url}/apollo/api/v1/users/api_profile",
        params={"include_credit_usage": "true"},
        headers={"x-api-key": KEY},
    ).json()
    assert credits_left(profile) == 42
    stats = _post(sim, "/usage_stats/credit_usage_stats").json()["credit_usage_stats"]
    assert stats["lead_credit"]["left_over"] == 42
    windows = _post(sim, "/usage_stats/api_usage_stats").json()
    assert windows['["api/v1/people", "bulk_match"]']["minute"]["limit"] == 20
    bare = httpx.get(f"{sim.url}/apollo/api/v1/users/api_profile", headers={"x-api-key": KEY})
    assert credits_left(bare.json()) is None  # without include_credit_usage it says nothing
    # the SPEC's example (a plan counting lead credits) and a unified-credit account, whose
    # num_credits_remaining sticks at 0 (superdesigndev/treg#180)
    assert credits_left(
        {"num_credits_remaining": 9500, "effective_num_lead_credits": 10000,
         "num_lead_credits_used": 500, "total_unified_credits_used": 910}
    ) == 9500  # fmt: skip
    assert credits_left(
        {"num_credits_remaining": 0, "effective_num_lead_credits": 2520,
         "num_lead_credits_used": 0, "total_unified_credits_used": 448}
    ) == 2072  # fmt: skip
    assert apollo().remaining() is None  # no balance: see the adapter's docstring
