"""Live progress of a run: a rich display for people, JSON lines for machines.

Both are ``pl.run`` listeners fed by the run's events. The display also shows what events do
not carry, sampled a few times a second by :func:`drive` from beside the run: the calls in
flight and waiting on rate limits per tool (the runner's gates), and the credits in the
run's ledger.

Per dataset it shows rows done of the total (counted before the run: a list's length, a CSV
file's rows; "?" when the input cannot tell), failed, reused (completed in an earlier attempt
of the run, not run again), rows per second and the time left. The words are the summary's
and ``playline show``'s: *reused* rows, *live* calls (sent to a provider), calls *from
receipts* (free).
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TextIO, TypeVar

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn
from rich.table import Table
from rich.text import Text

from .. import RunResult
from .._trace import gate_statistics
from ..store import Event, Store
from ._report import credits_text, dollars_text

__all__ = ["JsonLines", "LiveProgress", "drive", "event_dict"]

_TICK = 0.1
_LEDGER_EVERY = 0.5


def event_dict(event: Event) -> dict[str, Any]:
    """An event as a JSON object: its kind first, unset fields left out."""
    fields = {
        "kind": event.kind,
        "run_id": event.run_id,
        "at": event.at,
        "seq": event.seq or None,
        "dataset": event.dataset,
        "row_key": event.row_key,
        "column": event.column,
        "status": event.status,
        "provider": event.provider,
        "error": event.error,
        "preview": event.preview,
        "data": event.data,
    }
    return {k: v for k, v in fields.items() if v is not None}


def result_dict(result: RunResult) -> dict[str, Any]:
    from .. import Dataset

    output = result.output
    if isinstance(output, Dataset):
        output = {"$dataset": output.name, "rows": len(output)}
    return {
        "kind": "result",
        "run_id": result.run_id,
        "status": result.status,
        "error": result.error,
        "stats": result.stats.to_dict(),
        "output": output,
        "waiting": getattr(result, "waiting", None),
    }


def _as_json(value: Any) -> Any:
    """What JSON lines show of a value ``json`` does not take: a NumPy number a column
    returned as the number it holds (as it is stored), anything else as its text."""
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and type(value).__module__ == "numpy":
        return tolist()
    return str(value)


class JsonLines:
    """``--json``: one JSON object per event, then one ``{"kind": "result", ...}`` line."""

    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out or sys.stdout

    def _write(self, obj: dict[str, Any]) -> None:
        self._out.write(json.dumps(obj, default=_as_json, ensure_ascii=False) + "\n")
        self._out.flush()

    def __call__(self, event: Event) -> None:
        self._write(event_dict(event))

    def result(self, result: RunResult) -> None:
        self._write(result_dict(result))


@dataclass
class _Dataset:
    task: TaskID
    description: str
    started: float  # time.monotonic() when it started
    total: int | None = None  # rows the input holds (None: unknown)
    done: int = 0
    failed: int = 0
    reused: int = 0
    finished: bool = False
    elapsed: float | None = None  # seconds it took, once finished

    @property
    def settled(self) -> int:
        return self.done + self.failed + self.reused

    def rate(self, now: float) -> float | None:
        seconds = self.elapsed if self.elapsed is not None else now - self.started
        ran = self.done + self.failed
        return ran / seconds if seconds > 0 and ran else None


NARROW = 120  # a terminal narrower than this many columns gets the display's short form


class LiveProgress:
    """The terminal display: per dataset a bar with rows done of the total, failed, reused,
    rows per second and time left; per tool the requests sent and, while running, the calls
    in flight and waiting on its rate limit; the credits spent."""

    def __init__(self, console: Console, store: Store) -> None:
        self.console = console
        self._store = store
        # in a narrow terminal (80 columns) a shorter bar, and no description, leave the
        # dataset's name and its counts whole on one line
        self._narrow = console.width < NARROW
        self._bars = Progress(
            SpinnerColumn(finished_text="[green]✓[/green]"),
            TextColumn("[bold]{task.fields[name]}[/bold]"),
            BarColumn(bar_width=12 if self._narrow else 30),
            TextColumn("{task.fields[counts]}"),
            console=console,
            auto_refresh=False,
        )
        self._datasets: dict[str, _Dataset] = {}
        self._gates: dict[str, dict[str, int]] = {}
        self._batches: dict[str, int] = {}
        self._spent = (0.0, 0.0)  # credits, and dollars (LLM calls), from the ledger
        self._run_id: str | None = None
        self._ledger_at = 0.0
        self._status = "starting"
        self._resumed = False
        self._running = True
        self._stalled: str | None = None  # what the run waits for, once it stopped moving
        self._live = Live(console=console, auto_refresh=False, transient=False)

    # events
    def __call__(self, event: Event) -> None:
        self._run_id = event.run_id
        kind = event.kind
        if kind == "run":
            self._status = event.status or self._status
            if event.status == "running":
                self._resumed = bool((event.data or {}).get("resumed"))
        elif kind == "dataset" and event.dataset:
            self._dataset_event(event)
        elif kind == "row" and event.dataset and event.row_key:
            self._row_event(event.dataset, event.row_key, event.status)
        elif kind == "rows" and event.dataset:  # completed rows, reported together
            for row in (event.data or {}).get("rows", ()):
                self._row_event(event.dataset, row["key"], "completed")
        elif kind == "batch" and event.provider:
            requests = int((event.data or {}).get("requests", 1))
            self._batches[event.provider] = self._batches.get(event.provider, 0) + requests
            self._stalled = None  # moving again
        elif kind == "log" and (event.data or {}).get("stalled"):
            self._stalled = event.preview

    def _dataset_event(self, event: Event) -> None:
        name = event.dataset
        assert name is not None
        data = event.data or {}
        ds = self._datasets.get(name)
        if ds is None:
            description = str(data.get("description") or "")
            total = data.get("total")
            task = self._bars.add_task(name, total=total, name=name, counts="")
            ds = self._datasets[name] = _Dataset(
                task=task,
                description=description,
                started=time.monotonic(),
                total=int(total) if isinstance(total, int) else None,
            )
            if self._resumed and self._run_id is not None:  # rows an earlier attempt finished
                self._count_reused(self._run_id, name, ds)
        if event.status == "completed":
            ds.finished = True
            ds.elapsed = time.monotonic() - ds.started
            ds.reused = int(data.get("rows_reused", 0))
            ds.total = max(int(data.get("rows", 0)), ds.settled, 1)
        self._refresh_counts(ds)

    def _count_reused(self, run_id: str, name: str, ds: _Dataset) -> None:
        """Count the rows earlier attempts completed beside the run (a big dataset takes a
        while to count, and the run must not wait for its display); the dataset's end gives
        the exact number."""

        def count() -> None:
            try:
                done = self._store.row_counts(run_id, name).statuses.get("completed", 0)
            except Exception:  # a display's count must never stop the run
                return
            if not ds.finished:
                ds.reused = done

        threading.Thread(target=count, name="playline-progress-count", daemon=True).start()

    def _row_event(self, dataset: str, row_key: str, status: str | None) -> None:
        ds = self._datasets.get(dataset)
        if ds is None:
            return
        if status == "failed":
            ds.failed += 1
        elif status == "completed":
            ds.done += 1
        self._refresh_counts(ds)

    def _refresh_counts(self, ds: _Dataset) -> None:
        now = time.monotonic()
        total = "?" if ds.total is None else str(ds.total)
        parts = [f"{ds.settled}/{total} rows"]
        parts.append(f"[red]{ds.failed} failed[/red]" if ds.failed else "0 failed")
        if ds.reused:
            parts.append(f"{ds.reused} reused")
        rate = ds.rate(now)
        parts.append(f"{rate:,.1f} rows/s" if rate else "- rows/s")
        if ds.finished or not self._running:
            parts.append(f"in {_duration(ds.elapsed)}")
        else:
            left = None if ds.total is None or not rate else max(0, ds.total - ds.settled) / rate
            parts.append(f"ETA {_duration(left)}")
        if ds.description and not self._narrow:
            parts.append(f"[dim]{ds.description}[/dim]")
        self._bars.update(ds.task, total=ds.total, completed=ds.settled, counts=" · ".join(parts))

    # sampling
    def tick(self, gates: dict[str, dict[str, int]]) -> None:
        self._gates = gates
        now = time.monotonic()
        if self._run_id is not None and now - self._ledger_at >= _LEDGER_EVERY:
            self._ledger_at = now
            self._spent = _spent(self._store, self._run_id)
        for ds in self._datasets.values():
            if not ds.finished:
                self._refresh_counts(ds)  # the rate and the time left move with the clock
        self._live.update(self._render(), refresh=True)

    def _render(self) -> Group:
        tools = Table.grid(padding=(0, 2))
        for tool in sorted(set(self._gates) | set(self._batches)):
            stats = self._gates.get(tool, {}) if self._running else {}
            waiting = stats.get("waiting", 0)
            cells: list[Text | str] = [
                Text(tool, style="cyan"),
                f"{self._batches.get(tool, 0)} requests",
            ]
            if self._running:
                cells.append(f"{stats.get('in_flight', 0)} in flight")
                cells.append(
                    Text(f"{waiting} waiting on rate limit", style="yellow" if waiting else "dim")
                )
            tools.add_row(*cells)
        credits, usd = self._spent
        footer = Text.assemble(("credits ", "dim"), (credits_text(credits), "bold"))
        if usd:
            footer.append_text(Text.assemble((" · ", "dim"), (dollars_text(usd), "bold")))
        if self._stalled:
            return Group(self._bars, tools, footer, Text(self._stalled, style="yellow"))
        return Group(self._bars, tools, footer)

    def __enter__(self) -> LiveProgress:
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        # the last frame: what the run did, nothing in flight or waiting any more
        self._running = False
        self._stalled = None
        self._gates = {}
        for ds in self._datasets.values():
            if not ds.finished:  # stopped early (a stop, a budget, a wait): its rows so far
                ds.elapsed = time.monotonic() - ds.started
                ds.total = ds.total if ds.total is not None else max(ds.settled, 1)
                self._refresh_counts(ds)
        if self._run_id is not None:
            self._spent = _spent(self._store, self._run_id)
        self._live.update(self._render(), refresh=True)
        self._live.stop()


def _spent(store: Store, run_id: str) -> tuple[float, float]:
    """The run's credits and dollars so far (each charge counts in its own unit)."""
    credits = usd = 0.0
    for entry in store.read_ledger(run_id):
        if entry.unit == "usd":
            usd += entry.credits
        else:
            credits += entry.credits
    return credits, usd


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


_T = TypeVar("_T")


async def drive(
    start: Callable[[asyncio.Event], Coroutine[Any, Any, _T]],
    progress: LiveProgress | None,
) -> _T:
    """Run ``start(stop)`` (a ``pl.arun``, or a worker's ``run``, given ``stop=``); with a
    display, sample the gates beside it.

    SIGINT (Ctrl-C), SIGTERM and SIGHUP stop the run cleanly: no new paid call starts, the calls
    in flight finish and are recorded, and the run ends suspended, to be resumed. A second
    signal stops at once (calls in flight stay in doubt; a resume re-sends them with their
    idempotency keys).
    """
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    task = asyncio.ensure_future(start(stop))

    def signalled(signum: int) -> None:
        if stop.is_set():
            task.cancel()
            return
        stop.set()
        name = signal.Signals(signum).name
        print(
            f"{name}: stopping; the calls already sent finish and are recorded "
            "(send it again to stop at once).",
            file=sys.stderr,
            flush=True,
        )

    handled = [s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) if _can_handle(s)]
    for signum in handled:
        loop.add_signal_handler(signum, signalled, signum)
    try:
        if progress is None:
            return await task
        with progress:
            while not task.done():
                progress.tick(gate_statistics())
                await asyncio.wait({task}, timeout=_TICK)
        return task.result()
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)


def _can_handle(signum: signal.Signals) -> bool:
    """Signal handlers can only be set in the main thread (tests may run commands elsewhere)."""
    return threading.current_thread() is threading.main_thread()
