"""`playline run --temporal` and `playline worker --temporal`: submitting a run as a workflow,
following it through the store, and serving runs as a worker until SIGTERM.

The Temporal SDK is imported only here, and only when ``--temporal`` is given, so the command
line works without the ``temporal`` extra.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import shlex
import signal
import threading
from collections.abc import Callable, Mapping
from typing import Annotated, Any

import typer

import playline as pl

from ..store import RunRecord, Store, display_url
from ._app import MOST, console
from ._load import CliError, LoadedPlay
from ._progress import JsonLines, LiveProgress, drive

__all__ = [
    "ConcurrencyOpt",
    "DetachOpt",
    "NamespaceOpt",
    "TaskQueueOpt",
    "TemporalOpt",
    "follow_run",
    "recorded_endpoint",
    "serve",
    "submit",
]

TemporalOpt = Annotated[
    str | None,
    typer.Option(
        "--temporal",
        metavar="HOST:PORT",
        help="The Temporal server's frontend: runs become workflows that workers serve "
        "(needs the temporal extra and a store every worker reaches).",
    ),
]
NamespaceOpt = Annotated[
    str | None,
    typer.Option("--namespace", help="Temporal namespace (default: default). With --temporal."),
]
TaskQueueOpt = Annotated[
    str | None,
    typer.Option("--task-queue", help="Temporal task queue (default: playline). With --temporal."),
]
DetachOpt = Annotated[
    bool,
    typer.Option(
        "--detach", help="With --temporal: submit the run, print its id and exit 0 at once."
    ),
]
ConcurrencyOpt = Annotated[
    int | None,
    typer.Option(
        "--concurrency",
        min=1,
        max=MOST,
        help="With --temporal: runs this worker works on at once (10).",
    ),
]

Resolve = Callable[[RunRecord], tuple[pl.Play, list[Any]]]


def _backend() -> Any:
    try:
        from ..backends import temporal
    except ImportError as exc:
        raise CliError(str(exc), code=1) from None
    _quiet_sdk_core()
    return temporal


@functools.cache
def _quiet_sdk_core() -> None:
    """The SDK's core logs each retry of a server it cannot reach (a coloured WARN line a
    second): the command says once what that means (``follow_run``); its errors still show.
    Set before the command's first client, as the process's default runtime."""
    from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter

    quiet = LoggingConfig(filter=TelemetryFilter(core_level="ERROR", other_level="ERROR"))
    # (a client made before keeps the runtime it was made with)
    Runtime.set_default(
        Runtime(telemetry=TelemetryConfig(logging=quiet)), error_if_already_set=False
    )


def _check_store(db: Store) -> None:
    if db.url.startswith("memory://"):
        raise CliError(
            "--temporal needs a store the workers reach: give --store postgresql://... (or a "
            "SQLite file when every worker runs on this machine), not a memory store."
        )


def recorded_endpoint(record: RunRecord) -> dict[str, str] | None:
    """Where a run's workflow lives, if it was submitted to Temporal."""
    found = record.options.get("temporal")
    return found if isinstance(found, dict) else None


def submit(
    loaded: LoadedPlay,
    input: Any,
    *,
    db: Store,
    temporal: str,
    namespace: str | None,
    task_queue: str | None,
    run_id: str | None,
    max_credits: float | None,
    max_usd: float | None = None,
    recorded: Mapping[str, Any] | None = None,
) -> str:
    """Record the run and start its workflow (or attach to it); returns the run id.
    ``recorded``: more for the run's source to hold (its ``--out``, which a resume writes
    again)."""
    _check_store(db)
    backend = _backend()
    source = {
        "file": str(loaded.file),
        "function": loaded.function,
        "max_credits": max_credits,
        **(recorded or {}),
    }
    try:
        started: str = asyncio.run(
            backend.start(
                loaded.play,
                input,
                temporal=temporal,
                store=db,
                run_id=run_id,
                namespace=namespace,
                task_queue=task_queue,
                max_credits=max_credits,
                max_usd=max_usd,
                source=source,
            )
        )
    finally:
        gc.collect()  # the SDK's native objects, freed while the interpreter is whole
    return started


def follow_run(
    run_id: str, *, db: Store, temporal: str, namespace: str | None, json_mode: bool
) -> tuple[pl.RunResult, JsonLines | None]:
    """Follow a submitted run with the usual live display (or JSON lines). Ctrl-C asks the
    run to stop cleanly; a second one stops following (the run goes on)."""
    backend = _backend()
    jsonl = JsonLines() if json_mode else None
    progress = LiveProgress(console, db) if not json_mode and console.is_terminal else None
    listeners = [listener for listener in (jsonl, progress) if listener is not None]
    if not json_mode:
        console.print(f"run [bold]{run_id}[/] on Temporal at {temporal}", style="dim")
    try:
        result: pl.RunResult = asyncio.run(
            drive(
                lambda stop: backend.follow(
                    run_id,
                    temporal=temporal,
                    store=db,
                    namespace=namespace,
                    listeners=listeners,
                    stop=stop,
                ),
                progress,
            )
        )
    except asyncio.CancelledError:
        raise CliError(
            f"stopped following; the run goes on on Temporal. See it with `playline show "
            f"{run_id}`.",
            code=130,
        ) from None
    except (pl.PlaylineError, _rpc_error()) as exc:  # following failed (the run is submitted)
        reason = " ".join(str(exc).split())[:300]
        raise CliError(
            f"lost track of run {run_id} ({type(exc).__name__}: {reason}); the run goes on "
            f"on Temporal, its workers record it: `playline show {shlex.quote(run_id)}` says "
            "how it ends.",
            code=LOST_TRACK,
        ) from None
    finally:
        gc.collect()
    return result, jsonl


LOST_TRACK = 4  # the exit code of a follower that lost Temporal or the store, not the run


def _rpc_error() -> type[Exception]:
    from temporalio.service import RPCError

    return RPCError


def serve(
    *,
    db: Store,
    temporal: str,
    namespace: str | None,
    task_queue: str | None,
    concurrency: int | None,
    resolve: Resolve,
    json_mode: bool,
) -> None:
    """Serve runs until SIGTERM or Ctrl-C, which hand the attempts in progress over."""
    _check_store(db)
    backend = _backend()
    settings = backend.WorkerSettings(concurrency=concurrency or 10)
    worker = backend.TemporalWorker(
        temporal,
        store=db,
        resolve=_cached(resolve),
        namespace=namespace,
        task_queue=task_queue,
        settings=settings,
        on_attempt=lambda ended: _report(ended, json_mode),
    )
    try:
        asyncio.run(_serve(worker, json_mode))
    finally:
        gc.collect()


async def _serve(worker: Any, json_mode: bool) -> None:
    loop = asyncio.get_running_loop()
    await worker.start()
    where = worker.where
    _say(
        json_mode,
        {"kind": "worker", "status": "serving", "worker": worker.identity, **where.to_dict()},
        f"worker {worker.identity} serving task queue {where.task_queue!r} on {where.target} "
        f"(namespace {where.namespace!r}), store {display_url(worker.store.url)}. SIGTERM or "
        "Ctrl-C hands its runs over and stops it.",
    )
    serving = asyncio.ensure_future(worker.run())
    stopping: list[asyncio.Task[None]] = []

    def signalled(signum: int) -> None:
        if stopping:
            worker.abort()  # a second signal: stop at once (calls in flight stay in doubt)
            return
        stopping.append(loop.create_task(worker.shutdown()))
        _say(
            json_mode,
            {"kind": "worker", "status": "stopping", "signal": signal.Signals(signum).name},
            f"{signal.Signals(signum).name}: handing {worker.running} runs over; the calls "
            "already sent finish and are recorded (send it again to stop at once).",
        )

    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    if threading.current_thread() is threading.main_thread():
        for signum in handled:
            loop.add_signal_handler(signum, signalled, signum)
    try:
        await serving
        for task in stopping:
            await task
    finally:
        if threading.current_thread() is threading.main_thread():
            for signum in handled:
                loop.remove_signal_handler(signum)
    _say(json_mode, {"kind": "worker", "status": "stopped"}, "worker stopped")


def _say(json_mode: bool, data: dict[str, Any], text: str) -> None:
    if json_mode:
        typer.echo(json.dumps(data))
    else:
        console.print(text, style="dim", highlight=False)


def _report(ended: Any, json_mode: bool) -> None:
    """One line per attempt this worker ran."""
    if json_mode:
        typer.echo(
            json.dumps(
                {
                    "kind": "attempt",
                    "run_id": ended.run_id,
                    "attempt": ended.attempt,
                    "status": ended.status,
                    "seconds": round(ended.seconds, 3),
                    "rows": ended.rows,
                    "credits": ended.credits,
                    "waiting": ended.waiting,
                    "error": ended.error,
                },
                default=str,
            )
        )
        return
    waiting = ended.waiting or {}
    how = ended.status
    if waiting.get("stop"):
        how = f"{how} ({waiting['stop']})"
    elif ended.status == "suspended":
        how = f"{how}, waiting for {json.dumps(waiting, default=str)}"
    elif ended.error:
        how = f"{how}: {ended.error}"
    console.print(
        f"{ended.run_id} attempt {ended.attempt}: {how} · {ended.rows} rows · "
        f"{ended.credits:g} credits · {ended.seconds:.1f} s",
        highlight=False,
    )


def _cached(resolve: Resolve) -> Resolve:
    """Each play is loaded once per worker, by name (a new deploy restarts the workers)."""
    found: dict[str, tuple[pl.Play, list[Any]]] = {}
    lock = threading.Lock()

    def cached(record: RunRecord) -> tuple[pl.Play, list[Any]]:
        with lock:
            if record.play not in found:
                found[record.play] = resolve(record)
            return found[record.play]

    return cached
