"""Faults real providers inflict, over real loopback HTTP: random throttling whatever the rate,
metadata that tells the rate in force, jobs lost by a restarted provider."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from playline.sim import Simulator
from playline.sim._catalog import build_catalog
from playline.sim._faults import ToolFault, throttled

from simhelp import NOBODY, execute, people, person_input, unlimited

SEED = 7  # the session simulator's


def _faults(client: httpx.Client, tools: dict[str, Any]) -> None:
    response = client.post("/__faults", json={"tools": tools})
    assert response.status_code == 200, response.text


def test_throttling_is_a_share_of_requests_by_seed_and_counter() -> None:
    fault = ToolFault(throttle_rate=0.25)
    picks = [throttled(SEED, "sim.email.alpha", fault, n) for n in range(1, 2001)]
    assert 0.2 <= sum(picks) / len(picks) <= 0.3
    assert picks == [throttled(SEED, "sim.email.alpha", fault, n) for n in range(1, 2001)]
    assert picks != [throttled(SEED + 1, "sim.email.alpha", fault, n) for n in range(1, 2001)]
    assert not any(throttled(SEED, "sim.email.alpha", ToolFault(), n) for n in range(1, 200))


def test_throttled_requests_get_429_before_any_work(client: httpx.Client) -> None:
    fault = {"throttle_rate": 0.5, "throttle_retry_after_ms": 1500}
    unlimited(client, "sim.email.verify")
    _faults(client, {"sim.email.verify": fault})
    expected = [
        throttled(SEED, "sim.email.verify", ToolFault(throttle_rate=0.5), n) for n in range(1, 21)
    ]
    assert any(expected) and not all(expected)
    responses = [execute(client, "sim.email.verify", {"email": "a@b.c"}) for _ in range(20)]
    assert [r.status_code == 429 for r in responses] == expected
    refused = next(r for r in responses if r.status_code == 429)
    assert refused.headers["Retry-After"] == "2"  # whole seconds, rounded up
    body = refused.json()
    assert body["code"] == "throttled" and body["retry_after_ms"] == 1500
    ledger = client.get("/__ledger").json()
    assert ledger["throttled"] == {"sim.email.verify": sum(expected)}
    assert ledger["rejected"] == {}
    assert ledger["calls"] == {"sim.email.verify": 20 - sum(expected)}
    assert ledger["charges"]["sim.email.verify"] == pytest.approx(0.2 * (20 - sum(expected)))


def test_a_throttle_without_retry_after_names_no_cause(client: httpx.Client) -> None:
    unlimited(client, "sim.email.beta")
    _faults(client, {"sim.email.beta": {"throttle_rate": 1.0}})
    for tool, payload in (("sim.email.beta", NOBODY), ("sim.email.beta.bulk", {"items": []})):
        response = execute(client, tool, payload)
        assert response.status_code == 429
        assert "Retry-After" not in response.headers
        body = response.json()
        assert body["code"] == "throttled" and "retry_after_ms" not in body
    _faults(client, {"sim.email.beta": {"throttle_rate": None}})
    assert execute(client, "sim.email.beta", NOBODY).status_code == 200


def test_metadata_tells_the_rate_in_force(client: httpx.Client) -> None:
    def rate(tool: str) -> dict[str, Any]:
        published: dict[str, Any] = client.get(f"/api/v2/integrations/{tool}").json()["rate"]
        return published

    _faults(client, {"sim.email.beta": {"rate_per_second": 3}})
    assert rate("sim.email.beta") == {"per_second": 3.0, "burst": 3}
    assert rate("sim.email.beta.bulk") == {"per_second": 3.0, "burst": 3}
    listed = {t["id"]: t for t in client.get("/api/v2/integrations").json()["tools"]}
    assert listed["sim.email.beta"]["rate"] == {"per_second": 3.0, "burst": 3}
    assert listed["sim.email.alpha"]["rate"] == {"per_second": 20.0, "burst": 20}

    # a provider whose documented limits lag its real ones
    slow = {"rate_per_second": 0.01, "burst": 2, "publish_rate": False}
    _faults(client, {"sim.email.beta": slow})
    assert rate("sim.email.beta") == {"per_second": 10.0, "burst": 10}
    assert rate("sim.email.beta.bulk") == {"per_second": 10.0, "burst": 10}
    assert execute(client, "sim.email.beta.bulk", {"items": [NOBODY]}).status_code == 200
    codes = [execute(client, "sim.email.beta", NOBODY).status_code for _ in range(2)]
    assert codes == [200, 429]  # burst 2 enforced all the same

    client.post("/__reset")
    assert rate("sim.email.beta") == {"per_second": 10.0, "burst": 10}


def test_new_faults_are_validated(client: httpx.Client) -> None:
    for faults in (
        {"sim.email.alpha": {"throttle_rate": 1.5}},
        {"sim.email.alpha": {"throttle_retry_after_ms": -1}},
        {"sim.email.alpha": {"no_idempotency": "yes"}},
        {"sim.email.alpha": {"hold": 1}},
        {"sim.email.beta.bulk": {"publish_rate": False}},
    ):
        response = client.post("/__faults", json={"tools": faults})
        assert response.status_code == 400, faults
        assert response.json()["code"] == "invalid_input"
    assert client.get("/__faults").json()["tools"] == {}


def test_forgotten_jobs_are_unknown_but_keys_and_ledger_stay(
    client: httpx.Client, sim: Simulator
) -> None:
    unlimited(client, "sim.phone.finder")
    person = person_input(people(client, 1)[0])
    submitted = execute(client, "sim.phone.finder", person, "job-key").json()
    job = submitted["result"]["job_id"]
    before = client.get("/__ledger").json()

    assert client.post("/__jobs/forget").json() == {"ok": True, "forgotten": 1}
    poll = execute(client, "sim.phone.finder.poll", {"job_id": job})
    assert poll.status_code == 404 and poll.json()["code"] == "unknown_job"
    after = client.get("/__ledger").json()
    assert after["charges"] == before["charges"] and after["calls"]["sim.phone.finder"] == 1
    # The key still names the first submit: the client learns the job it must not pay again.
    again = execute(client, "sim.phone.finder", person, "job-key")
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json()["result"] == {"job_id": job}

    fresh = execute(client, "sim.phone.finder", person).json()["result"]["job_id"]
    assert fresh != job
    assert sim.forget_jobs() == 1
    assert execute(client, "sim.phone.finder.poll", {"job_id": fresh}).status_code == 404


def test_the_catalog_publishes_idempotency_for_every_operation() -> None:
    for spec in build_catalog().values():
        idempotency = spec.meta()["idempotency"]
        assert idempotency["header"] is (spec.kind != "poll")
        assert idempotency["bulk_items"] is spec.has_bulk
