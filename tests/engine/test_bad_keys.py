"""Rows with no key (issue 42): refused together, naming each, or set aside (``on_bad_key``).

A row whose key column is blank, None, NaN or missing (or whose ``key=`` function returns
nothing) cannot be named, so it cannot be found again on resume. By default the run stops
before the rows run, with one error naming every such row (its number from 1, a CSV file's
line, and why); with ``on_bad_key="skip"`` those rows are set aside, each logged and counted,
listed by ``playline show``, and the other rows run. Duplicate keys are unchanged: they run
once and are counted apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import playline as pl
from playline.cli import app
from playline.store import Store

from .helpers import run_play

ROWS = [
    {"email": "ada@acme.io", "name": "Ada"},
    {"email": "  ", "name": "Blank"},  # row 2: blank text
    {"name": "Nobody"},  # row 3: no email column
    {"email": "alan@acme.io", "name": "Alan"},
    {"email": None, "name": "Null"},  # row 5: None
    {"email": float("nan"), "name": "Nan"},  # row 6: a spreadsheet's empty number cell
    {"email": "grace@acme.io", "name": "Grace"},
]


def leads_play(rows: Any, resolved: list[str], **options: Any) -> Any:
    """A play over ``rows`` keyed by email, noting each row its column ran for."""

    def note(row: Any) -> str:
        resolved.append(row["name"])
        return row["name"].upper()

    async def play(ctx: pl.Context, input: Any) -> pl.Dataset:
        source = ctx.csv(rows) if isinstance(rows, Path) else rows
        return await (
            ctx.dataset("leads", source, key=options.get("key", "email"), **options.get("ds", {}))
            .with_column("loud", note)
            .run()
        )

    return play


def test_by_default_a_row_with_no_key_stops_the_run_naming_every_such_row() -> None:
    resolved: list[str] = []

    result = run_play(leads_play(ROWS, resolved), tools=[])

    assert result.status == "failed"
    assert isinstance(result.exception, pl.PlayDefinitionError)
    assert resolved == [] and result.stats.rows == 0  # no row ran, as before
    error = result.error or ""
    assert error.startswith("Dataset 'leads': 4 rows have no key: row 2: blank key 'email' in ")
    for said in (
        "row 3: no column 'email' in {'name': 'Nobody'}",
        "row 5: key 'email' is None",
        "row 6: key 'email' is NaN",
        'on_bad_key="skip"',
    ):
        assert said in error, error


def test_skip_sets_the_rows_with_no_key_aside_and_runs_the_others(store: Store) -> None:
    resolved: list[str] = []

    result = run_play(leads_play(ROWS, resolved, ds={"on_bad_key": "skip"}), tools=[])

    assert result.status == "completed", result.error
    assert resolved == ["Ada", "Alan", "Grace"]
    assert (result.stats.rows, result.stats.rows_set_aside) == (3, 4)
    assert [r["email"] for r in result.output] == ["ada@acme.io", "alan@acme.io", "grace@acme.io"]
    logs = [e.preview for e in store.read_events(result.run_id, kinds=["log"])]
    assert "Dataset 'leads': set aside row 2: blank key 'email' in " in logs[0]
    assert logs[-1].startswith("Dataset 'leads': 4 rows set aside (no key): row 2: ")
    (end,) = [
        e for e in store.read_events(result.run_id, kinds=["dataset"]) if e.status == "completed"
    ]
    assert end.data is not None
    assert end.data["rows_set_aside"] == 4
    assert end.data["set_aside"] == [
        "row 2: blank key 'email'",
        "row 3: no column 'email'",
        "row 5: key 'email' is None",
        "row 6: key 'email' is NaN (an empty cell)",
    ]


def test_infinite_keys_are_no_keys_and_half_a_character_fails_its_row(store: Store) -> None:
    """+inf and -inf were both the key "null" (the second row dropped as a duplicate); a key
    with half a character left the run 'interrupted' with a UnicodeEncodeError."""

    async def play(ctx: pl.Context, input: Any) -> Any:
        rows = [{"k": float("inf")}, {"k": float("-inf")}, {"k": "b\ud800"}, {"k": "ok"}]
        return await ctx.dataset("d", rows, key="k", on_bad_key="skip").run()

    result = run_play(play, tools=[], store=store)

    assert result.status == "completed_with_errors", result.error
    assert (result.stats.rows_set_aside, result.stats.rows_failed) == (2, 1)
    ends = [e for e in store.read_events(result.run_id, kinds=["dataset"]) if e.data]
    assert ends[-1].data is not None and ends[-1].data["set_aside"] == [
        "row 1: key 'k' is inf (no JSON number)",
        "row 2: key 'k' is -inf (no JSON number)",
    ]
    rows = {r.key: r for r in store.iter_rows(result.run_id, "d")}
    (half,) = [r for key, r in rows.items() if key.startswith("half-")]
    assert half.status == "failed" and "half a character" in (half.error or "")
    assert rows["ok"].status == "completed"


@pytest.mark.parametrize("where", ["dataset", "log", "error", "event"])
def test_half_a_character_anywhere_is_refused_or_kept_escaped_never_a_crash(
    store: Store, where: str
) -> None:
    """Names and keys holding a lone surrogate (a broken decode) are refused saying so; a log
    line or an error's text keeps it escaped. The run ends as it should, never 'interrupted'
    by the store failing to write text."""

    async def play(ctx: pl.Context, input: Any) -> Any:
        if where == "dataset":
            return await ctx.dataset("d\ud800", [{"a": 1}]).run()
        if where == "log":
            ctx.log("half \ud800 a character")
            return 1
        if where == "event":
            return await ctx.wait_for_event("approve:\ud800")
        raise ValueError("half \ud800 a character")

    result = run_play(play, tools=[], store=store)

    expected = "completed" if where == "log" else "failed"
    assert result.status == expected, result.error
    if where in ("dataset", "event"):
        assert "lone UTF-16 surrogate" in (result.error or "")
    stored = store.get_run(result.run_id)
    assert stored is not None and stored.status.value == expected
    with pytest.raises(pl.PlayDefinitionError, match="NUL character"):
        pl.send_event("approve:\x00", 1, store=store)


def test_a_csv_row_with_no_key_is_named_by_its_line_in_the_file(tmp_path: Path) -> None:
    csv = tmp_path / "leads.csv"
    csv.write_text(
        'email,name\nada@acme.io,"Ada\nLovelace"\n\n  ,Blank\nalan@acme.io,Alan\n',
        encoding="utf-8",
    )  # a quoted newline and a blank line: the blank key is row 2, on line 5

    result = run_play(leads_play(csv, []), tools=[])

    assert result.status == "failed"
    assert f"row 2 (line 5 of {str(csv)!r}): blank key 'email'" in (result.error or "")

    skipped = run_play(leads_play(csv, [], ds={"on_bad_key": "skip"}), tools=[])

    assert (skipped.status, skipped.stats.rows, skipped.stats.rows_set_aside) == (
        "completed",
        2,
        1,
    )


def test_a_key_function_that_returns_nothing_sets_its_row_aside() -> None:
    resolved: list[str] = []
    rows = [{"id": 1, "name": "a"}, {"id": None, "name": "b"}, {"id": 3, "name": "c"}]
    play = leads_play(rows, resolved, key=lambda row: row["id"], ds={"on_bad_key": "skip"})

    result = run_play(play, tools=[])

    assert result.status == "completed", result.error
    assert resolved == ["a", "c"] and result.stats.rows_set_aside == 1


def test_duplicate_keys_still_run_once_and_are_not_set_aside() -> None:
    resolved: list[str] = []
    rows = [{"email": "a@x.io", "name": "A"}, {"email": "a@x.io", "name": "A2"}, {"name": "B"}]

    result = run_play(leads_play(rows, resolved, ds={"on_bad_key": "skip"}), tools=[])

    assert resolved == ["A"]
    assert (result.stats.rows_duplicate, result.stats.rows_set_aside) == (1, 1)


def test_past_twenty_rows_with_no_key_the_rest_are_counted() -> None:
    rows = [{"email": ""} for _ in range(25)]

    result = run_play(leads_play(rows, []), tools=[])

    error = result.error or ""
    assert "25 rows have no key: row 1: blank key 'email'" in error
    assert "row 20: blank key" in error and "row 21:" not in error
    assert "; and 5 more." in error


@pytest.mark.parametrize("value", ["ignore", None, True, "SKIP"])
def test_on_bad_key_is_error_or_skip(value: Any) -> None:
    result = run_play(leads_play(ROWS, [], ds={"on_bad_key": value}), tools=[])

    assert result.status == "failed"
    assert isinstance(result.exception, pl.PlayDefinitionError)
    assert f"on_bad_key={value!r}; use 'error'" in (result.error or "")
    assert "'skip'" in (result.error or "")


SKIPPING_PLAY = """
import playline as pl

ROWS = [{"email": "ada@acme.io"}, {"email": "  "}, {"name": "Nobody"}, {"email": "alan@acme.io"}]

@pl.play
async def leads(ctx, input):
    return await (
        ctx.dataset("leads", ROWS, key="email", on_bad_key="skip")
        .with_column("domain", lambda row: row["email"].split("@")[1])
        .run()
    )
"""


def test_run_and_show_say_which_rows_were_set_aside(default_store: str, tmp_path: Path) -> None:
    play = tmp_path / "leads.py"
    play.write_text(SKIPPING_PLAY, encoding="utf-8")
    cli = CliRunner()

    ran = cli.invoke(app, ["run", str(play), "--store", default_store])

    assert ran.exit_code == 0, ran.output
    assert "2 rows: 2 run, 0 reused, 0 failed; 2 set aside for having no key" in ran.output
    run_id = ran.output.split()[1]
    shown = cli.invoke(app, ["show", run_id, "--store", default_store])
    assert shown.exit_code == 0, shown.output
    said = " ".join(shown.output.split())
    assert "leads: 2 row(s) set aside (no key): row 2: blank key 'email'; row 3: no column " in said
    doc = json.loads(cli.invoke(app, ["show", run_id, "--json", "--store", default_store]).output)
    assert doc["stats"]["rows_set_aside"] == 2
    assert doc["trace"]["datasets"][0]["stats"]["set_aside"] == [
        "row 2: blank key 'email'",
        "row 3: no column 'email'",
    ]


def test_a_plan_says_how_many_rows_would_be_set_aside() -> None:
    estimate = pl.plan(leads_play(ROWS, [], ds={"on_bad_key": "skip"}), tools=[])

    assert estimate.rows == 3
    assert "4 rows set aside for having no key" in " ".join(estimate.notes)


def test_run_says_how_many_rows_a_duplicate_key_skipped(default_store: str, tmp_path: Path) -> None:
    """Two rows with one key: the first counts, and the summary says the other was skipped
    (it said "1 rows: 1 run" and nothing of it)."""
    play = tmp_path / "dupes.py"
    play.write_text(
        SKIPPING_PLAY.replace(
            '{"email": "  "}, {"name": "Nobody"}', '{"email": "ada@acme.io"}'
        ).replace(', on_bad_key="skip"', ""),
        encoding="utf-8",
    )

    ran = CliRunner().invoke(app, ["run", str(play), "--store", default_store])

    assert ran.exit_code == 0, ran.output
    said = " ".join(ran.output.split())
    assert "2 rows: 2 run, 0 reused, 0 failed; 1 skipped for a key an earlier row has" in said
