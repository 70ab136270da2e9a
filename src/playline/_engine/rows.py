"""Row identity: how a dataset row is named, so that it is found again on resume.

A row with no key (its key column blank, None, NaN or absent, or ``key=`` returning nothing)
cannot be named. ``RowKeys`` either refuses the dataset, naming every such row
(``on_bad_key="error"``, the default: no row of the window that holds the first of them
runs, so a file shorter than the window runs none), or sets them aside, reported, and lets
the other rows run (``"skip"``). Rows are numbered from 1, as in the input; a CSV's rows also
say the line of the file they start on.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from .._json import canonical, digest, dumps, without_numpy
from ..errors import PlayDefinitionError
from .events import preview

__all__ = [
    "BAD_KEYS_LISTED",
    "DatasetKey",
    "KeySpec",
    "Located",
    "MissingKey",
    "OnBadKey",
    "RowKey",
    "RowKeys",
    "SetAside",
    "as_row",
    "row_key_function",
]

KeySpec = str | Sequence[str] | Callable[..., Any] | None
OnBadKey = Literal["error", "skip"]
BAD_KEYS_LISTED = 20  # rows with no key named one by one (in the error, the log, the trace)


@dataclass(frozen=True, slots=True)
class RowKey:
    """What a dataset names its rows by (``key=``) and what becomes of a row that has no key
    (``on_bad_key``)."""

    key: KeySpec = None
    on_bad_key: OnBadKey = "error"


DatasetKey = KeySpec | RowKey  # a bare key= means on_bad_key="error"


@runtime_checkable
class Located(Protocol):
    """Rows that know where the row last read stands in their source (a CSV file's line)."""

    def located(self) -> str | None: ...


class MissingKey(PlayDefinitionError):
    """A row with no key: its index (from 0), why, and the row."""

    def __init__(self, dataset: str, index: int, why: str, row: Mapping[str, Any]) -> None:
        self.index = index
        self.why = why
        self.row = row
        super().__init__(f"Dataset {dataset!r}: row {index + 1} has no key: {why}.")


@dataclass(frozen=True, slots=True)
class SetAside:
    """A row with no key, as reported: its number (from 1), where it is in its source, why,
    and a preview of the row."""

    row: int
    why: str
    where: str | None = None
    shown: str | None = None

    def __str__(self) -> str:
        return f"row {self.row}" + (f" ({self.where})" if self.where else "") + f": {self.why}"

    def detail(self) -> str:
        """With the row's preview: what a person needs to find it in a list."""
        return f"{self}" + (f" in {self.shown}" if self.shown else "")


class RowKeys:
    """A dataset's rows with their keys; the rows with no key refused together or set aside
    (``on_bad_key``). ``aside`` keeps the first ``BAD_KEYS_LISTED`` of them, ``count`` all;
    ``set_aside`` is how many were left out while the others ran."""

    def __init__(
        self,
        dataset: str,
        key: DatasetKey,
        outputs: Collection[str],
        log: Callable[[str], object],
    ) -> None:
        rule = key if isinstance(key, RowKey) else RowKey(key)
        self.dataset = dataset
        self.on_bad_key = rule.on_bad_key
        self.key_of = row_key_function(dataset, rule.key, outputs)
        self._log = log
        self.aside: list[SetAside] = []
        self.count = 0

    def rows(self, items: Iterable[Any]) -> Iterator[tuple[int, str, dict[str, Any]]]:
        """``(index, key, row)`` of each item with a key. With ``on_bad_key="error"``, once a
        row has none no more rows are given: the rest are read for theirs, and the refusal
        names them all."""
        located = items.located if isinstance(items, Located) else None
        key_of, refusing = self.key_of, False
        for index, item in enumerate(items):
            values = as_row(item)
            try:
                key = key_of(values, index)
            except MissingKey as missing:
                self._missing(missing, None if located is None else located())
                refusing = refusing or self.on_bad_key == "error"
                continue
            if not refusing:
                yield index, key, values
        if refusing:
            raise self.refusal()

    def _missing(self, missing: MissingKey, where: str | None) -> None:
        self.count += 1
        if self.count > BAD_KEYS_LISTED:
            return
        aside = SetAside(missing.index + 1, missing.why, where, preview(dict(missing.row), 80))
        self.aside.append(aside)
        if self.on_bad_key == "skip":
            self._log(f"Dataset {self.dataset!r}: set aside {aside.detail()}.")

    def _listed(self) -> str:
        listed = "; ".join(aside.detail() for aside in self.aside)
        more = self.count - len(self.aside)
        return listed + (f"; and {more} more" if more else "")

    def refusal(self) -> PlayDefinitionError:
        """The error naming every row with no key (the first ``BAD_KEYS_LISTED``)."""
        rows = "1 row has" if self.count == 1 else f"{self.count} rows have"
        return PlayDefinitionError(
            f"Dataset {self.dataset!r}: {rows} no key: {self._listed()}. Give every row a "
            "value there, choose another key= (a column, a list of columns, or fn(row, "
            'index)), or set such rows aside and go on: ctx.dataset(..., on_bad_key="skip").'
        )

    @property
    def set_aside(self) -> int:
        return self.count if self.on_bad_key == "skip" else 0

    def summary(self) -> str | None:
        """The log line that sums up the rows set aside (None: there were none)."""
        if not self.set_aside:
            return None
        return f"Dataset {self.dataset!r}: {self.count} rows set aside (no key): {self._listed()}."

    def report(self) -> dict[str, Any]:
        """What the dataset's end event says of them: ``set_aside``, each row's line."""
        return {"set_aside": [str(aside) for aside in self.aside]} if self.set_aside else {}


def as_row(item: Any) -> dict[str, Any]:
    """A dataset item as a row dict: mappings as they are, anything else as ``{"value": item}``."""
    if type(item) is dict and all(type(k) is str for k in item):
        return item.copy()  # the common case, without a str() per key
    if isinstance(item, Mapping):
        return {str(k): v for k, v in item.items()}
    return {"value": item}


def _blank(value: Any) -> bool:
    """No value: None, blank text, NaN (a spreadsheet's empty number cell) or pandas' NaT
    and NA; infinities too (JSON has no text for them: +inf and -inf would both be the key
    "null")."""
    if isinstance(value, str):
        return not value.strip()
    return (
        value is None
        or (isinstance(value, float) and not math.isfinite(value))
        or type(value).__name__ in ("NaTType", "NAType")  # pandas' missing time, or value
    )


def _float_why(value: float) -> str:
    return "NaN (an empty cell)" if math.isnan(value) else f"{value} (no JSON number)"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else canonical(value, what="A row key")


def row_key_function(
    dataset: str, key: KeySpec, outputs: Collection[str]
) -> Callable[[dict[str, Any], int], str]:
    """Build ``fn(row, index) -> key`` for a dataset's ``key=`` argument.

    Without a key, a row is named by a digest of its input (the dataset's own output columns
    left out, so a row that already holds an output keeps its identity).
    """
    if key is None:
        return _by_content(dataset, frozenset(outputs))
    if isinstance(key, str):
        if not key:
            raise PlayDefinitionError(f"Dataset {dataset!r}: key='' names no column.")
        return _by_columns(dataset, [key], single=True)
    if callable(key):
        return _by_function(dataset, key)
    if isinstance(key, Sequence) and key and all(isinstance(c, str) and c for c in key):
        return _by_columns(dataset, list(key), single=False)
    raise PlayDefinitionError(
        f"Dataset {dataset!r}: key={key!r} is not a key. Use a column name, a list of column "
        "names, or a function fn(row, index) returning a string."
    )


def _why(row: Mapping[str, Any], column: str, value: Any) -> str:
    """Why a key column gives a row no key."""
    if column not in row:
        return f"no column {column!r}"
    if value is None:
        return f"key {column!r} is None"
    if isinstance(value, float):
        return f"key {column!r} is {_float_why(value)}"
    return f"blank key {column!r}"


def _by_content(dataset: str, skip: frozenset[str]) -> Callable[[dict[str, Any], int], str]:
    def by_content(row: dict[str, Any], index: int) -> str:
        body = row if skip.isdisjoint(row) else {k: v for k, v in row.items() if k not in skip}
        try:
            encoded = dumps(body)  # canonical(body) as bytes: the same digest
        except PlayDefinitionError:  # said again, naming the row (a name made per row costs)
            canonical(body, what=f"Row {index} of dataset {dataset!r}")
            raise
        return digest(encoded)[:32]

    return by_content


def _by_columns(
    dataset: str, columns: list[str], *, single: bool
) -> Callable[[dict[str, Any], int], str]:
    """A key from one column (its text) or several (their values as canonical JSON)."""

    def value_of(row: dict[str, Any], index: int, column: str) -> Any:
        value = without_numpy(row.get(column))
        if _blank(value):
            raise MissingKey(dataset, index, _why(row, column, value), row)
        return value

    if single:
        (column,) = columns
        return lambda row, index: _text(value_of(row, index, column))
    return lambda row, index: canonical(
        [value_of(row, index, column) for column in columns], what="A row key"
    )


def _by_function(dataset: str, key: Callable[..., Any]) -> Callable[[dict[str, Any], int], str]:
    try:
        takes_index = len(inspect.signature(key).parameters) >= 2
    except (TypeError, ValueError):  # a builtin such as operator.itemgetter: fn(row)
        takes_index = False

    def by_function(row: dict[str, Any], index: int) -> str:
        value = without_numpy(key(row, index) if takes_index else key(row))
        if _blank(value):
            what = (
                "None"
                if value is None
                else _float_why(value)
                if isinstance(value, float)
                else "blank text"
            )
            raise MissingKey(dataset, index, f"key= returned {what}", row)
        return _text(value)

    return by_function
