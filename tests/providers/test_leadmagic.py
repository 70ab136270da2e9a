"""LeadMagic's adapter against its double (see contract.py for what every provider keeps),
and LeadMagic's own ways: free catch-all answers, charges reported in ``X-Credits-Cost``,
``RateLimit-Remaining`` read before the window is spent, 402 per request, E.164 numbers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from contract import KEY, Case, Contract, people, run_tool

from playline.providers import named
from playline.providers.leadmagic import e164
from playline.sim import Simulator
from playline.sim._doubles import Double
from playline.sim._doubles._base import linkedin_of
from playline.sim._world import Person
from playline.store import open_store

from virtual_clock import VirtualClock


def _found(result: Any, person: Person) -> None:
    assert result["email"] == person.email
    assert result["status"] in ("valid", "catch_all")
    assert result["confidence"] is None  # LeadMagic gives no score
    assert result["provider_status"] in ("valid", "valid_catch_all", "catch_all")


def _verified(result: Any, person: Person) -> None:
    assert result["email"] == person.email.casefold()
    assert result["status"] in ("valid", "catch_all")
    assert result["disposable"] is None and result["role"] is False


def _phone(result: Any, person: Person) -> None:
    assert result["phone"] == person.phone  # "+1-555-123-4567" as E.164
    assert result["raw"]["mobile_number"] != person.phone


def _has_mobile(double: Any, person: Person) -> bool:
    return bool(double.knows(person) and double.has_mobile(person))


FINDER = Case(
    tool="leadmagic.email_finder",
    ask=lambda p: {"first_name": p.first_name, "last_name": p.last_name, "domain": p.domain},
    check=_found,
    used_up={"credits": 3},
    used_up_outcome="insufficient_credits",
    left=("credits", 42.5),
    rate_calls=320,  # past 300 a minute
)
VALIDATE = Case(
    tool="leadmagic.email_validate",
    ask=lambda p: {"email": p.email},
    check=_verified,
    found=lambda double, p: True,  # every address gets a verdict
    misses=False,
    used_up={"credits": 0.1},  # two validations
    used_up_outcome="insufficient_credits",
    rate_calls=60,  # past 5 a second (the minute: the finder's, declared the same)
)
MOBILE = Case(
    tool="leadmagic.mobile_finder",
    ask=lambda p: {"linkedin_url": linkedin_of(p)},
    check=_phone,
    found=_has_mobile,
    used_up={"credits": 12},  # two mobiles
    used_up_outcome="insufficient_credits",
    rate_calls=60,  # past 5 a second (the minute: the finder's, declared the same)
)


class TestEmailFinder(Contract):
    case = FINDER


class TestEmailValidate(Contract):
    case = VALIDATE

    def test_a_run_stops_before_the_account_runs_out(self, double: Double) -> None:
        """The contract's, with a balance of two validations (0.1 credits) rather than its
        2 credits, which pay for 40 validations at 0.05: more than it asks."""
        double.credits = 0.1
        asked = people(6, offset=3000)

        result = run_tool(self.case, self.tools(), asked, "memory://", double=double)

        assert result.output is not None, result.error
        failed = result.output.errors
        assert failed and {e.code for e in failed} == {"account_used_up"}
        assert all(e.tool == self.case.tool for e in failed)
        assert not double.refused, "the provider was never asked past what it has"


class TestMobileFinder(Contract):
    case = MOBILE


@pytest.fixture
def double(sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> Any:
    provider = named("leadmagic")
    double = sim.double("leadmagic")
    double.reset()
    monkeypatch.setenv(provider.key, KEY)
    monkeypatch.setenv(provider.url_variable, f"{sim.url}/leadmagic")
    yield double
    double.reset()


def _tools(balanced: bool = True) -> Any:
    """LeadMagic's tools; not ``balanced``: not told what the account has left (another
    program spends it meanwhile), so LeadMagic's own refusal is what stops them."""
    tools = named("leadmagic").tools()
    for _, tool in () if balanced else tools.operations():
        tool.balance = None
    return tools


def _run(
    case: Case, asked: list[Person], store: str, double: Double, balanced: bool = True,
    **options: Any,
) -> Any:  # fmt: skip
    return run_tool(case, _tools(balanced), asked, store, double=double, **options)


def _with(case: Case, ask: Any) -> Case:
    return Case(**{**case.__dict__, "ask": ask})


def _at_catch_all(double: Any, engaged: bool, count: int) -> list[Person]:
    return [
        p
        for p in people(3000, offset=6000)
        if double.knows(p) and double.company(p.domain).catch_all and double.engaged(p) == engaged
    ][:count]


def test_a_catch_all_email_is_found_free_and_a_valid_catch_all_one_is_charged(
    double: Any, tmp_path: Path
) -> None:
    risky, engaged = _at_catch_all(double, False, 3), _at_catch_all(double, True, 3)
    store = f"sqlite:///{tmp_path}/s.db"

    result = _run(FINDER, [*risky, *engaged], store, double)

    assert result.status == "completed", result.error
    cells = {row["n"]: row["out"] for row in result.output}
    assert {cells[p.ordinal]["provider_status"] for p in risky} == {"catch_all"}
    assert {cells[p.ordinal]["provider_status"] for p in engaged} == {"valid_catch_all"}
    assert {cells[p.ordinal]["status"] for p in [*risky, *engaged]} == {"catch_all"}
    costs = {e.row_key: e.credits for e in open_store(store).read_ledger(result.run_id)}
    assert sorted(costs.values()) == [0, 0, 0, 1, 1, 1]
    assert result.stats.credits == double.charged == 3


def test_the_ledger_keeps_what_leadmagic_reports_and_it_is_what_the_tools_declare(
    double: Any, tmp_path: Path
) -> None:
    asked = people(30, offset=7000)
    store = f"sqlite:///{tmp_path}/s.db"
    runs = [
        _run(case, asked, store, double, run_id=f"run-{n}")
        for n, case in enumerate((FINDER, VALIDATE, MOBILE))
    ]

    entries = [e for run in runs for e in open_store(store).read_ledger(run.run_id)]
    assert {e.tool for e in entries} == {FINDER.tool, VALIDATE.tool, MOBILE.tool}
    assert all(e.reported is not None for e in entries), entries
    assert all(e.reported == pytest.approx(e.credits) for e in entries), [
        (e.tool, e.declared, e.reported) for e in entries if e.reported != e.credits
    ]
    assert {e.reported for e in entries if e.tool == MOBILE.tool} == {0, 5}
    assert sum(e.credits for e in entries) == pytest.approx(double.charged)


def test_validation_charges_definitive_verdicts_only(double: Any, tmp_path: Path) -> None:
    person = next(p for p in people(200, offset=8000) if not double.company(p.domain).catch_all)
    catch_all = next(p for p in _at_catch_all(double, False, 1))
    asked = {
        "valid": person.email,
        "invalid": f"nobody.{person.ordinal}@{person.domain}",
        "malformed": "john..doe@company.com",  # RFC-invalid: a charged "invalid", not a 400
        "unknown": "someone@no-such-company-anywhere.org",
        "catch_all": f"nobody.{catch_all.ordinal}@{catch_all.domain}",
    }
    rows = [Person(n, "x", "y", "", "", email, "") for n, email in enumerate(asked.values())]
    store = f"sqlite:///{tmp_path}/s.db"

    result = _run(_with(VALIDATE, lambda p: {"email": p.email}), rows, store, double)

    assert result.status == "completed", result.error
    verdicts = [row["out"]["status"] for row in result.output]
    assert verdicts == ["valid", "invalid", "invalid", "unknown", "catch_all"]
    costs = [e.credits for e in sorted(open_store(store).read_ledger(result.run_id),
                                       key=lambda e: int(e.row_key or 0))]  # fmt: skip
    assert costs == pytest.approx([0.05, 0.05, 0.05, 0, 0])
    assert double.charged == pytest.approx(0.15)


def test_the_finders_take_a_full_name_a_company_name_or_an_email(double: Any) -> None:
    person = next(p for p in people(40, offset=9000) if _has_mobile(double, p))
    company = double.company(person.domain).name
    by_name = _with(FINDER, lambda p: {"full_name": f"{p.first_name} {p.last_name}",
                                       "company": company})  # fmt: skip
    by_email = _with(MOBILE, lambda p: {"email": p.email.upper(), "first_name": "ignored"})

    found = _run(by_name, [person], "memory://", double)
    phone = _run(by_email, [person], "memory://", double)

    assert found.status == "completed" and phone.status == "completed", found.error
    _found(next(iter(found.output))["out"], person)
    _phone(next(iter(phone.output))["out"], person)


def test_a_request_leadmagic_refuses_fails_its_cell_in_its_words(double: Any) -> None:
    no_company = _with(FINDER, lambda p: {"first_name": p.first_name, "last_name": p.last_name})

    result = _run(no_company, people(1), "memory://", double)

    (error,) = result.output.errors
    assert error.status == 400 and "one company field (domain or company_name)" in error.message
    assert double.refused["request"] == 1 and double.charged == 0


def test_out_of_credits_is_per_request_in_leadmagic_s_words(double: Any) -> None:
    double.credits = 2.5
    asked = [p for p in people(60, offset=3000) if _has_mobile(double, p)][:2]

    result = _run(MOBILE, asked, "memory://", double, balanced=False)

    assert {e.code for e in result.output.errors} == {"insufficient_credits"}
    assert "Insufficient credits: need 5, have 2.50" in result.output.errors[0].message
    assert double.charged == 0
    assert _tools().remaining() == pytest.approx(2.5)  # nothing was taken


def test_what_leadmagic_says_is_left_of_the_minute_is_what_the_tool_hears(
    double: Any,
) -> None:
    """Another program with the key has spent 290 of the minute's 300: an answer's
    ``RateLimit-Remaining``/``RateLimit-Reset`` say what is left to the tool's gate (the
    engine holds the tool on them)."""
    clock = VirtualClock()
    start = clock.monotonic()
    for second in range(58):  # 5 a second (its burst) over the 58 seconds before the run
        double.clock = lambda at=start - 58 + second: at
        assert double.take_window(5, "email-validation") is None
    double.clock = clock.monotonic
    tool = _tools()["email_validate"]

    (verdict,) = asyncio.run(tool.call(tool.spec, [{"email": people(1)[0].email}]))

    assert verdict.data["status"] == "valid" and verdict.reported == 0.05
    assert tool.remaining() == (9, 2.0)  # 9 left, until the oldest 5 leave in 2 s


def test_a_429_says_when_to_come_back_and_every_answer_says_what_is_left(
    double: Any, sim: Simulator
) -> None:
    url = f"{sim.url}/leadmagic/v1/people/email-validation"
    headers = {"x-api-key": KEY}

    double.storm = 1
    refused = httpx.post(url, json={"email": "a@b.com"}, headers=headers)
    answered = httpx.post(url, json={"email": people(1)[0].email}, headers=headers)
    unknown = httpx.post(url, json={"email": "a@no-such-company-anywhere.org"}, headers=headers)
    wrong = httpx.post(url, json={"email": "a@b.com"}, headers={"X-API-Key": "nope"})

    assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json()["errors"][0]["code"] == "rate_limit_exceeded"
    assert answered.status_code == 200
    assert answered.headers["ratelimit-limit"] == "300"
    assert answered.headers["ratelimit-remaining"] == "299"
    assert int(answered.headers["ratelimit-reset"]) <= 60
    assert answered.headers["x-credits-cost"] == "0.05" and answered.json()["credits_consumed"]
    assert answered.headers["x-credits-remaining"] == "9999.95"
    assert unknown.headers["x-credits-cost"] == "0" and unknown.json()["credits_consumed"] == 0
    assert wrong.status_code == 401
    assert wrong.json()["errors"][0]["code"] == "invalid_api_key"


@pytest.mark.parametrize(
    ("written", "wanted"),
    [
        ("+1-555-123-4567", "+15551234567"),
        ("+1234567890", "+1234567890"),
        ("+1 (555) 123-4567 ext. 89", "+15551234567"),
        ("+44 (0)20 7946 0958", "+442079460958"),
        ("0049 30 1234567", "+49301234567"),
        ("555-123-4567", None),  # no country code: not guessed
        ("+0 123 456 789", None),
        ("+1-555", None),
        (None, None),
    ],
)
def test_numbers_are_given_in_e164(written: Any, wanted: str | None) -> None:
    assert e164(written) == wanted
