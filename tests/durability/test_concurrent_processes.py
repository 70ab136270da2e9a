"""SEMANTICS 9, 11: two processes running the same play on one store pay for each call once."""

from __future__ import annotations

from pathlib import Path

from playline.store import open_store

from durability_helpers import TOOLS, Journal, finish, journal_lines, start, write_play

ROWS = 300


def test_two_processes_at_once_make_one_call_per_distinct_input(
    tmp_path: Path, durable_store_url: str
) -> None:
    script = write_play(tmp_path)
    journal = tmp_path / "journal.log"
    store_url = durable_store_url  # a fresh store: both processes also create its schema
    env = {"PLAY_ROWS": str(ROWS)}
    procs = [start(script, store_url, f"run-{i}", "--wait-go", env=env) for i in (1, 2)]
    # A barrier: both are imported and waiting before either starts its run.
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = [finish(proc) for proc in procs]

    for result in results:
        assert result["status"] == "completed", result["error"]
        stats = result["stats"]
        assert stats["rows"] == ROWS and stats["rows_failed"] == 0
        resolved = stats["tool_calls_live"] + stats["tool_calls_cached"]
        assert resolved + stats["tool_calls_in_flight"] == ROWS * len(TOOLS)

    lines = journal_lines(journal)
    parsed = Journal.parse(lines)
    assert len(lines) == ROWS * len(TOOLS)  # one execution per distinct input ...
    assert parsed.duplicates() == {}
    assert sum(r["stats"]["tool_calls_live"] for r in results) == ROWS * len(TOOLS)

    store = open_store(store_url)
    for run_id in ("run-1", "run-2"):  # ... and both runs have every value
        values = {r.values["n"]: r.values["square"] for r in store.iter_rows(run_id, "numbers")}
        assert values == {n: {"square": 4 * n * n} for n in range(ROWS)}
