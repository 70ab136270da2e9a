"""`playline ui`: the live browser view of the store's runs (``playline.web``)."""

from __future__ import annotations

import ipaddress
import os
import re
import signal
import threading
from contextlib import closing
from typing import Annotated
from urllib.parse import quote

import typer

from .._secrets import Secret
from ..errors import PlaylineError
from ..store import DEFAULT_STORE_URL, NoStore, ReadOnlyStore, Store, display_url, open_store
from ._app import GatewayOpt, GatewayTokenOpt, StoreOpt, app, command, store_at
from ._load import TOKEN_VARIABLE, CliError, cannot_listen, read_gateway_token
from ._report import require_run

__all__ = ["start_beside", "store_url"]


def store_url(url: str | None) -> str:
    """The URL the store was opened from: a resume the UI starts opens the same one."""
    return url or os.environ.get("PLAYLINE_STORE") or DEFAULT_STORE_URL


@app.command()
@command
def ui(
    store: StoreOpt = None,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Interface to listen on. Anything but 127.0.0.1/localhost exposes the UI, "
            "which has no login, to the network (it says so).",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port (0: a free one).")
    ] = 8766,
    open_browser: Annotated[bool, typer.Option("--open", help="Open it in a browser.")] = False,
    run_id: Annotated[str | None, typer.Option("--run", help="Start on this run's page.")] = None,
    gateway: GatewayOpt = None,
    gateway_token: GatewayTokenOpt = None,
    allowed_hosts: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            metavar="NAME",
            help="Also answer for this host name (a reverse proxy's, or the address browsers "
            "use with --host 0.0.0.0); repeatable. Any other name but 127.0.0.1, localhost, "
            "[::1] and --host is refused, so a page of another site cannot read the UI "
            "through a name that resolves to this machine.",
        ),
    ] = None,
) -> None:
    """Serve a live view of runs, their cells, costs and logs, until Ctrl-C.

    It reads the store, so it shows runs of any process that writes there (a store this user
    cannot write, read-only). Its actions (stop, resume, export, send an event) need the
    page's token; resume starts `playline resume` on the same store, which calls the gateway
    the run called (or --gateway, if given) with this command's --gateway-token (else
    $PLAYLINE_GATEWAY_TOKEN), passed in its environment.
    """
    from ..web import UIConfig, serve

    names = tuple(_host_name(name) for name in allowed_hosts or ())
    url = store_url(store)
    new = _no_store_yet(url)
    with closing(_opened(url)) as db:  # the one store of the UI's reads, closed when it stops
        path = "/"
        if run_id is not None:
            require_run(db, run_id)
            path = f"/run/{quote(run_id)}"
        if new:
            typer.echo(
                f"warning: no store at {display_url(url)} yet: the UI starts on a new, empty "
                "one. Check --store (or PLAYLINE_STORE) if you expected runs there.",
                err=True,
            )
        try:
            _closing_on_sigterm()
            serve(
                UIConfig(
                    store=db,
                    store_url=url,
                    gateway=gateway,
                    gateway_token=_token(gateway_token),
                    allowed_hosts=names,
                ),
                host=host,
                port=port,
                open_browser=open_browser,
                say=lambda line: typer.echo(line, err=line.startswith("warning")),
                path=path,
            )
        except OSError as exc:
            raise cannot_listen(host, port, exc) from None


def _opened(url: str) -> Store:
    """The UI's store: read-only when this user cannot write it (a colleague's, a backup),
    its runs shown and its actions (stop, resume, send an event) refused."""
    try:
        return store_at(url)
    except ReadOnlyStore as exc:
        db = store_at(url, read_only=True)
        typer.echo(
            f"warning: {str(exc).split('. ')[0]}: the UI shows its runs read-only; stop, "
            "resume and sending an event need a user who can write it.",
            err=True,
        )
        return db


def _closing_on_sigterm() -> None:
    """SIGTERM stops the UI as Ctrl-C does, its store closed (no ``-wal`` left behind). The
    server stops on it, then raises it again with the handler it found: the default one
    would end the process before the store is closed."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stopped)


def _stopped(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _no_store_yet(url: str) -> bool:
    """Whether there is no store at ``url`` yet: the UI makes an empty one, which runs
    started on it later fill (a mistyped --store shows no runs, and says why)."""
    try:
        open_store(url, read_only=True).close()
    except NoStore:
        return True
    except PlaylineError:
        pass  # said again, better, as the store is opened to serve
    return False


def _host_name(name: str) -> str:
    """An ``--allowed-host`` as a ``Host`` header names it: an IPv6 address in brackets, a
    name as it is (``*.example.com`` for every subdomain)."""
    try:
        address = ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        if re.fullmatch(r"(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*", name):
            return name
        raise CliError(
            f"--allowed-host {name!r} is not a host name: give the name alone, with no scheme, "
            "port or path (e.g. --allowed-host playline.example.com).",
            code=2,
        ) from None
    return f"[{address}]" if address.version == 6 else str(address)


def _token(given: str | None) -> Secret | None:
    """The token the UI's resumes get (``--gateway-token``, else the variable), as a secret:
    never shown, caught if anything would store or print it."""
    token = read_gateway_token(given)[0]
    return Secret(TOKEN_VARIABLE, token) if token else None


def start_beside(
    db: Store, url: str | None, gateway: str | None, gateway_token: str | None = None
) -> str:
    """Serve the UI on a free loopback port in a daemon thread beside a run (``run --ui``);
    prints its URL and returns it. The thread ends with the process."""
    from ..web import UIConfig
    from ..web.server import serve_in_thread

    config = UIConfig(
        store=db, store_url=store_url(url), gateway=gateway, gateway_token=_token(gateway_token)
    )
    address = serve_in_thread(config)
    typer.echo(f"Playline UI on {address}/ (the run is at the top of the list)", err=True)
    return address
