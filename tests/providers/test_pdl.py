"""People Data Labs' adapter against its double (see contract.py for what every provider
keeps), and PDL's own ways: a bulk answer with one status per item, 404 misses free, the
charge of a call in ``x-call-credits-spent``, ``min_likelihood`` and ``required``, credits
running out inside a bulk request, the usage headers of a ``HEAD``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from contract import KEY, Case, Contract, people, run_tool

import playline as pl
from playline.providers import named
from playline.sim import Simulator
from playline.sim._doubles._base import linkedin_of
from playline.sim._doubles.pdl import PdlDouble, has_work_email
from playline.sim._world import Person
from playline.store import open_store

from virtual_clock import VirtualClock

TOOL = "pdl.person_enrich"


def _found(result: Any, person: Person) -> None:
    email = person.email if has_work_email(7, person) else None
    assert result["email"] == email and result["work_email"] == email
    assert result["status"] == ("unknown" if email else None) and result["confidence"] is None
    assert result["phone"] == (person.phone if person.ordinal % 3 == 0 else None)
    assert result["full_name"] == f"{person.first_name} {person.last_name}".casefold()
    assert result["linkedin_url"] == linkedin_of(person).removeprefix("https://www.")
    assert 6 <= result["likelihood"] <= 10
    assert result["raw"]["status"] == 200


def _ask(p: Person) -> dict[str, Any]:
    return {"first_name": p.first_name, "last_name": p.last_name, "domain": p.domain}


ENRICH = Case(
    tool=TOOL,
    ask=_ask,
    check=_found,
    used_up={"credits": 3},
    used_up_outcome="insufficient_credits",
)


class TestPersonEnrich(Contract):
    case = ENRICH


@pytest.fixture
def double(sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[PdlDouble]:
    provider = named("pdl")
    double = sim.double("pdl")
    assert isinstance(double, PdlDouble)
    double.reset()
    monkeypatch.setenv(provider.key, KEY)
    monkeypatch.setenv(provider.url_variable, f"{sim.url}/pdl")
    yield double
    double.reset()


def _run(ask: Callable[[Person], dict[str, Any]], asked: list[Person], store: str,
         double: PdlDouble, **options: Any) -> pl.RunResult:  # fmt: skip
    case = Case(**{**ENRICH.__dict__, "ask": ask})
    return run_tool(case, named("pdl").tools(), asked, store, double=double, **options)


def _cells(result: pl.RunResult) -> dict[int, Any]:
    assert result.output is not None, result.error
    return {row["n"]: row["out"] for row in result.output}


def _ledger(store: str, result: pl.RunResult) -> dict[int, Any]:
    return {int(e.row_key): e for e in open_store(store).read_ledger(result.run_id)}


def test_one_bulk_request_answers_each_item_by_its_own_status(
    double: PdlDouble, tmp_path: Path
) -> None:
    """Found (200) and missed (404, free) items in one request, each cell its own outcome,
    only the matches charged; an input PDL would refuse (a name alone) fails its cell unsent."""
    asked = people(12, offset=100)
    short = asked[0]
    known = [p for p in asked[1:] if double.knows(p)]
    assert known and len(known) < len(asked) - 1
    store = f"sqlite:///{tmp_path}/s.db"

    result = _run(
        lambda p: {"first_name": p.first_name, "last_name": p.last_name} if p is short
        else _ask(p),
        asked, store, double,
    )  # fmt: skip

    assert double.calls == {"person/bulk": 1}
    cells = _cells(result)
    for person in asked[1:]:
        if person in known:
            _found(cells[person.ordinal], person)
        else:
            assert cells[person.ordinal] is None
    assert result.output is not None
    [error] = result.output.errors
    assert error.row_key == str(short.ordinal)
    assert "needs linkedin_url or email, or first_name and last_name" in error.message
    ledger = _ledger(store, result)
    assert sorted(ledger) == sorted(p.ordinal for p in asked[1:])
    assert {n for n, e in ledger.items() if e.credits} == {p.ordinal for p in known}
    assert result.stats.credits == double.charged == len(known)
    assert all(e.reported is None for e in ledger.values())  # a bulk total is not an item's


def test_a_single_call_s_charge_is_the_one_pdl_reports(double: PdlDouble, tmp_path: Path) -> None:
    found = next(p for p in people(20, offset=200) if double.knows(p))
    missed = next(p for p in people(20, offset=200) if not double.knows(p))
    store = f"sqlite:///{tmp_path}/s.db"

    runs = [_run(_ask, [p], store, double, run_id=f"run-{p.ordinal}") for p in (found, missed)]

    assert double.calls == {"person/enrich": 2}
    entries = [_ledger(store, run)[p.ordinal] for run, p in zip(runs, (found, missed), strict=True)]
    assert [(e.credits, e.declared, e.reported) for e in entries] == [(1, 1, 1), (0, 0, 0)]
    assert double.charged == 1


def test_min_likelihood_is_six_unless_the_input_says_otherwise(double: PdlDouble) -> None:
    """A name with a company name is a weaker match (likelihood 4-7) than with its domain:
    below the adapter's default of 6 it is a free 404; asked with 2 it is found."""
    named_by = {
        p.ordinal: name
        for p in people(400, offset=300)
        if double.knows(p)
        and (name := double.company(p.domain).name)
        and double.company_named(name) is not None
    }
    asked = [p for p in people(400, offset=300) if p.ordinal in named_by][:16]
    weak = {p.ordinal for p in asked if p.ordinal % 4 < 2}  # likelihood 4 or 5
    assert weak and len(weak) < len(asked)

    def by_company(p: Person) -> dict[str, Any]:
        return {"first_name": p.first_name, "last_name": p.last_name,
                "company": named_by[p.ordinal]}  # fmt: skip

    default = _cells(_run(by_company, asked, "memory://", double))
    lenient = _cells(_run(lambda p: {**by_company(p), "min_likelihood": 2}, asked,
                          "memory://", double))  # fmt: skip

    assert {n for n, cell in default.items() if cell is None} == weak
    assert all(cell is not None for cell in lenient.values())
    assert {lenient[n]["likelihood"] for n in weak} <= {4, 5}
    assert double.charged == 2 * len(asked) - len(weak)


def test_required_work_email_pays_only_for_matches_that_have_one(double: PdlDouble) -> None:
    known = [p for p in people(300, offset=700) if double.knows(p)]
    without = [p for p in known if not has_work_email(7, p)][:3]
    asked = [*without, *[p for p in known if has_work_email(7, p)][:3]]

    plain = _cells(_run(_ask, asked, "memory://", double))
    assert double.charged == 6  # a match without a work email is a match, and paid
    assert all(plain[p.ordinal]["email"] is None for p in without)
    assert all(plain[p.ordinal]["personal_emails"] == [] for p in without)
    double.reset()

    strict = _cells(_run(lambda p: {**_ask(p), "required": "work_email"}, asked,
                         "memory://", double))  # fmt: skip

    assert [p for p in asked if strict[p.ordinal] is None] == without
    assert double.charged == 3


def test_credits_running_out_inside_a_bulk_request_fail_only_the_items_past_them(
    double: PdlDouble,
) -> None:
    """PDL answers each item as a single call would: the matches made while credits lasted
    are kept (and charged), the items past them answer 402 each and fail alone."""
    asked = [p for p in people(40, offset=1100) if double.knows(p)][:6]
    double.credits = 2

    result = _run(_ask, asked, "memory://", double)

    assert double.calls == {"person/bulk": 1}
    assert result.output is not None
    cells = _cells(result)
    assert [p.ordinal for p in asked if cells.get(p.ordinal) is not None] == [
        p.ordinal for p in asked[:2]
    ]
    assert {e.code for e in result.output.errors} == {"insufficient_credits"}
    assert len(result.output.errors) == 4
    assert double.charged == result.stats.credits == 2


def test_singles_at_the_documented_rate_meet_no_rate_limit_answer(double: PdlDouble) -> None:
    """One call at a time, each its own request: 130 of them go past the minute's 100."""
    asked = people(130, offset=1300)

    @pl.play(name="pdl-singles")
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        async def one_by_one(row: Any, ctx: pl.Context) -> int:
            return sum([(await ctx.tool(TOOL, _ask(p))).found for p in asked])

        return await ctx.dataset("one", [{"n": 1}], key="n").with_column("out", one_by_one).run()

    clock = VirtualClock()
    double.clock = clock.monotonic
    result = pl.run(play, {}, store="memory://", tools=[named("pdl").tools()], clock=clock)

    assert result.status == "completed", result.error
    assert double.calls == {"person/enrich": 130} and double.throttled == 0
    assert clock.monotonic() >= 60  # the minute's window held the rest back


def test_the_request_says_what_pdl_reads(
    double: PdlDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Names and domains compare in any form; the domain goes in PDL's ``company`` (a
    company name given too is dropped), ``min_likelihood`` is sent; bulk items carry
    metadata PDL echoes."""
    sent: list[dict[str, Any]] = []
    enrich = double._enrich

    def record(params: Any) -> Any:
        sent.append(dict(params))
        return enrich(params)

    monkeypatch.setattr(double, "_enrich", record)
    person = next(p for p in people(20, offset=1500) if double.knows(p))
    shouted = {
        "first_name": f" {person.first_name.upper()} ",
        "last_name": person.last_name,
        "domain": f"https://www.{person.domain}/about",
        "company": "Whatever Inc",
    }

    result = _run(lambda p: shouted, [person], "memory://", double)

    assert sent == [{
        "first_name": person.first_name.casefold(), "last_name": person.last_name.casefold(),
        "company": person.domain, "min_likelihood": 6,
    }]  # fmt: skip
    _found(_cells(result)[person.ordinal], person)
    assert "metadata" not in _cells(result)[person.ordinal]["raw"]  # a single call
    two = _run(_ask, [person, *people(1, offset=1530)], "memory://", double)
    assert double.calls == {"person/enrich": 1, "person/bulk": 1}
    assert _cells(two)[person.ordinal]["raw"]["metadata"] == {"source": "playline"}


def test_a_head_says_what_is_left_and_spends_nothing(sim: Simulator, double: PdlDouble) -> None:
    double.credits = 42
    url = f"{sim.url}/pdl/v5/person/enrich"

    answer = httpx.head(url, headers={"X-Api-Key": KEY})
    wrong = httpx.head(url, headers={"X-Api-Key": "k-wrong-key-fedcba9876543210"})

    assert answer.status_code == 200 and answer.headers["x-totallimit-remaining"] == "42"
    assert '"minute": 100' in answer.headers["x-ratelimit-limit"]
    assert wrong.status_code == 401
    assert double.charged == 0 and double.credits == 42
    assert named("pdl").tools().remaining() is None  # no account endpoint to ask


def test_a_rate_limit_answer_is_waited_out_for_the_window(double: PdlDouble) -> None:
    """PDL's 429 names its reset as an ISO time only: the tool waits the minute out."""
    double.storm = 1
    clock = VirtualClock()

    result = _run(_ask, people(1, offset=1600), "memory://", double, clock=clock)

    assert result.status == "completed", result.error
    assert double.throttled == 1 and double.calls == {"person/enrich": 2}
    assert clock.monotonic() >= 60
