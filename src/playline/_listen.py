"""The listening socket of a server Playline runs (the UI, webhooks, the simulator).

Bound before the server starts, so that a port taken, a host that is no address of this
machine or a port out of range is an ``OSError`` its command says in one line, before the
server has logged anything; and listening before its URL is said, so that a client told it
may connect at once (its connection waits for the server to start, never refused).
"""

from __future__ import annotations

import errno
import socket

__all__ = ["listening"]


def listening(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host:port`` (0: a free port); ``OSError`` when it cannot.

    It says it is TCP: asyncio turns Nagle's algorithm off (``TCP_NODELAY``) only on the
    connections of such a socket, and with it on, each answer on a kept-alive connection (a
    browser's, the grid's next window) waited ~40 ms for the client's delayed ACK."""
    if not 0 <= port <= 65535:
        raise OSError(errno.EINVAL, f"a port is a number from 0 to 65535, not {port}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(socket.SOMAXCONN)
    except BaseException:
        sock.close()
        raise
    return sock
