"""Where a SQLite store may be opened or created: URLs a careless user (or a typo) writes.

`~` and environment variables are expanded, an unset variable is refused (never a folder of
that name); one missing folder is created, a chain of them never, and root creates folders only
inside the working or home folder; `:memory:` is refused with a pointer to `memory://`; a
store opened read-only creates nothing, and a store whose file is removed refuses to write.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from playline.errors import StoreError
from playline.store import RunRecord, RunStatus, open_store
from playline.store.sql import SQLiteStore
from services import as_another_user


def _run(run_id: str) -> RunRecord:
    return RunRecord(
        run_id=run_id, play="p", status=RunStatus.RUNNING, created_at=1.0, updated_at=1.0
    )


def test_home_and_variables_are_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("STORES", str(tmp_path / "stores"))
    (tmp_path / "stores").mkdir()
    monkeypatch.chdir(tmp_path)

    open_store("sqlite:///~/home.db").close()
    open_store("sqlite:///$STORES/var.db").close()
    open_store("sqlite:///${STORES}/braces.db").close()

    assert (tmp_path / "home.db").is_file()
    assert {p.name for p in (tmp_path / "stores").glob("*.db")} == {"var.db", "braces.db"}
    assert not (tmp_path / "~").exists() and not (tmp_path / "$STORES").exists()


def test_an_unset_variable_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLAYLINE_NO_SUCH_VAR", raising=False)
    monkeypatch.chdir(tmp_path)

    with pytest.raises(StoreError, match=r"\$PLAYLINE_NO_SUCH_VAR, which is not set"):
        open_store("sqlite:///$PLAYLINE_NO_SUCH_VAR/x.db")

    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", ["sqlite:///:memory:", "sqlite:///file::memory:?cache=shared"])
def test_memory_paths_point_to_memory_urls(url: str) -> None:
    with pytest.raises(StoreError, match="'memory://'"):
        open_store(url)


def test_a_chain_of_missing_folders_is_never_created(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        open_store(f"sqlite:///{tmp_path}/a/b/c/x.db")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the rule for root")
def test_root_creates_no_folder_outside_the_working_or_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(work))

    with pytest.raises(StoreError, match="runs as root"):
        open_store(f"sqlite:///{elsewhere}/new/x.db")
    with pytest.raises(StoreError):
        open_store("sqlite:////nonexistent-playline-folder/x.db")
    open_store(f"sqlite:///{elsewhere}/x.db").close()  # an existing folder is fine
    open_store("sqlite:///.playline/x.db").close()  # and one level in the working folder

    assert not (elsewhere / "new").exists()
    assert not Path("/nonexistent-playline-folder").exists()
    assert (work / ".playline" / "x.db").is_file()


def test_read_only_opens_create_nothing(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=f"No store at {tmp_path / 'nope.db'}"):
        open_store(f"sqlite:///{tmp_path}/nope.db", read_only=True)
    with pytest.raises(StoreError, match="No store at"):
        open_store(f"sqlite:///{tmp_path}/missing/nope.db", read_only=True)
    assert list(tmp_path.iterdir()) == []


def test_an_empty_file_is_no_store_yet_to_a_reader(tmp_path: Path) -> None:
    """`: > s.db` (or a store whose first write never came): readers said "attempt to write
    a readonly database, check that the file is writable" of a writable file."""
    empty = tmp_path / "s.db"
    empty.touch()
    with pytest.raises(StoreError, match=f"No store at {empty}"):
        open_store(f"sqlite:///{empty}", read_only=True)
    open_store(f"sqlite:///{empty}").close()  # a writer makes it one
    open_store(f"sqlite:///{empty}", read_only=True).close()


def test_a_read_only_store_reads_and_refuses_writes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    with SQLiteStore(url) as store:
        store.create_run(_run("r1"))

    with SQLiteStore(url, read_only=True) as reader:
        assert reader.get_run("r1") is not None
        with pytest.raises(StoreError, match="opened read-only"):
            reader.create_run(_run("r2"))


def test_a_store_whose_file_is_removed_refuses_to_write(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(f"sqlite:///{path}") as store:
        store.create_run(_run("r1"))
        path.unlink()

        with pytest.raises(StoreError, match="was deleted or replaced"):
            store.create_run(_run("r2"))

    assert not path.exists()


def test_a_store_whose_file_is_replaced_refuses_to_write(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(f"sqlite:///{path}") as store:
        store.create_run(_run("r1"))
        moved = tmp_path / "moved.db"
        path.rename(moved)
        path.write_bytes(b"")  # someone puts another file in its place

        with pytest.raises(StoreError, match="was deleted or replaced"):
            store.create_run(_run("r2"))

    assert path.read_bytes() == b""


def test_a_reader_who_cannot_write_the_file_leaves_no_log_behind() -> None:
    """Another user's ``playline show`` of a store in a shared folder: the ``-wal`` and
    ``-shm`` files SQLite would make for it would be that user's, and the store's owner
    could write to the store no more. (Root writes any file: the reader is run as nobody.)"""
    shared = Path(tempfile.mkdtemp())  # outside pytest's folders, which only root enters
    try:
        shared.chmod(0o777)
        url = f"sqlite:///{shared}/s.db"
        with open_store(url) as db:
            db.create_run(_run("r1"))
        assert {p.name for p in shared.iterdir()} == {"s.db"}  # closed: no log left
        # the owner's, which the reader (nobody, or the owner through a file made read-only)
        # cannot write
        (shared / "s.db").chmod(0o644 if os.geteuid() == 0 else 0o444)

        def read() -> str:
            with open_store(url, read_only=True) as db:
                return ",".join(run.run_id for run in db.list_runs())

        assert as_another_user(read) == "r1"
        assert {p.name for p in shared.iterdir()} == {"s.db"}
        (shared / "s.db").chmod(0o644)
        with open_store(url) as db:  # and the owner writes as before
            db.create_run(_run("r2"))
    finally:
        shutil.rmtree(shared)
