"""Idempotency keys as real providers honour them, over real loopback HTTP: header keys,
per-item bulk keys sharing one memory per base tool, keys remembered once the work is done,
409 for a key in progress, 422 for a key reused on another input."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from playline.sim import Simulator

from simhelp import NOBODY, eventually, execute, people, person_input, unlimited

BULK = "sim.email.beta.bulk"


def _bulk(
    client: httpx.Client,
    items: list[dict[str, str]],
    keys: list[Any] | None = None,
    header: str | None = None,
) -> httpx.Response:
    payload: dict[str, Any] = {"items": items}
    if keys is not None:
        payload["idempotency_keys"] = keys
    return execute(client, BULK, payload, header)


def _sample(client: httpx.Client, n: int) -> list[dict[str, str]]:
    return [person_input(p) for p in people(client, n)]


def test_a_repeated_header_key_is_replayed_not_charged(client: httpx.Client) -> None:
    person = _sample(client, 1)[0]
    first = execute(client, "sim.email.gamma", person, "k-1")
    again = execute(client, "sim.email.gamma", person, "k-1")
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json()  # the first answer, _metadata included
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["x-request-id"] != first.headers["x-request-id"]
    ledger = client.get("/__ledger").json()
    assert ledger["calls"] == {"sim.email.gamma": 1}
    assert ledger["charges"] == {"sim.email.gamma": 2.0}
    assert ledger["replayed"] == {"sim.email.gamma": 1}


def test_bulk_items_whose_keys_are_done_are_replayed_and_not_charged(
    client: httpx.Client,
) -> None:
    unlimited(client, "sim.email.beta")
    sample = _sample(client, 8)
    first = _bulk(client, sample[:5], [f"k{i}" for i in range(5)]).json()
    results = first["result"]["results"]
    hits = sum(r is not None for r in results)
    assert hits > 0 and first["_metadata"]["credits"] == hits
    assert first["_metadata"]["replayed_items"] == []

    response = _bulk(client, [sample[0], sample[5], sample[1], sample[6]], ["k0", "k5", "k1", "k6"])
    second = response.json()
    assert response.status_code == 200 and "idempotent-replayed" not in response.headers
    got = second["result"]["results"]
    assert (got[0], got[2]) == (results[0], results[1])
    assert second["_metadata"]["replayed_items"] == [0, 2]
    new_hits = sum(r is not None for r in (got[1], got[3]))
    assert second["_metadata"]["credits"] == new_hits

    ledger = client.get("/__ledger").json()
    assert ledger["calls"] == {BULK: 2}
    assert ledger["items"] == {BULK: 9}
    assert ledger["replayed_items"] == {BULK: 2}
    assert ledger["replayed"] == {}
    assert ledger["charges"] == {"sim.email.beta": float(hits + new_hits)}
    assert ledger["duplicate_charges"] == 0


def test_a_bulk_whose_items_are_all_done_is_a_replay(client: httpx.Client) -> None:
    sample = _sample(client, 3)
    first = _bulk(client, sample, ["a", "b", "c"]).json()
    charged = client.get("/__ledger").json()["credits"]
    # an empty bucket (its one token spent): a replay takes no token
    client.post("/__faults", json={"tools": {"sim.email.beta": {"rate_per_second": 0.01}}})
    assert execute(client, "sim.email.beta", NOBODY).status_code == 200
    assert execute(client, "sim.email.beta", NOBODY).status_code == 429
    response = _bulk(client, [sample[2], sample[0]], ["c", "a"])
    assert response.status_code == 200
    assert response.headers["idempotent-replayed"] == "true"
    body = response.json()
    assert body["result"]["results"] == [first["result"]["results"][i] for i in (2, 0)]
    assert body["_metadata"]["credits"] == 0.0
    assert body["_metadata"]["replayed_items"] == [0, 1]
    ledger = client.get("/__ledger").json()
    assert ledger["calls"] == {BULK: 1, "sim.email.beta": 1}
    assert ledger["replayed_items"] == {BULK: 2}
    assert ledger["credits"] == charged


def test_single_and_bulk_keys_share_one_memory_per_base_tool(client: httpx.Client) -> None:
    unlimited(client, "sim.email.beta")
    sample = _sample(client, 40)
    alone = execute(client, "sim.email.beta", sample[0], "solo").json()

    as_item = _bulk(client, [sample[0], sample[1]], ["solo", "item-1"]).json()
    assert as_item["result"]["results"][0] == alone["result"]
    assert as_item["_metadata"]["replayed_items"] == [0]

    # an input first sent in a bulk batch, then alone with its item key
    hit = next(i for i, p in enumerate(sample[2:], 2) if _hit(client, p))
    client.post("/__reset")
    unlimited(client, "sim.email.beta")
    batch = _bulk(client, [sample[hit]], ["from-batch"]).json()
    single = execute(client, "sim.email.beta", sample[hit], "from-batch")
    assert single.status_code == 200 and single.headers["idempotent-replayed"] == "true"
    body = single.json()
    assert body["status"] == "completed"
    assert body["result"] == batch["result"]["results"][0]
    assert body["_metadata"]["credits"] == 1.0  # what the item was charged, once
    assert body["_metadata"]["request_id"] == batch["_metadata"]["request_id"]
    ledger = client.get("/__ledger").json()
    assert ledger["charges"] == {"sim.email.beta": 1.0}
    assert ledger["replayed"] == {"sim.email.beta": 1}


def _hit(client: httpx.Client, person: dict[str, str]) -> bool:
    body = execute(client, "sim.email.beta", person).json()
    return bool(body["status"] == "completed")


def test_a_header_key_on_a_bulk_without_item_keys_replays_the_whole_request(
    client: httpx.Client,
) -> None:
    sample = _sample(client, 4)
    first = _bulk(client, sample, header="whole")
    again = _bulk(client, sample, header="whole")
    assert again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    ledger = client.get("/__ledger").json()
    assert ledger["calls"] == {BULK: 1}
    assert ledger["replayed"] == {BULK: 1}
    # the key names that whole request, not one input
    reused = execute(client, "sim.email.beta", sample[0], "whole")
    assert reused.status_code == 422 and reused.json()["code"] == "idempotency_key_reused"


def test_a_key_reused_for_another_input_is_refused(client: httpx.Client) -> None:
    one, other = _sample(client, 2)
    assert execute(client, "sim.email.alpha", one, "k").status_code == 200
    reused = execute(client, "sim.email.alpha", other, "k")
    assert reused.status_code == 422
    body = reused.json()
    assert body["code"] == "idempotency_key_reused" and "new key" in body["message"]
    assert _bulk(client, [one], ["b"]).status_code == 200
    assert _bulk(client, [other], ["b"]).status_code == 422
    # spelling is not content: the same input, messier, is the same request
    messy = {**one, "first_name": one["first_name"].upper() + "  "}
    assert execute(client, "sim.email.alpha", messy, "k").status_code == 200
    assert client.get("/__ledger").json()["calls"] == {"sim.email.alpha": 1, BULK: 1}


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ("k", "aligned with payload.items"),
        (["k1"], "one per item: 2"),
        (["k1", ""], "idempotency_keys[1] must be a non-empty string"),
        (["k1", 7], "idempotency_keys[1]"),
        (["k1", "x" * 256], "at most 255"),
        (["k1", "k1"], "idempotency_keys[1] repeats idempotency_keys[0]"),
    ],
)
def test_bad_item_keys_are_refused(client: httpx.Client, keys: Any, message: str) -> None:
    response = _bulk(client, _sample(client, 2), keys)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_input"
    assert message in response.json()["message"]
    assert client.get("/__ledger").json()["calls"] == {}


def test_a_header_key_past_255_characters_is_refused(client: httpx.Client) -> None:
    person = _sample(client, 1)[0]
    assert execute(client, "sim.email.alpha", person, "x" * 255).status_code == 200
    response = execute(client, "sim.email.alpha", person, "x" * 256)
    assert response.status_code == 400 and "at most 255" in response.json()["message"]


def test_a_key_is_remembered_when_the_answer_then_fails(client: httpx.Client) -> None:
    """The phone finder is not retry-safe: an injected failure strikes after the work (the
    charge stands). Re-sent with its key, the in-doubt call gets the real answer, free."""
    unlimited(client, "sim.phone.finder")
    person = next(p for p in people(client, 40) if _phone_hit(client, p))
    client.post("/__reset")
    client.post("/__faults", json={"tools": {"sim.phone.finder": {"error_rate": 1.0}}})

    failed = execute(client, "sim.phone.finder", person_input(person), "in-doubt")
    assert failed.status_code == 503 and failed.json()["code"] == "transient_error"
    assert client.get("/__ledger").json()["charges"] == {"sim.phone.finder": 5.0}

    again = execute(client, "sim.phone.finder", person_input(person), "in-doubt")
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    job = again.json()["result"]["job_id"]
    assert again.json()["_metadata"]["credits"] == 5.0
    client.post("/__faults", json={"tools": {"sim.phone.finder": None}})  # polls inherit it
    polls = [execute(client, "sim.phone.finder.poll", {"job_id": job}).json() for _ in range(2)]
    assert polls[-1]["result"] == {"phone": person["phone"]}
    ledger = client.get("/__ledger").json()
    assert ledger["charges"] == {"sim.phone.finder": 5.0}
    assert ledger["duplicate_charges"] == 0


def _phone_hit(client: httpx.Client, person: dict[str, Any]) -> bool:
    body = execute(client, "sim.phone.finder", person_input(person)).json()
    return bool(body["_metadata"]["credits"] > 0)  # charged at submit: a hit


def test_a_key_in_progress_answers_409_and_is_not_charged(
    client: httpx.Client, sim: Simulator
) -> None:
    unlimited(client, "sim.email.beta")
    sample = _sample(client, 2)
    sim.faults(tools={"sim.email.beta": {"hold": True}})
    answers: list[httpx.Response] = []

    def first() -> None:
        with httpx.Client(base_url=sim.url, headers=sim.headers, timeout=30) as c:
            answers.append(execute(c, "sim.email.beta", sample[0], "busy"))

    worker = threading.Thread(target=first)
    worker.start()
    try:
        eventually(lambda: bool(sim.ledger()["inflight"]), "the first request is held")
        for conflict in (
            execute(client, "sim.email.beta", sample[0], "busy"),
            _bulk(client, sample, ["other", "busy"]),
        ):
            assert conflict.status_code == 409
            assert conflict.headers["Retry-After"] == "1"
            body = conflict.json()
            assert body["code"] == "idempotency_in_progress" and "'busy'" in body["message"]
        ledger = sim.ledger()
        assert ledger["conflicts"] == {"sim.email.beta": 1, BULK: 1}
        assert ledger["calls"] == {"sim.email.beta": 1}
        assert ledger["charges"] == {}
    finally:
        sim.faults(tools={"sim.email.beta": {"hold": None}})
        worker.join()
    assert answers[0].status_code == 200
    retried = execute(client, "sim.email.beta", sample[0], "busy")
    assert retried.headers["idempotent-replayed"] == "true"
    assert retried.json() == answers[0].json()
    assert sim.ledger()["inflight"] == {}


def test_no_idempotency_ignores_keys_and_says_so(client: httpx.Client, sim: Simulator) -> None:
    sim.faults(tools={"sim.email.beta": {"no_idempotency": True}})
    for tool in ("sim.email.beta", BULK):
        meta = client.get(f"/api/v2/integrations/{tool}").json()
        assert meta["idempotency"] == {"header": False, "bulk_items": False}
    listed = {t["id"]: t for t in client.get("/api/v2/integrations").json()["tools"]}
    assert listed["sim.email.beta"]["idempotency"]["header"] is False
    assert listed["sim.email.alpha"]["idempotency"] == {"header": True, "bulk_items": False}

    person = _sample(client, 1)[0]
    answers = [execute(client, "sim.email.beta", person, "same") for _ in range(2)]
    answers += [_bulk(client, [person], ["same"]) for _ in range(2)]
    assert all("idempotent-replayed" not in r.headers for r in answers)
    ledger = client.get("/__ledger").json()
    assert ledger["calls"] == {"sim.email.beta": 2, BULK: 2}
    assert ledger["replayed"] == {} and ledger["replayed_items"] == {}

    sim.faults(tools={"sim.email.beta": None})
    meta = client.get("/api/v2/integrations/sim.email.beta").json()
    assert meta["idempotency"] == {"header": True, "bulk_items": True}


def test_polls_ignore_keys(client: httpx.Client) -> None:
    job = execute(client, "sim.phone.finder", _sample(client, 1)[0]).json()["result"]["job_id"]
    statuses = [
        execute(client, "sim.phone.finder.poll", {"job_id": job}, "poll-key").json()["status"]
        for _ in range(2)
    ]
    assert statuses[0] == "pending" and statuses[1] != "pending"
    assert client.get("/__ledger").json()["replayed"] == {}
