"""``ctx.csv(path)``: rows of a real-world CSV file, checked before the first row runs.

What real files bring, and what happens:

- a UTF-8 byte-order mark (Excel's "CSV UTF-8"): dropped;
- ``;`` (or tab, or ``|``) as the delimiter: detected from a sample, else ``,``;
- quoted fields holding newlines, delimiters or doubled quotes: read as one value;
- blank lines, and lines whose fields are all empty: skipped;
- a missing, empty or duplicate header: ``PlayDefinitionError`` naming it;
- a line with more fields than the header (a "bad line"): ``PlayDefinitionError`` naming the
  line, or with ``on_bad_line="skip"`` the line is skipped and its number logged;
  a line with fewer: the missing trailing fields are ``""``;
- a quote that is never closed (it would make the rest of the file one value, silently):
  ``PlayDefinitionError`` naming the file and the line of the row where it opens;
- a field longer than ``field_limit`` characters (default 8 MiB), or a line longer than
  ``LINE_FIELDS`` times that: ``PlayDefinitionError`` naming the file, the line and the limit,
  found before more than that line's limit is in memory.

Values are strings, as written. The file is read when the rows are iterated (a dataset streams
it through its window), so a large file never sits in memory; its header is read and checked
at once, when ``ctx.csv`` is called. ``count()`` counts the rows ahead of a run (one quick
pass), so progress can show a total.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import hashlib
import io
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Literal

from .errors import PlayDefinitionError

__all__ = ["INPUT_KIND", "CsvRows", "file_digest", "read_csv"]

_SAMPLE = 64 * 1024
_DELIMITERS = ",;\t|"
FIELD_LIMIT = 8 * 1024 * 1024  # characters in one field: a few MB, far past any real cell
LINE_FIELDS = 4  # a line may hold this many fields' worth of characters (field_limit each)
_LOGGED_LINES = 20  # skipped lines logged one by one; the rest are counted in the summary
COUNT_BYTES = 100_000_000  # files up to this size are counted ahead of a run, larger estimated
_ESTIMATE_ROWS = 10_000

OnBadLine = Literal["error", "skip"]


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
        on_bad_line: OnBadLine = "error",
        log: Callable[[str], object] | None = None,
        shown: str | None = None,
        field_limit: int = FIELD_LIMIT,
    ) -> None:
        self.path = path
        self.delimiter = delimiter
        self._header = header
        self._picked = picked
        self.field_limit = field_limit
        self._on_bad_line = on_bad_line
        self._log = log
        self._shown = shown or str(path)  # the path as the play gave it
        self.columns = [name for _, name in picked]
        self._line = 0  # the line the row last read starts on (``located``)

    def __repr__(self) -> str:
        return f"CsvRows({str(self.path)!r}, columns={self.columns!r})"

    @property
    def shown(self) -> str:
        """The file's path as the play gave it."""
        return self._shown

    def located(self) -> str | None:
        """Where the row last read starts in the file, ``line 18 of 'leads.csv'``: a dataset
        names a row with no key by it too, as quoted newlines and skipped lines make row
        numbers and lines differ."""
        return f"line {self._line} of {self._shown!r}" if self._line else None

    def __iter__(self) -> Iterator[dict[str, str]]:
        width = len(self._header)
        limit = self.field_limit
        skipped: list[int] = []
        with _open(self.path) as handle:
            source = _then_end(_lines(handle, self.path, limit))
            reader = csv.reader(source, delimiter=self.delimiter)
            # csv's own limit is one for the whole process; ours is per file, checked below
            # while the process-wide one is higher (another file asked for more).
            wider = _allow(limit) > limit
            with _field_limit(self.path, reader, limit), _utf8(self.path, self._shown):
                yield from self._rows(reader, width, limit, wider, skipped)
        if skipped and self._log is not None:
            lines = ", ".join(map(str, skipped[:100])) + (", ..." if len(skipped) > 100 else "")
            self._log(
                f"CSV file {self._shown!r}: skipped {len(skipped)} line(s) with more fields "
                f"than the header: {lines}."
            )

    def _rows(
        self, reader: Any, width: int, limit: int, wider: bool, skipped: list[int]
    ) -> Iterator[dict[str, str]]:
        """The data lines of ``reader`` as rows; bad lines skipped into ``skipped``."""
        next(reader, None)  # the header, checked when this object was made
        next_start = reader.line_num + 1  # the line the next row starts on
        for fields in reader:
            start, next_start = next_start, reader.line_num + 1
            if fields and fields[-1].endswith(_END):
                if len(fields) == 1 and fields[0] == _END:
                    return  # the end, outside any quoted value
                raise PlayDefinitionError(
                    f"CSV file {self._shown!r}, line {start}: this row has a quote that is never "
                    "closed, so the rest of the file would be read as one value. Close the "
                    "quote, and double any quote inside a quoted value."
                )
            if wider and max(map(len, fields), default=0) > limit:
                raise _too_long(self.path, reader.line_num, limit)
            if not any(f.strip() for f in fields):
                continue  # a blank line, or only delimiters
            if len(fields) > width and any(f.strip() for f in fields[width:]):
                if self._on_bad_line == "error":
                    raise PlayDefinitionError(
                        f"CSV file {self._shown!r}, line {reader.line_num}: {len(fields)} "
                        f"fields but the header names {width} columns. Quote values that "
                        f"contain {self.delimiter!r}, add the missing header, or skip such "
                        'lines with ctx.csv(..., on_bad_line="skip").'
                    )
                skipped.append(reader.line_num)
                if self._log is not None and len(skipped) <= _LOGGED_LINES:
                    self._log(
                        f"CSV file {self._shown!r}: skipped line {reader.line_num} "
                        f"({len(fields)} fields, the header names {width})."
                    )
                continue
            if len(fields) < width:
                fields = fields + [""] * (width - len(fields))
            self._line = start
            yield {name: fields[i] for i, name in self._picked}

    def count(self) -> tuple[int, bool]:
        """How many rows iterating yields (bad lines included), and whether that is exact: a
        file up to ``COUNT_BYTES`` is counted (one pass), a larger one estimated from its
        first rows and its size."""
        size = self.path.stat().st_size
        rows = 0
        with _open(self.path) as handle:
            reader = csv.reader(
                _lines(handle, self.path, self.field_limit), delimiter=self.delimiter
            )
            with _utf8(self.path, self._shown):
                next(reader, None)
                for fields in reader:
                    if any(f.strip() for f in fields):
                        rows += 1
                    if size > COUNT_BYTES and rows >= _ESTIMATE_ROWS:
                        raw = getattr(handle, "buffer", None)
                        read = raw.tell() if raw is not None else 0
                        if read > 0:  # bytes read so far (ahead by at most a buffer)
                            return round(rows * size / read), False
        return rows, True

    def to_list(self) -> list[dict[str, str]]:
        return list(self)


# A line no real file holds, read after the file's last one: in a value whose quote never
# closed, it ends up at the end of that value (csv reads to the end of the file silently).
_END = "\ue000playline: end of file\ue000"


def _then_end(lines: Iterable[str]) -> Iterator[str]:
    yield from lines
    yield _END


def _lines(handle: IO[str], path: Path, field_limit: int) -> Iterator[str]:
    """The lines of ``handle``, each read only up to its limit (``LINE_FIELDS`` fields'
    worth): a line with no end in sight (a file of one 1 GB line) fails once that much is
    read, where iterating the file would hold the whole line first."""
    most = LINE_FIELDS * field_limit
    number = 0
    while line := handle.readline(most + 1):
        number += 1
        if len(line) > most:
            raise PlayDefinitionError(
                f"CSV file {str(path)!r}, line {number}: the line is longer than {most} "
                f"characters, {LINE_FIELDS} times the field limit ({field_limit}). Check that the "
                "file is CSV text with line breaks; if the line is right, raise the limit: "
                f"ctx.csv(path, field_limit={field_limit * 4})."
            )
        yield line


@contextlib.contextmanager
def _utf8(path: Path, shown: str) -> Iterator[None]:
    """A byte that is not UTF-8 past the sample the header was checked in, said with the
    file and its line (it came as a bare UnicodeDecodeError at a buffer's position)."""
    try:
        yield
    except UnicodeDecodeError as exc:
        where = f"CSV file {shown!r}"
        raise _not_utf8(path, where, exc, f"line {_bad_line(path)}") from None


def _bad_line(path: Path) -> int:
    """The line of the file's first byte that is not UTF-8 (read again, on that error only)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    line = 1
    with path.open("rb") as raw:
        for chunk in iter(lambda: raw.read(1 << 20), b""):
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError as exc:  # its object: the bytes held back, then chunk
                return line + exc.object.count(b"\n", 0, exc.start)
            line += chunk.count(b"\n")
    return line


def _not_utf8(path: Path, where: str, exc: UnicodeDecodeError, at: str) -> PlayDefinitionError:
    """What to do with a file that is not UTF-8: UTF-16 (its byte-order mark says so), or,
    most often, Windows-1252 (Excel's 'CSV' on Windows; latin1 would turn its quotes and €
    into control characters)."""
    with path.open("rb") as raw:
        head = raw.read(2)
    if head in (b"\xff\xfe", b"\xfe\xff"):
        how = "it is UTF-16 text: save it as 'CSV UTF-8', or `iconv -f utf-16 -t utf-8`"
    else:
        how = (
            "save it as 'CSV UTF-8', or convert it: `iconv -f cp1252 -t utf-8` for a file from "
            "Excel on Windows (its “quotes” and €), `iconv -f latin1 -t utf-8` for older ones"
        )
    return PlayDefinitionError(f"{where} is not UTF-8 text ({exc.reason}, {at}): {how}.")


INPUT_KIND = "input"  # the event of a file a run read: its path and digest


def file_digest(path: Path) -> str:
    """The SHA-256 of the file's bytes (what a resume compares with what its run read)."""
    with path.open("rb") as raw:
        return hashlib.file_digest(raw, "sha256").hexdigest()


def _open(path: Path) -> IO[str]:
    # utf-8-sig drops a byte-order mark; newline="" lets csv see quoted newlines as data.
    return path.open("r", encoding="utf-8-sig", newline="")


def _delimiter(sample: str) -> str:
    """The delimiter of the file ``sample`` begins: the one that splits the header into the
    most columns and every record after it into as many (as the csv module reads quotes: a
    quoted '"a"",""b"' in a ';' file misled csv.Sniffer into ',' and one column); else
    csv.Sniffer's guess, else the one the header holds most."""
    truncated = len(sample) >= _SAMPLE and "\n" in sample
    if truncated:
        sample = sample[: sample.rindex("\n")]  # whole lines only
    best, widest = None, 1
    for candidate in _DELIMITERS:
        try:
            records = [r for r in csv.reader(io.StringIO(sample), delimiter=candidate) if r]
        except csv.Error:
            continue
        if truncated and len(records) > 1:
            records.pop()  # the sample may end inside a quoted field
        width = len(records[0]) if records else 0
        if width > widest and all(len(r) == width for r in records):
            best, widest = candidate, width
    if best is not None:
        return best
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


def path_given(path: object, what: str, example: str) -> str:
    """``path`` as text when it is a file's path (text or a ``pathlib.Path``), else a
    ``PlayDefinitionError`` saying what ``what`` (``ctx.csv``, ``Dataset.to_csv``...) takes:
    pathlib's TypeError says neither."""
    given = os.fspath(path) if isinstance(path, str | os.PathLike) else path
    if isinstance(given, str) and given:
        return given
    if isinstance(given, bytes):
        got = f"bytes ({given[:60]!r}: decode them, path.decode())"
    else:
        got = "an empty text" if given == "" else "None" if given is None else type(given).__name__
    raise PlayDefinitionError(
        f"{what}(path) takes the file's path as text or a pathlib.Path, not {got}: e.g. "
        f"{what}({example!r})."
    )


def read_csv(
    path: str | Path,
    *,
    columns: Iterable[str] | None = None,
    rename: Mapping[str, str] | None = None,
    required: Iterable[str] | None = None,
    on_bad_line: OnBadLine = "error",
    base: str | Path | None = None,
    log: Callable[[str], object] | None = None,
    field_limit: int = FIELD_LIMIT,
) -> CsvRows:
    """Open ``path`` as rows of dicts; check its header against ``columns``/``required``.

    ``columns`` keeps only those columns (in that order); ``rename`` maps a header of the file
    to the column name the play uses; ``required`` names columns the file must have. All three
    use the names of the file's header. ``on_bad_line``: ``"error"`` (a line with more fields
    than the header fails the run, naming it) or ``"skip"`` (it is skipped, and ``log`` told
    its number). A relative ``path`` is read from ``base`` (default: the current folder).
    ``field_limit`` is the most characters one field may hold.
    """
    path = path_given(path, "ctx.csv", "leads.csv")
    where = f"CSV file {str(path)!r}"
    if isinstance(field_limit, bool) or not isinstance(field_limit, int) or field_limit < 1:
        raise PlayDefinitionError(
            f"{where}: field_limit={field_limit!r} must be a number of characters >= 1, e.g. "
            f"field_limit={FIELD_LIMIT}."
        )
    if on_bad_line not in ("error", "skip"):
        raise PlayDefinitionError(
            f'{where}: on_bad_line={on_bad_line!r} must be "error" (stop at a line with more '
            'fields than the header) or "skip" (skip such lines, logging their numbers).'
        )
    file = Path(path)
    if base is not None and not file.is_absolute():
        file = Path(base) / file
    if not file.is_file():
        start = (
            f"the folder the run started in ({base})" if base is not None else "the current folder"
        )
        if file.exists() and not file.is_dir():  # a device, a pipe, a socket
            raise PlayDefinitionError(
                f"{where} is not a file ({file.resolve()} is a device or a pipe): its rows are "
                "read more than once (a resume reads them again), so save them to a file "
                "first and give that."
            )
        raise PlayDefinitionError(
            f"{where} not found ({'a folder' if file.is_dir() else 'no such file'}: "
            f"{file.resolve()}). Check the path; a relative path starts in {start}."
        )
    try:
        with _open(file) as handle:
            sample = handle.read(_SAMPLE)
            handle.seek(0)
            delimiter = _delimiter(sample) if sample else ","
            reader = csv.reader(_lines(handle, file, field_limit), delimiter=delimiter)
            _allow(field_limit)
            with _field_limit(file, reader, field_limit):
                header = next(reader, None)
            if header and max(map(len, header)) > field_limit:
                raise _too_long(file, 1, field_limit)
    except UnicodeDecodeError as exc:
        raise _not_utf8(file, where, exc, "its first 64 KB") from None
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
    dupes = sorted(h for h, n in Counter(header).items() if n > 1)
    if dupes:
        raise PlayDefinitionError(
            f"{where}: the header names {', '.join(map(repr, dupes))} more than once. Give "
            "each column its own name in the first line."
        )
    wanted = _names(columns, "columns", where)
    needed = _names(required, "required", where)
    renames = dict(rename or {})
    known = {name: i for i, name in enumerate(header)}  # no dupes: each name once
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
    picked = [(known[name], renames.get(name, name)) for name in keep]
    clash = sorted(n for n, times in Counter(name for _, name in picked).items() if times > 1)
    if clash:
        raise PlayDefinitionError(
            f"{where}: rename= gives several columns the name(s) "
            f"{', '.join(map(repr, clash))}. Give each its own name."
        )
    return CsvRows(
        file,
        delimiter=delimiter,
        header=header,
        picked=picked,
        on_bad_line=on_bad_line,
        log=log,
        shown=str(path),
        field_limit=field_limit,
    )
