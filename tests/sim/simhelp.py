"""Helpers for the simulator tests (a unique module name: test dirs have no __init__.py)."""

from __future__ import annotations

from typing import Any

import httpx

NOBODY = {"first_name": "Nobody", "last_name": "Atall", "domain": "example.invalid"}
PERSON_FIELDS = ("first_name", "last_name", "domain")


def person_input(person: dict[str, Any]) -> dict[str, str]:
    return {k: person[k] for k in PERSON_FIELDS}


def execute(client: httpx.Client, tool: str, payload: dict[str, Any]) -> httpx.Response:
    return client.post(f"/api/v2/integrations/{tool}/execute", json={"payload": payload})


def people(client: httpx.Client, limit: int = 200) -> list[dict[str, Any]]:
    response = client.get("/__world/people", params={"limit": limit})
    assert response.status_code == 200
    rows: list[dict[str, Any]] = response.json()["people"]
    return rows


def unlimited(client: httpx.Client, *tools: str) -> None:
    """Lift the rate limit of ``tools`` so a test can send many requests at once."""
    doc = {t: {"rate_per_second": 1_000_000, "burst": 1_000_000} for t in tools}
    assert client.post("/__faults", json={"tools": doc}).status_code == 200
