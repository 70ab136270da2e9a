"""A SQLite store's write-ahead log copied into its file on a thread of its own.

In WAL mode a commit appends pages to the log (the ``-wal`` file), and a *checkpoint* copies
them into the database file. SQLite checkpoints in the commit that leaves more than
``wal_autocheckpoint`` pages in the log, on the thread that made it: the event loop's, when
the engine calls the store inline. That was a stall of 50-70 ms every 40 MB written, and a
tenth of a pure map's time.

A store's ``Checkpointer`` checkpoints on a thread and a connection of its own instead, each
time the store has changed ``EVERY`` more rows or made ``COMMITS`` more commits (small ones,
as slow jobs' polls and claims make, write whole pages for a row or two). It is ``PASSIVE``:
it never waits for a reader or a writer, of this process or another, and never makes one
wait; SQLite lets go of the interpreter lock meanwhile, so it runs beside the engine. The
commits' own checkpoint stays, at ``BACKSTOP`` pages: the log starts again from its beginning
only when a write begins with all of it copied, which that checkpoint, in the writing
connection, makes sure of (writes go on while the thread copies, so the thread alone never
catches up); by then the thread has copied most of the log. ``BACKSTOP`` pages (32 MB at
SQLite's default page size) keep the log under ``LOG_LIMIT``; a log that grew past it anyway
(a reader held its start) is cut back to it when it starts again (``journal_size_limit``).
With a checkpoint only every 40,000 pages, a 1,000-row run of slow jobs grew its log to
106 MB.

Measured against commits checkpointing every 10,000 pages (``python -m bench single_call``
cases and ``pure_map``'s 1M rows, alternating runs): live calls 4%, cached re-runs 3%, batch
calls 9% and the pure map 8% faster; the commits of 100,000 live calls took 0.61 s in all
instead of 1.09, the longest 48 ms instead of 78.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from contextlib import suppress

__all__ = ["BACKSTOP", "COMMITS", "EVERY", "LOG_LIMIT", "Checkpointer"]

EVERY = 20_000  # rows changed between two checkpoints on the thread
COMMITS = 500  # or commits: small ones write pages for few rows (slow jobs' polls and claims)
LOG_LIMIT = 64 * 1024 * 1024  # bytes a log file is cut back to when it starts again
BACKSTOP = 8_000  # pages in the log that make a commit checkpoint (wal_autocheckpoint)


class Checkpointer:
    """Checkpoints a store's log on a thread, started at the first one, after every
    ``EVERY`` rows changed (``wrote``). Holds no reference to its store: a store dropped
    unclosed stops it (``stop``, from a finalizer), as ``close`` does."""

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self._connect = connect
        self._mark = 0  # the store's changes when the last checkpoint was asked for
        self._commits = 0  # commits since then
        self._due = threading.Event()
        self._stopping = False
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._asked = self.made = 0  # checkpoints asked for, and made (or tried) so far
        self._thread: threading.Thread | None = None

    def wrote(self, changes: int) -> None:
        """A write committed (the store's lock still held); ``changes``: its connection's
        ``total_changes``."""
        self._commits += 1
        if changes - self._mark < EVERY and self._commits < COMMITS:
            return
        self._mark, self._commits = changes, 0
        with self._lock:
            if self._stopping:
                return
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="playline-checkpoint", daemon=True
                )
                self._thread.start()
            self._asked += 1
        self._due.set()

    def settled(self, timeout: float) -> bool:
        """Wait until the checkpoints asked for so far are made; False if ``timeout``
        seconds pass first (as they do once the thread has stopped)."""
        with self._done:
            return self._done.wait_for(lambda: self.made >= self._asked, timeout)

    def stop(self) -> None:
        """Let the thread end after the checkpoint it is making, if any."""
        with self._lock:
            self._stopping = True
        self._due.set()

    def close(self) -> None:
        """Stop the thread and wait for it: its connection is closed before the store's."""
        self.stop()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        try:
            conn = self._connect()
        except sqlite3.Error:
            return  # the commits' own checkpoints do it all
        try:
            while True:
                self._due.wait()
                self._due.clear()
                with self._lock:
                    if self._stopping:
                        return
                    asked = self._asked
                # busy (a checkpoint elsewhere), or a full disk: the next one, or a commit's
                with suppress(sqlite3.Error):
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                with self._done:
                    self.made = asked
                    self._done.notify_all()
        finally:
            conn.close()
