"""Helpers for the simulator tests (a unique module name: test dirs have no __init__.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

NOBODY = {"first_name": "Nobody", "last_name": "Atall", "domain": "example.invalid"}
PERSON_FIELDS = ("first_name", "last_name", "domain")


def person_input(person: dict[str, Any]) -> dict[str, str]:
    return {k: person[k] for k in PERSON_FIELDS}


def execute(
    client: httpx.Client, tool: str, payload: dict[str, Any], key: str | None = None
) -> httpx.Response:
    """POST an execute request, with ``key`` as its ``Idempotency-Key`` header if given."""
    headers = {"Idempotency-Key": key} if key else None
    return client.post(
        f"/api/v2/integrations/{tool}/execute", json={"payload": payload}, headers=headers
    )


def eventually(check: Callable[[], bool], what: str, within: float = 10.0) -> None:
    """Return once ``check()`` holds (an observable condition, polled); fail after
    ``within`` seconds, which only bounds a broken test."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"


def people(client: httpx.Client, limit: int = 200) -> list[dict[str, Any]]:
    response = client.get("/__world/people", params={"limit": limit})
    assert response.status_code == 200
    rows: list[dict[str, Any]] = response.json()["people"]
    return rows


def unlimited(client: httpx.Client, *tools: str) -> None:
    """Lift the rate limit of ``tools`` so a test can send many requests at once."""
    doc = {t: {"rate_per_second": 1_000_000, "burst": 1_000_000} for t in tools}
    assert client.post("/__faults", json={"tools": doc}).status_code == 200
