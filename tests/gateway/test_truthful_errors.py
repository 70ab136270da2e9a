"""Issue 10, "errors that lie" and "one failing provider takes the whole run down": a provider
error is the cell's failure (not a miss), a run where nothing worked fails, a budget fills the
rows it can, and a tool that keeps failing fails its own cells while the waterfall goes on.

Runs use a ManualClock (pacing and backoffs take no real time) and the simulator with its rate
limits lifted but its published rates kept, so the gateway still paces as it would.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import playline as pl
from playline.cli import app
from playline.sim import Simulator
from playline.store import Store, open_store

from gwfaults import enrichment_play, eventually, fast
from gwhelp import fake_gateway, people_play, person_input, tool_column, world_people

BETA_THEN_ALPHA = pl.Waterfall(
    "beta-then-alpha",
    output="email",
    steps=[pl.ToolStep("beta", "sim.email.beta"), pl.ToolStep("alpha", "sim.email.alpha")],
)


def _run(
    play: pl.Play, sim: Simulator, store: str | Store = "memory://", **options: Any
) -> pl.RunResult:
    gateway = pl.Gateway(sim.url, token=options.pop("token", sim.token))
    return pl.run(play, store=store, tools=[gateway], clock=pl.ManualClock(), **options)


def _steps(store_url: str, run_id: str, column: str) -> dict[str, dict[str, Any]]:
    """Per row key, the waterfall's step metadata of ``column``."""
    return {
        record.key: record.cells[column]["waterfall"]["steps"]
        for record in open_store(store_url).iter_rows(run_id, "people")
    }


# a 503 inside a waterfall step


def _found(result: pl.RunResult) -> dict[str, Any]:
    """Per row key, the waterfall's value (the ``found`` column)."""
    return {row["email"]: row["found"] for row in result.output}


def test_a_503_inside_a_waterfall_step_fails_the_cell_and_a_resume_retries_it(
    sim: Simulator, tmp_path: Path
) -> None:
    people = world_people(sim, 40)
    play = people_play(
        "waterfall-503",
        people,
        [("found", lambda row, ctx: ctx.waterfall(BETA_THEN_ALPHA, person_input(row)), None)],
    )
    fast(sim)
    clean_url = f"sqlite:///{tmp_path}/clean.db"
    clean = _run(play, sim, clean_url)  # the reference: what beta, then alpha, find
    assert clean.status == "completed", clean.error
    expected = _found(clean)
    beta_missed = {
        key
        for key, steps in _steps(clean_url, clean.run_id, "found").items()
        if steps["beta"]["status"] == "not_found"
    }
    assert 0 < len(beta_missed) < len(people)
    assert any(expected[key] for key in beta_missed), "alpha finds some of beta's misses"

    sim.reset()
    fast(sim, {"sim.email.alpha": {"down": True}})
    url = f"sqlite:///{tmp_path}/p.db"
    first = _run(play, sim, url)

    # The provider's failure is the cell's: failed with its cause, not "not found".
    assert first.status == "completed_with_errors", first.error
    assert first.stats.rows_failed == len(beta_missed)
    errors = first.output.errors
    assert {e.row_key for e in errors} == beta_missed
    for error in errors:
        assert error.column == "found" and error.tool == "sim.email.alpha"
        assert "503" in error.message, error.message
    for key, steps in _steps(url, first.run_id, "found").items():
        if key in beta_missed:
            assert steps["alpha"]["status"] == "failed", steps
            assert "503" in steps["alpha"]["error"]
        else:
            assert steps["alpha"]["status"] == "skipped", steps

    # alpha is back: the resume tries the failed cells again, and only those.
    sim.reset()
    fast(sim)
    again = _run(play, sim, url, run_id=first.run_id)
    assert again.status == "completed", again.error
    assert again.stats.rows_executed == len(beta_missed)
    assert again.stats.rows_reused == len(people) - len(beta_missed)
    assert _found(again) == expected  # what a clean run found
    # beta's answers came from their receipts; alpha was asked once per failed cell
    assert sim.ledger()["calls"] == {"sim.email.alpha": len(beta_missed)}


# a wrong token everywhere


def test_a_wrong_token_everywhere_fails_the_run_and_says_why(sim: Simulator) -> None:
    people = world_people(sim, 12)
    fast(sim)
    result = _run(enrichment_play("wrong-token", people), sim, token="not-the-token")
    assert result.status == "failed"
    assert result.error is not None and "401" in result.error, result.error
    assert result.stats.rows_failed == len(people)
    errors = result.output.errors
    assert {e.row_key for e in errors} == {p["email"] for p in people}
    assert all(e.status == 401 and e.code == "unauthorized" for e in errors)
    assert sim.ledger()["calls"] == {}  # nothing was worked, nothing charged


def test_playline_run_with_a_wrong_token_exits_1_and_prints_the_cause(
    sim: Simulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    people = world_people(sim, 5)
    play = tmp_path / "play.py"
    play.write_text(
        "import playline as pl\n"
        f"PEOPLE = {people!r}\n"
        "@pl.play\n"
        "async def find(ctx, input):\n"
        "    return await ctx.dataset('people', PEOPLE, key='email').with_column(\n"
        "        'found', lambda row, ctx: ctx.tool('sim.email.alpha', {k: row[k] for k in\n"
        "        ('first_name', 'last_name', 'domain')})).run()\n"
    )
    monkeypatch.setenv("PLAYLINE_GATEWAY_TOKEN", "not-the-token")
    result = CliRunner().invoke(
        app, ["run", str(play), "--gateway", sim.url, "--store", f"sqlite:///{tmp_path}/c.db"]
    )
    assert result.exit_code == 1, result.output
    assert "401" in result.output and "sim.email.alpha" in result.output, result.output
    assert "Traceback" not in result.output


def test_a_run_refused_for_its_token_says_to_check_the_token(sim: Simulator) -> None:
    people = world_people(sim, 3)
    fast(sim)
    result = _run(enrichment_play("wrong-token-hint", people), sim, token="not-the-token")
    assert result.status == "failed"
    assert result.error is not None and "token" in result.error.lower(), result.error


# budgets that fill rows up to the cap


def _company_play(name: str, companies: list[dict[str, Any]]) -> pl.Play:
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        return await (
            ctx.dataset("companies", companies, key="domain")
            .with_column(
                "firmo", lambda row, ctx: ctx.tool("sim.company.enrich", {"domain": row["domain"]})
            )
            .run()
        )

    return pl.play(name=name)(play)


def _companies(sim: Simulator, count: int) -> list[dict[str, Any]]:
    return [{"domain": c["domain"]} for c in sim.companies(count)]


@pytest.mark.parametrize(("rows", "cap"), [(200, 100), (250, 120)])
def test_a_budget_fills_rows_up_to_the_cap(
    sim: Simulator, tmp_path: Path, rows: int, cap: int
) -> None:
    """sim.company.enrich costs 1 credit per hit, through a bulk operation of 100: each input
    reserves its own worst case (not the batch's), and the last batch shrinks to what fits."""
    fast(sim)
    db = open_store(f"sqlite:///{tmp_path}/p.db")
    result = _run(_company_play("budget-fill", _companies(sim, rows)), sim, db, max_credits=cap)
    assert result.status == "failed"
    assert isinstance(result.exception, pl.BudgetExceeded), result.error
    ledger = sim.ledger()
    # inputs sent: in bulk, and alone (a last request of one goes out as a single call)
    sent = ledger["items"]["sim.company.enrich.bulk"] + ledger["calls"].get("sim.company.enrich", 0)
    # the cap is filled (never passed): a miss costs nothing, so more inputs go out until
    # the last request that fits has gone (its misses may leave a credit or two unspent)
    assert cap - 2 <= ledger["credits"] <= cap and ledger["credits"] == result.stats.credits
    assert sent >= cap and result.stats.tool_calls_live == sent
    assert ledger["duplicate_charges"] == 0
    # every receipt claimed was sent and recorded: none is left claimed (in doubt) unsent
    receipts = db.receipt_stats()["sim.company.enrich"]
    assert (receipts["completed"], receipts["running"], receipts["unknown"]) == (sent, 0, 0)
    # and the rows it paid for are enriched in the run
    saved = list(db.iter_rows(result.run_id, "companies"))
    enriched = [r for r in saved if r.status == "completed" and r.values.get("firmo")]
    assert len(enriched) == ledger["credits"]  # a credit per company found


def test_a_budget_stop_says_how_many_rows_it_left(sim: Simulator, tmp_path: Path) -> None:
    fast(sim)
    db = open_store(f"sqlite:///{tmp_path}/left.db")
    result = _run(_company_play("budget-left", _companies(sim, 250)), sim, db, max_credits=120)
    assert isinstance(result.exception, pl.BudgetExceeded), result.error
    done = [r for r in db.iter_rows(result.run_id, "companies") if r.status == "completed"]
    left = 250 - len(done)
    assert 0 < left < 250 and f"left {left} rows unenriched" in str(result.error), result.error


# one failing provider


def test_alpha_down_fails_its_steps_and_the_waterfall_goes_on(sim: Simulator) -> None:
    """sim.email.alpha answers 500 to everything: its steps fail (after their retries), the
    work_email waterfall goes on to gamma for those rows, and the run completes."""
    people = world_people(sim, 80)
    fast(sim, {"sim.email.alpha": {"error_rate": 1, "status": 500}})
    url = "memory://"
    db = open_store(url)
    result = _run(enrichment_play("alpha-down", people), sim, db)
    assert result.status in ("completed", "completed_with_errors"), result.error
    assert result.error is None
    steps = {
        record.key: record.cells["work_email"]["waterfall"]["steps"]
        for record in db.iter_rows(result.run_id, "people")
    }
    reached_alpha = {key for key, s in steps.items() if s["alpha"]["status"] != "skipped"}
    assert reached_alpha, "beta should miss some people"
    for key in reached_alpha:
        assert steps[key]["alpha"]["status"] == "failed", steps[key]
        assert steps[key]["gamma"]["status"] != "skipped", steps[key]  # the waterfall went on
    assert sum(1 for s in steps.values() if s["gamma"]["status"] == "completed") > 0
    # a row fails only when no later step found the email, and then with alpha's failure
    failed = {e.row_key: e for e in result.output.errors}
    assert set(failed) <= reached_alpha
    for key, error in failed.items():
        assert steps[key]["gamma"]["status"] in ("not_found", "failed")
        assert error.tool == "sim.email.alpha"
    ledger = sim.ledger()
    assert "sim.email.alpha" not in ledger["charges"]
    assert ledger["duplicate_charges"] == 0
    assert result.stats.credits == ledger["credits"]


def test_a_tool_that_keeps_failing_is_paused_and_its_cells_fail_with_the_cause(
    sim: Simulator,
) -> None:
    people = world_people(sim, 120)
    fast(sim, {"sim.email.alpha": {"error_rate": 1, "status": 500}})
    play = people_play("alpha-breaker", people, [("found", tool_column("sim.email.alpha"), None)])
    result = _run(play, sim)
    assert result.status == "failed"  # every row failed
    errors = result.output.errors
    assert len(errors) == len(people)
    assert all("500" in e.message for e in errors), {e.code for e in errors}
    assert not [e for e in errors if e.code == "retry_budget"]
    # after a few calls fail, the breaker opens: the others are not sent 3 times each
    assert sim.ledger()["calls"]["sim.email.alpha"] <= 3 * len(people) // 2


# paid calls that may have reached the provider


@pytest.mark.own_store  # its run names memory://: the test's store is not used
def test_a_bulk_call_slower_than_the_timeout_is_paid_once(sim: Simulator) -> None:
    """The provider holds a bulk request past the gateway's timeout: the request is sent again
    with the same item keys (409 while the first is worked on), and once the first is done
    the repeat is answered from it. Each input is charged once and every row completes."""
    people = world_people(sim, 2)
    sim.faults(tools={"sim.email.beta": {"hold": True}})
    gateway = pl.Gateway(sim.url, token=sim.token, timeout=0.2)  # bulk of 2: 2.2 s
    play = people_play("slow-bulk", people, [("found", tool_column("sim.email.beta"), None)])
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(pl.run, play, store="memory://", tools=[gateway])
        eventually(
            lambda: sim.ledger()["conflicts"].get("sim.email.beta.bulk", 0) >= 1 or running.done(),
            "the timed-out bulk request sent again while the first is still held",
        )
        sim.faults(tools={"sim.email.beta": {"hold": None}})  # the provider finishes it
        result = running.result(timeout=60)
    assert result.status == "completed", result.error
    ledger = sim.ledger()
    assert ledger["conflicts"]["sim.email.beta.bulk"] >= 1
    assert ledger["items"]["sim.email.beta.bulk"] == len(people)  # worked once
    assert ledger["replayed_items"]["sim.email.beta.bulk"] == len(people)  # then replayed
    assert ledger["duplicate_charges"] == 0
    assert all(n == 1 for n in ledger["inputs"].get("sim.email.beta", {}).values())
    assert result.stats.credits == ledger["credits"]


@pytest.mark.own_store  # its run names memory://: the test's store is not used
@pytest.mark.parametrize("tool", ["sim.email.alpha", "sim.email.beta"])
def test_a_call_slower_than_the_timeout_fails_in_doubt_when_the_provider_ignores_keys(
    sim: Simulator, tool: str
) -> None:
    """The tools are safe to retry after a 5xx, but a timeout is no answer: the provider may
    still be working, and without idempotency keys a repeat would pay twice. Each call is
    sent once and its cell fails in doubt; the provider charges each input once."""
    people = world_people(sim, 3)
    bulk = f"{tool}.bulk" if tool == "sim.email.beta" else None
    blind = {"no_idempotency": True}
    sim.faults(tools={tool: {"hold": True, **blind}, **({bulk: blind} if bulk else {})})
    gateway = pl.Gateway(sim.url, token=sim.token, timeout=0.2)  # reads the changed metadata
    play = people_play("slow-blind", people, [("found", tool_column(tool), None)])
    result = pl.run(play, store="memory://", tools=[gateway])
    sent = sim.ledger()["calls"]
    sim.faults(tools={tool: {"hold": None}})  # the provider finishes what it holds
    assert result.status == "failed", result.error  # every row failed
    errors = result.output.errors
    assert len(errors) == len(people)
    assert {e.code for e in errors} == {"in_doubt"}
    assert all("may have reached the provider" in e.message for e in errors)
    # none repeated: one bulk request for the three rows, or one request a row
    assert sent == ({bulk: 1} if bulk else {tool: len(people)})
    assert sim.ledger()["duplicate_charges"] == 0


def test_calls_in_doubt_count_against_the_budget_in_the_attempt_and_after_it(
    sim: Simulator, tmp_path: Path
) -> None:
    """A provider that ignores idempotency keys holds every call past the timeout: each call
    fails in doubt and may have been charged. Their worst case stays counted, so the budget
    stops the run once they could have spent it, and a resume counts them too: a slow
    provider never lets a budget be spent twice over."""
    people = world_people(sim, 12)
    sim.faults(tools={"sim.email.alpha": {"hold": True, "no_idempotency": True}})
    gateway = pl.Gateway(sim.url, token=sim.token, timeout=0.2)  # reads the changed metadata
    play = people_play("slow-budget", people, [("found", tool_column("sim.email.alpha"), None)])
    url = f"sqlite:///{tmp_path}/b.db"
    first = pl.run(play, store=url, tools=[gateway], max_credits=3)  # 1 credit a hit
    assert first.status == "failed"
    assert "3 in doubt (may have been charged)" in (first.error or "")
    assert sim.ledger()["calls"]["sim.email.alpha"] == 3
    again = pl.run(play, store=url, tools=[gateway], run_id=first.run_id)
    assert again.status == "failed" and "3 in doubt" in (again.error or "")
    assert sim.ledger()["calls"]["sim.email.alpha"] == 3  # nothing more was sent
    sim.faults(tools={"sim.email.alpha": {"hold": None}})


def test_a_paid_submit_that_failed_in_doubt_is_not_paid_again_on_resume(
    sim: Simulator, tmp_path: Path
) -> None:
    """sim.phone.finder is not safe to retry and here honours no idempotency key: a 5xx after
    the paid submit leaves the call in doubt. A resume does not send it again (the user may,
    with retry_in_doubt); everything else completes."""
    people = world_people(sim, 12)
    fast(
        sim,
        {
            "sim.phone.finder": {"error_rate": 0.3, "status": 500, "no_idempotency": True},
            "sim.phone.finder.poll": {"error_rate": 0},
        },
    )
    url = f"sqlite:///{tmp_path}/p.db"
    play = people_play("phone-in-doubt", people, [("phone", tool_column("sim.phone.finder"), None)])
    first = _run(play, sim, url)
    assert first.status == "completed_with_errors", first.error
    in_doubt = {e.row_key for e in first.output.errors}
    assert in_doubt and all(e.code == "in_doubt" for e in first.output.errors)
    paid = sim.ledger()
    assert paid["calls"]["sim.phone.finder"] == len(people)

    fast(sim, {"sim.phone.finder": {"error_rate": None}})  # the provider is fine again
    again = _run(play, sim, url, run_id=first.run_id)
    assert again.status == "completed_with_errors", again.error
    assert {e.row_key for e in again.output.errors} == in_doubt
    for error in again.output.errors:
        assert error.code == "in_doubt" and "retry_in_doubt" in error.message
    ledger = sim.ledger()
    assert ledger["calls"]["sim.phone.finder"] == len(people)  # nothing sent again
    assert ledger["duplicate_charges"] == 0
    assert ledger["credits"] == paid["credits"]
    # Playline records what it knows it paid; the calls in doubt may have been charged too
    spent = sum(e.credits for e in open_store(url).read_ledger(first.run_id))
    assert spent <= ledger["credits"] <= spent + 5.0 * len(in_doubt)


# a gateway answering a status it has no meaning for


def test_an_answer_with_an_unknown_status_fails_its_cell_and_is_never_a_miss(
    tmp_path: Path,
) -> None:
    # A gateway with one paid tool that answers every call 200 {"status": "failed"}.
    tools = [{"id": "odd.lookup", "cost": {"credits": 1}}]
    answer = {"status": "failed", "result": {"error": "quota exhausted"}}
    with fake_gateway(tools, answer) as (url, posts):
        gateway = pl.Gateway(url)

        @pl.play(name="odd-status")
        async def odd(ctx: pl.Context, input: Any) -> pl.Dataset:
            return await (
                ctx.dataset("rows", [{"n": 1}], key="n")
                .with_column("r", lambda row, ctx: ctx.tool("odd.lookup", {"n": row["n"]}))
                .run()
            )

        store = f"sqlite:///{tmp_path}/p.db"
        first = pl.run(odd, store=store, tools=[gateway])
        (error,) = first.output.errors
        assert error.code == "bad_response" and "'failed'" in error.message
        assert "quota exhausted" in error.message
        (row,) = open_store(store).iter_rows(first.run_id, "rows")
        assert row.cells["r"]["status"] == "failed"
        again = pl.run(odd, store=store, tools=[gateway])  # not answered from a receipt
        assert again.stats.tool_calls_cached == 0 and len(posts) == 2


# a stop while async jobs wait for their gate


def test_a_stop_submits_no_async_job_that_was_waiting_for_its_gate(sim: Simulator) -> None:
    """The phone finder (async, charged at submit) lets 4 jobs out at once; the rest wait for
    a slot. A stop while they wait sends none of them: only what was out is paid."""
    people = world_people(sim, 12)
    sim.faults(tools={"sim.phone.finder": {"latency_ms": 300}})
    play = people_play("phones-stop", people, [("phone", tool_column("sim.phone.finder"), None)])

    async def run() -> pl.RunResult:
        stop = asyncio.Event()

        def on_event(event: pl.Event) -> None:
            if event.kind == "batch" and event.provider == "sim.phone.finder":
                stop.set()  # the first job is out

        gateway = pl.Gateway(sim.url, token=sim.token)
        return await pl.arun(play, tools=[gateway], listeners=[on_event], stop=stop)

    result = asyncio.run(run())
    assert result.status == "suspended", result.error  # stopped: a resume goes on
    submitted = sim.ledger()["calls"].get("sim.phone.finder", 0)
    assert 1 <= submitted <= 4  # the jobs out when the stop came; none of the 8 waiting
    assert result.stats.rows_pending >= len(people) - 4


@pytest.mark.own_store  # its run names memory://: the test's store is not used
def test_jobs_whose_polls_fail_stay_counted_against_the_budget(sim: Simulator) -> None:
    """The phone finder charges at submit. Jobs submitted and then never answered (every poll
    a 503) may have been charged: their worst case stays counted, so the budget lets no more
    submits out than it holds (the reservations given back let 40 jobs out for a budget of
    20: 55 credits charged)."""
    people = world_people(sim, 40, offset=5000)
    sim.faults(tools={"sim.phone.finder.poll": {"error_rate": 1.0, "status": 503}})
    play = people_play(
        "phones-poll-fail", people, [("phone", tool_column("sim.phone.finder"), None)]
    )

    gateway = pl.Gateway(sim.url, token=sim.token)
    result = pl.run(play, store="memory://", tools=[gateway], max_credits=20)

    cost = sim.ledger()["credits"]
    assert 0 < cost <= 20, result.stats.errors
    assert result.stats.tool_calls_live == 0
