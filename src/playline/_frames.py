"""pandas and polars DataFrames in and out of datasets, without depending on either.

A DataFrame is recognised by the module its type comes from, so neither library is imported
unless the play already uses it. Going in, rows stream from the frame as plain Python values
(missing values become ``None``, NumPy scalars Python numbers, timestamps ISO text), so row
keys and stored rows are the same as for a list of dicts. Going out, ``Dataset.to_pandas()``
and ``to_polars()`` import the library when called and say which ``pip install`` fixes it;
they get the rows as ``Dataset`` makes them columns (``fields=`` and ``flatten``: see
``_flatten``).
"""

from __future__ import annotations

import datetime as dt
import importlib
import math
from collections.abc import Iterable, Iterator
from types import ModuleType
from typing import Any

from ._json import canonical
from .errors import PlayDefinitionError

__all__ = ["FrameRows", "frame_kind", "rows_to_pandas", "rows_to_polars"]

_CHUNK = 1000


def frame_kind(obj: Any) -> str | None:
    """``"pandas"`` or ``"polars"`` when ``obj`` is a DataFrame of that library, else None."""
    cls = type(obj)
    if cls.__name__ != "DataFrame":
        return None
    root = cls.__module__.partition(".")[0]
    return root if root in ("pandas", "polars") else None


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if type(value).__name__ in ("NaTType", "NAType"):  # pandas' missing markers
        return None
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    item = getattr(value, "item", None)  # a NumPy scalar
    if callable(item) and type(value).__module__.partition(".")[0] == "numpy":
        return _plain(item())
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    isoformat = getattr(value, "isoformat", None)
    if callable(isoformat):
        return isoformat()
    tolist = getattr(value, "tolist", None)  # an array or a polars Series in a cell
    if callable(tolist):
        return _plain(tolist())
    return value


class FrameRows:
    """The rows of a DataFrame as dicts of plain values, streamed chunk by chunk."""

    def __init__(self, frame: Any, kind: str) -> None:
        self.frame = frame
        self.kind = kind

    def __len__(self) -> int:
        return int(self.frame.shape[0])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        frame, n = self.frame, len(self)
        for start in range(0, n, _CHUNK):
            if self.kind == "pandas":
                records = frame.iloc[start : start + _CHUNK].to_dict("records")
            else:
                records = frame.slice(start, _CHUNK).to_dicts()
            for record in records:
                yield {str(k): _plain(v) for k, v in record.items()}


def _library(name: str, what: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise PlayDefinitionError(
            f"{what} needs {name}, which is not installed. Install it with "
            f"`pip install 'playline[{name}]'` (or `pip install {name}`)."
        ) from None


def rows_to_pandas(rows: Iterable[dict[str, Any]], what: str) -> Any:
    """A pandas DataFrame of ``rows`` (nested values stay Python objects)."""
    pandas = _library("pandas", what)
    return pandas.DataFrame.from_records(list(rows))


def rows_to_polars(rows: Iterable[dict[str, Any]], what: str) -> Any:
    """A polars DataFrame of ``rows``; nested values of mixed shapes become JSON text."""
    polars = _library("polars", what)
    data = list(rows)
    try:
        return polars.DataFrame(data, infer_schema_length=None)
    except Exception:  # polars cannot type a column mixing shapes: fall back to JSON text
        flat = [
            {k: canonical(v) if isinstance(v, dict | list) else v for k, v in row.items()}
            for row in data
        ]
        return polars.DataFrame(flat, infer_schema_length=None)
