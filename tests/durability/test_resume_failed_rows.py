"""SEMANTICS 14, 17: resuming a run reuses its completed rows and re-executes the failed ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import playline as pl
from playline.store import open_store

ROWS = 40
FLAKY = {n for n in range(ROWS) if n % 5 == 0}


def _play_and_tool(flag: Path, calls: list[int]) -> tuple[pl.Play, Any]:
    @pl.tool("resume.flaky")
    def flaky(input: dict[str, Any]) -> dict[str, Any]:
        calls.append(input["n"])
        if flag.exists() and input["n"] in FLAKY:
            raise RuntimeError(f"provider hiccup for {input['n']}")
        return {"n": input["n"], "ok": True}

    @pl.play(name="resume-play")
    async def resume_play(ctx: pl.Context, input: Any) -> pl.Dataset:
        return await (
            ctx.dataset("rows", [{"n": i} for i in range(ROWS)], key="n")
            .with_column("flaky", lambda row, ctx: ctx.tool("resume.flaky", {"n": row["n"]}))
            .with_column("doubled", lambda row: 2 * row["flaky"].get("n"))
            .run()
        )

    return resume_play, flaky


def test_resume_reuses_completed_rows_and_reruns_failed_ones(
    tmp_path: Path, store_url: str
) -> None:
    flag = tmp_path / "fail-now"
    flag.touch()
    calls: list[int] = []
    play, flaky = _play_and_tool(flag, calls)
    store = store_url

    first = pl.run(play, store=store, tools=[flaky])
    assert first.status == "completed_with_errors", first.error
    assert first.stats.rows_failed == len(FLAKY)
    assert first.stats.tool_calls_live == ROWS - len(FLAKY)
    assert first.stats.tool_calls_failed == len(FLAKY)
    errors = first.output.errors
    assert {int(e.row_key) for e in errors} == FLAKY
    assert all(e.column == "flaky" and e.tool == "resume.flaky" for e in errors)
    assert all("provider hiccup" in e.message for e in errors)

    flag.unlink()
    calls.clear()
    again = pl.run(play, store=store, run_id=first.run_id, tools=[flaky])
    assert again.status == "completed", again.error
    assert again.run_id == first.run_id
    assert again.stats.rows == ROWS
    assert again.stats.rows_reused == ROWS - len(FLAKY)
    assert again.stats.rows_executed == len(FLAKY)
    assert again.stats.rows_failed == 0
    # Only the failed calls run again: failed receipts are not reused, completed ones are.
    assert sorted(calls) == sorted(FLAKY)
    assert again.stats.tool_calls_live == len(FLAKY)

    rows = list(open_store(store).iter_rows(first.run_id, "rows"))
    assert len(rows) == ROWS
    assert all(r.status == "completed" and r.error is None for r in rows)
    assert {r.values["n"]: r.values["doubled"] for r in rows} == {n: 2 * n for n in range(ROWS)}
    assert again.output.errors == []


def test_resume_of_a_completed_run_executes_nothing(tmp_path: Path, store_url: str) -> None:
    calls: list[int] = []
    play, flaky = _play_and_tool(tmp_path / "never-created", calls)
    store = store_url
    first = pl.run(play, store=store, tools=[flaky])
    assert first.status == "completed", first.error
    calls.clear()
    again = pl.run(play, store=store, run_id=first.run_id, tools=[flaky])
    assert again.status == "completed", again.error
    assert calls == []
    assert again.stats.rows_reused == ROWS and again.stats.rows_executed == 0
    assert again.stats.tool_calls_live == 0 and again.stats.tool_calls_cached == 0


@pytest.mark.parametrize("run_id", ["", "   "])
def test_blank_run_id_is_refused(tmp_path: Path, run_id: str, store_url: str) -> None:
    play, flaky = _play_and_tool(tmp_path / "x", [])
    with pytest.raises(pl.PlayDefinitionError, match="run_id"):
        pl.run(play, store=store_url, run_id=run_id, tools=[flaky])
