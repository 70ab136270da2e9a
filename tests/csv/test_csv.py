"""ctx.csv on real-world files: BOM, `;`, quoted newlines, blank lines, bad headers."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

import playline as pl
from playline._csv import read_csv


def write(tmp_path: Path, text: str | bytes, name: str = "in.csv") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return path


def test_plain_file_reads_rows_as_string_dicts(tmp_path: Path) -> None:
    rows = read_csv(write(tmp_path, "name,age\nAda,36\nAlan,41\n"))
    assert rows.columns == ["name", "age"]
    assert list(rows) == [{"name": "Ada", "age": "36"}, {"name": "Alan", "age": "41"}]
    assert list(rows) == rows.to_list()  # iterable more than once


def test_utf8_bom_is_dropped_from_the_first_header(tmp_path: Path) -> None:
    path = write(tmp_path, "\ufeffemail,name\r\nada@x.io,Ada\r\n".encode())
    assert list(read_csv(path)) == [{"email": "ada@x.io", "name": "Ada"}]


def test_semicolon_delimiter_is_detected(tmp_path: Path) -> None:
    path = write(tmp_path, "name;city;note\nAda;London;a, b\nAlan;Wilmslow;c\n")
    rows = read_csv(path)
    assert rows.delimiter == ";"
    assert next(iter(rows)) == {"name": "Ada", "city": "London", "note": "a, b"}


@pytest.mark.parametrize(
    ("text", "delimiter"),
    [
        ('note;city\nAda;Paris\n"He said ""a"",""b""";Nice\n', ";"),
        ('note,city\nAda,Paris\n"He said ""a"";""b""",Nice\n', ","),
        ('link;n\n"=HYPERLINK(""http://x"",""y"")";1\n', ";"),
    ],
)
def test_quotes_around_another_delimiter_do_not_mislead_the_guess(
    tmp_path: Path, text: str, delimiter: str
) -> None:
    """csv.Sniffer read these as one column of the other delimiter, silently."""
    rows = read_csv(write(tmp_path, text))
    assert rows.delimiter == delimiter
    assert all(len(row) == 2 for row in rows)


def test_tab_delimiter_is_detected(tmp_path: Path) -> None:
    assert list(read_csv(write(tmp_path, "a\tb\n1\t2\n"))) == [{"a": "1", "b": "2"}]


def test_single_column_falls_back_to_comma(tmp_path: Path) -> None:
    assert list(read_csv(write(tmp_path, "email\nada@x.io\nalan@y.io\n"))) == [
        {"email": "ada@x.io"},
        {"email": "alan@y.io"},
    ]


def test_quoted_newlines_delimiters_and_quotes_stay_in_one_value(tmp_path: Path) -> None:
    text = 'name,address\n"Lovelace, Ada","12 St James\'s Sq\nLondon ""W1"""\nAlan,Bletchley\n'
    rows = list(read_csv(write(tmp_path, text)))
    assert rows == [
        {"name": "Lovelace, Ada", "address": '12 St James\'s Sq\nLondon "W1"'},
        {"name": "Alan", "address": "Bletchley"},
    ]


def test_blank_and_empty_lines_are_skipped(tmp_path: Path) -> None:
    text = "a,b\n\n1,2\n   \n,\n\n3,4\n\n"
    assert list(read_csv(write(tmp_path, text))) == [{"a": "1", "b": "2"}, {"a": "3", "b": "4"}]


def test_short_lines_are_padded_and_long_ones_refused(tmp_path: Path) -> None:
    assert list(read_csv(write(tmp_path, "a,b,c\n1\n"))) == [{"a": "1", "b": "", "c": ""}]
    assert list(read_csv(write(tmp_path, "a,b\n1,2,,\n"))) == [{"a": "1", "b": "2"}]
    rows = read_csv(write(tmp_path, "a,b\n1,2\n3,4,5\n"))
    with pytest.raises(pl.PlayDefinitionError, match=r"line 3: 3 fields but the header names 2"):
        list(rows)


def test_duplicate_headers_are_named(tmp_path: Path) -> None:
    with pytest.raises(pl.PlayDefinitionError, match=r"'email'.*more than once"):
        read_csv(write(tmp_path, "email,name,email\n1,2,3\n"))


def test_empty_headers_are_named_by_position(tmp_path: Path) -> None:
    with pytest.raises(pl.PlayDefinitionError, match=r"column\(s\) 2, 4 of the header have no"):
        read_csv(write(tmp_path, "a,,c, \n1,2,3,4\n"))


def test_empty_file_has_no_header(tmp_path: Path) -> None:
    with pytest.raises(pl.PlayDefinitionError, match="no header row"):
        read_csv(write(tmp_path, ""))
    with pytest.raises(pl.PlayDefinitionError, match="no header row"):
        read_csv(write(tmp_path, "\n\n"))


def test_header_only_gives_no_rows(tmp_path: Path) -> None:
    assert list(read_csv(write(tmp_path, "a,b\n"))) == []


def test_required_columns_missing_are_named_with_the_header(tmp_path: Path) -> None:
    path = write(tmp_path, "first,last\nAda,Lovelace\n")
    with pytest.raises(
        pl.PlayDefinitionError, match=r"lacks the required column.*'domain'.*first, last"
    ):
        read_csv(path, required=["first", "domain"])
    read_csv(path, required=["first"])  # present: fine


def test_columns_select_and_order_and_rename_maps(tmp_path: Path) -> None:
    path = write(tmp_path, "First Name,Last Name,Website,Notes\nAda,Lovelace,x.io,hi\n")
    rows = read_csv(
        path,
        columns=["Website", "First Name"],
        rename={"First Name": "first_name", "Website": "website"},
    )
    assert rows.columns == ["website", "first_name"]
    assert list(rows) == [{"website": "x.io", "first_name": "Ada"}]
    with pytest.raises(pl.PlayDefinitionError, match=r"column.* selected 'Phone'"):
        read_csv(path, columns=["Phone"])
    with pytest.raises(pl.PlayDefinitionError, match="to rename 'Email'"):
        read_csv(path, rename={"Email": "email"})
    with pytest.raises(pl.PlayDefinitionError, match="several columns the name"):
        read_csv(path, rename={"First Name": "name", "Last Name": "name"})


def test_missing_file_and_folder_are_clear(tmp_path: Path) -> None:
    with pytest.raises(pl.PlayDefinitionError, match=r"not found .*no such file"):
        read_csv(tmp_path / "nope.csv")
    with pytest.raises(pl.PlayDefinitionError, match=r"not found .*a folder"):
        read_csv(tmp_path)
    pipe = tmp_path / "rows.pipe"
    os.mkfifo(pipe)
    for device in (Path("/dev/null"), pipe):
        with pytest.raises(pl.PlayDefinitionError, match=r"is not a file .*save them to a file"):
            read_csv(device)


@pytest.mark.parametrize(
    ("path", "says"), [(None, "not None"), (b"/tmp/x.csv", "not bytes"), ("", "not an empty")]
)
def test_a_path_that_is_no_path_says_what_to_give(path: Any, says: str) -> None:
    """It was pathlib's TypeError, which names neither ctx.csv nor what it takes."""
    with pytest.raises(pl.PlayDefinitionError, match=rf"ctx.csv\(path\) takes .*{says}"):
        read_csv(path)


def test_non_utf8_file_says_how_to_convert(tmp_path: Path) -> None:
    path = write(tmp_path, "name\nJos\xe9\n".encode("latin-1"))
    with pytest.raises(pl.PlayDefinitionError, match=r"not UTF-8.*iconv -f cp1252 -t utf-8"):
        read_csv(path)
    utf16 = write(tmp_path, "name\nJosé\n".encode("utf-16"), "wide.csv")
    with pytest.raises(pl.PlayDefinitionError, match=r"it is UTF-16 text.*iconv -f utf-16"):
        read_csv(utf16)


def test_a_byte_not_utf8_past_the_first_64_kb_names_the_file_and_line(tmp_path: Path) -> None:
    """It came as a bare UnicodeDecodeError at a buffer's position, after a partial run."""
    text = "n,name\n" + "".join(f"{n},Ada Lovelace\n" for n in range(10000))
    path = write(tmp_path, text.encode() + "10000,Caf\xe9\n".encode("latin-1"))
    rows = read_csv(path)
    with pytest.raises(pl.PlayDefinitionError, match=r"in.csv' is not UTF-8.*line 10002\)"):
        list(rows)
    with pytest.raises(pl.PlayDefinitionError, match="is not UTF-8"):
        rows.count()


def test_ctx_csv_streams_rows_into_a_dataset(tmp_path: Path) -> None:
    path = write(tmp_path, '\ufeffE-mail;Name\n\nada@x.io;Ada\nalan@y.io;"Turing;Alan"\n')

    @pl.play
    async def from_csv(ctx: pl.Context, input: Any) -> pl.Dataset:
        rows = ctx.csv(input["file"], rename={"E-mail": "email"}, required=["E-mail"])
        return await (
            ctx.dataset("people", rows, key="email")
            .with_column("domain", lambda row: row["email"].split("@")[1])
            .run()
        )

    result = pl.run(from_csv, {"file": str(path)}, store="memory://", tools=[])
    assert result.status == "completed"
    assert result.output.to_list() == [
        {"email": "ada@x.io", "Name": "Ada", "domain": "x.io"},
        {"email": "alan@y.io", "Name": "Turing;Alan", "domain": "y.io"},
    ]


def test_ctx_csv_header_errors_fail_the_run_with_the_message(tmp_path: Path) -> None:
    path = write(tmp_path, "a,a\n1,2\n")

    @pl.play
    async def bad_csv(ctx: pl.Context, input: Any) -> Any:
        return list(ctx.csv(input["file"]))

    result = pl.run(bad_csv, {"file": str(path)}, store="memory://", tools=[])
    assert result.status == "failed"
    assert "'a' more than once" in (result.error or "")


def test_a_field_over_the_limit_names_the_file_and_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, 'id,note\n1,short\n2,"two\nlines"\n3,' + "x" * 5000 + "\n4,after\n")

    rows = read_csv(path, field_limit=1000)

    with pytest.raises(pl.PlayDefinitionError) as info:
        list(rows)
    message = str(info.value)
    assert str(path) in message and "line 5" in message and "1000" in message
    assert "field_limit=" in message  # how to raise it


def test_the_default_limit_takes_cells_of_a_few_megabytes(tmp_path: Path) -> None:
    big = "y" * (2 * 1024 * 1024)  # csv's own default stops at 131072
    path = write(tmp_path, f"id,blob\n1,{big}\n")
    assert [len(r["blob"]) for r in read_csv(path)] == [len(big)]


def test_an_unclosed_quote_is_found_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, 'id,note\n1,ok\n2,"never closed\n' + "3,more\n" * 400)

    with pytest.raises(pl.PlayDefinitionError) as info:
        list(read_csv(path, field_limit=500))

    assert "quote that is never closed" in str(info.value) and str(path) in str(info.value)


def test_an_unclosed_quote_in_a_small_file_is_an_error_not_one_long_value(
    tmp_path: Path,
) -> None:
    """Under the field limit, csv would read the rest of the file into the open value and
    the run would complete with the later rows lost."""
    path = write(tmp_path, 'a,b\nw,fine\n\nx,"1,2\n3,4\n5,6\n7,8\n')

    with pytest.raises(pl.PlayDefinitionError) as info:
        list(read_csv(path))

    message = str(info.value)
    assert str(path) in message and "line 4" in message and "never closed" in message


def test_quoted_values_up_to_the_last_line_are_read_whole(tmp_path: Path) -> None:
    for text in ('a,b\nx,"q\nr"', 'a,b\nx,"q\nr"\n', "a,b\nx,y"):
        rows = read_csv(write(tmp_path, text))
        assert [r["b"] for r in rows] in (["q\nr"], ["y"]), text


def test_each_file_keeps_its_own_limit(tmp_path: Path) -> None:
    roomy = read_csv(write(tmp_path, "v\n" + "a" * 3000 + "\n", "roomy.csv"), field_limit=10**6)
    tight = read_csv(write(tmp_path, "v\n" + "b" * 3000 + "\n", "tight.csv"), field_limit=2000)
    assert len(next(iter(roomy))["v"]) == 3000  # csv's process-wide limit is now 10**6

    with pytest.raises(pl.PlayDefinitionError, match=r"tight\.csv', line 2"):
        list(tight)


def test_a_header_over_the_limit_is_found_at_once(tmp_path: Path) -> None:
    path = write(tmp_path, "id," + "h" * 3000 + "\n1,2\n")
    with pytest.raises(pl.PlayDefinitionError, match="line 1"):
        read_csv(path, field_limit=100)


@pytest.mark.parametrize("limit", [0, -1, 1.5, True, "10"])
def test_a_bad_field_limit_says_what_it_takes(tmp_path: Path, limit: Any) -> None:
    with pytest.raises(pl.PlayDefinitionError, match="field_limit="):
        read_csv(write(tmp_path, "a\n1\n"), field_limit=limit)


def test_ctx_csv_field_limit_fails_the_run_naming_the_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "email\nada@x.io\n" + "z" * 4000 + "\n")

    @pl.play(name="csv-limit")
    async def limited(ctx: pl.Context, input: Any) -> Any:
        return await ctx.dataset("people", ctx.csv(input["file"], field_limit=1000)).run()

    result = pl.run(limited, {"file": str(path)}, store="memory://", tools=[])

    assert result.status == "failed"
    assert result.error is not None and str(path) in result.error and "line 3" in result.error


def test_ctx_csv_reads_no_field_its_cell_could_not_store(tmp_path: Path) -> None:
    """By default a field may be as long as the run's cell_limit: a longer one fails the run
    naming the line, not its row later with "unstorable value" and the cell lost."""
    path = write(tmp_path, "email,note\nada@x.io,short\nalan@y.io," + "z" * 3000 + "\n")

    @pl.play(name="csv-cell-limit")
    async def play(ctx: pl.Context, input: Any) -> Any:
        return await ctx.dataset("people", ctx.csv(input["file"])).run()

    result = pl.run(play, {"file": str(path)}, store="memory://", tools=[], cell_limit=2000)

    assert result.status == "failed"
    assert "line 3" in (result.error or "") and "unstorable" not in (result.error or "")


def test_a_bad_line_is_skipped_and_logged_with_on_bad_line_skip(tmp_path: Path) -> None:
    path = write(tmp_path, "name,age\nAda,36\nAlan,41,extra,more\nGrace,45\n")
    with pytest.raises(pl.PlayDefinitionError, match=r'line 3: 4 fields.*on_bad_line="skip"'):
        list(read_csv(path))
    said: list[str] = []
    rows = read_csv(path, on_bad_line="skip", log=said.append)
    assert [r["name"] for r in rows] == ["Ada", "Grace"]
    assert said == [
        f"CSV file {str(path)!r}: skipped line 3 (4 fields, the header names 2).",
        f"CSV file {str(path)!r}: skipped 1 line(s) with more fields than the header: 3.",
    ]
    with pytest.raises(pl.PlayDefinitionError, match=r"on_bad_line='drop' must be .error."):
        read_csv(path, on_bad_line="drop")  # type: ignore[arg-type]


def test_count_gives_the_rows_a_run_will_see(tmp_path: Path) -> None:
    path = write(tmp_path, 'name,note\nAda,"two\nlines"\n\n,\nAlan,x\n')
    assert read_csv(path).count() == (2, True)  # a quoted newline, a blank line, an empty one


def test_a_relative_path_is_read_from_the_base_folder(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    write(tmp_path / "data", "name\nAda\n", "in.csv")
    assert list(read_csv("data/in.csv", base=tmp_path)) == [{"name": "Ada"}]
    with pytest.raises(pl.PlayDefinitionError) as caught:
        read_csv("data/nope.csv", base=tmp_path)
    assert str(tmp_path / "data" / "nope.csv") in str(caught.value)
    assert f"a relative path starts in the folder the run started in ({tmp_path})" in str(
        caught.value
    )


def test_a_header_of_100k_columns_is_read(tmp_path: Path) -> None:
    """Checked in one pass: duplicates and picks were found with list.count/.index, a
    quadratic look at such a header (259 s)."""
    names = [f"c{i}" for i in range(100_000)]
    path = write(tmp_path, ",".join(names) + "\n" + ",".join(map(str, range(100_000))) + "\n")
    rows = read_csv(path, rename={"c99999": "last"})
    assert rows.columns[-1] == "last" and len(rows.columns) == 100_000
    [row] = list(rows)
    assert row["c0"] == "0" and row["last"] == "99999"
    with pytest.raises(pl.PlayDefinitionError, match="'c5' more than once"):
        read_csv(write(tmp_path, ",".join([*names, "c5"]) + "\n"))


@pytest.mark.parametrize("where", ["header", "row"])
def test_a_line_with_no_end_fails_before_it_is_in_memory(tmp_path: Path, where: str) -> None:
    """A 10 MB line under a 1,000-character field limit fails once 4,000 characters of it
    are read: memory holds about that, never the line (a 1 GB line peaked at 2.4 GB)."""
    line = "x" * 10_000_000
    path = write(tmp_path, f"{line}\n" if where == "header" else f"id\n{line}\n")
    tracemalloc.start()
    try:
        with pytest.raises(pl.PlayDefinitionError) as info:
            list(read_csv(path, field_limit=1000))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert f"line {1 if where == 'header' else 2}" in str(info.value)
    assert "field limit (1000)" in str(info.value) and "field_limit=4000" in str(info.value)
    assert peak < 1_000_000


def test_a_resume_refuses_a_csv_file_changed_since_its_run_read_it(tmp_path: Path) -> None:
    """Bob edited to Robert between two attempts left both rows (keyless rows), or kept Bob
    (rows by key), with counts that disagreed; a resume reads what its run read."""
    path = write(tmp_path, "id,name\n1,Ada\n2,Bob\n")
    store = f"sqlite:///{tmp_path}/s.db"
    clock = pl.ManualClock()

    @pl.play(name="csv-resume")
    async def play(ctx: pl.Context, input: Any) -> Any:
        rows = await ctx.dataset("people", ctx.csv(input["file"])).run()
        await ctx.sleep(3600)
        return rows

    first = pl.run(play, {"file": str(path)}, store=store, tools=[], clock=clock)
    assert first.status == "suspended", first.error
    path.touch()  # the same bytes: resumes
    again = pl.run(play, run_id=first.run_id, store=store, tools=[], clock=clock)
    assert again.status == "suspended", again.error

    write(tmp_path, "id,name\n1,Ada\n2,Robert\n")
    changed = pl.run(play, run_id=first.run_id, store=store, tools=[], clock=clock)
    assert changed.status == "failed"
    assert isinstance(changed.exception, pl.PlayDefinitionError)
    assert f"CSV file {str(path)!r} changed since this run first read it" in (changed.error or "")
