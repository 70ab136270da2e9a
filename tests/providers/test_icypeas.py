"""Icypeas' adapter against its double (see contract.py for what every provider keeps), and
Icypeas' own ways: every search is async, alone through ``/email-search`` read back by id,
together through ``/bulk-search`` watched by file; each row's status is its outcome."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from contract import KEY, Case, JobContract, people

import playline as pl
from playline.providers import icypeas, named
from playline.sim import Simulator
from playline.sim._doubles.icypeas import IcypeasDouble
from playline.sim._world import Person
from playline.store import open_store

TOOL = "icypeas.email_search"


def _found(result: Any, person: Person) -> None:
    assert result["email"] == person.email
    assert result["status"] in ("valid", "catch_all")
    assert result["confidence"] == (95 if result["status"] == "catch_all" else 99)
    assert result["certainty"] in ("ultra_sure", "very_sure", "probable")


def _ask(p: Person) -> dict[str, Any]:
    return {"first_name": p.first_name, "last_name": p.last_name, "domain": p.domain}


class TestEmailSearch(JobContract):
    case = Case(
        tool=TOOL,
        ask=_ask,
        check=_found,
        used_up={"credits": 3},  # a bulk search is refused unless the credits cover its rows
        used_up_outcome="insufficient_credits",
        # 1,000 people: 10 bulk searches, past the 5 a minute the tool sends, 20 file reads
        # (15 a minute allowed) and 10 result reads
        rate_calls=1000,
        job_route="bulk-search",
        poll_route="search-files",
    )


# -- Icypeas' own ways ------------------------------------------------------------------------


@pytest.fixture
def double(sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[IcypeasDouble]:
    provider = named("icypeas")
    double = sim.double("icypeas")
    assert isinstance(double, IcypeasDouble)
    double.reset()
    monkeypatch.setenv(provider.key, KEY)
    monkeypatch.setenv(provider.url_variable, f"{sim.url}/icypeas")
    yield double
    double.reset()


def run(
    double: IcypeasDouble,
    inputs: Sequence[Mapping[str, Any]],
    store: str = "memory://",
    **options: Any,
) -> pl.RunResult:
    """A run of one column asking ``icypeas.email_search`` for each input (the double counts
    its rate windows in the run's time)."""

    async def call(row: Mapping[str, Any], ctx: pl.Context) -> Any:
        return (await ctx.tool(TOOL, dict(row["ask"]))).data

    @pl.play(name="icypeas-quirks")
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        rows = [{"n": n, "ask": dict(ask)} for n, ask in enumerate(inputs)]
        return await ctx.dataset("asks", rows, key="n").with_column("out", call).run()

    clock = options.setdefault("clock", pl.ManualClock())
    double.clock = clock.monotonic
    return pl.run(play, {}, store=store, tools=[icypeas()], **options)


def cells(result: pl.RunResult) -> list[Any]:
    assert result.output is not None, result.error
    return [row["out"] for row in result.output]


def known(double: IcypeasDouble, count: int, offset: int, *, found: bool = True) -> list[Person]:
    return [p for p in people(count * 4, offset) if double.knows(p) == found][:count]


def post(sim: Simulator, path: str, body: Any, key: str = KEY) -> httpx.Response:
    return httpx.post(f"{sim.url}/icypeas/api/{path}", json=body, headers={"Authorization": key})


def test_a_lone_call_is_a_search_read_by_id_and_several_are_one_bulk_search(
    double: IcypeasDouble,
) -> None:
    alone = known(double, 1, 100)
    together = [*known(double, 3, 120), *known(double, 2, 120, found=False)]

    first = run(double, [_ask(p) for p in alone])
    assert double.calls["email-search"] == 1 and double.calls["bulk-search"] == 0
    assert double.calls["read"] == 2  # pending once, then done
    second = run(double, [_ask(p) for p in together])

    assert double.calls["email-search"] == 1 and double.calls["bulk-search"] == 1
    assert double.calls["search-files"] == 2 and double.calls["read"] == 3
    _found(cells(first)[0], alone[0])
    for cell, person in zip(cells(second), together, strict=True):
        if double.knows(person):
            _found(cell, person)
        else:
            assert cell is None
    [file] = double.files.values()  # the body Icypeas asks for: task, name, rows in order
    rows = [double.searches[id] for id in file["rows"]]
    assert file["name"] == "playline"
    assert [r["order"] for r in rows] == [0, 1, 2, 3, 4]
    assert [r["results"]["lastname"] for r in rows] == [p.last_name.casefold() for p in together]


def test_found_and_missed_rows_of_one_bulk_search_charge_what_their_status_says(
    double: IcypeasDouble, tmp_path: Path
) -> None:
    """DEBITED rows are charged (declared 1, reported 1), NOT_FOUND rows are free."""
    asked = [*known(double, 3, 200), *known(double, 3, 200, found=False)]
    store = f"sqlite:///{tmp_path}/s.db"

    result = run(double, [_ask(p) for p in asked], store)

    assert result.status == "completed", result.error
    assert double.calls["bulk-search"] == 1
    assert result.stats.credits == double.charged == 3
    entries = open_store(store).read_ledger(result.run_id)
    assert sorted((e.found, e.credits, e.declared, e.reported) for e in entries) == [
        (False, 0.0, 0.0, 0.0),
        (False, 0.0, 0.0, 0.0),
        (False, 0.0, 0.0, 0.0),
        (True, 1.0, 1.0, 1.0),
        (True, 1.0, 1.0, 1.0),
        (True, 1.0, 1.0, 1.0),
    ]


def test_a_miss_icypeas_says_it_debited_is_counted(
    double: IcypeasDouble, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``DEBITED_NOT_FOUND``: nothing found, and a credit gone: the ledger counts it."""
    search = double._search

    def debited_miss(*args: Any) -> dict[str, Any]:
        row: dict[str, Any] = search(*args)
        if row["status"] == "NOT_FOUND":
            row["status"] = "DEBITED_NOT_FOUND"
            double.charge(f"miss|{row['_id']}", 1)
        return row

    monkeypatch.setattr(double, "_search", debited_miss)
    asked = [*known(double, 1, 300), *known(double, 2, 300, found=False)]
    store = f"sqlite:///{tmp_path}/s.db"

    result = run(double, [_ask(p) for p in asked], store)

    assert cells(result)[1:] == [None, None]
    assert result.stats.credits == double.charged == 3


def test_a_search_is_read_until_it_has_run_and_a_running_one_is_never_a_miss(
    double: IcypeasDouble,
) -> None:
    """Read while SCHEDULED / IN_PROGRESS (with no email yet), it is polled again."""
    double.pending_polls = 3
    person = known(double, 1, 400)[0]

    result = run(double, [_ask(person)])

    _found(cells(result)[0], person)
    assert double.calls["read"] == 4


def test_certainties_are_our_statuses_and_the_surest_email_is_the_result(
    double: IcypeasDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``probable`` (a catch-all domain's address, in the double) is catch_all at 95;
    ``ultra_sure`` / ``very_sure`` are valid at 99; of several emails, the surest wins."""
    everyone = [p for p in people(400, 1100) if double.knows(p)]
    catch_all = next(p for p in everyone if double.catch_all(p.email))
    plain = [p for p in everyone if not double.catch_all(p.email)][:2]
    search = double._search

    def two_emails(*args: Any) -> dict[str, Any]:
        row: dict[str, Any] = search(*args)
        if row["results"]["lastname"] == plain[1].last_name.casefold():
            guess = {"email": f"guess@{plain[1].domain}", "certainty": "probable"}
            row["results"]["emails"].insert(0, guess)
        return row

    monkeypatch.setattr(double, "_search", two_emails)

    got = cells(run(double, [_ask(catch_all), *[_ask(p) for p in plain]]))

    assert (got[0]["status"], got[0]["confidence"], got[0]["certainty"]) == (
        "catch_all",
        95,
        "probable",
    )
    assert (got[1]["status"], got[1]["confidence"]) == ("valid", 99)
    assert got[2]["email"] == plain[1].email and got[2]["status"] == "valid"
    assert sum(len(s["results"]["emails"]) == 2 for s in double.searches.values()) == 1
    assert got[1]["mx_provider"] in ("google", "microsoft")


def test_names_domains_and_companies_are_asked_as_icypeas_takes_them(double: IcypeasDouble) -> None:
    """A full name is split; a company's name is a domainOrCompany too; spelling variants of
    one person are one receipt, one search, one charge."""
    a, b = known(double, 2, 500)
    company = next(c for c in double.world.companies if c.domain == b.domain)
    asks = [
        {"full_name": f"{a.first_name} {a.last_name}", "domain": f"https://www.{a.domain}/"},
        {"first_name": a.first_name.upper(), "last_name": f" {a.last_name} ", "domain": a.domain},
        {"first_name": b.first_name, "last_name": b.last_name, "company": company.name},
    ]

    result = run(double, asks)

    assert result.status == "completed", result.error
    got = cells(result)
    _found(got[0], a)
    _found(got[1], a)
    _found(got[2], b)
    assert double.charged == 2 and double.duplicates == 0


def test_an_input_icypeas_cannot_search_fails_its_own_cell_unsent(double: IcypeasDouble) -> None:
    """No domain or company, or no name: refused before any request (Icypeas would answer a
    BAD_INPUT row, or refuse a lone search as invalid)."""
    good = known(double, 2, 600)
    asks = [
        *[_ask(p) for p in good],
        {"first_name": "Ada", "last_name": "Lovelace"},
        {"linkedin_url": "https://www.linkedin.com/in/ada"},
    ]

    result = run(double, asks)

    got = cells(result)
    _found(got[0], good[0])
    _found(got[1], good[1])
    assert result.output is not None
    failed = {e.message for e in result.output.errors}
    assert len(failed) == 2 and all("needs a domain or a company" in m for m in failed), failed
    assert double.searches.keys() == {
        id for file in double.files.values() for id in file["rows"]
    }  # only the good ones were sent
    assert len(double.searches) == 2


@pytest.mark.parametrize(
    ("status", "code"), [("BAD_INPUT", "fatal"), ("INSUFFICIENT_FUNDS", "insufficient_credits")]
)
def test_a_row_icypeas_refuses_fails_its_own_call_and_the_others_stand(
    double: IcypeasDouble, monkeypatch: pytest.MonkeyPatch, status: str, code: str
) -> None:
    """A refused row of a bulk search fails only its own cell; the rows Icypeas found (and
    charged) are kept."""
    asked = known(double, 3, 650)
    search = double._search

    def refused(*args: Any) -> dict[str, Any]:
        row: dict[str, Any] = search(*args)
        if row["order"] == 1:
            row["status"] = status
            row["results"]["emails"] = []
        return row

    monkeypatch.setattr(double, "_search", refused)

    result = run(double, [_ask(p) for p in asked])

    got = cells(result)
    _found(got[0], asked[0])
    _found(got[2], asked[2])
    assert got[1] is None and result.output is not None
    [error] = result.output.errors
    assert error.code == code and status in error.message
    assert double.calls["bulk-search"] == 1 and result.stats.credits == 2


def test_no_credits_left_fails_a_lone_search_as_out_of_credits(double: IcypeasDouble) -> None:
    """Alone, the search is queued and its row says INSUFFICIENT_FUNDS."""
    double.credits = 0
    person = known(double, 1, 700)[0]

    result = run(double, [_ask(person)])

    assert result.output is not None
    [error] = result.output.errors
    assert error.code == "insufficient_credits" and "INSUFFICIENT_FUNDS" in error.message
    assert double.calls["email-search"] == 1 and double.charged == 0


def test_an_unpaid_subscription_is_a_used_up_account(double: IcypeasDouble) -> None:
    double.unpaid = True

    result = run(double, [_ask(p) for p in known(double, 3, 800)])

    assert result.output is not None
    assert {e.code for e in result.output.errors} == {"quota_exhausted"}
    assert all("pending on your subscription" in e.message for e in result.output.errors)


def test_rows_read_back_out_of_order_are_each_kept_for_their_own_person(
    double: IcypeasDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows are matched to the calls by their ``order`` (their place in ``data``), not by
    where they come in the answer; a row missing from it fails its own call."""
    page = double._page

    def reversed_and_short(items: list[dict[str, Any]], *args: Any) -> Any:
        return page([r for r in reversed(items) if r["order"] != 3], *args)

    monkeypatch.setattr(double, "_page", reversed_and_short)
    asked = known(double, 4, 900)

    result = run(double, [_ask(p) for p in asked])

    got = cells(result)
    for cell, person in zip(got[:3], asked, strict=False):
        _found(cell, person)
    assert got[3] is None and result.output is not None
    [error] = result.output.errors
    assert error.code == "missing_item" and double.duplicates == 0


def test_the_account_endpoint_needs_the_account_s_email_so_there_is_no_balance(
    sim: Simulator, double: IcypeasDouble
) -> None:
    assert named("icypeas").balance is None
    double.credits = 42
    asked = post(sim, "a/actions/subscription-information", {"email": "me@example.com"})
    assert asked.status_code == 200 and asked.json()["credits"] == 42
    refused = post(sim, "a/actions/subscription-information", {})
    assert refused.json()["success"] is False


def test_the_double_answers_in_icypeas_words(sim: Simulator, double: IcypeasDouble) -> None:
    """The key alone (no Bearer); invalid bodies are 200 success false with the field;
    unknown ids; at most 100 results a read; 30 reads a minute, then 429."""
    double.clock = time.monotonic
    person = known(double, 1, 950)[0]
    search = {"firstname": person.first_name, "lastname": person.last_name}

    assert post(sim, "email-search", search, key=f"Bearer {KEY}").status_code == 401
    missing = post(sim, "email-search", search)
    assert missing.status_code == 200
    assert missing.json()["validationErrors"][0]["field"] == "domainOrCompany"
    bulk = {"task": "email-search", "name": "x", "data": [["a", "b"]]}
    assert post(sim, "bulk-search", bulk).json()["validationErrors"][0]["field"] == "data.0"
    unknown = post(sim, "bulk-single-searchs/read", {"id": "nope"}).json()
    assert unknown["validationErrors"][0]["type"] == "SearchNotFoundError"
    queued = post(sim, "email-search", {**search, "domainOrCompany": person.domain}).json()
    assert queued["item"]["status"] == "NONE"
    too_many = post(sim, "bulk-single-searchs/read", {"mode": "single", "limit": 101})
    assert too_many.json()["validationErrors"][0]["field"] == "limit"
    reads = [
        post(sim, "bulk-single-searchs/read", {"id": queued["item"]["_id"]}) for _ in range(28)
    ]
    assert [r.json()["items"][0]["status"] for r in reads[:2]] == ["SCHEDULED", "DEBITED"]
    limited = post(sim, "bulk-single-searchs/read", {"id": queued["item"]["_id"]})
    assert limited.status_code == 429
    assert limited.json()["message"] == "You have exceeded the max number of requests per minute."


def test_a_lone_search_kept_on_a_receipt_is_read_back_by_its_id(
    sim: Simulator, double: IcypeasDouble
) -> None:
    """What a resume does with a lone search's job (``{"single": _id}``): it reads it,
    never sends it again."""
    double.clock = time.monotonic
    person = known(double, 1, 960)[0]
    body = {"firstname": person.first_name, "lastname": person.last_name}
    queued = post(sim, "email-search", {**body, "domainOrCompany": person.domain}).json()
    tool = icypeas()["email_search"]
    job = {"single": queued["item"]["_id"]}

    async def poll() -> Any:
        return await tool.poll_bulk(tool.spec, job, {0: _ask(person)})

    pending, done = asyncio.run(poll()), asyncio.run(poll())

    assert not pending.done and pending.job == job
    _found(done.result[0].data, person)  # with what Icypeas says it charged
    assert done.result[0].reported == 1
    assert double.calls["email-search"] == 1 and double.charged == 1
