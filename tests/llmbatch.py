"""A play of 1,000 rows whose column asks ``ctx.llm(..., batch=True)`` through
``pl.providers.openai`` against the simulator's OpenAI double, and what the batch-kill tests
check of it (tests/durability/test_llm_batch_kill.py, embedded; and
tests/temporal/test_llm_batch_worker_kill.py, on Temporal): the double's control endpoint
and ledger, the jobs on the receipts, each row's expected answer, and that the batch was
paid once, at the batch price."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from playline.llm import OPENAI_PRICES, usd
from playline.llm._adapter import read_call
from playline.providers.openai import chat_body
from playline.sim import Simulator
from playline.sim._doubles._answers import line
from playline.sim._doubles.openai import OpenAIDouble
from playline.store import open_store

KEY = "sk-sim-llm-0123456789abcdef"
MODEL = "gpt-4o-mini"
ROWS = 1000
DELAY = 3600.0  # seconds of the double's clock a batch takes: held until advanced
PLAYLINE = Path(sys.executable).with_name("playline")

PLAY = """
import playline as pl

openai = pl.providers.openai(api_key={key!r}, base_url={url!r}, poll_interval=0.05,
                             batch_wait=0.2)


@pl.play(name={name!r})
async def first_lines(ctx, input):
    rows = [{{"n": n, "company": f"Company {{n}}"}} for n in range({rows})]
    return await (
        ctx.dataset("companies", rows, key="n")
        .with_column("line", lambda row, ctx: ctx.llm(
            f"One line on {{row['company']}}, please.", model={model!r}, max_tokens=20,
            batch=True))
        .run()
    )
"""


def play_file(folder: Path, sim: Simulator, name: str) -> Path:
    path = folder / "first_lines.py"
    path.write_text(
        PLAY.format(name=name, key=KEY, url=f"{sim.url}/openai/v1", rows=ROWS, model=MODEL),
        encoding="utf-8",
    )
    return path


def expected_line(double: OpenAIDouble, n: int) -> str:
    """The answer the double gives row ``n``'s exact request (its words, its digest)."""
    input = {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"One line on Company {n}, please."}],
        "temperature": 0,
        "max_tokens": 20,
    }
    chat = double.read(chat_body(read_call("openai.batch", input, 1024)))
    return line(chat.seed, chat.last_user)


def control(sim: Simulator, **settings: Any) -> dict[str, Any]:
    """``POST /openai/__double``: the double's settings (``batch_delay``, ``advance``...)."""
    answer = httpx.post(f"{sim.url}/openai/__double", json=settings, timeout=30)
    assert answer.status_code == 200, answer.text
    doc: dict[str, Any] = answer.json()
    return doc


def books(sim: Simulator) -> dict[str, Any]:
    """The double's counters and its LLM ledger (``GET /openai/__double``)."""
    doc: dict[str, Any] = httpx.get(f"{sim.url}/openai/__double", timeout=30).json()
    return doc


def batch_status(sim: Simulator, batch_id: str) -> str:
    answer = httpx.get(
        f"{sim.url}/openai/v1/batches/{batch_id}",
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["status"])


def jobs_on_receipts(path: Path) -> list[Any]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return [
            json.loads(job)
            for (job,) in db.execute("SELECT job FROM receipts WHERE job IS NOT NULL")
        ]


def check_paid_once(sim: Simulator, store: str, run_id: str) -> None:
    """Every row has its own answer; the ledger's dollars are the double's, at the batch
    price (half the chat price of the same tokens)."""
    double = sim.double("openai")
    assert isinstance(double, OpenAIDouble)
    ledger = books(sim)
    assert ledger["duplicates"] == 0
    llm = ledger["llm"]
    assert llm["live"] == {}
    batch = llm["batch"][MODEL]
    assert batch["requests"] == ROWS
    used_in, used_out = int(batch["input_tokens"]), int(batch["output_tokens"])
    price = OPENAI_PRICES[MODEL]
    chat_price = (used_in * price.input + used_out * price.output) / 1e6
    assert llm["usd"] == pytest.approx(chat_price / 2)
    assert llm["usd"] == pytest.approx(usd(MODEL, used_in, used_out, batch=True))

    db = open_store(store)
    try:
        rows = list(db.iter_rows(run_id, "companies"))
        entries = db.read_ledger(run_id)
        record = db.get_run(run_id)
    finally:
        db.close()
    assert record is not None and record.status.value == "completed"
    assert len(rows) == ROWS and {r.status for r in rows} == {"completed"}
    for row in rows:  # matched by custom_id: each row has the answer to its own prompt
        assert row.values["line"] == expected_line(double, row.values["n"])
    assert len(entries) == ROWS and {(e.tool, e.unit) for e in entries} == {("openai.batch", "usd")}
    assert sum(e.credits for e in entries) == pytest.approx(llm["usd"])
