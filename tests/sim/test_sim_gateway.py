"""The gateway API over real loopback HTTP: metadata, hits and misses, bulk, auth, input."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import playline.sim
from playline.sim import Simulator

from simhelp import NOBODY, execute, people, person_input, unlimited

BASE_TOOLS = (
    "sim.email.alpha",
    "sim.email.beta",
    "sim.email.gamma",
    "sim.company.enrich",
    "sim.email.verify",
    "sim.phone.finder",
)
META_KEYS = {
    "id", "description", "rate", "concurrency", "cost", "batch", "outputs", "lists",
    "version", "retry_safe", "async", "input", "idempotency", "coverage",
}  # fmt: skip


def test_all_is_sorted_and_honest() -> None:
    assert playline.sim.__all__ == sorted(playline.sim.__all__)
    for name in playline.sim.__all__:
        assert hasattr(playline.sim, name)


def test_lists_tools_with_metadata(client: httpx.Client) -> None:
    tools = {t["id"]: t for t in client.get("/api/v2/integrations").json()["tools"]}
    assert set(BASE_TOOLS) <= set(tools)
    for tool_id in BASE_TOOLS:
        meta = tools[tool_id]
        assert set(meta) == META_KEYS
        assert meta["version"] == "2026-01"
        assert client.get(f"/api/v2/integrations/{tool_id}").json() == meta
    beta = tools["sim.email.beta"]
    assert beta["rate"] == {"per_second": 10.0, "burst": 10}
    assert beta["cost"] == {"credits": 1.0, "charge": "on_hit"}
    assert beta["batch"] == {"operation": "sim.email.beta.bulk", "max_size": 50}
    assert beta["outputs"]["email"] == ["email"]
    assert beta["input"] == {
        "required": ["first_name", "last_name", "domain"],
        "optional": [],
        # how the runtime compares inputs: variants of a person are one receipt
        "normalize": {"first_name": "name", "last_name": "name", "domain": "domain"},
    }
    assert beta["coverage"] == 0.45  # the share of the world's people it finds
    assert tools["sim.email.verify"]["coverage"] == 1.0
    assert tools["sim.email.beta.bulk"]["bulk_of"] == "sim.email.beta"
    assert tools["sim.company.enrich"]["batch"]["max_size"] == 100
    assert tools["sim.email.verify"]["batch"]["max_size"] == 200
    assert tools["sim.email.verify"]["cost"] == {"credits": 0.2, "charge": "per_call"}
    gamma = tools["sim.email.gamma"]
    assert gamma["cost"] == {"credits": 2.0, "charge": "per_call"}
    assert gamma["retry_safe"] is True and gamma["batch"] is None
    assert tools["sim.phone.finder"]["async"] == {"poll": "sim.phone.finder.poll"}
    assert tools["sim.phone.finder.poll"]["poll_of"] == "sim.phone.finder"
    assert beta["idempotency"] == {"header": True, "bulk_items": True}
    assert tools["sim.email.beta.bulk"]["idempotency"] == {"header": True, "bulk_items": True}
    assert gamma["idempotency"] == {"header": True, "bulk_items": False}
    assert tools["sim.phone.finder.poll"]["idempotency"] == {"header": False, "bulk_items": False}
    missing = client.get("/api/v2/integrations/sim.nope")
    assert missing.status_code == 404 and missing.json()["code"] == "unknown_tool"


def _first_hit(client: httpx.Client, tool: str, truth: str = "email") -> dict[str, Any]:
    for person in people(client):
        response = execute(client, tool, person_input(person))
        body = response.json()
        if response.status_code != 200:
            continue
        if body["status"] == "completed" and body["result"][truth] == person[truth]:
            return person
    raise AssertionError(f"{tool} found nobody among 200 people")


@pytest.mark.parametrize(
    ("tool", "hit_credits", "miss_credits"),
    [("sim.email.alpha", 1.0, 0.0), ("sim.email.beta", 1.0, 0.0), ("sim.email.gamma", 2.0, 2.0)],
)
def test_email_finders_hit_and_miss(
    client: httpx.Client, tool: str, hit_credits: float, miss_credits: float
) -> None:
    unlimited(client, tool)
    person = _first_hit(client, tool)
    client.post("/__reset")
    unlimited(client, tool)
    retries = 0
    while (hit := execute(client, tool, person_input(person))).status_code == 503:
        retries += 1  # gamma's transient 503s are part of its contract
    body = hit.json()
    assert hit.status_code == 200
    assert body["status"] == "completed"
    assert body["result"]["email"] == person["email"]
    assert 0.0 < body["result"]["confidence"] <= 1.0
    assert body["_metadata"]["tool"] == tool
    assert body["_metadata"]["credits"] == hit_credits
    assert body["_metadata"]["request_id"] == hit.headers["x-request-id"]

    while (miss := execute(client, tool, NOBODY)).status_code == 503:
        retries += 1
    assert miss.json()["status"] == "no_result"
    assert miss.json()["result"] is None
    assert miss.json()["_metadata"]["credits"] == miss_credits
    assert retries < 5


def test_lookups_normalise_case_and_whitespace(client: httpx.Client) -> None:
    person = _first_hit(client, "sim.email.alpha")
    messy = {
        "first_name": f"  {person['first_name'].upper()} ",
        "last_name": person["last_name"].lower(),
        "domain": f"https://www.{person['domain'].upper()}/team",
    }
    body = execute(client, "sim.email.alpha", messy).json()
    assert body["result"]["email"] == person["email"]


def test_company_enrich_hit_and_miss(client: httpx.Client) -> None:
    companies = client.get("/__world/companies", params={"limit": 50}).json()["companies"]
    found = 0
    for company in companies:
        body = execute(client, "sim.company.enrich", {"domain": company["domain"]}).json()
        if body["status"] == "completed":
            found += 1
            assert body["result"] == {
                k: company[k] for k in ("domain", "name", "industry", "size", "country")
            }
            assert body["_metadata"]["credits"] == 1.0
    assert 35 <= found < 50
    miss = execute(client, "sim.company.enrich", {"domain": "no-such-company.example"}).json()
    assert miss["status"] == "no_result" and miss["_metadata"]["credits"] == 0.0


def test_verify_valid_invalid_catch_all(client: httpx.Client) -> None:
    companies = client.get("/__world/companies", params={"limit": 200}).json()["companies"]
    catch_all = next(c["domain"] for c in companies if c["catch_all"])
    plain = next(c["domain"] for c in companies if not c["catch_all"])
    person = next(p for p in people(client) if p["domain"] not in {catch_all, plain})
    cases = [
        (person["email"], "valid"),
        (f"zz.nobody@{plain}", "invalid"),
        (f"zz.nobody@{catch_all}", "catch_all"),
        ("not-an-email", "invalid"),
    ]
    for email, expected in cases:
        body = execute(client, "sim.email.verify", {"email": email}).json()
        assert body["status"] == "completed"
        assert body["result"] == {"email": email, "status": expected}
        assert body["_metadata"]["credits"] == 0.2
    assert client.get("/__ledger").json()["charges"] == {"sim.email.verify": 0.8}


def test_bulk_results_align_with_items(client: httpx.Client) -> None:
    unlimited(client, "sim.email.beta")
    sample = people(client, 20)
    items = [person_input(p) for p in sample]
    items.insert(3, NOBODY)
    singles = [execute(client, "sim.email.beta", item).json()["result"] for item in items]
    client.post("/__reset")
    response = execute(client, "sim.email.beta.bulk", {"items": items})
    body = response.json()
    assert response.status_code == 200 and body["status"] == "completed"
    assert body["result"]["results"] == singles
    hits = sum(r is not None for r in singles)
    assert 0 < hits < len(items)
    assert body["_metadata"] == {
        "tool": "sim.email.beta.bulk",
        "credits": float(hits),
        "request_id": response.headers["x-request-id"],
    }
    ledger = client.get("/__ledger").json()
    assert ledger["calls"] == {"sim.email.beta.bulk": 1}
    assert ledger["charges"] == {"sim.email.beta": float(hits)}


def test_bulk_too_large_and_bad_items(client: httpx.Client) -> None:
    items = [NOBODY] * 51
    response = execute(client, "sim.email.beta.bulk", {"items": items})
    assert response.status_code == 400
    assert response.json()["code"] == "batch_too_large"
    assert "50" in response.json()["message"]
    bad = execute(client, "sim.email.beta.bulk", {"items": [NOBODY, {"first_name": "x"}]})
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_input"
    assert "items[1].last_name" in bad.json()["message"]
    assert client.get("/__ledger").json()["calls"] == {}


def test_bulk_takes_one_token_of_the_shared_bucket(client: httpx.Client) -> None:
    client.post(
        "/__faults", json={"tools": {"sim.email.beta": {"rate_per_second": 0.01, "burst": 2}}}
    )
    assert execute(client, "sim.email.beta.bulk", {"items": [NOBODY] * 50}).status_code == 200
    assert execute(client, "sim.email.beta", NOBODY).status_code == 200
    assert execute(client, "sim.email.beta.bulk", {"items": [NOBODY]}).status_code == 429


def test_auth(client: httpx.Client, sim: Simulator) -> None:
    url = f"{sim.url}/api/v2/integrations/sim.email.alpha/execute"
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "dev"}):
        response = httpx.post(url, json={"payload": NOBODY}, headers=headers)
        assert response.status_code == 401
        body = response.json()
        assert body["code"] == "unauthorized"
        assert body["request_id"] == response.headers["x-request-id"]
        assert body["message"]


def test_invalid_input_names_the_field(client: httpx.Client) -> None:
    response = execute(client, "sim.email.alpha", {"first_name": "Ada", "last_name": "L"})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert "domain" in response.json()["message"]
    blank = execute(client, "sim.email.verify", {"email": "   "})
    assert blank.status_code == 400 and "email" in blank.json()["message"]
    for content in (b"not json", b'{"nopayload": 1}', b'{"payload": [1]}'):
        raw = client.post("/api/v2/integrations/sim.email.alpha/execute", content=content)
        assert raw.status_code == 400 and raw.json()["code"] == "invalid_input"
    unknown = execute(client, "sim.email.nope", NOBODY)
    assert unknown.status_code == 404 and unknown.json()["code"] == "unknown_tool"


def test_request_ids_are_fresh(client: httpx.Client) -> None:
    ids = [execute(client, "sim.email.verify", {"email": "a@b.c"}).headers["x-request-id"]]
    ids += [execute(client, "sim.email.alpha", {}).headers["x-request-id"] for _ in range(3)]
    assert len(set(ids)) == 4 and all(i.startswith("req_") for i in ids)
