"""Rate limits, faults, the ledger, reset and async jobs, over real loopback HTTP."""

from __future__ import annotations

from itertools import count
from typing import Any

import httpx
import pytest

from playline.sim import Simulator
from playline.sim._catalog import build_catalog
from playline.sim._faults import NO_FAULT, injected_failure
from playline.sim._jobs import Jobs
from playline.sim._providers import Answer

from simhelp import NOBODY, execute, people, person_input, unlimited

SEED = 7  # the session simulator's (conftest)


def _faults(client: httpx.Client, doc: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/__faults", json=doc)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_429_with_retry_after_when_the_bucket_is_empty(client: httpx.Client) -> None:
    # A refill of one token per 100 s: the second request cannot get one, however slow CI is.
    _faults(client, {"tools": {"sim.email.alpha": {"rate_per_second": 0.01, "burst": 1}}})
    assert execute(client, "sim.email.alpha", NOBODY).status_code == 200
    limited = execute(client, "sim.email.alpha", NOBODY)
    assert limited.status_code == 429
    retry_after = limited.headers["Retry-After"]
    assert retry_after.isdigit() and int(retry_after) >= 1
    body = limited.json()
    assert body["code"] == "rate_limited"
    assert body["request_id"] == limited.headers["x-request-id"]
    assert body["retry_after_ms"] >= 1
    ledger = client.get("/__ledger").json()
    assert ledger["calls"] == {"sim.email.alpha": 1}
    assert ledger["rejected"] == {"sim.email.alpha": 1}
    # Other tools have their own buckets.
    assert execute(client, "sim.email.beta", NOBODY).status_code == 200


def test_default_burst_then_429(client: httpx.Client) -> None:
    codes = [execute(client, "sim.phone.finder", NOBODY).status_code for _ in range(12)]
    assert codes[:5] == [200] * 5  # burst 5
    assert 429 in codes


def test_ledger_counts_and_duplicate_charges(client: httpx.Client) -> None:
    unlimited(client, "sim.email.alpha", "sim.email.verify")
    hit = next(
        p
        for p in people(client)
        if execute(client, "sim.email.alpha", person_input(p)).json()["status"] == "completed"
    )
    client.post("/__reset")
    unlimited(client, "sim.email.alpha", "sim.email.verify")
    messy = {**person_input(hit), "first_name": hit["first_name"].upper() + "  "}
    for payload in (person_input(hit), messy, NOBODY, NOBODY):
        assert execute(client, "sim.email.alpha", payload).status_code == 200
    for _ in range(3):
        execute(client, "sim.email.verify", {"email": hit["email"]})
    ledger = client.get("/__ledger").json()
    assert ledger["calls"] == {"sim.email.alpha": 4, "sim.email.verify": 3}
    assert set(ledger["spans"]) == {"sim.email.alpha", "sim.email.verify"}
    assert all(span >= 0 for span in ledger["spans"].values())
    assert ledger["charges"] == {"sim.email.alpha": 2.0, "sim.email.verify": 0.6}
    assert ledger["credits"] == 2.6
    # one repeat for alpha (normalised input), two for verify (charged per call)
    assert ledger["duplicate_charges"] == 3
    key = (
        f'{{"domain":"{hit["domain"]}","first_name":"{hit["first_name"].lower()}",'
        f'"last_name":"{hit["last_name"].lower()}"}}'
    )
    assert ledger["inputs"]["sim.email.alpha"] == {key: 2}
    assert ledger["inputs"]["sim.email.verify"] == {f'{{"email":"{hit["email"]}"}}': 3}


def test_reset_clears_ledger_buckets_jobs_and_faults(client: httpx.Client) -> None:
    _faults(client, {"tools": {"sim.email.alpha": {"rate_per_second": 0.01, "burst": 1}}})
    execute(client, "sim.email.alpha", NOBODY)
    assert execute(client, "sim.email.alpha", NOBODY).status_code == 429
    job = execute(client, "sim.phone.finder", NOBODY).json()["result"]["job_id"]
    assert client.post("/__reset").json() == {"ok": True}
    assert client.get("/__faults").json() == {"latency_ms": None, "tools": {}}
    ledger = client.get("/__ledger").json()
    assert ledger["calls"] == {} and ledger["credits"] == 0 and ledger["duplicate_charges"] == 0
    assert all(execute(client, "sim.email.alpha", NOBODY).status_code == 200 for _ in range(3))
    poll = execute(client, "sim.phone.finder.poll", {"job_id": job})
    assert poll.status_code == 404 and poll.json()["code"] == "unknown_job"


def test_fault_down_and_inheritance_by_bulk(client: httpx.Client) -> None:
    faults = _faults(client, {"tools": {"sim.email.beta": {"down": True}}})
    assert faults == {"latency_ms": None, "tools": {"sim.email.beta": {"down": True}}}
    assert client.get("/__faults").json() == faults
    for tool, payload in (("sim.email.beta", NOBODY), ("sim.email.beta.bulk", {"items": []})):
        response = execute(client, tool, payload)
        assert response.status_code == 503
        assert response.json()["code"] == "tool_down"
    assert execute(client, "sim.email.alpha", NOBODY).status_code == 200
    _faults(client, {"tools": {"sim.email.beta": {"down": None}}})
    assert client.get("/__faults").json()["tools"] == {}
    assert execute(client, "sim.email.beta", NOBODY).status_code == 200
    assert client.get("/__ledger").json()["errors"] == {
        "sim.email.beta": 1,
        "sim.email.beta.bulk": 1,
    }


def test_fault_error_rate_is_deterministic_and_not_charged(client: httpx.Client) -> None:
    doc = {"sim.email.verify": {"error_rate": 0.3, "status": 502}}
    unlimited(client, "sim.email.verify")
    _faults(client, {"tools": doc})
    first = [
        execute(client, "sim.email.verify", {"email": "a@b.c"}).status_code for _ in range(100)
    ]
    assert set(first) == {200, 502}
    assert 10 <= first.count(502) <= 50
    assert client.get("/__ledger").json()["charges"]["sim.email.verify"] == pytest.approx(
        0.2 * first.count(200)
    )
    client.post("/__reset")
    unlimited(client, "sim.email.verify")
    _faults(client, {"tools": doc})
    again = [
        execute(client, "sim.email.verify", {"email": "a@b.c"}).status_code for _ in range(100)
    ]
    assert again == first


def test_gamma_fails_transiently_about_five_percent() -> None:
    # Which request fails is a pure function of (seed, tool, n): no need to send 300.
    gamma = build_catalog()["sim.email.gamma"]
    failures = [injected_failure(SEED, gamma, NO_FAULT, n) for n in range(1, 301)]
    assert 3 <= failures.count(503) <= 40
    assert set(failures) == {None, 503}


def test_gamma_transient_failures_over_http_are_not_charged(client: httpx.Client) -> None:
    gamma = build_catalog()["sim.email.gamma"]
    first = next(n for n in count(1) if injected_failure(SEED, gamma, NO_FAULT, n))
    unlimited(client, "sim.email.gamma")
    responses = [execute(client, "sim.email.gamma", NOBODY) for _ in range(first)]
    assert [r.status_code for r in responses] == [200] * (first - 1) + [503]
    assert responses[-1].json()["code"] == "transient_error"
    ok = first - 1
    assert client.get("/__ledger").json()["charges"]["sim.email.gamma"] == 2.0 * ok


def test_invalid_faults_are_refused(client: httpx.Client, sim: Simulator) -> None:
    bad_docs: list[Any] = [
        [1],
        {"tools": {"sim.email.alpha": {"error_rate": 2}}},
        {"tools": {"sim.email.alpha": {"bogus": 1}}},
        {"tools": {"sim.email.beta.bulk": {"rate_per_second": 5}}},
        {"latency_ms": -1},
    ]
    for doc in bad_docs:
        response = client.post("/__faults", json=doc)
        assert response.status_code == 400, doc
        assert response.json()["code"] == "invalid_input"
    unknown = client.post("/__faults", json={"tools": {"sim.nope": {"down": True}}})
    assert unknown.status_code == 404 and unknown.json()["code"] == "unknown_tool"
    assert client.get("/__faults").json()["tools"] == {}
    with pytest.raises(ValueError, match="error_rate"):
        sim.faults(tools={"sim.email.alpha": {"error_rate": -0.5}})


def test_in_process_helpers(client: httpx.Client, sim: Simulator) -> None:
    assert sim.faults(latency_ms=0, tools={"sim.email.alpha": {"down": True}}) == {
        "latency_ms": 0.0,
        "tools": {"sim.email.alpha": {"down": True}},
    }
    assert execute(client, "sim.email.alpha", NOBODY).status_code == 503
    assert sim.ledger()["errors"] == {"sim.email.alpha": 1}
    assert sim.faults(tools={"sim.email.alpha": None})["tools"] == {}
    sim.reset()
    assert sim.ledger()["calls"] == {}
    assert sim.people(limit=3) == people(client, 3)
    companies = client.get("/__world/companies", params={"limit": 2}).json()
    assert sim.companies(limit=2) == companies["companies"]
    assert companies["total"] >= 10_000


def _submit(client: httpx.Client, person: dict[str, Any]) -> httpx.Response:
    return execute(client, "sim.phone.finder", person_input(person))


def _poll(client: httpx.Client, job_id: str) -> dict[str, Any]:
    response = execute(client, "sim.phone.finder.poll", {"job_id": job_id})
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


def test_async_phone_job_submit_poll_charge_once(client: httpx.Client) -> None:
    unlimited(client, "sim.phone.finder")
    outcomes: dict[str, tuple[dict[str, Any], str]] = {}
    charged = 0.0
    for person in people(client, 40):
        submitted = _submit(client, person).json()
        assert submitted["status"] == "pending"
        credits = submitted["_metadata"]["credits"]
        assert credits in (0.0, 5.0)
        charged += credits
        outcomes.setdefault("hit" if credits else "miss", (person, submitted["result"]["job_id"]))
        if len(outcomes) == 2:
            break
    assert set(outcomes) == {"hit", "miss"}

    person, job_id = outcomes["hit"]
    first = _poll(client, job_id)
    assert (first["status"], first["result"]) == ("pending", {"job_id": job_id})
    done = _poll(client, job_id)
    assert done["status"] == "completed"
    assert done["result"] == {"phone": person["phone"]}
    assert done["_metadata"] == {
        "tool": "sim.phone.finder.poll",
        "credits": 0.0,
        "request_id": done["_metadata"]["request_id"],
    }
    assert _poll(client, job_id)["result"] == {"phone": person["phone"]}  # stays done

    _, miss_job = outcomes["miss"]
    statuses = [_poll(client, miss_job)["status"] for _ in range(3)]
    assert statuses == ["pending", "no_result", "no_result"]

    ledger = client.get("/__ledger").json()
    assert ledger["charges"]["sim.phone.finder"] == charged
    assert ledger["duplicate_charges"] == 0
    assert ledger["calls"]["sim.phone.finder.poll"] == 6
    assert "sim.phone.finder.poll" not in ledger["charges"]
    unknown = execute(client, "sim.phone.finder.poll", {"job_id": "job_999999"})
    assert unknown.status_code == 404 and unknown.json()["code"] == "unknown_job"

    # Submitting the same person again is a new job and a second charge.
    again = _submit(client, person).json()
    assert again["result"]["job_id"] != job_id
    assert client.get("/__ledger").json()["duplicate_charges"] == 1


def test_latency_holds_requests_in_flight(client: httpx.Client, sim: Simulator) -> None:
    sim.faults(tools={"sim.email.alpha": {"latency_ms": 5}})
    assert execute(client, "sim.email.alpha", NOBODY).status_code == 200
    assert client.get("/__ledger").json()["max_inflight"] == {"sim.email.alpha": 1}
    for path in ("/api/v2/integrations", "/__ledger", "/__faults"):
        assert client.get(path).headers["x-request-id"].startswith("req_")


def test_a_restarted_simulator_never_gives_a_job_id_it_gave_before() -> None:
    """A resumed run polls the job id on its receipt: a simulator restarted in between must
    answer it unknown (bought again), never with a new job that took the same number."""
    before, after = Jobs(), Jobs()  # two processes: before and after a restart
    first = before.submit("sim.phone.finder", Answer("no_result", None))
    again = after.submit("sim.phone.finder", Answer("no_result", None))
    assert first.id != again.id
    assert after.get(first.id) is None
