"""``ctx.csv(path)``: rows of a real-world CSV file, checked before the first row runs.

What real files bring, and what happens:

- a UTF-8 byte-order mark (Excel's "CSV UTF-8"): dropped;
- ``;`` (or tab, or ``|``) as the delimiter: detected from a sample, else ``,``;
- quoted fields holding newlines, delimiters or doubled quotes: read as one value;
- blank lines, and lines whose fields are all empty: skipped;
- a missing, empty or duplicate header: ``PlayDefinitionError`` naming it;
- a line with more fields than the header: ``PlayDefinitionError`` naming the line;
  a line with fewer: the missing trailing fields are ``""``;
- a field longer than ``field_limit`` characters (default 8 MiB; a quote left open makes the
  rest of the file one field): ``PlayDefinitionError`` naming the file, the line and the limit.

Values are strings, as written. The file is read when the rows are iterated (a dataset streams
it through its window), so a large file never sits in memory; its header is read and checked
at once, when ``ctx.csv`` is called.
"""

from __future__ import annotations

import contextlib
import csv
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from .errors import PlayDefinitionError

__all__ = ["CsvRows", "read_csv"]

_SAMPLE = 64 * 1024
_DELIMITERS = ",;\t|"
FIELD_LIMIT = 8 * 1024 * 1024  # characters in one field: a few MB, far past any real cell


class CsvRows:
    """The rows of a CSV file as dicts, read lazily (iterable more than once).

    ``columns`` are the output column names (after ``rename``), ``path`` the file.
    """

    def __init__(
        self,
        path: Path,
        *,
        delimiter: str,
        header: list[str],
        picked: list[tuple[int, str]],
        field_limit: int = FIELD_LIMIT,
    ) -> None:
        self.path = path
        self.delimiter = delimiter
        self.field_limit = field_limit
        self._header = header
        self._picked = picked
        self.columns = [name for _, name in picked]

    def __repr__(self) -> str:
        return f"CsvRows({str(self.path)!r}, columns={self.columns!r})"

    def __iter__(self) -> Iterator[dict[str, str]]:
        width = len(self._header)
        limit = self.field_limit
        with _open(self.path) as handle:
            reader = csv.reader(handle, delimiter=self.delimiter)
            # csv's own limit is one for the whole process; ours is per file, checked below
            # while the process-wide one is higher (another file asked for more).
            _allow(limit)
            with _field_limit(self.path, reader, limit):
                next(reader, None)  # the header, checked when this object was made
                for fields in reader:
                    if csv.field_size_limit() > limit and max(map(len, fields), default=0) > limit:
                        raise _too_long(self.path, reader.line_num, limit)
                    if not any(f.strip() for f in fields):
                        continue  # a blank line, or only delimiters
                    if len(fields) > width:
                        extra = fields[width:]
                        if any(f.strip() for f in extra):
                            raise PlayDefinitionError(
                                f"CSV file {str(self.path)!r}, line {reader.line_num}: "
                                f"{len(fields)} fields but the header names {width} columns. "
                                f"Quote values that contain {self.delimiter!r}, or add the "
                                "missing header."
                            )
                    if len(fields) < width:
                        fields = fields + [""] * (width - len(fields))
                    yield {name: fields[i] for i, name in self._picked}

    def to_list(self) -> list[dict[str, str]]:
        return list(self)


def _allow(limit: int) -> int:
    """Raise csv's process-wide field limit to at least ``limit``; return what it is now."""
    current = csv.field_size_limit()
    if current < limit:
        csv.field_size_limit(limit)
        return limit
    return current


@contextlib.contextmanager
def _field_limit(path: Path, reader: Any, limit: int) -> Iterator[None]:
    """csv's "field larger than field limit" said with the file and the line."""
    try:
        yield
    except csv.Error as exc:
        if "field limit" not in str(exc):
            raise
        raise _too_long(path, reader.line_num, limit) from None


def _too_long(path: Path, line: int, limit: int) -> PlayDefinitionError:
    return PlayDefinitionError(
        f"CSV file {str(path)!r}, line {line}: a field is longer than {limit} characters. "
        "Check the file for a quote that is never closed (it makes the rest of the file one "
        f"field); if the field is right, raise the limit: ctx.csv(path, field_limit={limit * 4})."
    )


def _open(path: Path) -> IO[str]:
    # utf-8-sig drops a byte-order mark; newline="" lets csv see quoted newlines as data.
    return path.open("r", encoding="utf-8-sig", newline="")


def _delimiter(sample: str) -> str:
    if len(sample) >= _SAMPLE and "\n" in sample:
        sample = sample[: sample.rindex("\n")]  # whole lines only
    try:
        return csv.Sniffer().sniff(sample, delimiters=_DELIMITERS).delimiter
    except csv.Error:
        first = sample.split("\n", 1)[0]
        counts = {d: first.count(d) for d in _DELIMITERS}
        best = max(counts, key=lambda d: counts[d])
        return best if counts[best] else ","


def _names(value: Iterable[str] | None, what: str, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    names = list(value)
    if not all(isinstance(n, str) for n in names):
        raise PlayDefinitionError(f"{where}: {what}= must be a list of column names.")
    return names


def read_csv(
    path: str | Path,
    *,
    columns: Iterable[str] | None = None,
    rename: Mapping[str, str] | None = None,
    required: Iterable[str] | None = None,
    field_limit: int = FIELD_LIMIT,
) -> CsvRows:
    """Open ``path`` as rows of dicts; check its header against ``columns``/``required``.

    ``columns`` keeps only those columns (in that order); ``rename`` maps a header of the file
    to the column name the play uses; ``required`` names columns the file must have. All three
    use the names of the file's header. ``field_limit`` is the most characters one field may
    hold.
    """
    file = Path(path)
    where = f"CSV file {str(path)!r}"
    if isinstance(field_limit, bool) or not isinstance(field_limit, int) or field_limit < 1:
        raise PlayDefinitionError(
            f"{where}: field_limit={field_limit!r} must be a number of characters >= 1, e.g. "
            f"field_limit={FIELD_LIMIT}."
        )
    if not file.is_file():
        raise PlayDefinitionError(
            f"{where} not found ({'a folder' if file.is_dir() else 'no such file'}: "
            f"{file.resolve()}). Check the path; a relative path starts in the current folder."
        )
    try:
        with _open(file) as handle:
            sample = handle.read(_SAMPLE)
            handle.seek(0)
            delimiter = _delimiter(sample) if sample else ","
            reader = csv.reader(handle, delimiter=delimiter)
            _allow(field_limit)
            with _field_limit(file, reader, field_limit):
                header = next(reader, None)
            if header and max(map(len, header)) > field_limit:
                raise _too_long(file, 1, field_limit)
    except UnicodeDecodeError as exc:
        raise PlayDefinitionError(
            f"{where} is not UTF-8 text ({exc.reason} at byte {exc.start}). Save it as "
            "'CSV UTF-8' or convert it, e.g. `iconv -f latin1 -t utf-8`."
        ) from None
    except OSError as exc:
        raise PlayDefinitionError(f"{where} cannot be read: {exc.strerror or exc}.") from None
    if not header or not any(h.strip() for h in header):
        raise PlayDefinitionError(
            f"{where} has no header row. Its first line must name the columns, e.g. "
            "`first_name,last_name,domain`."
        )
    header = [h.strip() for h in header]
    empty = [str(i + 1) for i, h in enumerate(header) if not h]
    if empty:
        raise PlayDefinitionError(
            f"{where}: column(s) {', '.join(empty)} of the header have no name. Name every "
            "column in the first line (or delete the empty columns)."
        )
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        raise PlayDefinitionError(
            f"{where}: the header names {', '.join(map(repr, dupes))} more than once. Give "
            "each column its own name in the first line."
        )
    wanted = _names(columns, "columns", where)
    needed = _names(required, "required", where)
    renames = dict(rename or {})
    known = set(header)
    for what, names in (
        ("required column(s)", needed),
        ("column(s) selected", wanted),
        ("column(s) to rename", list(renames)),
    ):
        missing = [n for n in names if n not in known]
        if missing:
            raise PlayDefinitionError(
                f"{where} lacks the {what} {', '.join(map(repr, missing))}. Its header has: "
                f"{', '.join(header)}."
            )
    keep = wanted or header
    picked = [(header.index(name), renames.get(name, name)) for name in keep]
    out = [name for _, name in picked]
    clash = sorted({n for n in out if out.count(n) > 1})
    if clash:
        raise PlayDefinitionError(
            f"{where}: rename= gives several columns the name(s) "
            f"{', '.join(map(repr, clash))}. Give each its own name."
        )
    return CsvRows(file, delimiter=delimiter, header=header, picked=picked, field_limit=field_limit)
