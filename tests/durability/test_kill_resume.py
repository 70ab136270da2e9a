"""SEMANTICS 11, 17: a run killed at any moment resumes by run id; completed calls never rerun."""

from __future__ import annotations

from pathlib import Path

from playline.store import ReceiptStatus, open_store

from durability_helpers import (
    BATCH_SIZE,
    TOOLS,
    Journal,
    finish,
    journal_lines,
    kill,
    query,
    start,
    wait_until,
    write_play,
)

ROWS = 300


def test_killed_run_resumes_and_never_repeats_a_completed_call(
    tmp_path: Path, durable_store_url: str
) -> None:
    script = write_play(tmp_path)
    journal = tmp_path / "journal.log"
    store_url = durable_store_url
    run_id = "run-killed"
    env = {"PLAY_ROWS": str(ROWS)}

    kills = 0
    for threshold in (20, 250, 450):  # journal lines, out of 2 tools x 300 inputs
        executed = len([x for x in journal_lines(journal) if x != "KILL"])
        assert executed < threshold, "the previous attempt ran past the next kill point"
        proc = start(script, store_url, run_id, env=env)
        wait_until(
            lambda t=threshold: len([x for x in journal_lines(journal) if x != "KILL"]) >= t,
            what=f"{threshold} journal lines",
            proc=proc,
        )
        kill(proc, journal)
        kills += 1

    final = finish(start(script, store_url, run_id, env=env))
    assert final["status"] == "completed", final["error"]
    assert final["stats"]["rows"] == ROWS and final["stats"]["rows_failed"] == 0

    store = open_store(store_url)
    rows = list(store.iter_rows(run_id, "numbers"))
    assert len(rows) == ROWS
    for record in rows:
        n = record.values["n"]
        assert record.status == "completed"
        assert record.values == {
            "n": n,
            "count": {"n": n, "double": 2 * n},
            "square": {"square": 4 * n * n},
        }

    parsed = Journal.parse(journal_lines(journal))
    assert parsed.kills == kills
    # Every input ran, for both tools.
    assert set(parsed.executions["t.count"]) == set(range(ROWS))
    assert set(parsed.executions["t.square"]) == {2 * n for n in range(ROWS)}
    # At most the batch in flight at each kill, per tool, ran again ...
    duplicates = parsed.duplicates()
    assert sum(duplicates.values()) <= kills * BATCH_SIZE * len(TOOLS), duplicates
    # ... and precisely: an input ran twice only when its first run was in that batch.
    parsed.assert_only_in_flight_repeated()

    # Nothing is left running or failed: every call has its completed receipt.
    statuses = dict(query(store_url, "SELECT status, count(*) FROM receipts GROUP BY status"))
    assert statuses == {ReceiptStatus.COMPLETED.value: ROWS * len(TOOLS)}


def test_rows_written_before_a_kill_are_reused_on_resume(
    tmp_path: Path, durable_store_url: str
) -> None:
    """Rows are saved in batches; a resume reuses exactly the rows saved before the kill."""
    rows = 2500
    script = write_play(tmp_path)
    journal = tmp_path / "journal.log"
    store_url = durable_store_url
    run_id = "run-row-batches"
    env = {"PLAY_ROWS": str(rows), "PLAY_LATENCY": "0.0004"}

    def saved_rows() -> int:
        found = query(
            store_url,
            f"SELECT count(*) FROM rows JOIN row_sets USING (set_id) WHERE run_id = '{run_id}'",
        )
        return int(found[0][0]) if found else 0

    proc = start(script, store_url, run_id, env=env)
    wait_until(lambda: saved_rows() > 0, what="the first batch of rows saved", proc=proc)
    kill(proc, journal)
    saved = saved_rows()
    assert 0 < saved < rows
    before_kill = len([x for x in journal_lines(journal) if x != "KILL"])

    final = finish(start(script, store_url, run_id, env=env))
    assert final["status"] == "completed", final["error"]
    stats = final["stats"]
    assert stats["rows"] == rows
    assert stats["rows_reused"] == saved
    assert stats["rows_executed"] == rows - saved
    # Rows that were not saved still find their calls in the receipts.
    assert stats["tool_calls_live"] <= 2 * rows - before_kill + 2 * BATCH_SIZE

    records = list(open_store(store_url).iter_rows(run_id, "numbers"))
    assert len(records) == rows
    assert all(r.status == "completed" for r in records)
    assert all(r.values["square"] == {"square": 4 * r.values["n"] ** 2} for r in records)
    parsed = Journal.parse(journal_lines(journal))
    assert set(parsed.executions["t.count"]) == set(range(rows))
    parsed.assert_only_in_flight_repeated()
