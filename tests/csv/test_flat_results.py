"""Flat results: ``with_column(..., fields=[...])`` shows a nested result as dotted columns
(a view: the stored cell and its receipt stay whole), and ``flatten=True`` spreads every dict
in ``to_pandas`` / ``to_polars`` / ``to_csv``."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

import playline as pl
from playline.cli import app as cli_app
from playline.store import open_store
from playline.web import UIConfig, create_app
from services import serve_asgi

PEOPLE = [
    {"email": "ada@acme.io", "domain": "acme.io"},
    {"email": "alan@nowhere.io", "domain": "nowhere.io"},  # the tool finds nothing
    {"email": "grace@navy.mil", "domain": "navy.mil"},  # no industry in its result
]
COMPANIES = {
    "acme.io": {"name": "Acme", "industry": "SaaS", "hq": {"city": "Paris"}, "tags": ["b2b"]},
    "navy.mil": {"name": "Navy", "hq": {"city": "Arlington"}, "tags": []},
}


@pl.tool("flat.company", batch=pl.Batch(max_size=10), cost=pl.Cost(1))
def company(inputs: list[dict[str, Any]]) -> list[Any]:
    return [COMPANIES.get(i["domain"]) for i in inputs]


def _play(fields: list[str] | None) -> pl.Play:
    @pl.play(name="flat")
    async def flat(ctx: pl.Context, input: Any) -> pl.Dataset:
        return await (
            ctx.dataset("people", PEOPLE, key="email")
            .with_column(
                "company",
                lambda row, ctx: ctx.tool("flat.company", {"domain": row["domain"]}),
                fields=fields,
            )
            .with_column("size", lambda row: len(row["email"]))
            .run()
        )

    return flat


def _run(tmp_path: Path, fields: list[str] | None, run_id: str) -> pl.RunResult:
    url = f"sqlite:///{tmp_path}/flat.db"
    result = pl.run(_play(fields), store=url, tools=[company], run_id=run_id)
    assert result.status == "completed", result.error
    return result


def test_fields_show_a_result_as_its_fields_columns_and_store_it_whole(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    ds = _run(tmp_path, ["name", "industry", "hq.city"], "f1").output

    frame = ds.to_pandas()
    assert list(frame.columns) == [
        "email", "domain", "company.name", "company.industry", "company.hq.city", "size",
    ]  # fmt: skip
    rows = frame.to_dict("records")
    assert rows[0]["company.name"] == "Acme" and rows[0]["company.hq.city"] == "Paris"
    assert pd.isna(rows[1]["company.name"])  # not found: None in each field, not an error
    assert pd.isna(rows[2]["company.industry"])  # a field the result lacks: None
    # what is stored, and what iterating gives, is the whole result
    assert ds.to_list()[0]["company"] == COMPANIES["acme.io"]

    out = ds.to_csv(tmp_path / "people.csv")
    with out.open(encoding="utf-8") as handle:
        written = list(csv.DictReader(handle))
    assert list(written[0]) == list(frame.columns)
    assert written[2]["company.name"] == "Navy" and written[2]["company.industry"] == ""


def test_changing_fields_is_a_view_the_receipts_answer_again(tmp_path: Path) -> None:
    _run(tmp_path, ["name"], "v1")
    again = _run(tmp_path, ["industry"], "v2")
    assert again.stats.tool_calls_live == 0  # the same calls: answered by their receipts
    assert again.stats.tool_calls_cached == 3
    assert open_store(f"sqlite:///{tmp_path}/flat.db").read_ledger("v2") == []  # none paid
    assert list(again.output.to_pandas().columns)[2:4] == ["company.industry", "size"]


def test_the_ui_exports_a_csv_with_the_fields_columns_as_the_command_line_does(
    tmp_path: Path,
) -> None:
    run_id = _run(tmp_path, ["name", "hq.city"], "u1").run_id
    url = f"sqlite:///{tmp_path}/flat.db"
    config = UIConfig(store=open_store(url), store_url=url)
    with serve_asgi(create_app(config)) as base:
        form = {"csrf_token": config.csrf_token, "format": "csv"}
        text = httpx.post(f"{base}/api/export/{run_id}", data=form, timeout=30).text
        form["format"] = "jsonl"
        lines = httpx.post(f"{base}/api/export/{run_id}", data=form, timeout=30).text
    written = list(csv.DictReader(io.StringIO(text)))
    assert list(written[0]) == ["email", "domain", "company.name", "company.hq.city", "size"]
    assert written[0]["company.name"] == "Acme" and written[2]["company.hq.city"] == "Arlington"
    assert json.loads(lines.splitlines()[0])["company"] == COMPANIES["acme.io"]  # JSON: whole

    out = tmp_path / "cli.csv"
    exported = CliRunner().invoke(cli_app, ["export", run_id, "--store", url, "--out", str(out)])
    assert exported.exit_code == 0, exported.output
    with out.open(encoding="utf-8", newline="") as handle:
        assert handle.read() == text  # the same file as `playline export`


def test_flatten_spreads_every_dict_and_keeps_lists_whole(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    polars = pytest.importorskip("polars")
    ds = _run(tmp_path, None, "n1").output

    frame = ds.to_pandas(flatten=True)
    assert list(frame.columns) == [
        "email", "domain", "company.name", "company.industry", "company.hq.city",
        "company.tags", "size",
    ]  # fmt: skip
    # (no empty "company" column for the row not found)
    assert frame.loc[0, "company.tags"] == ["b2b"]  # a list stays a list
    assert list(ds.to_pandas().columns) == ["email", "domain", "company", "size"]

    wide = ds.to_polars(flatten=True)
    assert isinstance(wide, polars.DataFrame) and wide["company.hq.city"].to_list() == [
        "Paris", None, "Arlington",
    ]  # fmt: skip

    out = ds.to_csv(tmp_path / "flat.csv", flatten=True)
    with out.open(encoding="utf-8") as handle:
        written = list(csv.DictReader(handle))
    assert json.loads(written[0]["company.tags"]) == ["b2b"]  # lists: JSON text in a CSV
    assert written[0]["company.hq.city"] == "Paris"


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ("name", "is a list of the result's field names"),
        ([], "fields= is empty"),
        (["name", ""], "each field is a non-empty name"),
        (["name", 3], "each field is a non-empty name"),
        (["name", "name"], "names 'name' more than once"),
    ],
)
def test_fields_must_be_a_list_of_distinct_names(fields: Any, said: str) -> None:
    @pl.play
    async def bad(ctx: pl.Context, input: Any) -> Any:
        ctx.dataset("people", PEOPLE, key="email").with_column(
            "company", lambda row: None, fields=fields
        )

    result = pl.run(bad, store="memory://", tools=[])
    assert isinstance(result.exception, pl.PlayDefinitionError), result.error
    assert said in str(result.error) and "column 'company'" in str(result.error)


def test_flatten_must_be_true_or_false(tmp_path: Path) -> None:
    ds = _run(tmp_path, None, "b1").output
    with pytest.raises(pl.PlayDefinitionError, match="flatten is True"):
        ds.to_pandas(flatten="yes")


def test_a_file_to_write_that_cannot_be_one_says_what_to_give(tmp_path: Path) -> None:
    """A path that is None, a folder, or in a folder that does not exist was a TypeError,
    IsADirectoryError or FileNotFoundError from deep in the write."""
    pytest.importorskip("pyarrow")
    ds = _run(tmp_path, None, "f5").output
    for write in (ds.to_csv, ds.to_parquet):
        with pytest.raises(pl.PlayDefinitionError, match=r"\(path\) takes .*not None"):
            write(None)
        with pytest.raises(pl.PlayDefinitionError, match=r"not bytes"):
            write(b"/tmp/x.csv")
        with pytest.raises(pl.PlayDefinitionError, match=r"a folder; give the path of a file"):
            write(tmp_path)
        with pytest.raises(pl.PlayDefinitionError, match=r"'/nodir' does not exist"):
            write("/nodir/x.csv")
    assert ds.to_csv(str(tmp_path / "rows.csv")).is_file()  # a path as text is one
