"""store: the bookkeeping and cached re-run workloads on memory, SQLite and PostgreSQL.

The same play as ``bookkeeping`` (BENCH_ROWS rows, one zero-latency local tool) run once per
store (live calls: claims, completions, rows, events), then again under a new run id (every
call answered from its receipt). Reference in the same run: SQLite; the goal is PostgreSQL
within 2x of it on both workloads.

PostgreSQL: ``BENCH_POSTGRES_URL`` (a server URL whose user may create databases; the bench
makes a database of its own and drops it after), else a throwaway local cluster started the
way the test suite starts one (tests/services.py: Debian's postgresql package, fsync off).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .bookkeeping import ROWS, _run

GOAL = 2.0


@contextlib.contextmanager
def _postgres_server() -> Iterator[Any]:
    given = os.environ.get("BENCH_POSTGRES_URL")
    if given:
        yield _GivenServer(given)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from services import run_postgres

    with run_postgres() as server:
        yield server


class _GivenServer:
    def __init__(self, url: str) -> None:
        self.url = url

    def new_database(self) -> str:
        import psycopg
        from psycopg import sql

        name = f"playline_bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url.rsplit("/", 1)[0] + "/" + name

    def drop_database(self, url: str) -> None:
        import psycopg
        from psycopg import sql

        name = url.rsplit("/", 1)[1]
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _workloads(url: str) -> dict[str, float]:
    """Seconds of a first run (live calls) and of a re-run (every call cached) on ``url``."""
    live_s, live = _run(url, "live")
    assert live.status == "completed", live.error
    _, first = _run(url, "cached")
    assert first.status == "completed", first.error
    cached_s, cached = _run(url, "cached")
    assert cached.status == "completed", cached.error
    assert cached.stats.tool_calls_live == 0, cached.stats
    return {"live_s": live_s, "cached_s": cached_s}


def main() -> dict[str, Any]:
    figures: dict[str, dict[str, float]] = {}
    figures["memory"] = _workloads(f"memory://bench-store-{uuid.uuid4().hex[:8]}")
    with tempfile.TemporaryDirectory() as tmp:
        figures["sqlite"] = _workloads(f"sqlite:///{tmp}/bench.db")
    with _postgres_server() as server:
        url = server.new_database()
        try:
            figures["postgres"] = _workloads(url)
        finally:
            server.drop_database(url)
    live_ratio = figures["postgres"]["live_s"] / figures["sqlite"]["live_s"]
    cached_ratio = figures["postgres"]["cached_s"] / figures["sqlite"]["cached_s"]
    result: dict[str, Any] = {
        "bench": "store",
        "ratio": round(max(live_ratio, cached_ratio), 3),
        "goal": f"postgres/sqlite <= {GOAL:g} on both workloads",
        "rows": ROWS,
        "live_postgres_vs_sqlite": round(live_ratio, 3),
        "cached_postgres_vs_sqlite": round(cached_ratio, 3),
    }
    for kind, seconds in figures.items():
        result[f"{kind}_live_s"] = round(seconds["live_s"], 3)
        result[f"{kind}_live_calls_per_s"] = round(ROWS / seconds["live_s"])
        result[f"{kind}_cached_s"] = round(seconds["cached_s"], 3)
        result[f"{kind}_cached_rows_per_s"] = round(ROWS / seconds["cached_s"])
    return result


if __name__ == "__main__":
    print(main())
