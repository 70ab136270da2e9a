"""llm: 2,000 rows of a one-line classification through ``ctx.llm`` against the simulator's
OpenAI double, at a limit of 200,000 tokens a minute declared on both sides.

The workload: each row asks ``gpt-4o-mini`` to label a company with one of seven industries
(the labels defined in the prompt, ~250 prompt tokens, ``max_tokens=16``), through
``pl.providers.openai`` (the ``openai.chat`` tool) with ``rate=pl.Rate(per_minute=RPM,
tokens_per_minute=TPM)`` (the adapter's own tier-1 rate with its request limit raised);
the double gets ``tpm=TPM`` and ``rpm=RPM`` through its control endpoint
(``POST /openai/__double``). RPM is 30,000, so the 2,000 requests never bind: the
run is bound by tokens. The double answers after 20 ms (its ``latency``).

The bound. The double counts a request as OpenAI does: its prompt tokens plus its
``max_tokens``, taken before the request runs and never given back, from a bucket of TPM
tokens, full at the start and refilled continuously at TPM/60 a second (OpenAI's limits are
"continuously replenished"; the double's ``_llm.py``). With N tokens counted in all, the last
request can go when the refill has covered what the first, full bucket did not:

    bound = (N - TPM) / (TPM / 60) seconds

(the first window free, every later token at the refill rate; no client, however clever,
finishes sooner without a 429). N is read from the double's ledger: its prompt tokens plus
2,000 x ``max_tokens``. The workload is sized so that N is more than 2 x TPM: the bound is
at least a minute of waiting for tokens, not a burst.

Playline's token gate is a bucket too (``tools/_tokens.py``), refilled a little slower,
over a minute and ``WINDOW_MARGIN`` (61 s), and it counts N' tokens: each prompt's
estimate, corrected to the prompt the answer counted, plus ``max_tokens`` (so N' = N when
every answer says its usage). Its own best is

    gate_bound = (N' - TPM) / (TPM / 61) seconds

Both are printed: ``ratio`` is wall / bound (the issue's goal: within 1.1x), ``gate_ratio``
is wall / gate_bound (how close the gate runs to its own rule). A run at its gate's bound is
61/60 of the provider's: 1.017.

``BENCH_LLM_ROWS`` and ``BENCH_LLM_MAX_TOKENS`` change the workload.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

import playline as pl
from playline.llm import estimate_tokens
from playline.sim import Simulator, serve
from playline.store import open_store
from playline.tools._declared import WINDOW_MARGIN

from ._measure import timed

ROWS = int(os.environ.get("BENCH_LLM_ROWS", "2000"))
MAX_TOKENS = int(os.environ.get("BENCH_LLM_MAX_TOKENS", "16"))
TPM = 200_000
RPM = 30_000  # far above 2,000 requests: requests never bind
LATENCY = 0.02  # seconds the double takes to answer
MODEL = "gpt-4o-mini"
KEY = "sk-bench-llm-0123456789abcdef"
GOAL = "wall within 1.1x of the token bound; 0 429s; the ledger's dollars = the double's"

LABELS = {
    "software": "companies whose main product is software sold as licences or "
    "subscriptions, including SaaS platforms, developer tools and mobile apps",
    "hardware": "companies that design or make physical devices, machines, chips, "
    "components or equipment, whether they sell to consumers or to other businesses",
    "services": "consulting firms, agencies, outsourcers and other companies whose revenue "
    "comes mainly from the work of their people, billed by the hour or the project",
    "finance": "banks, insurers, lenders, payment processors, asset managers and other "
    "companies that handle money for their customers",
    "health": "hospitals, clinics, drug makers, medical device makers and companies that "
    "sell to them",
    "retail": "shops, online stores, marketplaces and brands that sell goods to consumers",
    "other": "any company that fits none of the labels above",
}
INSTRUCTIONS = (
    "Classify the company below into exactly one industry label. The labels are:\n"
    + "\n".join(f"- {label}: {meaning}." for label, meaning in LABELS.items())
    + "\nAnswer with the label only, in lower case, with no punctuation and no explanation."
)


def prompt(row: dict[str, Any]) -> str:
    return (
        f"{INSTRUCTIONS}\n\nCompany: {row['company']} ({row['domain']}), {row['size']} "
        f"employees, based in {row['country']}."
    )


@pl.play(name="bench-llm")
async def classify(ctx: pl.Context, input: dict[str, Any]) -> int:
    ds = await (
        ctx.dataset("companies", input["companies"], key="domain")
        .with_column(
            "industry",
            lambda row, ctx: ctx.llm(prompt(row), model=MODEL, max_tokens=MAX_TOKENS),
        )
        .run()
    )
    return len(ds)


def control(sim: Simulator, **settings: Any) -> dict[str, Any]:
    """``POST /openai/__double`` (``GET`` without settings): the double's ledger."""
    url = f"{sim.url}/openai/__double"
    answer = httpx.post(url, json=settings) if settings else httpx.get(url)
    answer.raise_for_status()
    doc: dict[str, Any] = answer.json()
    return doc


def companies_to_classify(sim: Simulator) -> list[dict[str, Any]]:
    """The ``ROWS`` companies of the simulator's world, as the play reads them; and its
    OpenAI double set to the bench's limits, its counts reset."""
    control(sim, reset=True)
    control(sim, tpm=TPM, rpm=RPM, latency=LATENCY)
    return [
        {"company": c["name"], "domain": c["domain"], "size": c["size"], "country": c["country"]}
        for c in sim.companies(ROWS)
    ]


def main() -> dict[str, Any]:
    with serve(seed=7, latency_ms=0, token=KEY, providers=True) as sim:
        companies = companies_to_classify(sim)
        rate = pl.Rate(per_minute=RPM, tokens_per_minute=TPM)
        openai = pl.providers.openai(api_key=KEY, base_url=f"{sim.url}/openai/v1", rate=rate)
        with tempfile.TemporaryDirectory() as tmp:
            store = open_store(f"sqlite:///{Path(tmp) / 'llm.db'}")
            try:
                wall, result = timed(
                    lambda: pl.run(classify, {"companies": companies}, store=store, tools=[openai])
                )
                assert result.status == "completed", result.error
                ledger_usd = sum(e.credits for e in store.read_ledger(result.run_id))
            finally:
                store.close()
        books = control(sim)
    llm = books["llm"]
    live = llm["live"][MODEL]
    counted = int(live["input_tokens"]) + int(live["requests"]) * MAX_TOKENS  # N
    estimated = sum(  # the gate's estimate before the answers corrected it
        estimate_tokens({"model": MODEL, "messages": [{"role": "user", "content": prompt(c)}]})
        + MAX_TOKENS
        for c in companies
    )
    bound = (counted - TPM) / (TPM / 60)
    gate_bound = (counted - TPM) / (TPM / (60 + WINDOW_MARGIN))  # N' = N: usage corrects it
    report = {
        "bench": "llm",
        "ratio": round(wall / bound, 3),
        "goal": GOAL,
        "rows": ROWS,
        "max_tokens": MAX_TOKENS,
        "tpm": TPM,
        "rpm": RPM,
        "wall_s": round(wall, 2),
        "tokens_counted": counted,
        "windows": round(counted / TPM, 3),
        "bound_s": round(bound, 2),
        "tokens_estimated": estimated,
        "gate_bound_s": round(gate_bound, 2),
        "gate_ratio": round(wall / gate_bound, 3) if gate_bound > 0 else None,
        "requests": int(live["requests"]),
        "rejected_429": int(books["throttled"]),
        "duplicates": int(books["duplicates"]),
        "usd_double": round(float(llm["usd"]), 6),
        "usd_ledger": round(ledger_usd, 6),
        "usd_match": math.isclose(ledger_usd, float(llm["usd"]), rel_tol=1e-9, abs_tol=1e-9),
    }
    print(table(report), file=sys.stderr, flush=True)
    return report


def table(report: dict[str, Any]) -> str:
    lines = [
        f"llm: {report['rows']:,} classifications, {MODEL}, max_tokens={report['max_tokens']}, "
        f"TPM {report['tpm']:,}",
        f"{'':34} {'seconds':>8} {'tokens':>9} {'wall/it':>8}",
        f"{'wall':34} {report['wall_s']:8.2f}",
        f"{'bound: (N - TPM) / (TPM/60)':34} {report['bound_s']:8.2f} "
        f"{report['tokens_counted']:9,} {report['ratio']:8.3f}",
        f"{'gate: (N - TPM) / (TPM/61)':34} {report['gate_bound_s']:8.2f} "
        f"{report['tokens_counted']:9,} {report['gate_ratio']:8.3f}",
        f"(the gate's estimate before usage corrected it: {report['tokens_estimated']:,})",
        f"429s: {report['rejected_429']}   duplicates: {report['duplicates']}   "
        f"dollars: ledger {report['usd_ledger']:.6f} / double {report['usd_double']:.6f}",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    import orjson

    print(orjson.dumps(main()).decode())
