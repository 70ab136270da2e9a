"""By hand, not a test: how many receipts per second the SQLite store claims and completes.

PYTHONPATH=src .venv/bin/python tests/store/throughput_check.py [N] [BATCH]
"""

from __future__ import annotations

import sys
import tempfile
import time

from playline.store import Claim, Event, RowRecord, owner_id
from playline.store.sql import SQLiteStore


def main(n: int = 100_000, batch: int = 500) -> None:
    owner = owner_id("bench")
    keys = [f"{i:064x}" for i in range(n)]
    result = b'{"data":{"email":"someone@example.com","score":0.93},"found":true,"credits":1.0}'
    with tempfile.TemporaryDirectory() as folder, SQLiteStore(f"sqlite:///{folder}/b.db") as store:
        started = time.perf_counter()
        for start in range(0, n, batch):
            chunk = keys[start : start + batch]
            now = time.time()
            store.claim_receipts(
                [Claim(key=k, tool="email", run_id="bench") for k in chunk],
                owner=owner,
                lease_until=now + 60,
                now=now,
            )
            store.complete_receipts([(k, result) for k in chunk], owner=owner, now=now)
        live = n / (time.perf_counter() - started)

        started = time.perf_counter()
        for start in range(0, n, batch):
            chunk = keys[start : start + batch]
            now = time.time()
            store.claim_receipts(
                [Claim(key=k, tool="email", run_id="again") for k in chunk],
                owner=owner,
                lease_until=now + 60,
                now=now,
            )
        cached = n / (time.perf_counter() - started)

        started = time.perf_counter()
        for start in range(0, n, batch):
            chunk = keys[start : start + batch]
            store.save_rows(
                [
                    RowRecord(
                        run_id="bench",
                        dataset="people",
                        key=k,
                        index=start + i,
                        status="completed",
                        values={"key": k, "email": "someone@example.com"},
                        cells={"email": {"status": "completed", "provider": "sim", "cost": 1}},
                    )
                    for i, k in enumerate(chunk)
                ]
            )
            store.append_events(
                [
                    Event(kind="cell", run_id="bench", at=0.0, row_key=k, column="email")
                    for k in chunk
                ]
            )
        rows = n / (time.perf_counter() - started)

        started = time.perf_counter()
        count = sum(1 for _ in store.iter_rows("bench", "people"))
        streamed = count / (time.perf_counter() - started)

    print(f"claim + complete (live):      {live:>10,.0f} keys/s")
    print(f"claim of completed (cached):  {cached:>10,.0f} keys/s")
    print(f"save rows + append events:    {rows:>10,.0f} rows/s")
    print(f"iter_rows:                    {streamed:>10,.0f} rows/s")


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:]))
