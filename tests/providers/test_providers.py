"""What every provider shares: keys, base URLs and accounts; runs that find the providers
whose keys are set; the shipped waterfalls and plays with their catch-all policy;
`playline providers` and `playline sim --providers`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from contract import KEY, people

import playline as pl
from playline.providers import PROVIDERS, named
from playline.sim import Simulator, spawn
from playline.sim._doubles import Double
from playline.sim._world import Person
from playline.store import open_store


@pytest.fixture
def hunter(sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[Double]:
    for provider in PROVIDERS.values():  # only Hunter's key is set
        monkeypatch.delenv(provider.key, raising=False)
        monkeypatch.delenv(f"PLAYLINE_SECRET_{provider.key}", raising=False)
    monkeypatch.setenv("HUNTER_API_KEY", KEY)
    monkeypatch.setenv("PLAYLINE_HUNTER_URL", f"{sim.url}/hunter")
    double = sim.double("hunter")
    double.reset()
    yield double
    double.reset()


def _ask(p: Person) -> dict[str, str]:
    return {"first_name": p.first_name, "last_name": p.last_name, "domain": p.domain}


@pl.play(name="finder")
async def finder(ctx: pl.Context, input: Any) -> pl.Dataset:
    async def email(row: Mapping[str, Any], ctx: pl.Context) -> Any:
        return (await ctx.tool("hunter.email_finder", dict(row["ask"]))).get("email")

    return await ctx.dataset("people", input["people"], key="n").with_column("email", email).run()


def _rows(asked: list[Person]) -> dict[str, Any]:
    return {"people": [{"n": p.ordinal, "ask": _ask(p)} for p in asked]}


def test_a_run_without_tools_has_the_providers_whose_key_is_set(
    hunter: Double, tmp_path: Path
) -> None:
    asked = [p for p in people(20) if hunter.knows(p)][:3]

    result = pl.run(finder, _rows(asked), store=f"sqlite:///{tmp_path}/s.db",
                    clock=pl.ManualClock())  # fmt: skip

    assert result.status == "completed", result.error
    assert [row["email"] for row in result.output] == [p.email for p in asked]
    assert {spec.id for t in pl.providers.configured() for spec in t.specs()} == {
        "hunter.email_finder",
        "hunter.email_verifier",
    }


def test_a_key_given_in_code_is_an_account_of_its_own_and_never_stored(
    hunter: Double, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two keys are two accounts: receipts are not shared between them; the key in the
    environment can rotate and keep its receipts."""
    store = f"sqlite:///{tmp_path}/s.db"
    asked = [p for p in people(20) if hunter.knows(p)][:2]
    monkeypatch.setenv("HUNTER_API_KEY", "k-not-this-one-0123456789abcdef")

    mine = pl.providers.hunter(api_key=KEY)
    first = pl.run(finder, _rows(asked), store=store, tools=[mine], clock=pl.ManualClock())
    again = pl.run(finder, _rows(asked), store=store, tools=[pl.providers.hunter(api_key=KEY)],
                   clock=pl.ManualClock())  # fmt: skip

    assert first.stats.credits == 2 and again.stats.credits == 0  # the same account
    monkeypatch.setenv("HUNTER_API_KEY", KEY)
    other = pl.run(finder, _rows(asked), store=store, tools=[pl.providers.hunter()],
                   clock=pl.ManualClock())  # fmt: skip
    assert other.stats.credits == 2  # the environment's account: its own receipts
    # one key under two names: Hunter does not charge a repeat within the month
    assert hunter.duplicates == 0 and hunter.charged == 2
    assert KEY.encode() not in Path(f"{tmp_path}/s.db").read_bytes()


def test_a_provider_s_base_url_comes_from_the_call_else_the_environment_else_its_docs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PLAYLINE_HUNTER_URL", raising=False)
    assert pl.providers.hunter().base_url == "https://api.hunter.io"
    monkeypatch.setenv("PLAYLINE_HUNTER_URL", "http://127.0.0.1:9/hunter/")
    assert pl.providers.hunter()["email_finder"].url == "http://127.0.0.1:9/hunter/v2/email-finder"
    assert pl.providers.hunter(base_url="https://proxy.example").base_url == "https://proxy.example"
    monkeypatch.setenv("PLAYLINE_HUNTER_URL", "api.hunter.io")
    with pytest.raises(pl.PlayDefinitionError, match=r"PLAYLINE_HUNTER_URL='api\.hunter\.io'"):
        pl.providers.hunter()
    monkeypatch.delenv("PLAYLINE_HUNTER_URL")
    with pytest.raises(pl.PlayDefinitionError, match=r"the key as a string or a pl\.Secret"):
        pl.providers.hunter(api_key=" ")
    with pytest.raises(pl.PlayDefinitionError, match="adapters for hunter, apollo"):
        named("huntr")


def _verified_waterfall(hunter: Double, catch_all: str, asked: list[Person]) -> pl.RunResult:
    spec = pl.waterfalls.work_email(["hunter"], verify="hunter", catch_all=catch_all)  # type: ignore[arg-type]

    @pl.play(name=f"work-email-{catch_all}")
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        return await (
            ctx.dataset("people", [_ask(p) for p in asked], key=["first_name", "last_name"])
            .with_column("email", lambda row, ctx: ctx.waterfall(spec, dict(row)))
            .run()
        )

    return pl.run(play, {}, store="memory://", clock=pl.ManualClock())


@pytest.mark.parametrize(
    ("policy", "kept", "verified"),
    [("accept", True, 0), ("reject", False, 0), ("verify", False, 1)],
)
def test_a_catch_all_address_is_kept_dropped_or_verified_as_the_policy_says(
    hunter: Double, policy: str, kept: bool, verified: int
) -> None:
    """Hunter finds a catch-all domain's address; the verifier says accept_all again, so
    "verify" keeps it only when the verifier would say valid (it does not here)."""
    catch_all = [p for p in people(400) if hunter.knows(p) and hunter.catch_all(p.email)][:1]
    valid = [p for p in people(40) if hunter.knows(p) and not hunter.catch_all(p.email)][:1]

    result = _verified_waterfall(hunter, policy, catch_all + valid)

    emails = [row["email"] for row in result.output]
    assert emails == [catch_all[0].email if kept else None, valid[0].email]
    assert hunter.calls["email-verifier"] == verified  # a valid address is not verified


def test_a_waterfall_naming_a_verifier_without_its_key_fails_before_any_provider_is_paid(
    hunter: Double,
) -> None:
    """Hunter finds a catch-all address, which the policy sends to NeverBounce, whose key is
    not set: the run stops before Hunter is asked, and says which key to export."""
    asked = [p for p in people(400) if hunter.knows(p) and hunter.catch_all(p.email)][:1]
    spec = pl.waterfalls.work_email(["hunter"], verify="neverbounce", catch_all="verify")

    @pl.play(name="work-email-unverifiable")
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        return await (
            ctx.dataset("people", [_ask(p) for p in asked], key=["first_name", "last_name"])
            .with_column("email", lambda row, ctx: ctx.waterfall(spec, dict(row)))
            .run()
        )

    result = pl.run(play, {}, store="memory://", clock=pl.ManualClock())

    assert result.status == "failed"
    assert "step 'hunter'" in (result.error or "")
    assert "'neverbounce.verify'" in (result.error or "")
    assert "export NEVERBOUNCE_API_KEY" in (result.error or "")
    assert sum(hunter.calls.values()) == 0 and hunter.charged == 0


def test_rows_without_the_fields_a_finder_reads_are_skipped_and_counted_not_sent(
    hunter: Double,
) -> None:
    """Columns named otherwise ("First", "Company Domain") give Hunter no input: nothing is
    sent, and the run's summary says how many rows the waterfall could not read."""
    from playline.cli._app import stats_line

    spec = pl.waterfalls.work_email(["hunter"], catch_all="accept")

    @pl.play(name="work-email-other-names")
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        rows = [{"First": "Ann", "Last": "Lee", "Company Domain": "acme.com"}] * 2
        return await (
            ctx.dataset("people", rows, key=["First", "Last"])
            .with_column("email", lambda row, ctx: ctx.waterfall(spec, dict(row)))
            .run()
        )

    result = pl.run(play, {}, store="memory://", clock=pl.ManualClock())

    assert result.status == "completed", result.error
    assert sum(hunter.calls.values()) == 0
    assert result.stats.waterfalls["work_email"]["no_input"] == 1  # one key: one row
    assert "1 row had none of the fields waterfall 'work_email' reads" in stats_line(result.stats)
    assert "reads first_name, last_name and domain" in spec.description


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No provider's key in the environment (either spelling); the test sets its own."""
    for provider in PROVIDERS.values():
        monkeypatch.delenv(provider.key, raising=False)
        monkeypatch.delenv(f"PLAYLINE_SECRET_{provider.key}", raising=False)
    return monkeypatch


def test_the_waterfalls_refuse_what_cannot_work_and_order_by_documented_price(
    no_keys: pytest.MonkeyPatch,
) -> None:
    for provider in ("hunter", "leadmagic", "pdl", "dropcontact", "prospeo"):
        no_keys.setenv(PROVIDERS[provider].key, "k")
    with pytest.raises(pl.PlayDefinitionError, match="'fastmail' cannot do it"):
        pl.waterfalls.work_email(["hunter", "fastmail"])
    assert pl.waterfalls.work_email(["Hunter", " prospeo"])  # names as pl.providers takes them
    with pytest.raises(pl.PlayDefinitionError, match="needs a verifier"):
        pl.waterfalls.work_email(verify=None, catch_all="verify")
    with pytest.raises(pl.PlayDefinitionError, match="'accept'"):
        pl.waterfalls.linkedin_to_email(catch_all="maybe")  # type: ignore[arg-type]
    with pytest.raises(pl.PlayDefinitionError, match="'auto' \\(the first of them"):
        pl.waterfalls.work_email(verify="gmail")
    spec = pl.waterfalls.work_email(verify=None, catch_all="accept")
    assert spec.order == "cheapest" and len(spec.steps) == 5


def test_without_a_list_the_waterfalls_take_the_providers_whose_keys_are_set(
    no_keys: pytest.MonkeyPatch,
) -> None:
    """A run has the tools of the providers whose keys are set: a default waterfall takes
    those (a step without its tool would fail every row after the others were paid), and
    its verifier is the first of them that verifies; with none, it is refused up front,
    naming the variables to export."""
    with pytest.raises(pl.PlayDefinitionError) as none:
        pl.waterfalls.work_email()
    assert "work_email has no provider: none of HUNTER_API_KEY, LEADMAGIC_API_KEY" in str(
        none.value
    )
    with pytest.raises(pl.PlayDefinitionError, match="person_to_phone has no provider"):
        pl.waterfalls.person_to_phone()

    no_keys.setenv("PLAYLINE_SECRET_PROSPEO_API_KEY", "k")  # the other spelling counts too
    with pytest.raises(pl.PlayDefinitionError) as unverified:
        pl.waterfalls.work_email()  # catch_all="verify", and no verifier's key
    assert "none of ZEROBOUNCE_API_KEY, NEVERBOUNCE_API_KEY, HUNTER_API_KEY" in str(
        unverified.value
    )
    accepted = pl.waterfalls.work_email(catch_all="accept")
    assert accepted.description.startswith("Work email: prospeo; catch-all addresses kept; ")

    no_keys.setenv("HUNTER_API_KEY", "k")
    spec = pl.waterfalls.work_email()
    assert sorted(step.id for step in spec.steps) == ["hunter", "prospeo"]
    assert _verifier_of(spec) == "hunter"
    no_keys.setenv("ZEROBOUNCE_API_KEY", "k")
    assert _verifier_of(pl.waterfalls.work_email()) == "zerobounce"
    assert _verifier_of(pl.waterfalls.linkedin_to_email()) == "zerobounce"
    named_ones = pl.waterfalls.work_email(["apollo"], verify="neverbounce")  # as given
    assert [step.id for step in named_ones.steps] == ["apollo"]


def _verifier_of(spec: pl.Waterfall) -> str:
    """The verifier a waterfall's description names (what a run's description shows)."""
    return spec.description.rsplit("verified by ", 1)[1].split(";")[0]


def _cli(*args: str, env: Mapping[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "playline", *args],
        cwd=cwd,
        env={**{k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_shipped_play_runs_from_the_command_line_against_the_doubles(tmp_path: Path) -> None:
    """`playline sim --providers` in a process of its own, as a user runs it."""
    with spawn(seed=7, latency_ms=0, token="dev", providers=True) as sim:
        env = {"HUNTER_API_KEY": "dev", "PLAYLINE_HUNTER_URL": f"{sim.url}/hunter",
               "PLAYLINE_STORE": f"sqlite:///{tmp_path}/s.db"}  # fmt: skip
        asked = people(6)
        (tmp_path / "leads.csv").write_text(
            "first_name,last_name,domain\n"
            + "".join(f"{p.first_name},{p.last_name},{p.domain}\n" for p in asked)
        )

        listed = _cli("providers", "list", "--json", env=env, cwd=tmp_path)
        checked = _cli("providers", "check", "hunter", env=env, cwd=tmp_path)
        # as the README gives it: one key, the providers and the verifier those it has
        ran = _cli("run", "playline.plays:work_email", "-i", "file=leads.csv",
                   "--out", "enriched.csv", env=env, cwd=tmp_path)  # fmt: skip
        counted = sim.double("hunter")
        sim.double("hunter", quota=0)  # the month used up: the next leads fail, naming it
        (tmp_path / "more.csv").write_text(
            "first_name,last_name,domain\n"
            + "".join(f"{p.first_name},{p.last_name},{p.domain}\n" for p in people(6, 100))
        )
        used_up = _cli("run", "playline.plays:work_email", "-i", "file=more.csv",
                       "-i", 'providers:=["hunter"]', "-i", "verify=hunter", env=env,
                       cwd=tmp_path)  # fmt: skip

    docs = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [d["provider"] for d in docs] == list(PROVIDERS)
    assert docs[0]["key_set"] and not docs[1]["key_set"]
    assert checked.returncode == 0 and "hunter: ok, the key works; 10000 searches left" in (
        checked.stdout
    ), checked.stdout + checked.stderr
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert used_up.returncode == 1, used_up.stdout + used_up.stderr
    assert "All 6 rows failed" in used_up.stdout + used_up.stderr
    assert "account_used_up from hunter.email_finder" in used_up.stdout + used_up.stderr
    written = (tmp_path / "enriched.csv").read_text()
    assert written.count("@") >= 1 and counted["duplicates"] == 0
    store = open_store(f"sqlite:///{tmp_path}/s.db")
    credits = sum(e.credits for run in store.list_runs() for e in store.read_ledger(run.run_id))
    assert credits == pytest.approx(counted["charged"]) and credits > 0


def test_providers_check_fails_naming_the_refused_key(tmp_path: Path, sim: Simulator) -> None:
    env = {"HUNTER_API_KEY": "k-wrong-key-fedcba9876543210",
           "PLAYLINE_HUNTER_URL": f"{sim.url}/hunter"}  # fmt: skip
    checked = _cli("providers", "check", "hunter", env=env, cwd=tmp_path)
    assert checked.returncode == 1
    assert "hunter: failed, Hunter refused the key (401): check HUNTER_API_KEY." in checked.stdout
    assert "k-wrong-key" not in checked.stdout + checked.stderr
    missing = _cli("providers", "check", "apollo", env={"APOLLO_API_KEY": ""}, cwd=tmp_path)
    assert missing.returncode == 2 and "APOLLO_API_KEY is not set" in missing.stderr
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        gone = f"http://127.0.0.1:{free.getsockname()[1]}/hunter"
    env = {"HUNTER_API_KEY": "k-some-key-fedcba9876543210", "PLAYLINE_HUNTER_URL": gone}
    nowhere = _cli("providers", "check", "hunter", env=env, cwd=tmp_path)
    assert nowhere.returncode == 1
    assert f"hunter: failed, no answer from {gone}" in nowhere.stdout
    assert "PLAYLINE_HUNTER_URL" in nowhere.stdout


def test_a_plan_says_when_the_account_has_too_little_left(hunter: Double) -> None:
    hunter.quota = 2
    asked = people(6)

    estimate = pl.plan(finder, _rows(asked), store="memory://")

    assert estimate.calls == 6
    assert (
        "hunter.email_finder: the account has 2 searches left; this plan needs 3 expected, "
        "6 at most (the run would stop when they are spent: add credits first)."
    ) in estimate.notes
    assert sum(hunter.calls.values()) == 1  # the account endpoint; nothing bought


def test_a_plan_whose_key_the_provider_refuses_lists_it_refused(
    hunter: Double, monkeypatch: pytest.MonkeyPatch
) -> None:
    """planning.md: a key the provider refuses is a refusal (exit 1), not a note: the run
    would fail every row with 401."""
    from playline._access import refusals

    monkeypatch.setenv(named("hunter").key, "k-wrong-key-fedcba9876543210")
    estimate = pl.plan(finder, _rows(people(3)), store="memory://")

    (refused,) = refusals(estimate, None)
    assert refused.why == "Hunter refused the key (401): check HUNTER_API_KEY."
    assert refused.tools == ("hunter.email_finder",)
    assert not any("balance could not be read" in note for note in estimate.notes)


def _waterfall_run(
    sim: Simulator, monkeypatch: pytest.MonkeyPatch, provider: str, spec: pl.Waterfall,
    rows: list[dict[str, Any]],
) -> tuple[pl.RunResult, Double]:  # fmt: skip
    named_provider = named(provider)
    monkeypatch.setenv(named_provider.key, KEY)
    monkeypatch.setenv(named_provider.url_variable, f"{sim.url}/{provider}")
    double = sim.double(provider)
    double.reset()

    @pl.play(name=f"waterfall-{spec.id}-{provider}")
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        return await (
            ctx.dataset("people", rows, key="n")
            .with_column("found", lambda row, ctx: ctx.waterfall(spec, dict(row)))
            .run()
        )

    clock = pl.ManualClock()
    double.clock = clock.monotonic
    result = pl.run(play, {}, store="memory://", tools=[named_provider.tools()], clock=clock)
    return result, double


def _linkedin(p: Person) -> str:
    from playline.sim._doubles import _base

    return _base.linkedin_of(p)


@pytest.mark.parametrize("provider", sorted(pl.waterfalls.providers.EMAIL_FINDERS))
def test_each_email_finder_is_a_step_of_work_email(
    sim: Simulator, monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    """The waterfall asks each provider in its own words and reads its answer: a person it
    knows has an email, the ledger is what the provider charged."""
    rows = [{"n": p.ordinal, **_ask(p), "title": p.title} for p in people(12, 6000)]
    spec = pl.waterfalls.work_email([provider], verify=None, catch_all="accept")

    result, double = _waterfall_run(sim, monkeypatch, provider, spec, rows)

    assert result.status == "completed", result.output and result.output.errors
    found = {row["n"]: row["found"] for row in result.output}
    assert any(found.values()), found
    truth = {p.ordinal: p.email for p in people(12, 6000)}
    assert all(email == truth[n] for n, email in found.items() if email)
    assert result.stats.credits == pytest.approx(double.charged)


@pytest.mark.parametrize("provider", sorted(pl.waterfalls.providers.LINKEDIN_FINDERS))
def test_each_linkedin_finder_is_a_step_of_linkedin_to_email(
    sim: Simulator, monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    rows = [{"n": p.ordinal, "linkedin_url": _linkedin(p)} for p in people(12, 6100)]
    spec = pl.waterfalls.linkedin_to_email([provider], verify=None, catch_all="accept")

    result, double = _waterfall_run(sim, monkeypatch, provider, spec, rows)

    assert result.status == "completed", result.output and result.output.errors
    truth = {p.ordinal: p.email for p in people(12, 6100)}
    found = {row["n"]: row["found"] for row in result.output}
    assert any(found.values()) and all(e == truth[n] for n, e in found.items() if e), found
    assert result.stats.credits == pytest.approx(double.charged)


@pytest.mark.parametrize("provider", sorted(pl.waterfalls.providers.PHONE_FINDERS))
def test_each_phone_finder_is_a_step_of_person_to_phone(
    sim: Simulator, monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    rows = [{"n": p.ordinal, "linkedin_url": _linkedin(p), "email": p.email}
            for p in people(12, 6200)]  # fmt: skip
    spec = pl.waterfalls.person_to_phone([provider])

    result, double = _waterfall_run(sim, monkeypatch, provider, spec, rows)

    assert result.status == "completed", result.output and result.output.errors
    truth = {p.ordinal: p.phone for p in people(12, 6200)}
    found = {row["n"]: row["found"] for row in result.output}
    assert any(found.values()) and all(ph == truth[n] for n, ph in found.items() if ph), found
    assert result.stats.credits == pytest.approx(double.charged)


def test_playline_sim_providers_names_each_double_s_url() -> None:
    sim = subprocess.Popen(
        [sys.executable, "-m", "playline", "sim", "--providers", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert sim.stdout is not None
        lines = [sim.stdout.readline() for _ in range(1 + len(PROVIDERS))]
    finally:
        sim.terminate()
        sim.communicate(timeout=30)
    url = lines[0].split()[3]
    assert lines[0].startswith("playline sim on http://127.0.0.1:")
    assert [line.split() for line in lines[1:]] == [
        [f"{name}:", f"{url}/{name}"] for name in PROVIDERS
    ]
