"""Where a SQLite store lives: its URL, its folder, and the checks made before opening it.

The path of a URL has ``~`` and environment variables expanded (an unset variable is refused,
never made into a folder of that name). A missing folder is created only one level deep, in a
folder that exists and is writable, and, for root, only inside the working folder or the home
folder: a typo never creates folders in system places. ``:memory:`` is refused: such a store
would keep nothing, which is what ``memory://`` says plainly.
"""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path
from urllib.parse import parse_qsl

from ...errors import StoreError
from .._messages import NoStore, ReadOnlyStore

__all__ = [
    "DEFAULT_BUSY_TIMEOUT",
    "header_damage",
    "no_store",
    "not_a_database",
    "parse_url",
    "prepare_folder",
]

_PREFIX = "sqlite:///"
DEFAULT_BUSY_TIMEOUT = 10.0
_UNSET_VARIABLE = re.compile(r"\$(\w+|\{[^}]*\})")


def parse_url(url: str) -> tuple[str, float]:
    """The database path of a ``sqlite:///`` URL and its busy timeout (``?busy_timeout=N``
    seconds, default 10)."""
    if not url.startswith(_PREFIX) or len(url) == len(_PREFIX):
        raise StoreError(
            f"Invalid SQLite store URL {url!r}. Use 'sqlite:///relative/path.db' or "
            "'sqlite:////absolute/path.db' (three slashes, then the path)."
        )
    path, _, query = url[len(_PREFIX) :].partition("?")
    if path.startswith((":memory:", "file::memory:")):
        raise StoreError(
            f"{url!r} would be a store that keeps nothing once the process ends. Use "
            "'memory://' for a store in memory, or a file path to keep the runs."
        )
    path = os.path.expanduser(os.path.expandvars(path))
    unset = _UNSET_VARIABLE.search(path)
    if unset:
        raise StoreError(
            f"The store URL {url!r} names the environment variable {unset.group(0)}, which is "
            "not set. Set it, or write the path out."
        )
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
    """Create the database's folder (one level only, see the module docstring) and refuse
    paths SQLite cannot use."""
    folder = path.parent
    if not folder.exists():
        _create(folder, path)
    if not folder.is_dir():
        raise StoreError(
            f"Cannot open the store {path}: {folder} is not a folder. "
            "Choose another store path (PLAYLINE_STORE or store=...)."
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ReadOnlyStore(
            f"The folder {folder} is read-only, and the store {path} needs to write there "
            "(the database and its -wal and -shm files). Make it writable (chmod u+w), or "
            "choose another store path (PLAYLINE_STORE or store=...). Commands that only read "
            "(runs, show, logs, export) open it as it is."
        )
    if not path.exists():
        return
    if not path.is_file():
        raise StoreError(f"Cannot open the store {path}: it is not a file. Choose another path.")
    if not os.access(path, os.R_OK | os.W_OK):
        raise ReadOnlyStore(
            f"The store {path} is read-only. Make it writable (chmod u+rw), or choose another "
            "store path (PLAYLINE_STORE or store=...). Commands that only read (runs, show, "
            "logs, export) open it as it is."
        )


def _create(folder: Path, path: Path) -> None:
    if not folder.parent.is_dir():
        raise StoreError(
            f"Cannot create the store {path}: the folder {folder.parent} does not exist. "
            "Create it first, or choose another store path (PLAYLINE_STORE or store=...)."
        )
    if os.geteuid() == 0 and not _inside(folder, (Path.cwd(), Path.home())):
        raise StoreError(
            f"Playline runs as root and creates a store's folder only inside the working folder "
            f"or the home folder, and {folder} is neither. Create it first (mkdir {folder}) if "
            "it is the right place, or choose another store path (PLAYLINE_STORE or store=...)."
        )
    try:
        folder.mkdir(exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"Cannot create the folder {folder} for the store {path} ({exc.strerror}). "
            "Make its parent folder writable, or choose another store path "
            "(PLAYLINE_STORE or store=...)."
        ) from None


def _inside(folder: Path, roots: tuple[Path, ...]) -> bool:
    where = folder.resolve()
    return any(where.is_relative_to(root.resolve()) for root in roots)


def no_store(path: Path | str) -> NoStore:
    return NoStore(
        f"No store at {path}. Check the path (--store or PLAYLINE_STORE); a store is created "
        "by the first `playline run` (or pl.run) that writes to it."
    )


def header_damage(conn: sqlite3.Connection, path: Path) -> str | None:
    """What the database header says is wrong with the file, if anything: its size against
    its page size, and its page count against the file's size when no write-ahead log holds
    pages yet. A header SQLite cannot take at all (no database, an impossible page size) or
    that counts pages past the file's end raises ``sqlite3.DatabaseError`` here.

    Read through ``conn``, never with ``open()``: closing any descriptor of a file drops every
    POSIX lock the process holds on it, SQLite's among them, and another process may then
    take the database as unused, checkpoint it and delete its log under a live connection
    (https://www.sqlite.org/howtocorrupt.html, section 2.2). One read transaction holds the
    pages still: no checkpoint copies pages into the file while it reads it without the log,
    so what it finds is the file's state, not another process's write half made."""
    conn.execute("BEGIN")
    try:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]  # reads the header: first
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        size = os.stat(path).st_size
        wal = _size(f"{path}-wal")
    finally:
        conn.execute("COMMIT")
    if size % page_size:
        return f"its size ({size} bytes) is not a whole number of {page_size}-byte pages"
    if not wal and pages * page_size != size:  # the log may hold pages past the file
        return f"the header counts {pages} pages but the file holds {size // page_size}"
    return None


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def not_a_database(path: Path | str) -> StoreError:
    return StoreError(
        f"{path} is not a SQLite database (or it is damaged), so it cannot be a Playline store. "
        "Playline has left it untouched: move it away or restore it from a backup, or choose "
        "another store path (PLAYLINE_STORE or store=...)."
    )
