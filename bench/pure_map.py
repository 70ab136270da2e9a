"""pure_map: 1,000,000 rows through three pure columns, against a plain loop + executemany.

The play names its rows by a column (``key="website"``); ``without_key_*`` is the same play
with no ``key=``, each row named by a digest of its input, as a dataset is by default: keys in
random order, which a store indexing each row's key as it writes it pays for.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import tempfile
from typing import Any

import orjson

from ._measure import in_child, peak_rss_mb, timed

ROWS = int(os.environ.get("BENCH_ROWS_PURE", "1000000"))


def domain(row: Any) -> str:
    return str(row["website"]).split("//")[-1].strip("/")


def slug(row: Any) -> str:
    return str(row["name"]).lower().replace(" ", "-")


def score(row: Any) -> int:
    return len(row["domain"]) + len(row["slug"])


def rows() -> Any:
    return ({"name": f"Company {i}", "website": f"https://c{i}.example.com/"} for i in range(ROWS))


def reference(path: str) -> float:
    """The same three functions in a loop, results written with executemany."""

    def results() -> Any:
        for i, row in enumerate(rows()):
            out = dict(row)
            out["domain"] = domain(out)
            out["slug"] = slug(out)
            out["score"] = score(out)
            yield (i, orjson.dumps(out))

    def go() -> None:
        db = sqlite3.connect(path)
        db.execute("create table rows (idx integer primary key, data blob)")
        with db:
            db.executemany("insert into rows values (?, ?)", results())
        db.close()

    seconds, _ = timed(go)
    return seconds


def playline_child(store_kind: str, key: str) -> None:
    """One run of the play; ``key`` is the dataset's key column, or "" for none (each row is
    then named by a digest of its input: random keys)."""
    import playline as pl

    @pl.play(name="bench-pure-map")
    async def pure(ctx: pl.Context, input: Any) -> int:
        ds = await (
            ctx.dataset("companies", rows(), key=key or None)
            .with_column("domain", domain)
            .with_column("slug", slug)
            .with_column("score", score)
            .run()
        )
        return len(ds)

    with tempfile.TemporaryDirectory() as tmp:
        store = "memory://" if store_kind == "memory" else f"sqlite:///{tmp}/pure.db"
        seconds, result = timed(lambda: pl.run(pure, store=store, tools=[]))
    assert result.status == "completed", result.error
    print(
        orjson.dumps({"seconds": seconds, "rss_mb": peak_rss_mb(), "rows": result.output}).decode()
    )


def main() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        ref_s = reference(f"{tmp}/ref.db")
    store_kind = os.environ.get("BENCH_STORE", "sqlite")
    try:
        ours = in_child("bench.pure_map", "--child", store_kind, "website")
    except Exception:
        store_kind = "memory"
        ours = in_child("bench.pure_map", "--child", store_kind, "website")
    digests = in_child("bench.pure_map", "--child", store_kind, "")
    return {
        "bench": "pure_map",
        "ratio": round(ours["seconds"] / ref_s, 3),
        "goal": "<= 1.5x; peak RSS <= 300 MB (issue 43)",
        "rows": ROWS,
        "store": store_kind,
        "playline_s": round(ours["seconds"], 3),
        "reference_s": round(ref_s, 3),
        "peak_rss_mb": round(ours["rss_mb"], 1),
        # the same rows without key=: named by digests, whose order is random
        "without_key_ratio": round(digests["seconds"] / ref_s, 3),
        "without_key_s": round(digests["seconds"], 3),
        "without_key_peak_rss_mb": round(digests["rss_mb"], 1),
    }


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    playline_child(sys.argv[2], sys.argv[3])
