"""NeverBounce's adapter against its double (see contract.py for what every provider keeps),
and NeverBounce's own ways: every refusal an HTTP 200 envelope, a lone address checked at
once and many as one job (created started, polled, its results fetched), bad syntax free in
a job, the charge a single check reports."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from contract import KEY, Case, JobContract, people

import playline as pl
from playline.providers import neverbounce
from playline.sim import Simulator
from playline.sim._doubles import Double
from playline.sim._world import Person, world_for
from playline.store import open_store

from virtual_clock import VirtualClock


def _verified(result: Any, person: Person) -> None:
    assert result["email"] == person.email
    assert result["status"] in ("valid", "catch_all")
    assert result["disposable"] is False and result["role"] is False
    assert result["raw"]


class TestVerify(JobContract):
    case = Case(
        tool="neverbounce.verify",
        ask=lambda p: {"email": p.email},
        check=_verified,
        found=lambda double, p: True,  # every address gets a verdict
        misses=False,
        used_up={"credits": 3},
        used_up_outcome="insufficient_credits",
        left=("credits", 42),
        rate_calls=60,
        job_route="jobs/create",
        poll_route="jobs/status",
    )


# -- NeverBounce's own ways ----------------------------------------------------------------


@pytest.fixture
def double(sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[Double]:
    double = sim.double("neverbounce")
    double.reset()
    monkeypatch.setenv("NEVERBOUNCE_API_KEY", KEY)
    monkeypatch.setenv("PLAYLINE_NEVERBOUNCE_URL", f"{sim.url}/neverbounce")
    yield double
    double.reset()


def _play(emails: Sequence[str]) -> Any:
    async def call(row: Mapping[str, Any], ctx: pl.Context) -> Any:
        return (await ctx.tool("neverbounce.verify", {"email": row["email"]})).data

    @pl.play(name="neverbounce-quirks")
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        rows = [{"n": n, "email": email} for n, email in enumerate(emails)]
        return await ctx.dataset("emails", rows, key="n").with_column("out", call).run()

    return play


def verify(
    double: Double,
    emails: Sequence[str],
    store: str = "memory://",
    *,
    balanced: bool = True,
    **options: Any,
) -> pl.RunResult:
    """A run verifying ``emails`` (one row each, keyed by position) in the double's time."""
    clock = options.setdefault("clock", pl.ManualClock())
    double.clock = clock.monotonic
    return pl.run(_play(emails), {}, store=store, tools=[_tools(balanced)], **options)


def _tools(balanced: bool = True) -> Any:
    """The adapter's tools; not ``balanced``: not told what the account has left, so the
    provider's own answers tell (as when another program spends the account mid-run)."""
    tools = neverbounce()
    if not balanced:
        for _, tool in tools.operations():
            tool.balance = None
    return tools


def cells(result: pl.RunResult) -> list[Any]:
    assert result.output is not None, result.error
    return [row["out"] for row in result.output]


def _person(catch_all: bool) -> Person:
    """The first person of the world whose company is (or is not) catch-all."""
    world = world_for(7)
    for person in world.people:
        company = world.company(person.domain)
        if company is not None and company.catch_all is catch_all:
            return person
    raise AssertionError("no such person")


def test_one_job_answers_every_verdict_in_our_vocabulary_and_bad_syntax_is_free(
    double: Double, tmp_path: Path
) -> None:
    valid, catch_all = _person(catch_all=False), _person(catch_all=True)
    emails = [
        valid.email,
        catch_all.email,
        f"nobody.here@{valid.domain}",  # a company's domain, no such mailbox
        f"info@{valid.domain}",  # a role mailbox
        "someone@mailinator.com",  # throwaway
        "someone@gmail.com",  # webmail: NeverBounce cannot tell
        "someone@gmial.com",  # a misspelt domain
        "not an address",  # bad syntax: not billable in a job
    ]
    store = f"sqlite:///{tmp_path}/s.db"

    result = verify(double, emails, store)

    assert result.status == "completed", result.error
    assert double.calls["jobs/create"] == 1 and double.calls["single/check"] == 0
    out = cells(result)
    assert [(c["email"], c["status"]) for c in out] == [
        (valid.email, "valid"),
        (catch_all.email, "catch_all"),
        (f"nobody.here@{valid.domain}", "invalid"),
        (f"info@{valid.domain}", "valid"),
        ("someone@mailinator.com", "invalid"),
        ("someone@gmail.com", "unknown"),
        ("someone@gmial.com", "invalid"),
        ("not an address", "invalid"),
    ]
    assert [c["disposable"] for c in out] == [False] * 4 + [True] + [False] * 3
    assert [c["role"] for c in out] == [False] * 3 + [True] + [False] * 4
    assert out[5]["free_email"] is True and out[0]["free_email"] is False
    assert out[6]["suggested_correction"] == "someone@gmail.com"
    assert out[7]["flags"] == ["bad_syntax"] and out[0]["suggested_correction"] is None
    assert out[0]["raw"]["verification"]["result"] == "valid"
    # seven billable rows charged when the job started; the one of bad syntax is free
    assert double.charged == 7 and double.duplicates == 0
    assert result.stats.credits == 7
    costs = {e.row_key: e.credits for e in open_store(store).read_ledger(result.run_id)}
    assert costs == {str(n): 1.0 for n in range(7)} | {"7": 0.0}


def test_the_job_is_created_started_and_polled_until_complete(double: Double) -> None:
    double.pending_polls = 3  # running for three polls, then complete
    emails = [p.email for p in people(5, offset=7000)]

    result = verify(double, emails)

    assert result.status == "completed", result.error
    (job,) = double.jobs.values()
    assert job["started"], "created with auto_parse and auto_start: started (and paid) at once"
    assert [row["email"] for row in job["rows"]] == emails
    assert double.calls["jobs/status"] == 4 and double.calls["jobs/results"] == 1
    assert [c["email"] for c in cells(result)] == emails


def test_a_lone_address_is_checked_at_once_and_its_reported_charge_is_the_ledger(
    double: Double, tmp_path: Path
) -> None:
    person = _person(catch_all=False)
    store = f"sqlite:///{tmp_path}/s.db"

    result = verify(double, [person.email], store)

    assert result.status == "completed", result.error
    assert double.calls["single/check"] == 1 and double.calls["jobs/create"] == 0
    (out,) = cells(result)
    assert (out["email"], out["status"]) == (person.email, "valid")
    assert out["raw"]["credits_info"]["paid_credits_used"] == 1
    (entry,) = open_store(store).read_ledger(result.run_id)
    assert (entry.credits, entry.declared, entry.reported) == (1.0, 1.0, 1.0)
    assert double.charged == 1


def test_the_key_is_in_the_job_s_json_body_and_the_query_of_the_gets(
    double: Double, monkeypatch: pytest.MonkeyPatch
) -> None:
    """jobs/create carries the key in its JSON body (never in its URL); single/check and
    the polls are GETs with the key (and the job's id) in the query."""
    sent: list[tuple[str, str, dict[str, str], dict[str, Any]]] = []
    params = double._params  # type: ignore[attr-defined]

    async def recorded(request: Any) -> dict[str, Any]:
        raw = await request.body()
        body = json.loads(raw) if raw else {}
        route = request.url.path.rsplit("/v4.2/", 1)[-1]
        sent.append((request.method, route, dict(request.query_params), body))
        return dict(await params(request))

    monkeypatch.setattr(double, "_params", recorded)

    assert verify(double, [p.email for p in people(2, offset=400)]).status == "completed"
    assert verify(double, [people(1, offset=450)[0].email]).status == "completed"

    by_route = {route: (method, query, body) for method, route, query, body in sent}
    method, query, body = by_route["jobs/create"]
    assert method == "POST" and query == {}
    assert body["key"] == KEY and body["input"] == [{"email": p.email} for p in people(2, 400)]
    assert (body["input_location"], body["auto_parse"], body["auto_start"]) == (
        "supplied",
        True,
        True,
    )
    job = str(next(iter(double.jobs.values()))["id"])
    assert by_route["jobs/status"] == ("GET", {"job_id": job, "key": KEY}, {})
    assert by_route["jobs/results"] == (
        "GET",
        {"job_id": job, "page": "1", "items_per_page": "1000", "key": KEY},
        {},
    )
    method, query, body = by_route["single/check"]
    assert (method, body, query["key"], query["address_info"]) == ("GET", {}, KEY, "1")


def test_a_job_s_results_are_matched_by_address_and_one_left_out_fails_alone(
    double: Double,
) -> None:
    """The order of jobs/results is not documented: items come back reversed and are still
    each address's own; an address the results leave out fails its cell (missing_item), and
    the job's other cells stand."""
    double.pending_polls = 10**6
    emails = [p.email for p in people(4, offset=8700)]

    async def reordered_while_running() -> pl.RunResult:
        clock = pl.ManualClock()
        double.clock = clock.monotonic
        run = asyncio.create_task(
            pl.arun(_play(emails), {}, store="memory://", tools=[_tools()], clock=clock)
        )
        await _until(lambda: double.calls["jobs/status"] >= 1)
        (job,) = double.jobs.values()
        job["rows"] = [row for row in reversed(job["rows"]) if row["email"] != emails[1]]
        double.pending_polls = 0
        return await run

    result = asyncio.run(reordered_while_running())

    assert result.output is not None
    out = {row["n"]: row["out"] for row in result.output}
    assert [out[n]["email"] for n in (0, 2, 3)] == [emails[0], emails[2], emails[3]]
    (error,) = result.output.errors
    assert error.code == "missing_item"
    assert double.calls["jobs/create"] == 1


def test_a_lone_address_of_bad_syntax_still_costs_its_check(double: Double) -> None:
    result = verify(double, ["not an address"])

    assert result.status == "completed", result.error
    (out,) = cells(result)
    assert (out["status"], out["flags"]) == ("invalid", ["bad_syntax"])
    assert result.stats.credits == 1 == double.charged


def test_a_wrong_key_is_a_200_auth_failure_failing_every_cell_with_its_words(
    double: Double, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEVERBOUNCE_API_KEY", "k-wrong-key-fedcba9876543210")

    result = verify(double, [p.email for p in people(3)])

    assert result.output is not None
    errors = result.output.errors
    assert len(errors) == 3
    assert all("unable to authenticate" in e.message for e in errors), errors
    assert double.refused["auth"] >= 1 and double.charged == 0


@pytest.mark.parametrize("fault", ["storm", "down"])
def test_throttle_triggered_and_temp_unavail_are_200s_waited_out_then_answered(
    double: Double, fault: str
) -> None:
    """``storm``: 200 throttle_triggered, ``down``: 200 temp_unavail; twice each."""
    setattr(double, fault, 2)

    result = verify(double, [_person(catch_all=False).email])

    assert result.status == "completed", result.error
    assert double.calls["single/check"] == 3
    assert cells(result)[0]["status"] == "valid"
    assert result.stats.credits == 1 == double.charged


def test_polls_answered_throttle_triggered_or_temp_unavail_are_asked_again(
    double: Double,
) -> None:
    """Once the job is created, its polls meet a throttle_triggered and a temp_unavail: both
    are waited out and the job's results still come (a temp_unavail poll is no failure)."""
    double.pending_polls = 10**6
    emails = [p.email for p in people(3, offset=8500)]

    async def faults_while_polled() -> pl.RunResult:
        clock = pl.ManualClock()
        double.clock = clock.monotonic
        run = asyncio.create_task(
            pl.arun(_play(emails), {}, store="memory://", tools=[_tools()], clock=clock)
        )
        await _until(lambda: double.calls["jobs/status"] >= 1)
        double.storm, double.down = 1, 1
        await _until(lambda: double.storm == double.down == 0)
        double.pending_polls = 0
        return await run

    result = asyncio.run(faults_while_polled())

    assert result.status == "completed", result.error
    assert double.calls["jobs/create"] == 1 and double.throttled >= 1
    assert [c["email"] for c in cells(result)] == emails


async def _until(condition: Callable[[], bool]) -> None:
    """Until ``condition`` holds (an observable state of the double's, polled)."""
    for _ in range(6000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the condition never held")


def test_a_job_the_credits_cannot_pay_is_refused_and_charges_nothing(double: Double) -> None:
    double.credits = 2  # spent by another program since the run read the balance

    result = verify(double, [p.email for p in people(4, offset=8000)], balanced=False)

    assert result.output is not None
    errors = result.output.errors
    assert len(errors) == 4 and {e.code for e in errors} == {"insufficient_credits"}
    assert "Insufficient credits" in errors[0].message
    assert double.charged == 0 and double.credits == 2 and not double.jobs


def test_a_job_that_fails_fails_its_cells_with_the_failure_reason(double: Double) -> None:
    double.fail_jobs = 1

    result = verify(double, [p.email for p in people(3, offset=9000)])

    assert result.output is not None
    errors = result.output.errors
    assert len(errors) == 3
    assert all("poorly formatted" in e.message for e in errors), errors
    assert double.calls["jobs/results"] == 0


def test_a_job_deleted_before_its_results_are_read_is_lost_not_bought_again(
    double: Double, tmp_path: Path
) -> None:
    """The run stops with its job running; the job is deleted in the app; the resume's poll
    is a general_failure: the results are gone (job_expired), and nothing is bought again."""
    double.pending_polls = 10**6
    store = f"sqlite:///{tmp_path}/s.db"
    emails = [p.email for p in people(3, offset=9500)]

    async def stopped_while_running() -> pl.RunResult:
        stop = asyncio.Event()
        clock = pl.ManualClock()
        double.clock = clock.monotonic
        run = asyncio.create_task(
            pl.arun(_play(emails), {}, store=store, tools=[_tools()], clock=clock, stop=stop)
        )
        await _until(lambda: double.calls["jobs/status"] >= 1)
        stop.set()
        return await run

    first = asyncio.run(stopped_while_running())
    assert double.calls["jobs/create"] == 1 and first.status != "completed"
    double.jobs.clear()  # deleted in the app: its results are gone
    double.pending_polls = 1

    again = verify(double, emails, store, run_id=first.run_id)

    assert again.output is not None
    assert {e.code for e in again.output.errors} == {"job_expired"}
    assert double.calls["jobs/create"] == 1  # never submitted again unasked


def test_many_jobs_at_once_keep_to_five_requests_a_second_each_one_page_of_results(
    double: Double,
) -> None:
    """7000 addresses: seven jobs of 1000 (one page of results each), created no faster
    than the double's 5 a second allow."""
    emails = [p.email for p in people(7000, offset=10000)]

    result = verify(double, emails, row_window=len(emails), clock=VirtualClock())

    assert result.status == "completed", result.error
    assert double.calls["jobs/create"] == 7 and double.throttled == 0
    assert all(len(job["rows"]) == 1000 for job in double.jobs.values())
    assert double.calls["jobs/results"] == 7 and double.charged == 7000


def test_a_lone_address_waits_briefly_for_company_then_is_checked_alone(
    double: Double,
) -> None:
    """One row at a time: each address waits the batch's 2 s for others, then goes alone to
    single/check; never a job of one."""
    clock = pl.ManualClock()
    start = clock.now()

    result = verify(double, [p.email for p in people(3, offset=600)], row_window=1, clock=clock)

    assert result.status == "completed", result.error
    assert double.calls["single/check"] == 3 and double.calls["jobs/create"] == 0
    assert clock.now() - start == pytest.approx(3 * 2.0, abs=0.5)


def test_the_double_checks_the_request_s_shape(sim: Simulator, double: Double) -> None:
    """The double refuses as NeverBounce does, at HTTP 200: no key, no input_location, a
    remote list it cannot fetch, a page too large; an unknown job."""
    api = f"{sim.url}/neverbounce/v4.2"

    def said(path: str, **body: Any) -> dict[str, Any]:
        answer = httpx.post(f"{api}/{path}", params={"key": KEY}, json=body)
        assert answer.status_code == 200
        return dict(answer.json())

    assert httpx.get(f"{api}/single/check", params={"email": "a@b.co"}).json() == {
        "status": "general_failure",
        "message": "Missing required parameter 'key'",
        "execution_time": 7,
    }
    assert said("jobs/create", input=[{"email": "a@b.co"}])["message"] == (
        "Missing required parameter 'input_location'"
    )
    remote = said("jobs/create", input_location="remote_url", input="https://x.co/list.csv")
    assert remote["status"] == "general_failure"
    assert said("jobs/status", job_id=1)["message"] == "Job #1 was not found"
    created = said("jobs/create", input_location="supplied", input=[["a@b.co", "A"]])
    assert created["status"] == "success" and isinstance(created["job_id"], int)
    # not auto-started: it waits for a start, and nothing is charged
    assert said("jobs/status", job_id=created["job_id"])["job_status"] == "waiting"
    assert said("jobs/results", job_id=created["job_id"])["status"] == "general_failure"
    assert double.charged == 0
