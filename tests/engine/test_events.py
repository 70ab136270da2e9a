"""Progress and observability (SEMANTICS 33, 34): events, logs, stats and the ledger."""

from __future__ import annotations

import asyncio
import itertools

import pytest

import playline as pl

from .helpers import call_tool, dataset_play, row_reports, rows_of, run_dataset, run_play


@pytest.fixture
def company_tool(registry):
    @registry.tool("t.company", batch=pl.Batch(max_size=10), cost=pl.Cost(1.5))
    def company(inputs):
        return [{"domain": f"{i['x']}.io"} for i in inputs]

    return registry


def enrich_play():
    async def play(ctx, input):
        ctx.log("starting")

        def plain(row, ctx):
            ctx.log(f"row {row['x']}")
            return row["x"].upper()

        return await (
            ctx.dataset("rows", [{"x": "a"}, {"x": "b"}], key="x")
            .with_column("company", call_tool("t.company"))
            .with_column("plain", plain)
            .run()
        )

    return play


@pytest.fixture
def enriched(company_tool, store):
    """One run of ``enrich_play`` and every event its listener saw."""
    events: list[pl.Event] = []
    result = run_play(enrich_play(), tools=[company_tool], store=store, listeners=[events.append])
    assert result.status == "completed", result.error
    return result, events


def only(events, **fields):
    return [e for e in events if all(getattr(e, k) == v for k, v in fields.items())]


def test_listeners_see_every_cell_change(enriched):
    result, events = enriched

    # row "a" waited on t.company, then finished: its cells ride in its row's report
    ((_, status, detail),) = [r for r in row_reports(events) if r[0] == "a"]
    assert status == "completed"
    assert detail == {
        "cells": {"company": "completed", "plain": "completed"},
        "values": {"company": {"domain": "a.io"}, "plain": "A"},
    }
    # completed rows are reported together, one event for many rows
    (reported,) = only(events, kind="rows")
    assert reported.run_id == result.run_id and reported.dataset == "rows"
    # what was queued and sent is reported per batch
    (batch,) = only(events, kind="batch")
    assert batch.provider == "t.company"


def test_a_cell_set_before_its_row_waits_gets_its_own_event(company_tool):
    events: list[pl.Event] = []
    play = dataset_play(
        [{"x": "a"}],
        {"plain": lambda r: r["x"].upper(), "company": call_tool("t.company")},
        key="x",
    )

    run_play(play, tools=[company_tool], listeners=[events.append])

    (plain,) = only(events, kind="cell", row_key="a", column="plain")
    assert (plain.status, plain.preview) == ("completed", "A")
    ((_, _, detail),) = row_reports(events)
    assert detail == {
        "cells": {"company": "completed"},
        "values": {"company": {"domain": "a.io"}},
    }


def test_listeners_see_rows_datasets_batches_and_the_run(enriched):
    _, events = enriched

    assert {key for key, status, _ in row_reports(events) if status == "completed"} == {"a", "b"}
    assert [e.status for e in only(events, kind="dataset", dataset="rows")] == [
        "running",
        "completed",
    ]
    (batch,) = only(events, kind="batch")
    assert (batch.provider, batch.data) == ("t.company", {"tool": "t.company", "size": 2})
    assert [e.status for e in only(events, kind="run")] == ["running", "completed"]
    assert events[-1].data["rows"] == 2


def test_a_dataset_the_budget_stops_reports_its_end_with_its_pending_rows(registry, store):
    """It ends ``stopped`` (``playline show`` showed a budget-stopped dataset ``running``)."""
    registry.tool("t.paid", batch=pl.Batch(max_size=2), cost=pl.Cost(1))(lambda inputs: inputs)
    events: list[pl.Event] = []

    result = run_dataset(
        rows_of(5), {"y": call_tool("t.paid")}, tools=[registry], max_credits=2,
        store=store, listeners=[events.append],
    )  # fmt: skip

    assert isinstance(result.exception, pl.BudgetExceeded)
    started, ended = only(events, kind="dataset", dataset="rows")
    assert (started.status, ended.status) == ("running", "stopped")
    assert ended.data["rows_pending"] == 3 == result.stats.rows_pending
    assert "Budget of 2 credits would be exceeded" in ended.error
    stored = store.read_events(result.run_id, kinds=["dataset"])
    assert [e.status for e in stored] == ["running", "stopped"]


def test_a_dataset_an_error_stops_reports_its_end_failed():
    events: list[pl.Event] = []

    def explode(row):
        raise ValueError("nope")

    result = run_dataset(
        [{"x": 1}], {"y": explode}, tools=[], on_row_error="raise", listeners=[events.append]
    )

    assert result.status == "failed"
    _, ended = only(events, kind="dataset", dataset="rows")
    assert ended.status == "failed" and "nope" in ended.error


def test_a_dataset_a_stop_ends_reports_its_end_stopped(registry, store):
    events: list[pl.Event] = []

    async def main():
        stop = asyncio.Event()

        @registry.tool("t.stops", rate=pl.Rate(concurrency=1))
        def stops(input):
            stop.set()  # a Ctrl-C while the first call is out: the others are never sent
            return input

        play = dataset_play(rows_of(3), {"y": call_tool("t.stops")})
        return await pl.arun(
            play, tools=[registry], store=store, stop=stop, listeners=[events.append]
        )

    result = asyncio.run(main())

    assert result.status == "suspended" and result.stats.rows_pending == 2
    _, ended = only(events, kind="dataset", dataset="rows")
    assert ended.status == "stopped" and ended.error is None
    assert ended.data["rows_pending"] == 2


def test_events_are_stored_in_order(enriched, store):
    result, events = enriched

    stored = store.read_events(result.run_id)

    assert [(e.kind, e.row_key, e.column, e.status) for e in stored] == [
        (e.kind, e.row_key, e.column, e.status) for e in events
    ]
    seqs = [e.seq for e in stored]
    assert all(a < b for a, b in itertools.pairwise(seqs))
    assert store.read_events(result.run_id, after_seq=seqs[-2]) == stored[-1:]


def test_log_lines_are_readable_after_the_run(enriched, store):
    result, _ = enriched

    logs = store.read_events(result.run_id, kinds=["log"])

    assert [e.preview for e in logs[:1]] == ["starting"]
    assert sorted((e.preview, (e.data or {}).get("row_key")) for e in logs[1:]) == [
        ("row a", "a"),
        ("row b", "b"),
    ]


def test_the_run_keeps_its_stats_and_ledger(enriched, store):
    result, _ = enriched

    record = store.get_run(result.run_id)
    ledger = store.read_ledger(result.run_id)

    assert record.status == "completed"
    assert record.stats == result.stats.to_dict()
    assert record.output == {"$dataset": "rows", "run_id": result.run_id, "rows": 2}
    assert sorted((e.tool, e.credits, e.dataset, e.row_key) for e in ledger) == [
        ("t.company", 1.5, "rows", "a"),
        ("t.company", 1.5, "rows", "b"),
    ]
    assert result.stats.credits == 3.0


def test_a_failed_cell_event_carries_the_error():
    events: list[pl.Event] = []

    def explode(row):
        raise ValueError("nope")

    run_dataset([{"x": 1}], {"y": explode}, tools=[], listeners=[events.append])

    (row,) = only(events, kind="row", status="failed")
    assert row.data == {"cells": {"y": "failed"}, "values": {"y": None}}
    assert "nope" in row.error


def test_a_skipped_cell_is_an_event():
    events: list[pl.Event] = []

    async def play(ctx, input):
        builder = ctx.dataset("rows", [{"x": 1}]).with_column("y", lambda r: 1, when=lambda r: 0)
        return await builder.run()

    run_play(play, tools=[], listeners=[events.append])

    ((_, _, detail),) = row_reports(events)
    assert detail == {"cells": {"y": "skipped"}, "values": {"y": None}}


def test_hidden_columns_make_no_cell_events(company_tool):
    events: list[pl.Event] = []
    play = dataset_play([{"x": "a"}], {"_company": call_tool("t.company"), "y": lambda r: 1})

    run_play(play, tools=[company_tool], listeners=[events.append])

    assert only(events, kind="cell", column="_company") == []


def test_a_listener_that_raises_is_logged_once_in_sentences_that_end_once():
    events: list[pl.Event] = []

    def broken(event):
        raise ValueError("the display is gone.")

    run_dataset([{"x": 1}], {"y": lambda row: 1}, tools=[], listeners=[broken, events.append])

    (line,) = [e.preview for e in only(events, kind="log") if "listener" in (e.preview or "")]
    assert "raised ValueError: the display is gone. The run goes on;" in line
