"""By hand, not a test: how many receipts per second a store claims and completes.

PYTHONPATH=src .venv/bin/python tests/store/throughput_check.py [N] [BATCH] [URL]

Without URL: a SQLite file in a temp dir. ``python -m bench store`` compares the stores on
whole runs.
"""

from __future__ import annotations

import sys
import tempfile
import time

from playline.store import Claim, Completion, Event, RowRecord, open_store, owner_id


def main(n: int = 100_000, batch: int = 500, url: str | None = None) -> None:
    owner = owner_id("bench")
    keys = [f"{i:064x}" for i in range(n)]
    result = b'{"data":{"email":"someone@example.com","score":0.93},"found":true,"credits":1.0}'
    with tempfile.TemporaryDirectory() as folder:
        store = open_store(url or f"sqlite:///{folder}/b.db")
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
            store.complete_receipts(
                [Completion(key=k, result=result) for k in chunk], owner=owner, now=now
            )
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
        store.close()

    print(f"claim + complete (live):      {live:>10,.0f} keys/s")
    print(f"claim of completed (cached):  {cached:>10,.0f} keys/s")
    print(f"save rows + append events:    {rows:>10,.0f} rows/s")
    print(f"iter_rows:                    {streamed:>10,.0f} rows/s")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(*(int(a) for a in args[:2]), *args[2:3])
