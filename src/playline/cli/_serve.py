"""`playline serve`: signed webhooks (``pl.hook``) that queue runs, and a worker starting them.

One command serves the hooks the given files declare (``playline.web.hooks``) and, unless
``--no-worker``, runs a ``pl.Worker`` beside them on a loop of its own in a thread: it starts
the runs the hooks queue (and resumes every other due run, as `playline worker` does), so a
play's code never runs on the loop that answers requests.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from contextlib import closing, suppress
from typing import Annotated, Any

import typer

import playline as pl

from ..store import Store, display_url
from ..triggers._hooks import Hook, hooks_of
from ._app import GatewayOpt, GatewayTokenOpt, StoreOpt, app, command, store_at
from ._load import CliError, LoadedModule, cannot_listen, connect_gateway, gateway_from, load_module
from ._runcmds import Plays, play_resolver

__all__ = ["serve"]

_ENDED = {"completed", "completed_with_errors", "failed", "suspended"}


def _say(line: str) -> None:
    typer.echo(line, err=True)


@app.command()
@command
def serve(
    files: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[FILE.py ...]",
            help="Python files declaring hooks with pl.hook (and the plays they start).",
        ),
    ] = None,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Interface to listen on (default: this machine only; put a tunnel or a "
            "reverse proxy in front, or give 0.0.0.0: requests are accepted only signed).",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port (0: a free one).")
    ] = 8767,
    store: StoreOpt = None,
    worker: Annotated[
        bool,
        typer.Option(
            "--worker/--no-worker",
            help="Also start the runs the hooks queue, and every other due run (as `playline "
            "worker` does). --no-worker leaves them to workers running elsewhere.",
        ),
    ] = True,
    gateway: GatewayOpt = None,
    gateway_token: GatewayTokenOpt = None,
) -> None:
    """Answer signed webhooks at POST /hooks/NAME until Ctrl-C: each delivery queues a run of
    its hook's play (or sends its event) and is answered 202 at once.

    A request must carry a `Playline-Delivery` id (the same delivery twice starts one run)
    and `Playline-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256, under the hook's secret,
    of "<t>.<delivery id>", a newline, then the raw body>` (at most 5 minutes old). Each
    hook's secret must be set, and at least 16 characters.
    """
    from ..web.hooks import HooksConfig, create_hooks_app, serve_hooks
    from ..web.server import listen

    loaded = [load_module(f) for f in files or []]
    hooks = [h for m in loaded for h in hooks_of(m.module.__name__)]
    if not hooks:
        given = ", ".join(files or []) or "no file"
        raise CliError(
            f"No hook to serve ({given} declares none). Declare one in a Python file with "
            "pl.hook('signup', play=enrich_lead, secret='CRM_HOOK_SECRET') and give the file: "
            "`playline serve hooks.py`."
        )
    gw = (
        connect_gateway(gateway, gateway_token, doing="nothing is served")
        if worker  # its runs call the gateway: an unreachable one, or a refused token, fails
        else gateway_from(gateway, gateway_token)
    )
    with closing(store_at(store)) as db:
        hooks_app = create_hooks_app(HooksConfig(store=db, hooks=hooks))  # reads the secrets
        try:
            sock, url = listen(host, port)
        except OSError as exc:
            raise cannot_listen(host, port, exc) from None
        _logging()
        background = _Background(_worker(db, loaded, hooks, gw)) if worker else None
        _announce(url, hooks, db, worker)
        if background is not None:
            background.start()
        try:
            serve_hooks(hooks_app, sock)
        finally:
            if background is not None:
                background.stop()
        _say("Stopped.")


def _announce(url: str, hooks: list[Hook], db: Store, worker: bool) -> None:
    _say(f"Playline hooks on {url} (store {display_url(db.url)}); Ctrl-C stops them.")
    for hook in hooks:
        does = f"starts play {hook.play.name}" if hook.play else f"sends event {hook.event!r}"
        if hook.play is None and not isinstance(hook.event, str):
            does = "sends an event"
        _say(f"  POST {url}/hooks/{hook.name}  {does} (secret {hook.secret})")
    if not worker:
        _say("  --no-worker: queued runs wait for `playline worker` on this store.")


def _logging() -> None:
    """Refused and accepted deliveries, one line each on stderr."""
    log = logging.getLogger("playline.hooks")
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.INFO)


def _worker(
    db: Store, loaded: list[LoadedModule], hooks: list[Hook], gw: pl.Gateway | None
) -> pl.Worker:
    """The worker, finding plays as `playline worker FILE.py ...` does: those the files
    define (and the hooks start) by name, any other by the file its run recorded."""
    by_name: Plays = {}
    for module in loaded:
        by_name.update({p.name: (p, module.sources) for p in module.plays.values()})
        for hook in hooks_of(module.module.__name__):
            if hook.play is not None:
                by_name.setdefault(hook.play.name, (hook.play, module.sources))

    return pl.Worker(
        store=db,
        resolve=play_resolver(db, by_name, gw),
        listeners=[_ended],
        on_skip=lambda name, why: _say(f"skipped {name}: {' '.join(why.split())}"),
    )


def _ended(event: pl.Event) -> None:
    if event.kind == "run" and event.status in _ENDED and "/" not in event.run_id:
        _say(f"run {event.run_id} {event.status}" + (f": {event.error}" if event.error else ""))


class _Background:
    """A worker on an event loop of its own, in a thread, until ``stop``."""

    def __init__(self, worker: pl.Worker) -> None:
        self._worker = worker
        self._loop = asyncio.new_event_loop()
        self._task: asyncio.Task[Any] | None = None
        self._thread = threading.Thread(target=self._main, name="playline-worker", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._task = self._loop.create_task(self._worker.run())
        try:
            self._loop.run_until_complete(self._task)
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # the hooks go on answering; say why runs no longer start
            _say(f"error: the worker stopped ({type(exc).__name__}: {exc}); queued runs wait")
        finally:
            self._loop.close()

    def stop(self) -> None:
        """Stop at once, as Ctrl-C stops `playline worker`: an attempt under way is recorded
        as stopped, for `playline resume`."""
        self._worker.stop()
        task = self._task
        if task is not None and not self._loop.is_closed():
            with suppress(RuntimeError):  # its loop closed meanwhile: the worker had ended
                self._loop.call_soon_threadsafe(task.cancel)
        self._thread.join()
