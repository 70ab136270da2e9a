"""Flat results: nested cell values spread into dotted columns (``company.name``).

A tool column usually holds a dict (a company's ``name``, ``industry``, ``size`` ...). Tables
read better with one column per field, so two things spread such values into columns named
``<column>.<field>``:

- ``with_column(..., fields=["name", "industry"])``: the fields a column is *shown* as. It is a
  view, recorded with the column (in its dataset's start event), not a change to what is
  stored: the cell keeps the whole result, receipts and row keys are unchanged, and changing
  ``fields`` needs no new run to take effect on the next export. A field a result lacks (or a
  cell that is not a dict: not found, skipped) gives ``None``, never an error; a field may
  name a nested one with dots (``"location.city"``).
- ``flatten`` (``playline export --flatten``, ``Dataset.to_pandas(flatten=True)`` ...): every
  dict value spread into dotted columns, at any depth. Lists stay whole (JSON text in a CSV).

Columns keep the dataset's order: a spread column's fields take its place, in the order
``fields`` names them (else as first seen). A column that only ever held ``None`` beside
spread values of the same name (rows not found) adds no empty column of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._json import canonical
from .errors import PlayDefinitionError, PlaylineError

if TYPE_CHECKING:
    from .store import Store

__all__ = [
    "Fields",
    "check_fields",
    "dataset_fields",
    "defused",
    "flat",
    "spread",
    "spread_columns",
    "spread_row",
]

Fields = Mapping[str, Sequence[str]]  # a column's name -> the fields it is shown as


def check_fields(fields: Any, where: str) -> tuple[str, ...] | None:
    """``fields=`` of ``with_column`` as a tuple: None, or a non-empty list of distinct,
    non-empty field names."""
    if fields is None:
        return None
    example = 'e.g. fields=["name", "industry"]'
    if isinstance(fields, str) or not isinstance(fields, list | tuple):
        raise PlayDefinitionError(
            f"{where}: fields= is a list of the result's field names to show as columns, "
            f"{example}; not {fields!r}."
        )
    if not fields:
        raise PlayDefinitionError(
            f"{where}: fields= is empty; name at least one field ({example}), or leave it out "
            "to keep the whole result in one column."
        )
    for name in fields:
        if not isinstance(name, str) or not name.strip():
            raise PlayDefinitionError(
                f"{where}: fields= holds {name!r}; each field is a non-empty name ({example})."
            )
    twice = sorted({name for name in fields if fields.count(name) > 1})
    if twice:
        raise PlayDefinitionError(
            f"{where}: fields= names {', '.join(map(repr, twice))} more than once; name each "
            "field once."
        )
    return tuple(fields)


def dataset_fields(store: Store, run_id: str, dataset: str) -> dict[str, tuple[str, ...]]:
    """The ``fields=`` of the dataset's columns, as its newest start recorded them (a resume
    of a changed play records its own)."""
    found: dict[str, tuple[str, ...]] = {}
    for event in store.read_events(run_id, kinds=["dataset"]):
        if event.dataset == dataset and event.status == "running":
            recorded = (event.data or {}).get("fields") or {}
            found = {str(name): tuple(names) for name, names in recorded.items()}
    return found


def _pick(value: Any, field: str) -> Any:
    """``value[field]``, or through dicts along a dotted ``field``; None when missing."""
    if not isinstance(value, Mapping):
        return None
    if field in value:
        return value[field]
    head, dot, rest = field.partition(".")
    return _pick(value.get(head), rest) if dot and head in value else None


def _spread(name: str, value: Any, flatten: bool) -> Iterator[tuple[str, Any]]:
    if flatten and isinstance(value, Mapping) and value:
        for key, part in value.items():
            yield from _spread(f"{name}.{key}", part, flatten)
    else:
        yield name, value


def spread_row(
    row: Mapping[str, Any], fields: Fields, *, flatten: bool = False
) -> list[tuple[str, str, Any]]:
    """The row's cells as ``(column, name, value)``: a column with ``fields`` as one cell per
    field, and with ``flatten`` every dict value spread (``company.location.city``)."""
    cells: list[tuple[str, str, Any]] = []
    for column, value in row.items():
        chosen = fields.get(column)
        if chosen is not None:
            for field in chosen:
                parts = _spread(f"{column}.{field}", _pick(value, field), flatten)
                cells += [(column, n, v) for n, v in parts]
        else:
            cells += [(column, n, v) for n, v in _spread(column, value, flatten)]
    return cells


def spread(row: Mapping[str, Any], fields: Fields, *, flatten: bool = False) -> dict[str, Any]:
    """One row with its nested values spread into dotted columns (see ``spread_row``)."""
    out: dict[str, Any] = {}
    for column, name, value in spread_row(row, fields, flatten=flatten):
        if name in out:
            raise _clash(column, name)
        out[name] = value
    return out


def _clash(column: str, name: str) -> PlaylineError:
    return PlaylineError(
        f"Column {column!r} spreads into {name!r}, which the row already has (a column of "
        "that name, or --with-status's status of a column): export it without --flatten or "
        "fields= (or without --with-status), or rename one of the two columns."
    )


def spread_columns(
    rows: Iterable[Mapping[str, Any]], fields: Fields, *, flatten: bool = False
) -> list[str]:
    """Every spread column of ``rows``, in the dataset's order (see the module docstring)."""
    order: dict[str, dict[str, None]] = {}  # column -> its spread names, first seen first
    valued: set[str] = set()  # names that held a value other than None somewhere
    for row in rows:
        seen: set[str] = set()  # a name twice in a row is refused before anything is written
        for column, name, value in spread_row(row, fields, flatten=flatten):
            if name in seen:
                raise _clash(column, name)
            seen.add(name)
            order.setdefault(column, {}).setdefault(name, None)
            if value is not None:
                valued.add(name)
    names: list[str] = []
    for spread_names in order.values():
        # rows without a result beside rows spread (``company`` None, ``company.name``
        # elsewhere): no empty column of their own
        names += [
            name
            for name in spread_names
            if name in valued or not any(other.startswith(f"{name}.") for other in spread_names)
        ]
    return names


def flat(value: Any) -> Any:
    """A cell value as one CSV field: nested values as canonical JSON."""
    return value if value is None or isinstance(value, str | int | float) else canonical(value)


# OWASP's CSV injection rule: a spreadsheet runs a cell that begins with one of these as a
# formula (=HYPERLINK(...) from a provider's data), so it is written with a quote in front.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def defused(value: Any) -> Any:
    """A CSV cell that a spreadsheet shows as text, never runs as a formula (every CSV export:
    the command line's, the web UI's and ``Dataset.to_csv``)."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value
