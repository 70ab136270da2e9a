"""Who holds a run or a receipt: a host, a process and an attempt's token.

Ownership is decided by leases, which the holder renews while it works; on the holder's own
host a dead process is recognised at once (its pid is gone), which spares waiting for its
lease to run out. On another host only the lease counts.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["holding", "keep_alive", "owner_alive", "owner_host_pid", "owner_id"]

_HOST = socket.gethostname()
_holding: dict[str, int] = {}  # this process's live holders (nested attempts count)


def owner_id(token: str) -> str:
    """``host/pid/token``: unique per attempt, and telling whose process it was."""
    return f"{_HOST}/{os.getpid()}/{token}"


def owner_host_pid(owner: str) -> tuple[str, int | None]:
    host, _, rest = owner.partition("/")
    pid = rest.partition("/")[0]
    return host, int(pid) if pid.isdigit() else None


@contextmanager
def holding(owner: str) -> Iterator[None]:
    """``owner`` (an attempt of this process) is alive for the duration of the block."""
    _holding[owner] = _holding.get(owner, 0) + 1
    try:
        yield
    finally:
        _holding[owner] -= 1
        if not _holding[owner]:
            del _holding[owner]


def keep_alive(owner: str) -> Callable[[], None]:
    """``owner`` (a holder of this process with no block to live in, such as a process's rate
    gates) is alive until the returned function is called."""
    _holding[owner] = _holding.get(owner, 0) + 1

    def release() -> None:
        _holding[owner] -= 1
        if not _holding[owner]:
            del _holding[owner]

    return release


def owner_alive(owner: str) -> bool:
    """False when the owner was a process on this host that no longer exists, or an attempt
    of this process that has ended."""
    host, pid = owner_host_pid(owner)
    if host != _HOST or pid is None:
        return True
    if pid == os.getpid():
        return owner in _holding
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
