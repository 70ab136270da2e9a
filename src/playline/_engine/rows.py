"""Row identity: how a dataset row is named, so that it is found again on resume."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from .._json import canonical, digest, dumps, without_numpy
from ..errors import PlayDefinitionError
from .events import preview

__all__ = ["KeySpec", "as_row", "row_key_function"]

KeySpec = str | Sequence[str] | Callable[..., Any] | None


def as_row(item: Any) -> dict[str, Any]:
    """A dataset item as a row dict: mappings as they are, anything else as ``{"value": item}``."""
    if type(item) is dict and all(type(k) is str for k in item):
        return item.copy()  # the common case, without a str() per key
    if isinstance(item, Mapping):
        return {str(k): v for k, v in item.items()}
    return {"value": item}


def _blank(value: Any) -> bool:
    """No value: None, blank text, or NaN (a spreadsheet's empty number cell)."""
    return (
        value is None
        or (isinstance(value, str) and not value.strip())
        or (isinstance(value, float) and math.isnan(value))
    )


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


def _missing(dataset: str, index: int, what: str, row: Mapping[str, Any]) -> PlayDefinitionError:
    # the row as well as its index: a CSV's skipped lines make indexes and lines differ
    shown = preview(dict(row), 200)
    return PlayDefinitionError(
        f"Dataset {dataset!r}: row {index} (counting from 0: {shown}) has no value for "
        f"{what}. Give every row a value there, or choose another key= (a column, a list "
        "of columns, or fn(row, index))."
    )


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
            raise _missing(dataset, index, f"key column {column!r}", row)
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
            raise _missing(dataset, index, "its key (key= returned nothing)", row)
        return _text(value)

    return by_function
