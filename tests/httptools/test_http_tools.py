"""pl.HttpTool against a provider double on loopback (provider_double.py): requests built from
declarations, auth from a secret, outcome rules, waits, quota and credits, bulk per-item
statuses, async jobs. Runs use a ManualClock, so a provider's wait costs nothing."""

from __future__ import annotations

import email.utils
import json
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from provider_double import KEY, Double

import playline as pl
from playline.store import open_store
from playline.tools import Answer
from playline.tools._outcomes import match, remaining_of, wait_of
from services import serve_asgi
from stores import wait_for_jobs

from virtual_clock import VirtualClock

NOW = 1_767_225_600.0
PEOPLE = [
    {"first_name": "Ann", "domain": "acme.com"},
    {"first_name": "Bob", "domain": "acme.com"},
    {"first_name": "Dee", "domain": "nowhere.io"},
]


@pytest.fixture
def double(monkeypatch: pytest.MonkeyPatch) -> Iterator[Double]:
    provider = Double()
    with serve_asgi(provider.app) as url:
        provider.url = url
        monkeypatch.setenv("DOUBLE_API_KEY", KEY)
        yield provider


def finder(double: Double, **options: Any) -> pl.HttpTool:
    """The double's email finder as a user declares it."""
    declared: dict[str, Any] = {
        "auth": pl.Auth.header("X-Api-Key", "DOUBLE_API_KEY"),
        "outcomes": [
            pl.Outcome("not_found", status=404),
            pl.Outcome("not_found", status=200, body={"error": True, "error_code": "NO_MATCH"}),
        ],
        "result": "data",
        "cost": pl.Cost(1, charge="on_hit"),
    }
    declared.update(options)
    return pl.HttpTool(
        "double.find",
        "GET",
        f"{double.url}/v1/find",
        **declared,
    )


def run(
    tool: pl.HttpTool | Sequence[Any],
    people: Sequence[Mapping[str, Any]],
    store: str,
    *,
    columns: Mapping[str, Any] | None = None,
    **options: Any,
) -> pl.RunResult:
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        builder = ctx.dataset("people", [dict(p) for p in people], key="first_name")
        for name, resolver in (columns or {"email": _find}).items():
            builder = builder.with_column(name, resolver)
        return await builder.run()

    tools = list(tool) if isinstance(tool, Sequence) else [tool]
    options.setdefault("clock", pl.ManualClock())
    return pl.run(pl.play(name="http")(play), store=store, tools=tools, **options)


async def _find(row: Mapping[str, Any], ctx: pl.Context) -> Any:
    result = await ctx.tool(
        "double.find", {"first_name": row["first_name"], "domain": row["domain"]}
    )
    return result.data


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/s.db"


def test_found_and_not_found_answers_become_values_and_empty_cells(
    double: Double, store: str
) -> None:
    result = run(finder(double), [*PEOPLE, {"first_name": "nomatch", "domain": "acme.com"}], store)

    assert result.ok
    emails = {row["first_name"]: row["email"] for row in result.output}
    assert emails == {
        "Ann": {"email": "ann@acme.com", "first_name": "ann", "email_status": "VALID"},
        "Bob": {"email": "bob@acme.com", "first_name": "bob", "email_status": "VALID"},
        "Dee": None,  # 404: not found
        "nomatch": None,  # 200 with error: true, NO_MATCH: not found
    }
    assert result.stats.credits == 2  # on hit: the two found
    assert double.calls["find"] == 4
    sent = [a["asked"] for a in double.asked]
    assert {"first_name": "Ann", "domain": "acme.com"} in sent  # a GET sends the input as query


def test_a_rule_can_make_an_answer_free(double: Double, store: str) -> None:
    """Prospeo returns catch-all emails free: found, and charged nothing."""
    free = pl.Outcome("found", status=200, body={"data.email_status": "CATCH_ALL"}, credits=0)
    tool = finder(double, outcomes=[free])
    people = [PEOPLE[0], {"first_name": "Cy", "domain": "initech.com"}]

    result = run(tool, people, store)

    assert result.ok
    emails = {row["first_name"]: row["email"]["email"] for row in result.output}
    assert emails == {"Ann": "ann@acme.com", "Cy": "cy@initech.com"}
    assert result.stats.credits == 1  # Ann's; Cy's catch-all was free
    costs = {e.row_key: e.credits for e in open_store(store).read_ledger(result.run_id)}
    assert costs == {"Ann": 1.0, "Cy": 0.0}


def test_the_key_comes_from_the_environment_and_never_keys_the_receipt(
    double: Double, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run(finder(double), PEOPLE[:1], store).ok
    assert [a["auth"] for a in double.asked] == [KEY]

    monkeypatch.setenv("DOUBLE_API_KEY", "k-rotated-0987654321fedcba")  # a new key, same account
    again = run(finder(double), PEOPLE[:1], store)

    assert again.stats.tool_calls_cached == 1  # the receipt holds: nothing bought again
    assert double.calls["find"] == 1


def test_variants_of_an_input_are_one_request_sent_as_declared(double: Double, store: str) -> None:
    tool = finder(double, normalize={"first_name": "name", "domain": "domain"})
    variants = [
        {"first_name": "Ann", "domain": "acme.com"},
        {"first_name": " ANN ", "domain": "https://www.Acme.com/"},
    ]

    result = run(tool, variants, store)

    assert result.ok
    assert double.calls["find"] == 1
    assert double.asked[0]["asked"] == {"first_name": "ann", "domain": "acme.com"}
    assert result.stats.credits == 1


@pytest.mark.parametrize(
    ("auth", "seen"),
    [
        (pl.Auth.bearer("DOUBLE_API_KEY"), f"Bearer {KEY}"),
        (pl.Auth.query("api_key", "DOUBLE_API_KEY"), KEY),
    ],
)
def test_a_key_goes_where_the_provider_reads_it(
    double: Double, store: str, auth: pl.Auth, seen: str
) -> None:
    result = run(finder(double, auth=auth), PEOPLE[:1], store)

    assert result.ok
    assert [a["auth"] for a in double.asked] == [seen]


def test_a_rate_limit_sent_as_403_waits_and_sends_the_same_request_again(
    double: Double, store: str
) -> None:
    """Hunter answers 403 when a key goes too fast: a rule says so, and the call waits."""
    double.script(403, {"errors": [{"id": "too_many_requests"}]}, {"Retry-After": "2"})
    tool = finder(double, outcomes=[pl.Outcome("rate_limited", status=403)])

    result = run(tool, PEOPLE[:1], store)

    assert result.ok
    assert result.output.to_list()[0]["email"]["email"] == "ann@acme.com"
    assert double.calls["find"] == 2
    assert result.stats.credits == 1


def test_several_rate_windows_hold_at_once(double: Double) -> None:
    """Hunter allows 15 requests a second and 500 a minute (here 20): the second's rate
    paces the requests (a token bucket) and no span of a minute holds more than 20. (The
    gate a shared store keeps is held to the same windows in tests/gates.)"""
    clock = double.clock = VirtualClock()
    tool = finder(double, rate=pl.Rate(per_second=15, per_minute=20))
    people = [{"first_name": f"p{i}", "domain": "acme.com"} for i in range(45)]  # not found

    result = run(tool, people, "memory://", clock=clock)

    assert result.ok, result.error
    stamps = sorted(double.stamps)
    assert len(stamps) == 45
    for stamp in stamps:
        assert sum(stamp - 60 < other <= stamp for other in stamps) <= 20
    assert stamps[-1] - stamps[0] >= 120  # the 41st request waits for the third minute
    assert stamps[19] - stamps[0] >= (20 - 15) / 15  # past the burst, 15 a second at most


def test_remaining_budget_headers_slow_the_tool_before_a_429(double: Double) -> None:
    """The provider allows 5 requests a minute, where the tool declares 10 a second, and
    says what is left in RateLimit-Remaining and RateLimit-Reset: the gate lets out no more
    than that and holds once the window is spent, so no request draws a 429. (One request at
    a time: each answer is heard before the next request leaves.)"""
    clock = double.clock = VirtualClock()
    double.window = (5, 60.0)
    people = [{"first_name": f"p{i}", "domain": "acme.com"} for i in range(12)]  # not found
    tool = finder(double, rate=pl.Rate(per_second=10, concurrency=1))

    result = run(tool, people, "memory://", clock=clock)

    assert result.ok, result.error
    assert double.throttled == 0
    assert double.calls["find"] == 12
    assert clock.elapsed >= 120  # the 11th waits for the third window


@pytest.mark.parametrize(
    ("rule", "sends"),
    [
        (pl.Outcome("retryable", status=503), 2),  # the provider did no work: sent again
        (pl.Outcome("blocked", status=503, wait=120), 2),  # waits out the block, then again
        (pl.Outcome("fatal", status=503), 1),  # refused: the cell fails, nothing is repeated
    ],
)
def test_a_rule_decides_whether_a_failed_answer_is_sent_again(
    double: Double, store: str, rule: pl.Outcome, sends: int
) -> None:
    double.script(503, {"message": "busy"})

    result = run(finder(double, outcomes=[rule]), PEOPLE[:1], store)

    assert double.calls["find"] == sends
    (record,) = open_store(store).iter_rows(result.run_id, "people")
    assert record.cells["email"]["status"] == ("completed" if sends == 2 else "failed")


def test_a_blocked_account_is_sent_nothing_until_its_block_ends(double: Double) -> None:
    """ZeroBounce blocks an account for a while instead of answering 429: neither the call
    that heard it nor any other call to the account (another of its tools too) goes out
    until the block ends; then each is sent once. (Virtual time, in which waits overlap as
    on a wall clock, stamps each request the double receives.)"""
    clock = double.clock = VirtualClock()
    double.script(403, {"error": "Your account is blocked for 120 seconds"}, {"Retry-After": "120"})
    blocked = [
        pl.Outcome("blocked", status=403, message="error"),
        pl.Outcome("not_found", status=404),
    ]
    first = finder(double, outcomes=blocked, rate=pl.Rate(concurrency=1))
    second = pl.HttpTool(  # the same account (host and key): the block is the account's
        "double.find_again",
        "GET",
        f"{double.url}/v1/find",
        auth=pl.Auth.header("X-Api-Key", "DOUBLE_API_KEY"),
        outcomes=blocked,
        result="data",
    )

    async def again(row: Mapping[str, Any], ctx: pl.Context) -> Any:
        found = await ctx.tool("double.find_again", {"first_name": "x" + row["first_name"]})
        return found.data

    result = run(
        [first, second], PEOPLE, "memory://", columns={"email": _find, "again": again}, clock=clock
    )

    assert result.ok and result.stats.rows_failed == 0
    block, *after = double.stamps
    assert after and all(stamp >= block + 120 for stamp in after)
    assert double.calls["find"] == 1 + len(PEOPLE) * 2  # the blocked one again, and the rest


@pytest.mark.parametrize(
    ("status", "outcome", "body"),
    [
        (429, "quota_exhausted", {"errors": [{"id": "too_many_requests", "code": 429}]}),
        (402, "insufficient_credits", {"message": "You have run out of credits"}),
    ],
)
def test_an_account_used_up_fails_its_cells_with_the_cause_and_sends_nothing_more(
    double: Double, store: str, status: int, outcome: str, body: Any
) -> None:
    """Hunter's 429 is its monthly quota; LeadMagic's 402 its credits. The cell that got it
    fails with the provider's words; the account's other calls are not sent, and a waterfall
    goes on with its next step."""
    double.script(status, body)
    tool = finder(  # one request at a time: the calls after the first are still queued
        double,
        outcomes=[pl.Outcome(outcome, status=status)],  # type: ignore[arg-type]
        rate=pl.Rate(concurrency=1),
    )
    registry = pl.ToolRegistry()

    @registry.tool("backup.find")
    def backup(input: Mapping[str, Any]) -> dict[str, Any]:
        return {"email": f"{input['first_name'].lower()}@backup.io"}

    waterfall = pl.Waterfall(
        "emails",
        output="email",
        steps=[pl.ToolStep("double", "double.find"), pl.ToolStep("backup", "backup.find")],
    )

    async def email(row: Mapping[str, Any], ctx: pl.Context) -> Any:
        return await ctx.waterfall(
            waterfall, {"first_name": row["first_name"], "domain": row["domain"]}
        )

    result = run([tool, registry], PEOPLE, store, columns={"email": email})

    assert double.calls["find"] == 1  # the first answer stopped the account
    assert result.ok
    emails = {row["first_name"]: row["email"] for row in result.output}
    assert emails == {"Ann": "ann@backup.io", "Bob": "bob@backup.io", "Dee": "dee@backup.io"}
    assert result.stats.credits == 0


def test_a_run_that_nothing_else_could_progress_fails_naming_the_provider(
    double: Double, store: str
) -> None:
    double.script(402, {"message": "You have run out of credits"})
    tool = finder(
        double,
        outcomes=[pl.Outcome("insufficient_credits", status=402, message="message")],
        rate=pl.Rate(concurrency=1),
    )

    result = run(tool, PEOPLE, store)

    assert double.calls["find"] == 1
    assert result.status == "failed"
    assert "402 from double.find (insufficient_credits)" in str(result.error)
    assert f"add credits, then resume the run (playline resume {result.run_id})" in str(
        result.error
    )
    errors = [
        r.cells["email"]["error"] for r in open_store(store).iter_rows(result.run_id, "people")
    ]
    assert len(errors) == 3
    assert all("out of credits" in e and "add credits and resume" in e for e in errors)


def test_an_answer_no_rule_matches_fails_its_cell_with_the_status_and_a_clipped_body(
    double: Double, store: str
) -> None:
    double.script(418, text=f"teapot says {KEY} " + "x" * 1000)

    result = run(finder(double), PEOPLE[:1], store)

    (record,) = open_store(store).iter_rows(result.run_id, "people")
    cell = record.cells["email"]
    assert (cell["status"], cell["http_status"]) == ("failed", 418)
    assert "no outcome rule matches: teapot says" in cell["error"]
    assert KEY not in cell["error"]  # the key the body echoed is never kept
    assert len(cell["error"]) < 500  # the body clipped
    assert double.calls["find"] == 1  # a refusal is not sent again


def test_a_request_function_that_fails_fails_its_cell_not_the_run(
    double: Double, store: str
) -> None:
    tool = finder(double)

    @tool
    def request(input: dict[str, Any]) -> dict[str, Any]:
        if input["first_name"] == "Bob":
            raise KeyError("no such field")
        return {"query": dict(input)}

    result = run(tool, PEOPLE[:2], store)

    cells = {r.key: r.cells["email"] for r in open_store(store).iter_rows(result.run_id, "people")}
    assert cells["Ann"]["status"] == "completed"
    assert cells["Bob"]["status"] == "failed"
    assert "its request function failed: KeyError" in cells["Bob"]["error"]
    assert double.calls["find"] == 1


def bulk_finder(double: Double, max_size: int = 100, **options: Any) -> pl.HttpTool:
    """The double's finder with its bulk form, as People Data Labs' bulk enrichment is:
    items under ``requests``, one answer each with its own status."""
    bulk = pl.HttpBulk(
        url=f"{double.url}/v1/bulk",
        max_size=max_size,
        items="requests",
        item={"params": {"first_name": "{first_name}", "domain": "{domain}"}},
        results="",
        item_status="status",
        item_result="data",
    )
    return finder(double, bulk=bulk, **options)


def test_bulk_requests_map_per_item_statuses_back_to_their_inputs(
    double: Double, store: str
) -> None:
    tool = bulk_finder(double)

    result = run(tool, PEOPLE, store)

    assert result.ok
    assert double.calls["bulk"] == 1 and double.calls["find"] == 0
    emails = {row["first_name"]: (row["email"] or {}).get("email") for row in result.output}
    assert emails == {"Ann": "ann@acme.com", "Bob": "bob@acme.com", "Dee": None}
    assert result.stats.credits == 2


def test_a_bulk_request_counted_per_record_spends_the_rate_of_its_records(
    double: Double,
) -> None:
    """Prospeo counts a bulk request as one request per record: with 10 records a minute,
    20 people go in requests that fit the minute's room, none drawing a 429, over two
    minutes (four requests of 5 at once would have drawn two)."""
    clock = double.clock = VirtualClock()
    double.window = (10, 60.0)
    tool = bulk_finder(double, max_size=5, rate=pl.Rate(per_minute=10, per_record=True))
    people = [{"first_name": f"p{i}", "domain": "acme.com"} for i in range(20)]

    result = run(tool, people, "memory://", clock=clock)

    assert result.ok, result.error
    assert double.throttled == 0
    assert sum(len(a["asked"]["requests"]) for a in double.asked) == 20
    assert clock.elapsed >= 60


def jobs_tool(double: Double, **poll: Any) -> pl.HttpTool:
    """The double's async enrichment, declared as Dropcontact's batch API is (``poll``:
    the poll's declaration where a test differs)."""
    declared: dict[str, Any] = {
        "url": f"{double.url}/v1/jobs/{{job}}",
        "interval": 30,
        "outcomes": [pl.Outcome("pending", body={"status": "IN_PROGRESS"})],
        "result": "data",
    }
    return pl.HttpTool(
        "double.find",
        "POST",
        f"{double.url}/v1/jobs",
        auth=pl.Auth.header("X-Api-Key", "DOUBLE_API_KEY"),
        outcomes=[pl.Outcome("pending", status=202, job="request_id")],
        poll=pl.HttpPoll(**(declared | poll)),
        cost=pl.Cost(1, charge="on_hit"),
    )


def test_an_async_job_is_submitted_once_and_polled_to_its_result(
    double: Double, store: str
) -> None:
    result = run(jobs_tool(double), PEOPLE[:2], store)

    assert result.ok, result.error
    assert double.calls["submit"] == 2
    assert double.calls["poll"] == 2 * 3  # two polls pending, the third done
    emails = {row["first_name"]: row["email"]["email"] for row in result.output}
    assert emails == {"Ann": "ann@acme.com", "Bob": "bob@acme.com"}


def test_a_pending_job_is_polled_again_after_the_wait_its_answer_names(
    double: Double, store: str
) -> None:
    """Apollo answers a poll "pending, retry after N seconds": the next poll waits N, not
    the declared interval (30 s before the first poll, 45 s as asked after each pending)."""
    double.poll_wait = 45
    waits = pl.Outcome("pending", body={"status": "IN_PROGRESS"}, wait_from="retry_after_seconds")
    tool = jobs_tool(double, outcomes=[waits])
    clock = pl.ManualClock()
    start = clock.now()

    result = run(tool, PEOPLE[:1], store, clock=clock)

    assert result.ok, result.error
    assert double.calls["poll"] == 3
    assert clock.now() - start == 30 + 45 + 45  # virtual seconds: the waits asked for


def bulk_jobs_tool(double: Double, **poll: Any) -> pl.HttpTool:
    """The double's bulk enrichment, declared as Dropcontact's batch API is: many people
    in one job, polled, one answer per person (``poll``: where a test's poll differs)."""
    declared: dict[str, Any] = {
        "url": f"{double.url}/v1/bulkjobs/{{job}}",
        "interval": 30,
        "outcomes": [pl.Outcome("pending", body={"status": "IN_PROGRESS"})],
        "result": "data",
        "echo": {"first_name": "first_name"},
    }
    return pl.HttpTool(
        "double.enrich",
        "POST",
        f"{double.url}/v1/bulkjobs",
        auth=pl.Auth.header("X-Api-Key", "DOUBLE_API_KEY"),
        outcomes=[pl.Outcome("pending", status=202, job="request_id")],
        bulk=pl.HttpBulk(max_size=50, items="items", results="data"),
        poll=pl.HttpPoll(**(declared | poll)),
        cost=pl.Cost(1, charge="on_hit"),
    )


async def _enrich(row: Mapping[str, Any], ctx: pl.Context) -> Any:
    found = await ctx.tool(
        "double.enrich", {"first_name": row["first_name"], "domain": row["domain"]}
    )
    return found.data


def test_a_bulk_job_is_submitted_once_for_many_inputs_and_answers_each(
    double: Double, store: str
) -> None:
    result = run(bulk_jobs_tool(double), PEOPLE, store, columns={"email": _enrich})

    assert result.ok, result.error
    assert double.calls["submit_bulk"] == 1  # three people, one job
    assert double.calls["poll_bulk"] == 3  # two polls pending, the third done
    emails = {row["first_name"]: (row["email"] or {}).get("email") for row in result.output}
    assert emails == {"Ann": "ann@acme.com", "Bob": "bob@acme.com", "Dee": None}
    assert result.stats.credits == 2  # on hit: Dee was not found


def test_a_bulk_job_whose_polls_fail_is_polled_on_resume_never_submitted_again(
    double: Double, store: str
) -> None:
    """The provider stops answering polls: the job's calls end in doubt with the job kept on
    their receipts; the resume polls it, with no second submission (a second charge)."""
    double.polls_down = True
    tool = bulk_jobs_tool(double)
    first = run(tool, PEOPLE, store, columns={"email": _enrich})
    assert first.stats.tool_calls_failed == 3 and first.stats.credits_in_doubt == 3
    double.polls_down = False

    resumed = run(tool, PEOPLE, store, columns={"email": _enrich}, run_id=first.run_id)

    assert resumed.ok, resumed.error
    assert double.calls["submit_bulk"] == 1
    emails = {row["first_name"]: (row["email"] or {}).get("email") for row in resumed.output}
    assert emails == {"Ann": "ann@acme.com", "Bob": "bob@acme.com", "Dee": None}


def test_results_a_finished_job_keeps_apart_are_fetched(double: Double, store: str) -> None:
    """The poll says only that the job is done: its result is another request (JSON), and a
    bulk job's a CSV file of rows, one per item."""
    double.results_apart = True
    single = jobs_tool(double, fetch=f"{double.url}/v1/jobs/{{job}}/result", result="data")
    csv_file = bulk_jobs_tool(
        double, fetch=f"{double.url}/v1/bulkjobs/{{job}}/download", fetch_format="csv", result=None
    )

    result = run([single, csv_file], PEOPLE, store, columns={"email": _find, "file": _enrich})

    assert result.ok, result.error
    assert double.calls["result"] == 3  # one per single job
    assert double.calls["download"] == double.calls["submit_bulk"]  # one file per bulk job
    for row in result.output:
        expected = {"Ann": "ann@acme.com", "Bob": "bob@acme.com"}.get(row["first_name"])
        assert (row["email"] or {}).get("email") == expected
        assert (row["file"] or {}).get("email") == (expected or "")


def test_polls_back_off_as_declared(double: Double, store: str) -> None:
    """HttpPoll(interval=10, backoff=2, max_interval=30): waits of 10, 20, 30, 30 seconds
    for a job pending three polls."""
    double.polls_pending = 3
    tool = jobs_tool(double, interval=10, backoff=2, max_interval=30)
    clock = pl.ManualClock()
    start = clock.now()

    result = run(tool, PEOPLE[:1], store, clock=clock)

    assert result.ok, result.error
    assert double.calls["poll"] == 4
    assert clock.now() - start == 10 + 20 + 30 + 30


def test_a_job_answered_for_another_input_fails_and_is_never_kept_as_found(
    double: Double, store: str
) -> None:
    """A provider restarted mid-job numbered a new job as Ann's: its answer is Bob's."""
    double.misroute["job-1"] = {"first_name": "Bob", "domain": "acme.com"}
    tool = jobs_tool(double, echo={"first_name": "data.first_name"})

    result = run(tool, PEOPLE[:1], store)

    (record,) = open_store(store).iter_rows(result.run_id, "people")
    assert record.cells["email"]["status"] == "failed"
    assert record.cells["email"]["code"] == "job_mismatch"
    assert record.values["email"] is None
    assert double.calls["submit"] == 1  # never submitted again
    assert result.stats.credits == 0


def test_a_job_whose_result_expired_fails_and_is_bought_again_only_on_retry_failed(
    double: Double, store: str
) -> None:
    double.expired.add("job-1")
    tool = jobs_tool(double, expired=[pl.Outcome("fatal", status=410)])

    first = run(tool, PEOPLE[:1], store)

    (record,) = open_store(store).iter_rows(first.run_id, "people")
    assert record.cells["email"]["code"] == "job_expired"
    assert "--retry-failed" in record.cells["email"]["error"]
    assert first.stats.credits_in_doubt == 0  # known lost: failed, not in doubt
    again = run(tool, PEOPLE[:1], store, run_id=first.run_id)
    ((cause, count),) = again.stats.errors.items()
    assert count == 1 and cause.startswith("result_lost from double.find: ")
    assert double.calls["submit"] == 1  # not bought again unasked
    double.expired.clear()
    retried = run(tool, PEOPLE[:1], store, run_id=first.run_id, retry_failed=True)
    assert retried.ok, retried.error
    assert double.calls["submit"] == 2
    assert retried.output.to_list()[0]["email"]["email"] == "ann@acme.com"


# the rules and waits, answer by answer
PROSPEO_LEFT = {
    "x-minute-request-left": "4",
    "x-minute-reset-seconds": "12",
    "x-daily-request-left": "80",
    "x-daily-reset-seconds": "3000",
}


def answer(status: int, body: Any = None, **headers: str) -> Answer:
    return Answer(status, body, {k.replace("_", "-"): v for k, v in headers.items()})


@pytest.mark.parametrize(
    ("headers", "said"),
    [
        ({"RateLimit-Remaining": "3", "RateLimit-Reset": "30"}, (3, 30.0)),  # IETF, LeadMagic
        ({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(NOW + 20)}, (0, 20.0)),
        ({"x-minute-requests-left": "40", "x-24-hour-requests-left": "10"}, (10, 86400.0)),
        ({"x-minute-requests-left": "2", "x-24-hour-requests-left": "900"}, (2, 60.0)),
        ({"x-daily-requests-left": "5", "x-minute-requests-left": "9"}, (5, 86400.0)),  # Apollo
        (PROSPEO_LEFT, (4, 12.0)),
        ({"RateLimit-Remaining": "many"}, None),
        ({}, None),
    ],
)
def test_remaining_budget_headers_are_read_tightest_first(
    headers: dict[str, str], said: tuple[int, float] | None
) -> None:
    """Apollo says what is left of each window: the one with the fewest requests left is
    the one that runs out first; a reset past 1e9 is a time, not a delay."""
    assert remaining_of(headers, now=NOW) == said


def test_the_first_matching_rule_wins_then_429_and_2xx_fall_back() -> None:
    rules = [
        pl.Outcome("not_found", status=404),
        pl.Outcome("quota_exhausted", status=429),
        pl.Outcome("retryable", status="5xx"),
        pl.Outcome("fatal", status=[400, 422]),
        pl.Outcome("not_found", body=lambda b: b["error_code"] == "NO_MATCH"),
    ]
    said = {
        (s, repr(b)): (rule.outcome if (rule := match(rules, answer(s, b), "data")) else None)
        for s, b in [
            (404, None),
            (429, None),
            (503, None),
            (422, None),
            (200, {"error_code": "NO_MATCH"}),
            (200, {"data": {"email": "a@b.c"}}),
            (200, {"data": {}}),
            (418, None),
        ]
    }
    assert list(said.values()) == [
        "not_found",
        "quota_exhausted",  # the tool's rule before the fallback's rate_limited
        "retryable",
        "fatal",
        "not_found",  # a body rule; a body it cannot read does not match
        "found",
        "not_found",  # a 2xx with an empty result
        None,  # no rule says what a 418 means
    ]
    assert match([], answer(429), None).outcome == "rate_limited"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("headers", "body", "rule", "seconds"),
    [
        ({"Retry-After": "7"}, None, pl.Outcome("rate_limited"), 7.0),
        (
            {"Retry-After": email.utils.formatdate(NOW + 90, usegmt=True)},
            None,
            pl.Outcome("rate_limited"),
            90.0,
        ),
        ({"RateLimit-Reset": "12"}, None, pl.Outcome("rate_limited"), 12.0),
        ({"X-RateLimit-Reset": str(int(NOW) + 30)}, None, pl.Outcome("rate_limited"), 30.0),
        ({"X-RateLimit-Reset": "5"}, None, pl.Outcome("rate_limited"), 5.0),
        (
            {},
            {"retry_after_seconds": 4},
            pl.Outcome("rate_limited", wait_from="retry_after_seconds"),
            4.0,
        ),
        ({}, None, pl.Outcome("rate_limited", wait=3), 3.0),
        ({}, None, pl.Outcome("rate_limited"), 1.0),
        ({}, None, pl.Outcome("blocked"), 60.0),
        ({"Retry-After": "soon"}, None, pl.Outcome("blocked", wait=600), 600.0),
    ],
)
def test_a_wait_is_read_from_the_answer_else_the_rule_else_the_default(
    headers: dict[str, str], body: Any, rule: pl.Outcome, seconds: float
) -> None:
    assert wait_of(rule, Answer(429, body, headers), now=NOW) == pytest.approx(seconds, abs=1)


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: pl.HttpTool("a.b", "FETCH", "https://x.io"), "method"),
        (lambda: pl.HttpTool("a.b", "GET", "x.io/find"), "http://"),
        (lambda: pl.HttpTool("a.b", "GET", "https://x.io", outcomes=["404"]), "pl.Outcome"),
        (lambda: pl.HttpTool("a.b", "POST", "https://x.io", json={}, form={}), "not both"),
        (lambda: pl.Outcome("missing"), "one of"),  # type: ignore[arg-type]
        (
            lambda: pl.HttpTool("a.b", "GET", "https://x.io", outcomes=[pl.Outcome("pending")]),
            "job=",
        ),
        (lambda: pl.Outcome("fatal", status="6xx"), "status"),
        (lambda: pl.Outcome("fatal", status=True), "status"),
        (lambda: pl.Outcome("rate_limited", wait=-1), "wait"),
        (lambda: pl.HttpTool("a.b", "GET", "https://x.io", auth="KEY"), "pl.Auth.bearer"),
        (lambda: pl.HttpTool("a.b", "GET", "https://x.io", bulk={"max_size": 5}), "HttpBulk"),
        (lambda: pl.HttpTool("a.b", "GET", "https://x.io", timeout=0), "timeout"),
        (lambda: pl.HttpPoll(url="/jobs/{job}"), "poll's URL"),
        (lambda: pl.HttpPoll(url="https://x.io/{job}", interval=0), "interval"),
        (lambda: pl.HttpPoll(url="https://x.io/{job}", backoff=0.5), "number >= 1"),
        (lambda: pl.HttpPoll(url="https://x.io/{job}", interval=5, max_interval=2), "at least"),
        (lambda: pl.HttpPoll(url="https://x.io/{job}", expired=[404]), "expired"),
        (lambda: pl.Reported(header="a", path="b"), "one place"),
        (lambda: pl.Reported(debited="DEBITED", header="x"), "path="),
        (lambda: pl.Rate(per_minute=0), "per_minute"),
        (lambda: pl.HttpBulk(max_size=0), "max_size"),
        (lambda: pl.Outcome("fatal", status=402, credits=1), "found or"),
        (lambda: pl.Outcome("found", credits=-1), "found or"),
        (lambda: pl.Outcome("pending", repeat=True), "answered the input before"),
        (lambda: pl.Outcome("found", repeat="yes"), "answered the input before"),
        (lambda: pl.Auth.header("", "KEY"), "header name"),
        (lambda: pl.Auth.bearer(""), "environment variable"),
    ],
)
def test_a_declaration_that_cannot_work_is_refused_with_what_to_write(make: Any, says: str) -> None:
    with pytest.raises(pl.PlayDefinitionError, match=says):
        make()


CHILD = """
import sys
import playline as pl

url, store = sys.argv[1:3]
tool = pl.HttpTool(
    "double.find", "POST", f"{url}/v1/jobs",
    auth=pl.Auth.header("X-Api-Key", "DOUBLE_API_KEY"),
    outcomes=[pl.Outcome("pending", status=202, job="request_id")],
    poll=pl.HttpPoll(url=f"{url}/v1/jobs/{{job}}", interval=float(sys.argv[3]),
                     outcomes=[pl.Outcome("pending", body={"status": "IN_PROGRESS"})],
                     result="data"),
    cost=pl.Cost(1, charge="on_hit"),
)


@pl.play(name="jobs")
async def jobs(ctx, input):
    return await ctx.dataset("people", input["people"], key="first_name").with_column(
        "email", lambda row, ctx: ctx.tool("double.find", dict(row))).run()


result = pl.run(jobs, {"people": %r}, store=store, run_id="run-jobs", tools=[tool])
print(result.status)
"""


def test_a_run_killed_while_its_jobs_are_pending_polls_them_on_resume(
    double: Double, tmp_path: Path
) -> None:
    """The job id is on the receipt before the first poll: a resume polls, never resubmits
    (a resubmit is a second charge)."""
    path = tmp_path / "s.db"
    script = tmp_path / "jobs.py"
    script.write_text(CHILD % ([dict(p) for p in PEOPLE[:2]],))
    child = subprocess.Popen(  # polls once an hour: it submits, records the jobs, waits
        [sys.executable, str(script), double.url, f"sqlite:///{path}", "3600"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_jobs(path, child, 2)
    finally:
        child.kill()
        child.communicate()
    assert double.calls["submit"] == 2 and double.calls["poll"] == 0

    @pl.play(name="jobs")
    async def jobs(ctx: pl.Context, input: Any) -> pl.Dataset:
        return await (
            ctx.dataset("people", input["people"], key="first_name")
            .with_column("email", lambda row, ctx: ctx.tool("double.find", dict(row)))
            .run()
        )

    result = pl.run(  # the same run again: it resumes
        jobs,
        {"people": [dict(p) for p in PEOPLE[:2]]},
        store=f"sqlite:///{path}",
        run_id="run-jobs",
        tools=[jobs_tool(double)],
        clock=pl.ManualClock(),
    )

    assert result.status == "completed", result.error
    assert double.calls["submit"] == 2  # no job submitted again
    assert double.calls["poll"] == 2 * 3
    assert {row["first_name"]: row["email"]["email"] for row in result.output} == {
        "Ann": "ann@acme.com",
        "Bob": "bob@acme.com",
    }


PLAY_FILE = """
import playline as pl

finder = pl.HttpTool(
    "double.find", "GET", "%s/v1/find",
    auth=pl.Auth.header("X-Api-Key", "DOUBLE_API_KEY"),
    outcomes=[pl.Outcome("not_found", status=404), pl.Outcome("rate_limited", status=403, wait=5)],
    result="data",
    cost=pl.Cost(1, charge="on_hit"),
)


@pl.play
async def emails(ctx, input):
    return await ctx.dataset("people", input["people"], key="first_name").with_column(
        "email", lambda row, ctx: ctx.tool("double.find", dict(row))).run()
"""


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "playline", *args], cwd=cwd, capture_output=True, text=True
    )


def test_a_reported_cost_above_the_declared_one_is_kept_shown_and_budgeted(
    double: Double, store: str, tmp_path: Path
) -> None:
    """The provider says (x-call-credits-spent) it charged 2 where the tool declares 1: the
    ledger keeps both, `playline show` names the mismatch, and the budget counts 2."""
    double.charge = 2
    tool = finder(
        double, reported=pl.Reported(header="x-call-credits-spent"), rate=pl.Rate(concurrency=1)
    )
    people = [*PEOPLE, {"first_name": "Cy", "domain": "initech.com"}]  # Dee is not found

    result = run(tool, people, store, max_credits=3)

    # one request at a time: after 2 + 2 spent, no call fits the budget of 3 (at the
    # declared 1 each, all four would have been sent)
    assert result.stats.credits == 4
    assert double.calls["find"] == 2 and sum(double.found.values()) == 2
    entries = open_store(store).read_ledger(result.run_id)
    assert [(e.credits, e.declared, e.reported) for e in entries if e.found] == [
        (2.0, 1.0, 2.0),
        (2.0, 1.0, 2.0),
    ]
    shown = _cli("show", result.run_id, "--store", store, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert (
        "double.find: for 2 call(s) the provider reported 4 credits where the tool declares 2"
        in " ".join(shown.stdout.split())
    ), shown.stdout
    described = json.loads(
        _cli("show", result.run_id, "--store", store, "--json", cwd=tmp_path).stdout
    )
    assert described["trace"]["tools"]["double.find"]["reported"] == {
        "calls": 2,
        "reported": 4,
        "declared": 2,
        "mismatch": True,
    }


def test_a_play_file_s_http_tools_are_described_and_run_from_the_command_line(
    double: Double, tmp_path: Path
) -> None:
    play = tmp_path / "emails.py"
    play.write_text(PLAY_FILE % double.url)

    described = _cli("tools", "describe", "double.find", "--play", str(play), cwd=tmp_path)
    assert described.returncode == 0, described.stderr
    http = json.loads(described.stdout)["http"]
    assert http["auth"] == {"kind": "header", "secret": "DOUBLE_API_KEY"}  # its name, no key
    assert KEY not in described.stdout
    assert http["outcomes"] == [
        "status 404: not_found",
        "status 403: rate_limited (wait 5)",
        "429: rate_limited",
        "2xx: found (not_found when the result is empty)",
    ]

    people = json.dumps({"people": [dict(p) for p in PEOPLE[:2]]})
    ran = _cli(
        "run", str(play), "--input-json", people, "--store", f"sqlite:///{tmp_path}/s.db",
        cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert double.calls["find"] == 2


def test_polls_that_fail_now_and_then_do_not_add_up_to_a_failed_job(
    double: Double, store: str
) -> None:
    """Six polls failing in a row fail a job; seven over its life, each followed by an
    answer, do not."""
    double.script(202, {"request_id": "job-x"})
    for _ in range(7):
        double.script(503, {"error": "busy"})
        double.script(200, {"status": "IN_PROGRESS"})
    double.script(200, {"status": "DONE", "data": {"email": "ann@acme.com"}})

    result = run(jobs_tool(double), PEOPLE[:1], store)

    assert result.ok, result.output and result.output.errors
    assert result.output.to_list()[0]["email"]["email"] == "ann@acme.com"
    assert double.calls["submit"] == 1 and double.calls["poll"] == 15


def test_a_poll_that_says_the_account_is_out_of_credits_stops_its_other_calls(
    double: Double, store: str
) -> None:
    """As a submit's answer would: the job's call fails with the cause, and the account's
    later calls (another tool of the same key) are not sent."""
    double.script(202, {"request_id": "job-x"})  # the submit, then the poll's 402
    double.script(402, {"message": "out of credits"})
    tool = jobs_tool(double, outcomes=[
        pl.Outcome("pending", body={"status": "IN_PROGRESS"}),
        pl.Outcome("insufficient_credits", status=402, message="message"),
    ])  # fmt: skip
    lookup = pl.HttpTool(  # another tool of the same account (host and key)
        "double.lookup", "GET", f"{double.url}/v1/find",
        auth=pl.Auth.header("X-Api-Key", "DOUBLE_API_KEY"), result="data",
    )  # fmt: skip

    refused: list[str] = []

    async def job_then_lookup(row: Mapping[str, Any], ctx: pl.Context) -> Any:
        try:
            await ctx.tool("double.find", {"first_name": row["first_name"]})
        except pl.ToolError as exc:
            refused.append(str(exc))
        return (await ctx.tool("double.lookup", dict(row))).data

    result = run([tool, lookup], PEOPLE[:1], store, columns={"email": job_then_lookup})

    assert double.calls["find"] == 0, "the account's other tool sent nothing"
    assert len(refused) == 1 and "out of credits" in refused[0]
    (error,) = result.output.errors
    assert "not sent" in error.message and error.tool == "double.lookup"


def test_a_job_pending_past_its_max_wait_is_left_to_the_resume_not_polled_for_ever(
    double: Double, store: str
) -> None:
    """Dropcontact answers a job it lost "not ready" for ever: past ``max_wait`` the call
    fails in doubt, its job on the receipt; a resume polls it again, never resubmits."""
    double.polls_pending = 50  # past max_wait (were it ignored, done at the 51st: no hang)
    tool = jobs_tool(double, max_wait=90)

    first = run(tool, PEOPLE[:1], store, run_id="run-wait")

    (error,) = first.output.errors
    assert error.code == "job_timeout" and "still pending after 90 s" in error.message
    assert double.calls["submit"] == 1 and double.calls["poll"] == 3  # at 30, 60 and 90 s
    double.polls_pending = 0
    again = run(tool, PEOPLE[:1], store, run_id="run-wait")
    assert again.ok, again.output and again.output.errors
    assert double.calls["submit"] == 1  # polled on resume, never submitted again
    assert again.output.to_list()[0]["email"]["email"] == "ann@acme.com"
