"""What docs/guide/temporal.md says of workers on other machines, checked on the dev server:

- Workers share each tool's rate limit through the store, as processes running plays on one
  store do (stores.md#shared-rate-limits): a worker's attempt paces a tool that declares a
  rate with the store's gate, which every other worker and process on the store takes its
  tokens from. (Before, each worker paced its attempts with its own bucket.)
- An input file named by the run's input (``-i file=leads.csv``) is read by the worker that
  runs the attempt, not by the client that submitted it: a relative path from the worker's
  own folder. The client inlines only what it reads itself (``-i rows:=@leads.json``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

import playline as pl
from playline.backends import temporal
from playline.store import open_store

from temporalhelp import serving, task_queue

pytestmark = pytest.mark.anyio


@pl.tool("t6.rated", rate=pl.Rate(per_second=40, burst=8))
def rated(input: dict[str, Any]) -> dict[str, Any]:
    return {"v": input["n"]}


@pl.play(name="temporal-t6-csv")
async def from_csv(ctx: pl.Context, input: Any) -> Any:
    rows = ctx.csv(input["file"])
    return await ctx.dataset("leads", rows, key="email").run()


@pl.play(name="temporal-t6-rated")
async def rated_rows(ctx: pl.Context, input: Any) -> Any:
    return await (
        ctx.dataset("nums", [{"n": n} for n in range(6)], key="n")
        .with_column("v", lambda row, ctx: ctx.tool("t6.rated", {"n": row["n"]}))
        .run()
    )


async def test_a_workers_attempts_take_their_rate_from_the_stores_gate(
    temporal_client: Client, tmp_path: Path
) -> None:
    store = open_store(f"sqlite:///{tmp_path}/shared.db")
    try:
        async with serving(temporal_client, store, tools=[rated]) as worker:
            result = await temporal.arun(
                rated_rows,
                temporal=temporal_client,
                store=store,
                task_queue=worker.where.task_queue,
            )
        assert result.status == "completed", result.error
        assert result.stats.tool_calls_live == 6
        gates = [g for g in store.read_gates(now=time.time()) if g.key.startswith("t6.rated@")]
        assert len(gates) == 1, gates  # the rate every worker on the store shares
        assert gates[0].ceiling == pytest.approx(40 * 0.95)  # the declared rate, paced at 95%
    finally:
        store.close()


async def test_a_relative_input_path_is_read_from_the_workers_folder(
    temporal_client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client submits ``{"file": "leads.csv"}`` from a folder that has no such file; the
    worker, started in the folder that has it, reads it."""
    (tmp_path / "client").mkdir()
    worker_dir = tmp_path / "worker"
    worker_dir.mkdir()
    (worker_dir / "leads.csv").write_text("email,name\nada@x.io,Ada\nbo@x.io,Bo\n")
    store = open_store(f"sqlite:///{tmp_path}/inputs.db")
    try:
        monkeypatch.chdir(tmp_path / "client")
        run_id = await temporal.start(
            from_csv, {"file": "leads.csv"}, temporal=temporal_client, store=store,
            task_queue=(queue := task_queue()),
        )  # fmt: skip
        monkeypatch.chdir(worker_dir)
        async with serving(temporal_client, store, queue=queue):
            result = await temporal.follow(run_id, temporal=temporal_client, store=store)
        assert result.status == "completed", result.error
        assert [r["name"] for r in result.output.to_list()] == ["Ada", "Bo"]
        record = store.get_run(run_id)
        assert record is not None and record.input == {"file": "leads.csv"}  # not inlined
    finally:
        store.close()
