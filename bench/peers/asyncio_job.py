"""The hand-written peer: the work-email waterfall as an afternoon's asyncio script.

What a competent engineer writes without a framework: one httpx AsyncClient, a semaphore per
provider sized by the concurrency its docs state, a retry loop that honours ``Retry-After`` on
429 and backs off on 5xx, and one task per person trying beta, alpha, then gamma (a gamma
guess below 0.6 confidence is kept only when the verifier says ``valid``). Single calls only:
the usual script does not use bulk endpoints. Nothing is stored, so a second run pays again.

    python bench/peers/asyncio_job.py --url URL --token TOKEN --people people.json

prints one JSON line: ``{"wall_s": ..., "found": [email or null, ...]}`` (input order).
It imports nothing from Playline; it runs in bench/.peers-venv.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import httpx

FIELDS = ("first_name", "last_name", "domain")
# From the providers' documentation (GET /api/v2/integrations): requests in flight at once.
CONCURRENCY = {
    "sim.email.beta": 4,
    "sim.email.alpha": 8,
    "sim.email.gamma": 4,
    "sim.email.verify": 16,
}
GUESS_BELOW = 0.6  # gamma's confidence in the addresses it really knows is 0.6 or more
MAX_RATE_LIMITED = 100  # 429s: wait as told and try again, but not forever
MAX_FAILURES = 6  # 5xx and network errors: back off 0.5 s, 1 s, 2 s, ...


class GaveUp(Exception):
    """A provider call that kept failing; the person moves on to the next provider."""


class Providers:
    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.limits = {tool: asyncio.Semaphore(n) for tool, n in CONCURRENCY.items()}

    async def call(self, tool: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The provider's result (``{}`` when it has none), retrying 429s and 5xx."""
        rate_limited = failures = 0
        async with self.limits[tool]:
            while True:
                try:
                    response = await self.client.post(
                        f"/api/v2/integrations/{tool}/execute", json={"payload": payload}
                    )
                except httpx.TransportError as exc:
                    failures += 1
                    if failures >= MAX_FAILURES:
                        raise GaveUp(f"{tool}: {exc!r}") from exc
                    await asyncio.sleep(0.5 * 2 ** (failures - 1))
                    continue
                if response.status_code == 429:
                    rate_limited += 1
                    if rate_limited >= MAX_RATE_LIMITED:
                        raise GaveUp(f"{tool}: still rate limited after {rate_limited} tries")
                    await asyncio.sleep(float(response.headers.get("Retry-After", "1")))
                    continue
                if response.status_code >= 500:
                    failures += 1
                    if failures >= MAX_FAILURES:
                        raise GaveUp(f"{tool}: {response.status_code} {response.text}")
                    await asyncio.sleep(0.5 * 2 ** (failures - 1))
                    continue
                response.raise_for_status()
                result = response.json().get("result")
                return result if isinstance(result, dict) else {}


def _email(result: dict[str, Any]) -> str | None:
    email = result.get("email")
    return email if isinstance(email, str) and email.strip() else None


async def find_email(providers: Providers, person: dict[str, Any]) -> str | None:
    who = {name: person.get(name) for name in FIELDS}
    if not all(isinstance(v, str) and v.strip() for v in who.values()):
        return None
    for tool in ("sim.email.beta", "sim.email.alpha"):
        try:
            email = _email(await providers.call(tool, who))
        except GaveUp:
            continue
        if email:
            return email
    try:
        found = await providers.call("sim.email.gamma", who)
        email = _email(found)
        if email is None:
            return None
        confidence = found.get("confidence")
        if isinstance(confidence, int | float) and confidence >= GUESS_BELOW:
            return email
        check = await providers.call("sim.email.verify", {"email": email})
    except GaveUp:
        return None
    return email if check.get("status") == "valid" else None


async def main(url: str, token: str, people: list[dict[str, Any]]) -> list[str | None]:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30.0) as client:
        providers = Providers(client)
        return list(await asyncio.gather(*(find_email(providers, p) for p in people)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--people", required=True, help="JSON file: a list of people")
    parser.add_argument("--state", help="unused: this script keeps no state")
    args = parser.parse_args()
    with open(args.people, encoding="utf-8") as f:
        people = json.load(f)
    start = time.perf_counter()
    found = asyncio.run(main(args.url, args.token, people))
    print(json.dumps({"wall_s": time.perf_counter() - start, "found": found}))
