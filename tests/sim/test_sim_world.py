"""Determinism, coverage and lifecycle of the simulator.

Determinism and coverage are properties of pure functions (the world, the providers), checked
directly; one HTTP test checks that served simulators answer by them.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from playline.sim import Simulator, serve
from playline.sim._catalog import build_catalog
from playline.sim._inputs import parse_single
from playline.sim._providers import answer
from playline.sim._world import World, world_for

from simhelp import execute, person_input

FINDERS = ("sim.email.alpha", "sim.email.beta", "sim.email.gamma")
ANSWERING = ("sim.email.alpha", "sim.email.beta", "sim.phone.finder")
CATALOG = build_catalog()
SMALL = {"companies": 2_000, "people": 5_000}  # entity i depends on (seed, i) only


def _answers(world: World, sample: list[dict[str, Any]]) -> list[Any]:
    """What the providers answer for ``sample``: (status, result, credits) per finder, then
    the company's firmographics, as the gateway would put them."""
    out: list[Any] = []
    for person in sample:
        for tool in ANSWERING:
            spec = CATALOG[tool]
            ans = answer(tool, world, parse_single(spec, person_input(person)))
            credits = spec.cost.credits if ans.hit or spec.cost.charge == "per_call" else 0.0
            if spec.is_async:  # the gateway answers a job; its poll answers the result
                out.append((ans.status, ans.result))
                continue
            out.append((ans.status, ans.result, credits))
        out.append(answer("sim.company.enrich", world, {"domain": person["domain"]}).result)
    return out


def _http_answers(sim: Simulator, sample: list[dict[str, Any]]) -> list[Any]:
    with httpx.Client(base_url=sim.url, headers=sim.headers) as client:
        out: list[Any] = []
        for person in sample:
            for tool in ANSWERING:
                body = execute(client, tool, person_input(person)).json()
                if tool == "sim.phone.finder":
                    poll = {"job_id": body["result"]["job_id"]}
                    execute(client, "sim.phone.finder.poll", poll)
                    body = execute(client, "sim.phone.finder.poll", poll).json()
                    out.append((body["status"], body["result"]))
                    continue
                out.append((body["status"], body["result"], body["_metadata"]["credits"]))
            company = execute(client, "sim.company.enrich", {"domain": person["domain"]})
            out.append(company.json()["result"])
        return out


def test_same_seed_same_world_and_answers() -> None:
    one, two = World(11, **SMALL), World(11, **SMALL)
    assert one.companies == two.companies
    world_one = [p.public() for p in one.people]
    assert world_one == [p.public() for p in two.people]
    sample = world_one[:50]
    assert _answers(one, sample) == _answers(two, sample)
    other = World(12, **SMALL)
    assert [p.public() for p in other.people[:50]] != world_one[:50]


def test_simulators_of_one_seed_answer_by_the_world_over_http() -> None:
    with serve(seed=7, latency_ms=0) as one, serve(seed=7, latency_ms=0) as two:
        assert one.url != two.url
        sample = one.people(limit=5)
        assert two.people(limit=5) == sample
        served = _http_answers(one, sample)
        assert served == _http_answers(two, sample)
    assert served == _answers(world_for(7), sample)


def _found(tool: str, world: World, sample: list[dict[str, Any]]) -> set[int]:
    """Indexes of the people ``tool`` finds the true email of."""
    spec = CATALOG[tool]
    found = set()
    for i, person in enumerate(sample):
        result = answer(tool, world, parse_single(spec, person_input(person))).result
        if result is not None and result["email"] == person["email"]:
            found.add(i)
    return found


def test_coverage_of_the_three_finders() -> None:
    world = world_for(7)
    sample = [p.public() for p in world.people[:2000]]
    found = {tool: _found(tool, world, sample) for tool in FINDERS}
    rates = {tool: len(hits) / len(sample) for tool, hits in found.items()}
    union = len(set().union(*found.values())) / len(sample)
    assert 0.45 <= rates["sim.email.alpha"] <= 0.65
    assert 0.35 <= rates["sim.email.beta"] <= 0.55
    assert 0.28 <= rates["sim.email.gamma"] <= 0.48
    assert union >= 0.8
    assert all(rate < union - 0.2 for rate in rates.values())
    # Providers overlap only partly: each finds people the others do not.
    for tool in FINDERS:
        others = set().union(*(found[t] for t in FINDERS if t != tool))
        assert found[tool] - others


def test_serve_stops_cleanly() -> None:
    before = {t.ident for t in threading.enumerate()}
    with serve(latency_ms=0) as sim:
        url = sim.url
        assert httpx.get(f"{url}/api/v2/integrations").status_code == 200
    assert {t.ident for t in threading.enumerate()} <= before
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/api/v2/integrations")


def test_port_in_use_is_reported() -> None:
    with serve(latency_ms=0) as sim:
        port = int(sim.url.rsplit(":", 1)[1])
        with pytest.raises(RuntimeError, match="port"), serve(port=port):
            pass
