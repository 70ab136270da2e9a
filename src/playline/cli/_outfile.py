"""Files the command line writes (``--out``): checked before a run starts, written whole or not.

An export holds provider data, and its path may be one an attacker prepared: an existing file
is never replaced without ``--force``, a symbolic link at the path is never followed (with
``--force`` the link itself is replaced by the file), and the rows go to a temporary file in
the same folder that is renamed into place once complete, so a reader never sees half a file
and a failed export leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ._load import CliError

__all__ = ["FORMATS", "STDOUT", "check_out", "replacing"]

FORMATS = (".csv", ".jsonl", ".parquet")
STDOUT = Path("-")  # `playline export --out -`: the rows on standard output


def out_source(out: Path | None, raw: bool) -> dict[str, Any]:
    """What a run records of its ``--out`` for a resume to write again: the file's absolute
    path (a resume may start in another folder) and ``--raw``."""
    return {} if out is None else {"out": str(out.absolute()), "raw": raw}


def check_out(
    out: Path | None, *, force: bool, format: str | None = None, stdout: bool = False
) -> None:
    """Refuse an output path that cannot be written, before anything runs or is paid for.
    Its suffix says the format, unless ``format`` is given (``--format``). ``-`` is standard
    output where the command prints nothing else (``stdout``), in a text format."""
    if out is None:
        return
    if out == STDOUT:
        if not stdout:
            raise CliError(
                "--out -: this command prints its own output there; give a file name, or "
                "print the rows afterwards with `playline export RUN_ID --out -`."
            )
        if format == "parquet":
            raise CliError("--out -: Parquet is not text; give a .parquet file name.")
        return
    suffix = out.suffix.lower()
    if format is None and suffix not in FORMATS:
        raise CliError(f"--out {out}: use a .parquet, .csv or .jsonl file name.")
    if suffix in FORMATS and f".{format}" in FORMATS and suffix != f".{format}":
        # a name of another format's file (Parquet in x.csv) misleads what opens it
        raise CliError(
            f"--out {out} --format {format}: the file name says {suffix[1:]}, the format "
            f"{format}. Name it {out.with_suffix(f'.{format}').name}, or leave --format out "
            "(the suffix chooses)."
        )
    folder = out.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise CliError(
            f"--out {out}: the folder {folder} {what}. Create it first, or choose another path."
        )
    _probe(out)
    if out.is_symlink():
        if not force:
            raise CliError(
                f"--out {out} is a symbolic link; Playline never writes through one. Choose "
                "another path, or add --force to replace the link (not what it points to)."
            )
    elif out.is_dir():
        raise CliError(f"--out {out} is a folder. Give a file name, e.g. {out / 'rows.csv'}.")
    elif out.exists() and not force:
        raise CliError(f"--out {out} exists. Add --force to replace it, or choose another path.")


def _probe(out: Path) -> None:
    """Refuse a folder the file cannot be made in: a file is made there and removed (asking
    ``os.access`` says yes to root, on a read-only mount, in ``/proc``...)."""
    try:
        fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".probe", dir=out.parent)
    except OSError as exc:
        raise CliError(
            f"--out {out}: no file can be written in {out.parent} ({exc.strerror or exc}). "
            "Choose another path, or make the folder writable."
        ) from None
    os.close(fd)
    os.unlink(name)


@contextlib.contextmanager
def replacing(out: Path, *, force: bool, binary: bool = False) -> Iterator[IO[Any]]:
    """A text (or ``binary``) handle on a temporary file next to ``out``, put in its place
    when the block ends without an error (and removed when it does not). A file system that
    refuses it (full, gone read-only) is a ``CliError`` saying so: the rows stay in the
    store."""
    if out == STDOUT:  # checked by the command: nothing to put in place
        yield sys.stdout
        return
    check_out(out, force=force, format="given")
    try:
        with _writing(out, force=force, binary=binary) as handle:
            yield handle
    except OSError as exc:
        raise CliError(
            f"--out {out}: the file could not be written ({exc.strerror or exc}); nothing was "
            "left there. The rows are in the store: `playline export RUN_ID --out FILE` writes "
            "them once there is room.",
            code=1,
        ) from None


@contextlib.contextmanager
def _writing(out: Path, *, force: bool, binary: bool) -> Iterator[IO[Any]]:
    fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".part", dir=out.parent)
    temp = Path(name)
    try:
        handle: IO[Any] = (
            os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", newline="", encoding="utf-8")
        )
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, 0o666 & ~_umask())  # mkstemp's 0600, made what open() would give
        _put(temp, out, force=force)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def _put(temp: Path, out: Path, *, force: bool) -> None:
    if force:
        os.replace(temp, out)  # replaces a link at ``out`` itself, never its target
        return
    try:
        os.link(temp, out)  # fails if ``out`` appeared meanwhile: nothing is overwritten
    except FileExistsError:
        raise CliError(
            f"--out {out} was created while the export was written. Add --force to replace "
            "it, or choose another path."
        ) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
            raise
        if os.path.lexists(out):  # a file system without hard links: check, then rename
            raise CliError(f"--out {out} exists. Add --force to replace it.") from None
        os.replace(temp, out)
        return
    temp.unlink()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
