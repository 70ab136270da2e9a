"""`playline ui`: the live browser view of the store's runs (``playline.web``)."""

from __future__ import annotations

import os
from contextlib import closing
from typing import Annotated

import typer

from ..store import DEFAULT_STORE_URL, Store, display_url
from ._app import GatewayOpt, StoreOpt, app, command, store_at
from ._load import CliError, cannot_listen

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
    port: Annotated[int, typer.Option("--port", min=0, help="Port (0: a free one).")] = 8766,
    open_browser: Annotated[bool, typer.Option("--open", help="Open it in a browser.")] = False,
    run_id: Annotated[str | None, typer.Option("--run", help="Start on this run's page.")] = None,
    gateway: GatewayOpt = None,
) -> None:
    """Serve a live view of runs, their cells, costs and logs, until Ctrl-C.

    It reads the store, so it shows runs of any process that writes there. Its actions (stop,
    resume, export, send an event) need the page's token; resume starts `playline resume`
    on the same store (with --gateway, if given).
    """
    from ..web import UIConfig, serve

    url = store_url(store)
    with closing(store_at(url)) as db:  # the one store of the UI's reads, closed when it stops
        path = "/"
        if run_id is not None:
            if db.get_run(run_id) is None:
                raise CliError(
                    f"No run {run_id!r} in the store {display_url(url)}. List runs with "
                    "`playline runs`.",
                    code=1,
                )
            path = f"/run/{run_id}"
        try:
            serve(
                UIConfig(store=db, store_url=url, gateway=gateway),
                host=host,
                port=port,
                open_browser=open_browser,
                say=lambda line: typer.echo(line, err=line.startswith("warning")),
                path=path,
            )
        except OSError as exc:
            raise cannot_listen(host, port, exc) from None


def start_beside(db: Store, url: str | None, gateway: str | None) -> str:
    """Serve the UI on a free loopback port in a daemon thread beside a run (``run --ui``);
    prints its URL and returns it. The thread ends with the process."""
    from ..web import UIConfig
    from ..web.server import serve_in_thread

    address = serve_in_thread(UIConfig(store=db, store_url=store_url(url), gateway=gateway))
    typer.echo(f"Playline UI on {address}/ (the run is at the top of the list)", err=True)
    return address
