"""Running the simulator: in a background thread for tests (:func:`serve`) or in the
foreground for a terminal (:func:`main`)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import uvicorn

from .._listen import listening
from ._doubles import Double
from ._server import build_app
from ._state import SimState

T = TypeVar("T")

_UNSET: Any = object()
_CALL_TIMEOUT = 10.0


class _Server(uvicorn.Server):
    """A uvicorn server that says when it is listening, and on which loop."""

    def __init__(
        self, config: uvicorn.Config, on_listening: Callable[[_Server], None] | None = None
    ) -> None:
        super().__init__(config)
        self.ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._on_listening = on_listening

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self.loop = asyncio.get_running_loop()
        await super().startup(sockets=sockets)
        if self.started and self._on_listening is not None:
            self._on_listening(self)
        self.ready.set()

    @property
    def port(self) -> int:
        """The port it listens on (the one picked when asked for port 0)."""
        return int(self.servers[0].sockets[0].getsockname()[1])


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class Simulator:
    """A running simulator: its ``url`` and ``token``, and in-process control-plane helpers.

    The helpers run on the server's event loop, so they are safe while requests are in flight.
    """

    def __init__(self, *, url: str, state: SimState, loop: asyncio.AbstractEventLoop) -> None:
        self.url = url
        self._state = state
        self._loop = loop

    @property
    def token(self) -> str:
        return self._state.token

    @property
    def seed(self) -> int:
        return self._state.seed

    @property
    def headers(self) -> dict[str, str]:
        """The ``Authorization`` header the gateway expects."""
        return {"Authorization": f"Bearer {self._state.token}"}

    def _call(self, fn: Callable[[], T]) -> T:
        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(_CALL_TIMEOUT)

    def ledger(self) -> dict[str, Any]:
        """The ``GET /__ledger`` document: calls, rejections, charges, duplicate charges."""
        return self._call(self._state.ledger.snapshot)

    def reset(self) -> None:
        """Clear the ledger, buckets, jobs, idempotency keys and faults (``POST /__reset``)."""
        self._call(self._state.reset)

    def forget_jobs(self) -> int:
        """Drop every async job as a provider restarted without persistence would
        (``POST /__jobs/forget``); returns how many. Keys and the ledger stay."""
        return self._call(self._state.forget_jobs)

    def faults(
        self, *, latency_ms: float | None = _UNSET, tools: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Merge faults in (like ``POST /__faults``) and return those in force.

        ``sim.faults(tools={"sim.email.alpha": {"down": True}})``; with no arguments, only
        returns the current faults. Raises ``ValueError`` for a document the server would
        refuse with 400.
        """
        doc: dict[str, Any] = {}
        if latency_ms is not _UNSET:
            doc["latency_ms"] = latency_ms
        if tools is not None:
            doc["tools"] = tools
        return self._call(lambda: self._state.update_faults(doc))

    def double(self, name: str) -> Double:
        """The double of provider ``name`` (served with ``providers=True``): its counters
        (``charged``, ``duplicates``, ``throttled``...) and faults (``credits``, ``storm``...)."""
        try:
            return self._state.doubles[name]
        except KeyError:
            served = ", ".join(self._state.doubles) or "none: serve(providers=True)"
            raise KeyError(f"no double of {name!r} is served ({served})") from None

    def people(self, limit: int = 100, offset: int = 0) -> list[dict[str, object]]:
        """Sample people of the world with their true email and phone."""
        return [p.public() for p in self._state.world.people[offset : offset + limit]]

    def companies(self, limit: int = 100, offset: int = 0) -> list[dict[str, object]]:
        """Sample companies of the world."""
        return [c.public() for c in self._state.world.companies[offset : offset + limit]]


def _config(state: SimState, host: str, port: int, *, foreground: bool) -> uvicorn.Config:
    # In-process, leave the host application's logging configuration alone.
    logging: dict[str, Any] = {} if foreground else {"log_config": None}
    return uvicorn.Config(
        build_app(state),
        host=host,
        port=port,
        loop="asyncio",
        http="h11",
        lifespan="off",
        access_log=False,
        log_level="info" if foreground else "warning",
        timeout_graceful_shutdown=5,
        **logging,
    )


@contextmanager
def serve(
    seed: int = 7,
    port: int = 0,
    token: str = "dev",
    latency_ms: float | None = None,
    *,
    host: str = "127.0.0.1",
    providers: bool = False,
) -> Iterator[Simulator]:
    """Run a simulator in a background thread for the duration of the ``with`` block.

    ``port=0`` picks a free port (see ``sim.url``); ``latency_ms=0`` answers without delay
    (default 20 ms with jitter). ``providers=True`` also serves the doubles of the real
    providers under ``/<provider>`` (see :meth:`Simulator.double`). The server is accepting
    connections when the block starts and its thread has ended when it exits.
    """
    state = SimState(seed=seed, token=token, latency_ms=latency_ms, providers=providers)
    server = _Server(_config(state, host, port, foreground=False))

    def run() -> None:
        try:
            server.run()
        except SystemExit:
            pass  # uvicorn exits when it cannot bind; reported below as a RuntimeError
        finally:
            server.ready.set()  # unblock the waiter if startup failed

    thread = threading.Thread(target=run, name="playline-sim", daemon=True)
    thread.start()
    server.ready.wait()
    if not server.started or server.loop is None:
        thread.join()
        raise RuntimeError(
            f"the simulator could not listen on {host}:{port}; "
            "is the port taken? Pass port=0 to pick a free one"
        )
    try:
        yield Simulator(url=_url(host, server.port), state=state, loop=server.loop)
    finally:
        server.should_exit = True
        thread.join()


def main(
    port: int = 8765,
    seed: int = 7,
    host: str = "127.0.0.1",
    *,
    token: str = "dev",
    latency_ms: float | None = None,
    stop_on_stdin_eof: bool = False,
    providers: bool = False,
    time_scale: float = 1.0,
    time_origin: float | None = None,
) -> None:
    """Run the simulator in the foreground until Ctrl-C (``playline sim``).

    Once it listens, the first line on stdout names its URL (with the port picked when
    ``port`` is 0): ``playline sim on http://127.0.0.1:43567  seed=7 ...``. With
    ``stop_on_stdin_eof`` it also stops when its stdin closes, so a parent that dies without
    stopping it (see :func:`spawn`) leaves no simulator behind.
    """
    state = SimState(
        seed=seed,
        token=token,
        latency_ms=latency_ms,
        providers=providers,
        time_scale=time_scale,
        time_origin=time_origin,
    )

    def announce(server: _Server) -> None:
        print(
            f"playline sim on {_url(host, server.port)}  seed={seed}  token={token!r}  "
            f"latency={state.default_latency_ms:g}ms  "
            f"({len(state.world.companies):,} companies, {len(state.world.people):,} people)",
            flush=True,
        )
        for name in state.doubles:
            print(f"  {name}: {_url(host, server.port)}/{name}", flush=True)

    server = _Server(_config(state, host, port, foreground=True), on_listening=announce)
    if stop_on_stdin_eof:

        def watch() -> None:
            sys.stdin.buffer.read()
            server.should_exit = True

        threading.Thread(target=watch, name="playline-sim-stdin", daemon=True).start()
    sock = listening(host, port)  # an OSError here is said in one line (exit 1), unlogged
    with contextlib.suppress(SystemExit):  # uvicorn could not start: it logged why, exits 3
        server.run(sockets=[sock])
    if not server.started:
        raise OSError(errno.EADDRINUSE, "the simulator's server did not start")
