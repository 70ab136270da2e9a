"""The UI's listening socket: its connections answer at once on a kept-alive connection."""

from __future__ import annotations

import socket
from contextlib import closing

from playline.web.server import listen


def test_the_ui_listens_on_a_socket_that_says_it_is_tcp() -> None:
    """asyncio turns Nagle's algorithm off (TCP_NODELAY) only on the connections of a socket
    made with ``IPPROTO_TCP``; with it on, each window a grid asked for on a kept-alive
    connection waited ~40 ms for the client's delayed ACK (bench ui_window: 44 ms -> 2.4 ms
    for a window the store reads in 0.8 ms)."""
    sock, url = listen("127.0.0.1", 0)
    with closing(sock):
        assert sock.proto == socket.IPPROTO_TCP
        assert url == f"http://127.0.0.1:{sock.getsockname()[1]}"
        client = socket.create_connection(sock.getsockname())
        accepted, _ = sock.accept()
        with closing(client), closing(accepted):
            assert accepted.proto == socket.IPPROTO_TCP  # what asyncio looks at
