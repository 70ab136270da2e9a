"""The DBOS peer: the work-email waterfall as one durable workflow per person.

DBOS Transact (``dbos`` on PyPI) with its system database in SQLite, written the way its
documentation says to call rate-limited APIs: the person workflows go through a queue whose
limiter starts at most 10 a second (beta's limit; every person starts with beta). Each
workflow tries beta, alpha, then gamma (a gamma guess below 0.6 confidence is kept only when
the verifier says ``valid``); every provider call is a step, retried by DBOS on 429 and 5xx
with its exponential backoff (DBOS's step retries cannot honour ``Retry-After``), under the
same semaphore per provider as the hand-written script. Single calls only.

Workflows get DBOS's default (random) ids, as a batch script enqueuing one per person does;
so a second run is new work and pays again. (Content-derived ids set with ``SetWorkflowID``
would let DBOS answer a re-run from its system database; that is a choice its user must make.)

    python bench/peers/dbos_job.py --url URL --token TOKEN --people people.json --state DIR

prints one JSON line: ``{"wall_s": ..., "found": [email or null, ...]}`` (input order).
It imports nothing from Playline; it runs in bench/.peers-venv.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

import httpx
from dbos import DBOS, DBOSConfig

FIELDS = ("first_name", "last_name", "domain")
CONCURRENCY = {
    "sim.email.beta": 4,
    "sim.email.alpha": 8,
    "sim.email.gamma": 4,
    "sim.email.verify": 16,
}
GUESS_BELOW = 0.6


class Retryable(Exception):
    """A 429, a 5xx or a network error: DBOS retries the step."""


class Gateway:
    """An HTTP client and per-provider semaphores, for the event loop that made it."""

    def __init__(self, url: str, token: str) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        self.client = httpx.AsyncClient(base_url=url, headers=headers, timeout=30.0)
        self.limits = {tool: asyncio.Semaphore(n) for tool, n in CONCURRENCY.items()}


# DBOS runs dequeued workflows on its own background loop: each loop gets its gateway there,
# on first use, kept for the life of the process.
GATEWAY_ARGS: dict[str, str] = {}
_gateways: dict[asyncio.AbstractEventLoop, Gateway] = {}


def gateway() -> Gateway:
    loop = asyncio.get_running_loop()
    if loop not in _gateways:
        _gateways[loop] = Gateway(**GATEWAY_ARGS)
    return _gateways[loop]


@DBOS.step(
    retries_allowed=True,
    max_attempts=12,
    interval_seconds=1.0,
    backoff_rate=1.5,
    should_retry=lambda exc: isinstance(exc, Retryable),
)
async def call_provider(tool: str, payload: dict[str, Any]) -> dict[str, Any]:
    gw = gateway()
    async with gw.limits[tool]:
        try:
            response = await gw.client.post(
                f"/api/v2/integrations/{tool}/execute", json={"payload": payload}
            )
        except httpx.TransportError as exc:
            raise Retryable(f"{tool}: {exc!r}") from exc
    if response.status_code == 429 or response.status_code >= 500:
        raise Retryable(f"{tool}: {response.status_code}")
    response.raise_for_status()
    result = response.json().get("result")
    return result if isinstance(result, dict) else {}


def _email(result: dict[str, Any]) -> str | None:
    email = result.get("email")
    return email if isinstance(email, str) and email.strip() else None


@DBOS.workflow()
async def find_email(person: dict[str, Any]) -> str | None:
    who = {name: person.get(name) for name in FIELDS}
    if not all(isinstance(v, str) and v.strip() for v in who.values()):
        return None
    for tool in ("sim.email.beta", "sim.email.alpha"):
        try:
            email = _email(await call_provider(tool, who))
        except Exception:  # retries exhausted: on to the next provider
            continue
        if email:
            return email
    try:
        found = await call_provider("sim.email.gamma", who)
        email = _email(found)
        if email is None:
            return None
        confidence = found.get("confidence")
        if isinstance(confidence, int | float) and confidence >= GUESS_BELOW:
            return email
        check = await call_provider("sim.email.verify", {"email": email})
    except Exception:
        return None
    return email if check.get("status") == "valid" else None


async def main(people: list[dict[str, Any]]) -> list[str | None]:
    queue = await DBOS.register_queue_async("people", limiter={"limit": 10, "period": 1.0})
    handles = [await queue.enqueue_async(find_email, p) for p in people]
    return [await h.get_result() for h in handles]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--people", required=True, help="JSON file: a list of people")
    parser.add_argument("--state", required=True, help="folder for DBOS's SQLite database")
    args = parser.parse_args()
    with open(args.people, encoding="utf-8") as f:
        people = json.load(f)
    start = time.perf_counter()
    config: DBOSConfig = {
        "name": "peers-work-email",
        "system_database_url": f"sqlite:///{os.path.join(args.state, 'dbos.sqlite')}",
        "log_level": "WARNING",
    }
    GATEWAY_ARGS.update(url=args.url, token=args.token)
    DBOS(config=config)
    DBOS.launch()
    try:
        found = asyncio.run(main(people))
    finally:
        DBOS.destroy()
    print(json.dumps({"wall_s": time.perf_counter() - start, "found": found}))
