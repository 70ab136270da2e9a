"""llm_shared: the ``llm`` bench's 2,000 classifications split over several processes on one
SQLite store, against one simulator OpenAI double at 200,000 tokens a minute.

Each process (``python -m bench.llm_shared child ...``) runs the ``bench-llm`` play on its
share of the companies with ``pl.providers.openai(rate=pl.Rate(tokens_per_minute=TPM))``:
the whole account's limit, declared by every process. On a shared store the token bucket is
the store's (``tools/_shared_tokens.py``), so together they stay under it: the bound is the
``llm`` bench's, ``(N - TPM) / (TPM / 60)`` seconds for the N tokens the double counted, and
``wall`` runs from the first process's ``pl.run`` to the last one's end.

``BENCH_LLM_SHARED_PROCESSES`` (4) sets the processes, ``BENCH_LLM_ROWS`` the rows, and
``BENCH_LLM_SHARED_STORE=memory`` gives each process a ``memory://`` store: buckets of its
own, each the whole limit (the contrast: together they send up to N times it, and the
double answers 429).

``python -m bench llm_shared`` (or ``python -m bench.llm_shared``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

import playline as pl
from playline.sim import serve
from playline.store import open_store
from playline.tools._declared import WINDOW_MARGIN

from .llm import (
    KEY,
    MAX_TOKENS,
    MODEL,
    ROWS,
    RPM,
    TPM,
    classify,
    companies_to_classify,
    control,
)

PROCESSES = int(os.environ.get("BENCH_LLM_SHARED_PROCESSES", "4"))
STORE = os.environ.get("BENCH_LLM_SHARED_STORE", "sqlite")
GOAL = "wall within 1.1x of the token bound with 0 429s, the processes together"
ROOT = Path(__file__).resolve().parent.parent


def child(sim_url: str, store_url: str, share_file: str) -> dict[str, Any]:
    """One process: its share of the companies, through the whole account's limits."""
    companies = orjson.loads(Path(share_file).read_bytes())
    rate = pl.Rate(per_minute=RPM, tokens_per_minute=TPM)
    openai = pl.providers.openai(api_key=KEY, base_url=f"{sim_url}/openai/v1", rate=rate)
    start = time.time()
    result = pl.run(classify, {"companies": companies}, store=store_url, tools=[openai])
    return {"start": start, "end": time.time(), "status": result.status, "rows": len(companies)}


def main() -> dict[str, Any]:
    with (
        serve(seed=7, latency_ms=0, token=KEY, providers=True) as sim,
        tempfile.TemporaryDirectory() as tmp,
    ):
        companies = companies_to_classify(sim)
        store_url = f"sqlite:///{Path(tmp) / 'llm.db'}" if STORE == "sqlite" else "memory://"
        if STORE == "sqlite":
            open_store(store_url).close()  # the schema, once
        children = []
        for n in range(PROCESSES):
            share = Path(tmp) / f"share-{n}.json"
            share.write_bytes(orjson.dumps(companies[n::PROCESSES]))
            children.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "bench.llm_shared",
                        "child",
                        sim.url,
                        store_url,
                        str(share),
                    ],
                    cwd=ROOT,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        runs = [orjson.loads(c.communicate()[0].strip().splitlines()[-1]) for c in children]
        books = control(sim)
    live = books["llm"]["live"][MODEL]
    counted = int(live["input_tokens"]) + int(live["requests"]) * MAX_TOKENS  # N
    wall = max(r["end"] for r in runs) - min(r["start"] for r in runs)
    bound = (counted - TPM) / (TPM / 60)
    gate_bound = (counted - TPM) / (TPM / (60 + WINDOW_MARGIN))
    report = {
        "bench": "llm_shared",
        "ratio": round(wall / bound, 3),
        "goal": GOAL,
        "processes": PROCESSES,
        "store": STORE,
        "rows": ROWS,
        "tpm": TPM,
        "completed": sum(r["status"] == "completed" for r in runs),
        "wall_s": round(wall, 2),
        "process_walls_s": [round(r["end"] - r["start"], 2) for r in runs],
        "tokens_counted": counted,
        "bound_s": round(bound, 2),
        "gate_ratio": round(wall / gate_bound, 3) if gate_bound > 0 else None,
        "requests": int(live["requests"]),
        "rejected_429": int(books["throttled"]),
        "duplicates": int(books["duplicates"]),
    }
    print(
        f"llm_shared: {PROCESSES} processes on {STORE}, {ROWS:,} rows, TPM {TPM:,}: "
        f"wall {wall:.2f} s, bound {bound:.2f} s ({report['ratio']:.3f}x, gate "
        f"{report['gate_ratio']}x), 429s {report['rejected_429']}, completed "
        f"{report['completed']}/{PROCESSES}",
        file=sys.stderr,
        flush=True,
    )
    return report


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        print(orjson.dumps(child(*sys.argv[2:5])).decode(), flush=True)
    else:
        print(orjson.dumps(main()).decode(), flush=True)
