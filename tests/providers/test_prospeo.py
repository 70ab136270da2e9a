"""Prospeo's adapter against its double (see contract.py for what every provider keeps), and
Prospeo's own ways: only verified emails bought, a bulk answer keyed by identifier, a
re-enrichment free, ``INTERNAL_ERROR`` a 400 yet retried, ``error_code`` whatever the
status."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from contract import KEY, Case, Contract, people, run_tool

import playline as pl
from playline.providers import named
from playline.providers.prospeo import _found as read_found
from playline.sim import Simulator
from playline.sim._doubles import prospeo as prospeo_double
from playline.sim._doubles._base import linkedin_of
from playline.sim._doubles.prospeo import ProspeoDouble
from playline.sim._world import Person
from playline.store import open_store
from playline.tools import Answer


def _found(result: Any, person: Person) -> None:
    assert result["email"] == person.email
    assert result["status"] == "valid" and result["confidence"] is None
    assert result["full_name"] == f"{person.first_name} {person.last_name}"
    assert result["linkedin_url"] == linkedin_of(person)


def _ask(p: Person) -> dict[str, Any]:
    return {"first_name": p.first_name, "last_name": p.last_name, "domain": p.domain}


FINDER = Case(
    tool="prospeo.email_finder",
    ask=_ask,
    check=_found,
    # only_verified_email: a catch-all domain's address is not verified, so not found
    found=lambda double, p: double.knows(p) and not double.catch_all(p.email),
    used_up={"credits": 3},
    used_up_outcome="insufficient_credits",
    rate_calls=320,  # past 5 a second and 300 a minute, counted per record
)


class TestEmailFinder(Contract):
    case = FINDER


@pytest.fixture
def double(sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[ProspeoDouble]:
    provider = named("prospeo")
    double = sim.double("prospeo")
    assert isinstance(double, ProspeoDouble)
    double.reset()
    monkeypatch.setenv(provider.key, KEY)
    monkeypatch.setenv(provider.url_variable, f"{sim.url}/prospeo")
    yield double
    double.reset()


def _run(ask: Callable[[Person], dict[str, Any]], asked: list[Person], store: Any,
         double: ProspeoDouble, **options: Any) -> pl.RunResult:  # fmt: skip
    case = Case(**{**FINDER.__dict__, "ask": ask})
    return run_tool(case, named("prospeo").tools(), asked, store, double=double, **options)


def _cells(result: pl.RunResult) -> dict[int, Any]:
    assert result.output is not None, result.error
    return {row["n"]: row["out"] for row in result.output}


def _kinds(double: ProspeoDouble) -> tuple[Person, Person, Person]:
    """A person Prospeo verifies, one it does not know, one at a catch-all domain."""
    pool = people(400, offset=100)
    verified = next(p for p in pool if FINDER.found(double, p))
    unknown = next(p for p in pool if not double.knows(p))
    catch_all = next(p for p in pool if double.knows(p) and double.catch_all(p.email))
    return verified, unknown, catch_all


def test_a_bulk_answer_is_read_by_identifier_and_unverified_emails_are_not_bought(
    double: ProspeoDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One bulk request: each record sent with its place as ``identifier`` and the request
    with ``only_verified_email``; the ``matched`` records go back to their cells by the
    identifier they echo, the others are not found, and the catch-all domain's unverified
    address costs nothing."""
    sent: list[dict[str, Any]] = []
    body = double._body

    async def record(request: Any) -> dict[str, Any]:
        sent.append(await body(request))
        return sent[-1]

    monkeypatch.setattr(double, "_body", record)
    verified, unknown, catch_all = asked = list(_kinds(double))
    store = open_store("memory://")  # its rows come at once: one wave, one bulk request

    result = _run(_ask, asked, store, double)

    assert double.calls["bulk-enrich-person"] == 1 and not double.calls["enrich-person"]
    [request] = sent
    assert request["only_verified_email"] is True
    assert [r["identifier"] for r in request["data"]] == ["0", "1", "2"]
    assert request["data"][0] == {
        "identifier": "0", "first_name": verified.first_name.casefold(),
        "last_name": verified.last_name.casefold(), "company_website": verified.domain,
    }  # fmt: skip
    cells = _cells(result)
    _found(cells[verified.ordinal], verified)
    assert cells[unknown.ordinal] is None and cells[catch_all.ordinal] is None
    ledger = {int(e.row_key): e for e in store.read_ledger(result.run_id)}
    assert [(ledger[p.ordinal].credits, ledger[p.ordinal].reported) for p in asked] == [
        (1, None),  # the declared credit; total_cost is the request's, not the record's
        (0, None),
        (0, None),
    ]
    assert result.stats.credits == double.charged == 1


def test_a_record_prospeo_cannot_search_reads_as_not_found_and_the_others_stand(
    double: ProspeoDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record Prospeo lists under ``invalid_datapoints`` (its rules stricter than the
    documented minimum the adapter checks) is in no ``matched`` entry: not found and free, as
    it is at Prospeo; the matches of the same bulk request are kept and charged once (the
    match sent last, found first in ``matched``: read by identifier, not by position)."""
    verified, unknown, refused = _kinds(double)
    asked = [unknown, refused, verified]
    enrich = double._enrich

    def stricter(flags: Any, data: Any) -> Any:
        if data.get("last_name") == refused.last_name.casefold():
            return "INVALID_DATAPOINTS", {}, 0
        return enrich(flags, data)

    monkeypatch.setattr(double, "_enrich", stricter)
    store = open_store("memory://")

    result = _run(_ask, asked, store, double)

    assert double.calls["bulk-enrich-person"] == 1 and not double.calls["enrich-person"]
    cells = _cells(result)
    _found(cells[verified.ordinal], verified)
    assert cells[unknown.ordinal] is None and cells[refused.ordinal] is None
    assert result.output is not None and not result.output.errors
    assert result.stats.credits == double.charged == 1
    ledger = {int(e.row_key): e.credits for e in store.read_ledger(result.run_id)}
    assert ledger == {verified.ordinal: 1, unknown.ordinal: 0, refused.ordinal: 0}


def test_a_re_enrichment_is_free_and_the_ledger_says_so(double: ProspeoDouble) -> None:
    """Prospeo charges a person once for the account's lifetime: asked again (a run on
    another store, without the receipt), the answer says ``free_enrichment`` and costs 0."""
    verified = _kinds(double)[0]

    first = _run(_ask, [verified], "memory://", double)
    again = _run(_ask, [verified], "memory://", double)

    assert first.stats.credits == 1 and again.stats.credits == 0
    assert double.charged == 1 and double.calls["enrich-person"] == 2
    cell = _cells(again)[verified.ordinal]
    _found(cell, verified)
    assert cell["raw"]["free_enrichment"] is True


def test_the_flag_is_what_keeps_an_unverified_email_free(
    sim: Simulator, double: ProspeoDouble
) -> None:
    """Without ``only_verified_email`` Prospeo sells the catch-all domain's address
    ``UNVERIFIED`` for a credit; the adapter asks with it, and pays nothing."""
    catch_all = _kinds(double)[2]
    data = {"linkedin_url": linkedin_of(catch_all)}

    plain = httpx.post(f"{sim.url}/prospeo/enrich-person", json={"data": data},
                       headers={"X-KEY": KEY})  # fmt: skip
    assert plain.status_code == 200 and double.charged == 1
    assert plain.json()["person"]["email"]["status"] == "UNVERIFIED"
    assert read_found(Answer(200, plain.json()))["status"] == "unknown"  # type: ignore[index]
    double.reset()

    result = _run(lambda p: {"linkedin_url": linkedin_of(p)}, [catch_all], "memory://", double)

    assert _cells(result)[catch_all.ordinal] is None
    assert double.charged == 0 and result.stats.credits == 0


def test_prospeo_s_internal_error_is_a_400_and_is_tried_again(double: ProspeoDouble) -> None:
    verified = _kinds(double)[0]
    double.down = 2  # answered 400 INTERNAL_ERROR, Prospeo's server fault

    result = _run(_ask, [verified], "memory://", double)

    assert result.status == "completed", result.error
    _found(_cells(result)[verified.ordinal], verified)
    assert double.calls["enrich-person"] == 3


def test_an_input_short_of_prospeo_s_minimum_fails_unsent(double: ProspeoDouble) -> None:
    verified = _kinds(double)[0]

    result = _run(lambda p: {"first_name": p.first_name, "last_name": p.last_name},
                  [verified], "memory://", double)  # fmt: skip

    assert result.output is not None
    [error] = result.output.errors
    assert "Prospeo needs linkedin_url or email" in error.message
    assert not double.calls["enrich-person"] and not double.calls["bulk-enrich-person"]


def test_a_name_with_a_company_name_or_a_full_name_or_an_email_finds_the_person(
    double: ProspeoDouble,
) -> None:
    verified = next(
        p for p in people(400, offset=600)
        if FINDER.found(double, p) and double.company_named(double.company(p.domain).name)
    )  # fmt: skip
    asks = [
        {"full_name": f"{verified.first_name} {verified.last_name}", "domain": verified.domain},
        {"first_name": verified.first_name, "last_name": verified.last_name,
         "company": double.company(verified.domain).name},
        {"email": verified.email.upper()},
    ]  # fmt: skip
    for ask in asks:
        double.reset()
        _found(_cells(_run(lambda p, a=ask: a, [verified], "memory://", double))[
            verified.ordinal], verified)  # fmt: skip


def test_a_bulk_answer_of_another_shape_fails_its_cells_never_a_silent_miss(
    double: ProspeoDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lists under ``response`` (a third-party client's reading, not the documented
    form): no ``matched`` list where the declaration reads it, so the request fails, and no
    record is read as not found."""
    answered = prospeo_double.JSONResponse

    def nested(content: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(content, dict) and "matched" in content:
            content = {"error": False, "response": content}
        return answered(content, *args, **kwargs)

    monkeypatch.setattr(prospeo_double, "JSONResponse", nested)
    asked = list(_kinds(double))

    result = _run(_ask, asked, open_store("memory://"), double)

    assert double.calls["bulk-enrich-person"] == 1
    assert result.output is not None
    assert sorted(e.row_key for e in result.output.errors) == sorted(str(p.ordinal) for p in asked)
    assert {e.code for e in result.output.errors} == {"misaligned_batch"}


def test_a_masked_email_is_no_email() -> None:
    masked = {"status": "VERIFIED", "revealed": False, "email": "a***@x.io"}
    body = {"error": False, "free_enrichment": False, "person": {"email": masked}}
    assert read_found(Answer(200, body)) is None
