"""Where a SQLite store lives: its URL, its folder, and the checks made before opening it."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qsl

from ...errors import StoreError

__all__ = ["DEFAULT_BUSY_TIMEOUT", "not_a_database", "parse_url", "prepare_folder"]

_PREFIX = "sqlite:///"
_HEADER = b"SQLite format 3\x00"
DEFAULT_BUSY_TIMEOUT = 10.0


def parse_url(url: str) -> tuple[str, float]:
    """The database path of a ``sqlite:///`` URL and its busy timeout (``?busy_timeout=N``
    seconds, default 10)."""
    if not url.startswith(_PREFIX) or len(url) == len(_PREFIX):
        raise StoreError(
            f"Invalid SQLite store URL {url!r}. Use 'sqlite:///relative/path.db' or "
            "'sqlite:////absolute/path.db' (three slashes, then the path)."
        )
    path, _, query = url[len(_PREFIX) :].partition("?")
    timeout = DEFAULT_BUSY_TIMEOUT
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name != "busy_timeout":
            raise StoreError(
                f"Unknown option {name!r} in the store URL {url!r}; the SQLite store takes "
                "busy_timeout=SECONDS."
            )
        try:
            timeout = float(value)
        except ValueError:
            timeout = -1.0
        if not timeout >= 0:
            raise StoreError(
                f"busy_timeout={value!r} in the store URL {url!r} must be a number of seconds >= 0."
            )
    return path, timeout


def prepare_folder(path: Path) -> None:
    """Create the database's folder (one level only) and refuse paths SQLite cannot use."""
    folder = path.parent
    if not folder.exists():
        if not folder.parent.is_dir():
            raise StoreError(
                f"Cannot create the store {path}: the folder {folder.parent} does not exist. "
                "Create it first, or choose another store path (PLAYLINE_STORE or store=...)."
            )
        try:
            folder.mkdir(exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"Cannot create the folder {folder} for the store {path} ({exc.strerror}). "
                "Make its parent folder writable, or choose another store path "
                "(PLAYLINE_STORE or store=...)."
            ) from None
    if not folder.is_dir():
        raise StoreError(
            f"Cannot open the store {path}: {folder} is not a folder. "
            "Choose another store path (PLAYLINE_STORE or store=...)."
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StoreError(
            f"The folder {folder} is read-only, and the store {path} needs to write there "
            "(the database and its -wal and -shm files). Make it writable (chmod u+w), or "
            "choose another store path (PLAYLINE_STORE or store=...)."
        )
    if not path.exists():
        return
    if not path.is_file():
        raise StoreError(f"Cannot open the store {path}: it is not a file. Choose another path.")
    if not os.access(path, os.R_OK | os.W_OK):
        raise StoreError(
            f"The store {path} is read-only. Make it writable (chmod u+rw), or choose another "
            "store path (PLAYLINE_STORE or store=...)."
        )
    with path.open("rb") as file:
        head = file.read(len(_HEADER))
    if head and head != _HEADER:
        raise not_a_database(path)


def not_a_database(path: Path | str) -> StoreError:
    return StoreError(
        f"{path} is not a SQLite database (or it is damaged), so it cannot be a Playline store. "
        "Playline has left it untouched: move it away or restore it from a backup, or choose "
        "another store path (PLAYLINE_STORE or store=...)."
    )
