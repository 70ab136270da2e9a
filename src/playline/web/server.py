"""Serving the UI with uvicorn: loopback by default, a warning for anything else."""

from __future__ import annotations

import ipaddress
import socket
import threading
import webbrowser
from collections.abc import Callable
from dataclasses import replace

import uvicorn

from .._listen import listening
from ..store import display_url
from .app import UIConfig, create_app

__all__ = ["is_loopback", "no_login_warning", "serve", "serve_in_thread"]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def no_login_warning(host: str) -> str:
    warning = (
        f"warning: the UI listens on {host}, not only on this machine, and has no login: anyone "
        "who can reach it can read every run in the store and stop or resume them. Bind to "
        "127.0.0.1 (the default) unless the network is yours alone."
    )
    if _any_address(host):
        warning += (
            " It answers only for the host names it knows (127.0.0.1, localhost and "
            "--allowed-host): name the ones browsers reach it by with --allowed-host."
        )
    return warning


def _any_address(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _named(host: str) -> str:
    """The host as a URL and a ``Host`` header name it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


def _config(config: UIConfig, host: str, port: int) -> uvicorn.Config:
    # it answers for the address it listens on too (the loopback names it always answers for)
    answers = replace(config, allowed_hosts=(*config.allowed_hosts, _named(host)))
    return uvicorn.Config(
        create_app(answers),
        host=host,
        port=port,
        loop="asyncio",
        http="h11",
        lifespan="off",
        access_log=False,
        log_level="warning",
        timeout_graceful_shutdown=2,  # open event streams end with the server
    )


def serve(
    config: UIConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8766,
    open_browser: bool = False,
    say: Callable[[str], None] = print,
    path: str = "/",
) -> None:
    """Serve until Ctrl-C; ``say`` gets the URL (and, off loopback, the warning) first."""
    sock, url = listen(host, port)
    bound = sock.getsockname()[1]
    if not is_loopback(host):
        say(no_login_warning(host))
    say(f"Playline UI on {url}{path} (store {display_url(config.store_url)}); Ctrl-C stops it.")
    if open_browser:
        threading.Timer(0.5, webbrowser.open, args=(url + path,)).start()
    server = uvicorn.Server(_config(config, host, bound))
    server.run(sockets=[sock])


def serve_in_thread(config: UIConfig, *, host: str = "127.0.0.1", port: int = 0) -> str:
    """Start the UI in a daemon thread (``playline run --ui``); returns its URL once it
    listens. It lives as long as the process."""
    sock, url = listen(host, port)
    server = uvicorn.Server(_config(config, host, sock.getsockname()[1]))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    return url


def listen(host: str, port: int) -> tuple[socket.socket, str]:
    """A socket listening on ``host:port`` (0: a free port, ``_listen.py``) and the base URL
    it is reached at; ``OSError`` when it cannot bind."""
    sock = listening(host, port)
    return sock, f"http://{_named(host)}:{sock.getsockname()[1]}"
