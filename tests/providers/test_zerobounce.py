"""ZeroBounce's adapter against its double (see contract.py for what every provider keeps),
and ZeroBounce's own ways: a lone address to validate, many in one batch whose rows come in
an order of their own, the batch's key in its body, unknown and sandbox verdicts free,
temporary blocks instead of throttling (waited out 10 minutes, the batch's block, whichever
form was blocked), one sentence for a wrong key and for no credits."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from contract import KEY, Case, Contract

import playline as pl
import playline.tools._http as http_tools
from playline.providers import zerobounce
from playline.sim import Simulator
from playline.sim._doubles import Double
from playline.sim._doubles._base import Limit
from playline.sim._doubles.zerobounce import SANDBOX, verdict
from playline.sim._world import Person, world_for
from playline.store import open_store

from virtual_clock import VirtualClock

# the adapter's module (``playline.providers.zerobounce`` is the function giving its tools)
adapter_module = importlib.import_module("playline.providers.zerobounce")
adapter = adapter_module.PROVIDER
WORLD = world_for(7)
OURS = {"valid": "valid", "catch-all": "catch_all", "unknown": "unknown"}  # else invalid


def expected(email: str) -> str:
    """Our status for ``email``, from the double's verdict."""
    return OURS.get(verdict(WORLD, email)[0], "invalid")


def _validated(result: Any, person: Person) -> None:
    assert result["email"] == person.email
    assert result["status"] == expected(person.email)
    assert result["status"] in ("valid", "catch_all", "unknown")
    assert result["raw"]["address"] == person.email


class TestValidate(Contract):
    case = Case(
        tool="zerobounce.validate",
        ask=lambda p: {"email": p.email},
        check=_validated,
        found=lambda double, p: True,  # every address gets a verdict
        misses=False,
        used_up={"credits": 3},
        used_up_outcome="insufficient_credits",
        left=("credits", 42),
        rate_calls=601,  # 7 batches of up to 100: past the 5 a minute
    )


# -- ZeroBounce's own ways -----------------------------------------------------------------


@pytest.fixture
def double(sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[Double]:
    double = sim.double("zerobounce")
    double.reset()
    monkeypatch.setenv("ZEROBOUNCE_API_KEY", KEY)
    monkeypatch.setenv("PLAYLINE_ZEROBOUNCE_URL", f"{sim.url}/zerobounce")
    yield double
    double.reset()


@pytest.fixture
def base(sim: Simulator) -> str:
    return f"{sim.url}/zerobounce"


def _play(emails: Sequence[str]) -> Any:
    async def call(row: Mapping[str, Any], ctx: pl.Context) -> Any:
        return (await ctx.tool("zerobounce.validate", {"email": row["email"]})).data

    @pl.play(name="zerobounce-quirks")
    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        rows = [{"n": n, "email": email} for n, email in enumerate(emails)]
        return await ctx.dataset("emails", rows, key="n").with_column("out", call).run()

    return play


def validate(
    double: Double, emails: Sequence[str], store: str = "memory://", **options: Any
) -> pl.RunResult:
    """A run validating ``emails`` (one row each, keyed by position) in the double's time."""
    clock = options.setdefault("clock", pl.ManualClock())
    double.clock = clock.monotonic
    tools = zerobounce()
    if not options.pop("balanced", True):  # not told what is left: the answers tell
        for _, tool in tools.operations():
            tool.balance = None
    return pl.run(_play(emails), {}, store=store, tools=[tools], **options)


def cells(result: pl.RunResult) -> list[Any]:
    assert result.output is not None, result.error
    return [row["out"] for row in result.output]


def _person(status: str, sub_status: str = "") -> Person:
    """The first person of the world the double gives this verdict."""
    return next(p for p in WORLD.people if verdict(WORLD, p.email) == (status, sub_status))


def test_every_zerobounce_status_is_ours_with_its_flags_and_sandbox_addresses_are_free(
    double: Double,
) -> None:
    emails = [f"{local}@example.com" for local in SANDBOX]

    result = validate(double, emails)

    assert result.status == "completed", result.error
    assert double.calls["validatebatch"] == 1 and double.calls["validate"] == 0
    out = {c["email"].split("@")[0]: c for c in cells(result)}
    assert {local: c["status"] for local, c in out.items()} == {
        local: OURS.get(status, "invalid") for local, (status, _) in SANDBOX.items()
    }
    assert [k for k, c in out.items() if c["provider_status"] == "do_not_mail"] == [
        "disposable", "toxic", "donotmail", "global_suppression", "possible_trap",
        "role_based", "role_based_catch_all",
    ]  # fmt: skip
    assert [k for k, c in out.items() if c["disposable"]] == ["disposable"]
    assert [k for k, c in out.items() if c["role"]] == [
        "donotmail",
        "role_based",
        "role_based_catch_all",
    ]
    assert out["spamtrap"]["status"] == out["abuse"]["status"] == "invalid"
    assert out["unknown"]["disposable"] is None and out["unknown"]["role"] is None
    assert out["valid"]["disposable"] is False and out["valid"]["role"] is False
    assert out["free_email"]["free_email"] is True and out["valid"]["free_email"] is False
    assert out["leading_period_removed"]["sub_status"] == "leading_period_removed"
    # the sandbox costs nothing, at ZeroBounce and in the ledger
    assert double.charged == 0 and result.stats.credits == 0


def test_one_batch_answers_each_address_its_own_verdict_and_unknowns_are_free(
    double: Double, tmp_path: Path
) -> None:
    valid, catch_all = _person("valid"), _person("catch-all")
    greylisted = _person("unknown", "greylisted")
    emails = [
        valid.email,
        catch_all.email,
        greylisted.email,  # unknown: free
        f"nobody.here@{valid.domain}",  # no such mailbox
        f"info@{valid.domain}",  # a role address: do_not_mail
        "someone@mailinator.com",  # disposable: do_not_mail
        "someone@gmail.com",  # ZeroBounce cannot tell: unknown, free
        "not an address",  # bad syntax: invalid, charged
    ]
    store = f"sqlite:///{tmp_path}/s.db"

    result = validate(double, emails, store)

    assert result.status == "completed", result.error
    assert double.calls["validatebatch"] == 1 and double.calls["validate"] == 0
    out = cells(result)
    assert [(c["email"], c["status"]) for c in out] == [
        (valid.email, "valid"),
        (catch_all.email, "catch_all"),
        (greylisted.email, "unknown"),
        (f"nobody.here@{valid.domain}", "invalid"),
        (f"info@{valid.domain}", "invalid"),
        ("someone@mailinator.com", "invalid"),
        ("someone@gmail.com", "unknown"),
        ("not an address", "invalid"),
    ]
    assert [c["sub_status"] for c in out] == [
        None, None, "greylisted", "mailbox_not_found", "role_based", "disposable",
        "antispam_system", "failed_syntax_check",
    ]  # fmt: skip
    assert out[4]["role"] is True and out[5]["disposable"] is True
    costs = {e.row_key: e.credits for e in open_store(store).read_ledger(result.run_id)}
    assert costs == {"0": 1.0, "1": 1.0, "2": 0.0, "3": 1.0, "4": 1.0, "5": 1.0, "6": 0.0, "7": 1.0}
    assert double.charged == result.stats.credits == 6 and double.duplicates == 0


def test_the_key_goes_in_validate_s_query_and_in_the_batch_s_body_only(
    double: Double, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[tuple[str, dict[str, Any], Any]] = []
    real = http_tools.request_or_raise

    async def recording(client: Any, tool: str, method: str, url: str, **kw: Any) -> Any:
        query = dict(httpx.URL(url).params) | dict(kw.get("params") or {})  # all of it
        sent.append((method, query, kw.get("json")))
        return await real(client, tool, method, url, **kw)

    monkeypatch.setattr(http_tools, "request_or_raise", recording)
    person, other = _person("valid"), WORLD.people[1]

    assert validate(double, [person.email]).status == "completed"  # a lone address
    assert validate(double, [person.email, other.email]).status == "completed"  # a batch

    (get, single), (post, batch) = [(m, (p, j)) for m, p, j in sent]
    assert (get, post) == ("GET", "POST")
    assert single == ({"api_key": KEY, "email": person.email, "ip_address": ""}, None)
    params, body = batch
    assert params == {}, "never the key in the batch's URL"
    assert body == {
        "api_key": KEY,
        "email_batch": [
            {"email_address": person.email, "ip_address": None},
            {"email_address": other.email, "ip_address": None},
        ],
    }


def test_the_double_checks_the_documented_request_shapes(double: Double, base: str) -> None:
    asked = {"api_key": KEY, "email": "valid@example.com"}

    missing = httpx.get(f"{base}/v2/validate", params=asked)
    blank_ip = httpx.get(f"{base}/v2/validate", params={**asked, "ip_address": ""})
    no_key = httpx.post(f"{base}/v2/validatebatch", json={"email_batch": [{"email_address": "a"}]})
    no_batch = httpx.post(f"{base}/v2/validatebatch", json={"api_key": KEY})

    assert (missing.status_code, missing.json()) == (
        400,
        {"error": "Missing parameter: ip_address."},
    )
    assert blank_ip.status_code == 200 and blank_ip.json()["status"] == "valid"
    assert (no_key.status_code, no_key.json()) == (400, {"Message": "Missing parameter: api_key."})
    assert no_batch.json() == {"Message": "Missing parameter: email_batch."}


def test_a_batch_s_rows_are_matched_by_address_and_a_row_not_validated_fails_alone(
    double: Double, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ZeroBounce's rows come in an order of their own (and any case), and an address it
    could not take is in ``errors`` (or nowhere): each input gets its own row; one without a
    row fails its own cell (``missing_item``, not charged) and the others stand. A leading
    dot ZeroBounce dropped from the address it echoes finds no row either."""
    real = http_tools.request_or_raise

    async def answering(client: Any, tool: str, method: str, url: str, **kw: Any) -> Any:
        if method != "POST":
            return await real(client, tool, method, url, **kw)
        return httpx.Response(
            200,
            json={
                "email_batch": [
                    {"address": "E@X.com ", "status": "valid", "sub_status": ""},
                    {
                        "address": "c@x.com",
                        "status": "valid",
                        "sub_status": "leading_period_removed",
                    },
                    {"address": "a@x.com", "status": "invalid", "sub_status": "mailbox_not_found"},
                    {"address": "f@x.com", "status": "unknown", "sub_status": "greylisted"},
                ],
                "errors": [
                    {"error": "Too many requests for this domain", "email_address": "b@x.com"}
                ],
            },
            request=httpx.Request(method, url),
        )

    monkeypatch.setattr(http_tools, "request_or_raise", answering)
    emails = ["b@x.com", "A@X.com", ".c@x.com", "d@x.com", "e@x.com", "f@x.com"]

    result = validate(double, emails)

    assert result.status == "completed_with_errors", result.error
    out = cells(result)
    assert [c and (c["email"], c["status"]) for c in out] == [
        None,
        ("a@x.com", "invalid"),
        None,
        None,
        ("E@X.com", "valid"),
        ("f@x.com", "unknown"),
    ]
    failed = {e.row_key: e.code for e in (result.output.errors if result.output else [])}
    assert failed == {"0": "missing_item", "2": "missing_item", "3": "missing_item"}
    assert result.stats.credits == 2  # a and e; f is unknown: free


def test_the_double_blocks_past_its_limits_for_the_documented_time(
    double: Double, base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = pl.ManualClock()
    double.clock = clock.monotonic
    batch = {"api_key": KEY, "email_batch": [{"email_address": "valid@example.com"}]}

    answers = [httpx.post(f"{base}/v2/validatebatch", json=batch).status_code for _ in range(6)]
    clock.advance(599)
    still = httpx.post(f"{base}/v2/validatebatch", json=batch)
    clock.advance(1)
    again = httpx.post(f"{base}/v2/validatebatch", json=batch)

    assert answers == [200] * 5 + [429]
    assert (still.status_code, still.text) == (429, "Too Many Requests")
    assert again.status_code == 200

    monkeypatch.setattr(double, "limits", (Limit(2, 10.0, "validate"),))
    asked = {"api_key": KEY, "email": "valid@example.com", "ip_address": ""}
    singles = [httpx.get(f"{base}/v2/validate", params=asked).status_code for _ in range(3)]
    clock.advance(59)
    blocked = httpx.get(f"{base}/v2/validate", params=asked).status_code
    clock.advance(1)
    freed = httpx.get(f"{base}/v2/validate", params=asked).status_code

    assert (singles, blocked, freed) == ([200, 200, 429], 429, 200)


def test_a_blocked_batch_holds_the_account_ten_minutes_then_goes_on(
    double: Double, base: str
) -> None:
    """Another program spent the batch's 5 a minute: the run's batch is blocked, waits out
    the documented 10 minutes (nothing sent meanwhile), and is answered once."""
    clock = VirtualClock()
    double.clock = clock.monotonic
    batch = {"api_key": KEY, "email_batch": [{"email_address": "valid@example.com"}]}
    for _ in range(5):
        assert httpx.post(f"{base}/v2/validatebatch", json=batch).status_code == 200
    emails = [p.email for p in WORLD.people[10:13]]

    result = validate(double, emails, clock=clock)

    assert result.status == "completed", result.error
    assert [c["email"] for c in cells(result)] == emails
    assert double.throttled == 1 and double.calls["validatebatch"] == 5 + 2
    assert 600 <= clock.elapsed < 700


def test_a_blocked_validate_holds_the_account_ten_minutes_too(
    double: Double, base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """validate's block is 1 minute, but a 429 does not say which endpoint it answers: the
    run waits the batch's 10 minutes (never sending into a block), then goes on."""
    clock = VirtualClock()
    double.clock = clock.monotonic
    monkeypatch.setattr(double, "limits", (Limit(1, 10.0, "validate"),))
    asked = {"api_key": KEY, "email": "valid@example.com", "ip_address": ""}
    assert httpx.get(f"{base}/v2/validate", params=asked).status_code == 200
    person = _person("valid")

    result = validate(double, [person.email], clock=clock)

    assert result.status == "completed", result.error
    assert cells(result)[0]["status"] == "valid"
    assert double.throttled == 1 and double.calls["validate"] == 1 + 2
    assert 600 <= clock.elapsed < 700


def test_a_wrong_key_and_no_credits_are_one_sentence_told_apart_by_the_balance(
    double: Double,
) -> None:
    """ZeroBounce answers a wrong key and an empty account alike (200, one sentence): the
    cell fails as out of credits with those words, the account's other calls are not sent,
    and ``remaining()`` (getcredits) tells which: 0 credits, or a key it does not know."""
    double.credits = 0
    person = _person("valid")

    lone = validate(double, [person.email], balanced=False)

    (error,) = lone.output.errors if lone.output else []
    assert "Invalid API key or your account ran out of credits" in error.message
    assert double.calls["validate"] == 1
    assert zerobounce().remaining() == 0
    with pytest.raises(PermissionError, match="ZEROBOUNCE_API_KEY"):
        zerobounce(api_key="k-wrong-key-fedcba9876543210").remaining()


def test_the_balance_reads_credits_as_a_number_or_text() -> None:
    read = adapter.balance.read if adapter.balance else None
    assert read is not None
    assert read({"Credits": 2375323}) == 2375323
    assert read({"Credits": "12345"}) == 12345
    for refused in ({"Credits": -1}, {"Credits": "-1"}, {"error": "Invalid API key"}):
        with pytest.raises(PermissionError, match="ZEROBOUNCE_API_KEY"):
            read(refused)


def test_batches_go_to_the_documented_bulk_host_beside_zerobounce_s_api_hosts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PLAYLINE_ZEROBOUNCE_URL", raising=False)
    monkeypatch.delenv("PLAYLINE_ZEROBOUNCE_BULK_URL", raising=False)

    def urls(**given: Any) -> tuple[str, str | None]:
        tool = zerobounce(api_key="k-any-key-0123456789", **given)["validate"]
        return tool.url, tool.bulk.url if tool.bulk else None

    assert urls() == (
        "https://api.zerobounce.net/v2/validate",
        "https://bulkapi.zerobounce.net/v2/validatebatch",
    )
    assert urls(base_url="https://api-eu.zerobounce.net")[1] == (
        "https://bulkapi.zerobounce.net/v2/validatebatch"
    )
    assert urls(base_url="http://proxy.local/zb")[1] == "http://proxy.local/zb/v2/validatebatch"
    monkeypatch.setenv("PLAYLINE_ZEROBOUNCE_BULK_URL", "https://bulkapi-eu.example/")
    assert urls()[1] == "https://bulkapi-eu.example/v2/validatebatch"


def test_the_adapter_is_a_plain_declaration() -> None:
    """No subclass: the key is ``pl.Auth.body`` (validate's query, the batch's body), the
    batch's rows are matched by address, a 429 waits the batch's 10 minutes."""
    tool = zerobounce(api_key="k-any-key-0123456789")["validate"]

    assert type(tool) is pl.HttpTool
    assert tool.describe()["auth"] == {"kind": "body", "secret": "ZEROBOUNCE_API_KEY"}
    assert tool.bulk is not None and dict(tool.bulk.match or {}) == {"email": "address"}
    (blocked,) = [o for o in tool.outcomes if o.outcome == "blocked"]
    assert (blocked.codes, blocked.wait) == (frozenset({429}), 600.0)
