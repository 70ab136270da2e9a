"""DataFrames in (ctx.dataset(name, df)) and out (Dataset.to_pandas / to_polars)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

import playline as pl

ROWS = [
    {"email": "ada@x.io", "score": 3, "weight": 1.5},
    {"email": "alan@y.io", "score": 5, "weight": None},
]


def _enrich(frame: Any) -> pl.RunResult:
    @pl.play
    async def from_frame(ctx: pl.Context, input: Any) -> pl.Dataset:
        return await (
            ctx.dataset("people", frame, key="email")
            .with_column("domain", lambda row: row["email"].split("@")[1])
            .with_column("double", lambda row: row["score"] * 2)
            .with_column("info", lambda row: {"n": row["score"], "tags": ["a"]})
            .run()
        )

    return pl.run(from_frame, store="memory://", tools=[])


def test_pandas_dataframe_in_and_out() -> None:
    pd = pytest.importorskip("pandas")
    result = _enrich(pd.DataFrame(ROWS))
    assert result.status == "completed", result.error
    rows = result.output.to_list()
    assert rows[0] == {
        "email": "ada@x.io",
        "score": 3,
        "weight": 1.5,
        "domain": "x.io",
        "double": 6,
        "info": {"n": 3, "tags": ["a"]},
    }
    assert type(rows[0]["score"]) is int  # NumPy scalars became Python numbers
    assert rows[1]["weight"] is None  # NaN became None
    back = result.output.to_pandas()
    assert isinstance(back, pd.DataFrame)
    # the input's columns, then the computed ones, in the order they were defined
    assert list(back.columns) == ["email", "score", "weight", "domain", "double", "info"]
    assert back["double"].tolist() == [6, 10]
    assert back.loc[1, "info"] == {"n": 5, "tags": ["a"]}


def test_pandas_timestamps_and_missing_markers_become_plain_values() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(
        {"email": ["a@x.io", "b@x.io"], "at": pd.to_datetime(["2024-01-02", None])}
    )
    result = _enrich_plain(frame)
    assert result.output.to_list() == [
        {"email": "a@x.io", "at": "2024-01-02T00:00:00"},
        {"email": "b@x.io", "at": None},
    ]


def _enrich_plain(frame: Any) -> pl.RunResult:
    @pl.play
    async def plain(ctx: pl.Context, input: Any) -> pl.Dataset:
        return await ctx.dataset("rows", frame, key="email").run()

    return pl.run(plain, store="memory://", tools=[])


def test_polars_dataframe_in_and_out() -> None:
    polars = pytest.importorskip("polars")
    result = _enrich(polars.DataFrame(ROWS))
    assert result.status == "completed", result.error
    rows = result.output.to_list()
    assert [r["double"] for r in rows] == [6, 10]
    assert rows[1]["weight"] is None
    back = result.output.to_polars()
    assert isinstance(back, polars.DataFrame)
    assert set(back.columns) == {"email", "score", "weight", "domain", "double", "info"}
    assert back["domain"].to_list() == ["x.io", "y.io"]
    assert back.height == 2


def test_polars_falls_back_to_json_text_for_mixed_nested_values() -> None:
    polars = pytest.importorskip("polars")
    frame = _enrich_plain(polars.DataFrame({"email": ["a@x.io", "b@x.io"]}))

    @pl.play
    async def mixed(ctx: pl.Context, input: Any) -> pl.Dataset:
        values: list[Any] = [{"a": 1}, [1, "x"]]
        return await (
            ctx.dataset("rows", [{"k": 0}, {"k": 1}], key=lambda row: str(row["k"]))
            .with_column("v", lambda row: values[row["k"]])
            .run()
        )

    assert frame.status == "completed"
    back = pl.run(mixed, store="memory://", tools=[]).output.to_polars()
    assert back["v"].to_list() == ['{"a":1}', '[1,"x"]']


def test_a_dataframe_round_trips_between_runs() -> None:
    pd = pytest.importorskip("pandas")
    first = _enrich(pd.DataFrame(ROWS)).output.to_pandas()
    second = _enrich_plain(first[["email", "domain"]]).output.to_pandas()
    assert second[["email", "domain"]].to_dict("records") == [
        {"email": "ada@x.io", "domain": "x.io"},
        {"email": "alan@y.io", "domain": "y.io"},
    ]


@pytest.mark.parametrize("library", ["pandas", "polars"])
def test_missing_library_says_which_pip_install_fixes_it(
    library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _enrich_plain([{"email": "a@x.io"}])
    monkeypatch.setitem(sys.modules, library, None)  # what an absent install looks like
    with pytest.raises(pl.PlayDefinitionError, match=rf"pip install 'playline\[{library}\]'"):
        getattr(result.output, f"to_{library}")()
