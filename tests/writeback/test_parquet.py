"""Dataset.to_parquet and `playline export --format parquet`: pyarrow reads back what was
written, nested values as structs and lists where they share a shape, else JSON text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import playline as pl
from playline import _writeback
from playline.cli import app


@pl.play(name="parquet-play")
async def parquet_play(ctx: pl.Context, input: dict[str, Any]) -> pl.Dataset:
    rows = [{"id": i, "name": f"lead {i}"} for i in range(input["rows"])]
    return await (
        ctx.dataset("leads", rows, key="id")
        .with_column("company", lambda row: {"name": f"c{row['id']}", "size": row["id"]})
        .with_column("emails", lambda row: [f"{row['id']}@x.com"] * (row["id"] % 3))
        .with_column("shape", lambda row: {"a": 1} if row["id"] % 2 else [1, 2])
        .with_column("mixed", lambda row: row["id"] if row["id"] % 2 else "even")
        .with_column("late", lambda row: None if row["id"] < input["late"] else {"x": 1.5})
        .with_column("empty", lambda row: {})
        .run()
    )


def _run(tmp_path: Path, rows: int = 12, late: int = 5) -> pl.RunResult:
    result = pl.run(parquet_play, {"rows": rows, "late": late}, store=f"sqlite:///{tmp_path}/s.db")
    assert result.ok, result.error
    return result


def test_round_trip_with_nested_values(tmp_path: Path) -> None:
    ds = _run(tmp_path).output
    out = ds.to_parquet(tmp_path / "leads.parquet")
    table = pq.read_table(out)
    types = {f.name: f.type for f in table.schema}
    assert types["id"] == pa.int64() and types["name"] == pa.string()
    assert pa.types.is_struct(types["company"]) and pa.types.is_list(types["emails"])
    assert types["shape"] == types["mixed"] == types["empty"] == pa.string()  # no one shape
    assert pa.types.is_struct(types["late"])  # all null in the first rows: typed by the rest
    back = table.to_pylist()
    assert [r["id"] for r in back] == list(range(12))
    assert back[4]["company"] == {"name": "c4", "size": 4}
    assert back[5]["emails"] == ["5@x.com", "5@x.com"]
    assert json.loads(back[2]["shape"]) == [1, 2] and json.loads(back[3]["shape"]) == {"a": 1}
    assert [back[1]["mixed"], back[2]["mixed"]] == ["1", "even"]
    assert back[0]["late"] is None and back[7]["late"] == {"x": 1.5}
    assert back[0]["empty"] == "{}"


def test_rows_stream_in_pages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_writeback, "_PAGE", 4)  # 12 rows: three row groups, types over all
    ds = _run(tmp_path, late=9).output
    out = ds.to_parquet(tmp_path / "paged.parquet")
    meta = pq.ParquetFile(out).metadata
    assert meta.num_row_groups == 3 and meta.num_rows == 12
    back = pq.read_table(out).to_pylist()
    assert back[10]["late"] == {"x": 1.5} and back[0]["late"] is None


def test_an_empty_dataset(tmp_path: Path) -> None:
    ds = _run(tmp_path, rows=0).output
    assert pq.read_table(ds.to_parquet(tmp_path / "none.parquet")).num_rows == 0


def test_export_format_parquet(tmp_path: Path) -> None:
    run_id = _run(tmp_path).run_id
    store = f"sqlite:///{tmp_path}/s.db"
    runner = CliRunner()
    for out, extra in (("a.parquet", []), ("b.pq", ["--format", "parquet"])):
        done = runner.invoke(
            app, ["export", run_id, "--out", str(tmp_path / out), "--store", store, *extra]
        )
        assert done.exit_code == 0, done.output
        assert "Wrote 12 rows" in done.output
        back = pq.read_table(tmp_path / out).to_pylist()
        assert back[4]["company"] == {"name": "c4", "size": 4}
    with_status = runner.invoke(
        app,
        ["export", run_id, "--out", str(tmp_path / "s.parquet"), "--store", store, "--with-status"],
    )
    assert with_status.exit_code == 0, with_status.output
    assert pq.read_table(tmp_path / "s.parquet").to_pylist()[0]["_status"] == "completed"
    refused = runner.invoke(
        app, ["export", run_id, "--out", str(tmp_path / "c.pq"), "--store", store]
    )
    assert refused.exit_code != 0 and ".parquet, .csv or .jsonl" in refused.output
    assert not (tmp_path / "c.pq").exists()


def test_a_missing_pyarrow_says_which_extra_installs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    ds = _run(tmp_path).output
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if it were not installed
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(pl.PlayDefinitionError, match=r"pip install 'playline\[parquet\]'"):
        ds.to_parquet(tmp_path / "x.parquet")
