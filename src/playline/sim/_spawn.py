"""The simulator as a separate process, for tests that kill their client.

A crash test must SIGKILL the *client* (a play run) mid-call and see what the provider did
meanwhile; an in-process simulator would die with it. :func:`spawn` starts
``python -m playline.sim`` in its own process group (a signal to the client's group does not
reach it), waits for the line naming its URL, and drives its control plane over HTTP with
the same methods as the in-process :class:`~playline.sim.Simulator`.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import httpx

_UNSET: Any = object()
_URL = re.compile(r"https?://\S+")
START_TIMEOUT = 60.0
_STOP_TIMEOUT = 10.0


class SimProcess:
    """A simulator running in a child process: its ``url``, ``token`` and ``pid``, and its
    control plane over HTTP."""

    def __init__(self, *, url: str, token: str, seed: int, pid: int) -> None:
        self.url = url
        self.token = token
        self.seed = seed
        self.pid = pid
        self._http = httpx.Client(base_url=url, timeout=30.0)

    def __repr__(self) -> str:
        return f"SimProcess(url={self.url!r}, pid={self.pid})"

    @property
    def headers(self) -> dict[str, str]:
        """The ``Authorization`` header the gateway expects."""
        return {"Authorization": f"Bearer {self.token}"}

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._http.request(method, path, **kwargs)
        if response.status_code in (400, 404) and path == "/__faults":
            # the in-process Simulator raises FaultError, a ValueError, for these
            raise ValueError(response.json().get("message", response.text))
        response.raise_for_status()
        return response.json()

    def ledger(self) -> dict[str, Any]:
        """The ``GET /__ledger`` document: calls, rejections, charges, duplicate charges."""
        result: dict[str, Any] = self._json("GET", "/__ledger")
        return result

    def reset(self) -> None:
        """Clear the ledger, buckets, jobs, idempotency keys and faults (``POST /__reset``)."""
        self._json("POST", "/__reset")

    def faults(
        self, *, latency_ms: float | None = _UNSET, tools: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Merge faults in (``POST /__faults``) and return those in force; ``ValueError`` for
        a document the server refuses."""
        doc: dict[str, Any] = {}
        if latency_ms is not _UNSET:
            doc["latency_ms"] = latency_ms
        if tools is not None:
            doc["tools"] = tools
        result: dict[str, Any] = self._json("POST", "/__faults", json=doc)
        return result

    def forget_jobs(self) -> int:
        """Drop every async job (``POST /__jobs/forget``); returns how many."""
        return int(self._json("POST", "/__jobs/forget")["forgotten"])

    def people(self, limit: int = 100, offset: int = 0) -> list[dict[str, object]]:
        """Sample people of the world with their true email and phone."""
        params = {"limit": limit, "offset": offset}
        rows: list[dict[str, object]] = self._json("GET", "/__world/people", params=params)[
            "people"
        ]
        return rows

    def companies(self, limit: int = 100, offset: int = 0) -> list[dict[str, object]]:
        """Sample companies of the world."""
        params = {"limit": limit, "offset": offset}
        rows: list[dict[str, object]] = self._json("GET", "/__world/companies", params=params)[
            "companies"
        ]
        return rows

    def double(self, name: str, **faults: Any) -> dict[str, Any]:
        """The counters of provider ``name``'s double (``GET /<name>/__double``); with
        ``faults`` (``credits=5``, ``storm=20``...), sets them first (``POST``)."""
        if faults:
            result: dict[str, Any] = self._json("POST", f"/{name}/__double", json=faults)
        else:
            result = self._json("GET", f"/{name}/__double")
        return result

    def close(self) -> None:
        self._http.close()


def _first_line(stream: IO[bytes], lines: queue.Queue[str]) -> None:
    """Hand the first line over, then drain the rest so the child never blocks on a full
    pipe; an empty string says the child closed stdout (it exited)."""
    first = stream.readline()
    lines.put(first.decode(errors="replace"))
    for _ in iter(lambda: stream.read(65536), b""):
        pass


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # its own group: the simulator alone
            proc.wait()


@contextmanager
def spawn(
    seed: int = 7,
    latency_ms: float | None = None,
    token: str = "dev",
    *,
    providers: bool = False,
    time_scale: float = 1.0,
    time_origin: float | None = None,
) -> Iterator[SimProcess]:
    """Run ``python -m playline.sim`` on a free port for the duration of the ``with`` block.

    The child has its own process group, so killing a client's group leaves it (and its
    ledger) alone; it also stops if this process dies (its stdin closes). Raises
    ``RuntimeError`` with the child's stderr if it does not come up. ``providers=True``
    serves the real providers' doubles too (see :meth:`SimProcess.double`), their time
    running ``time_scale`` times faster from ``time_origin``.
    """
    args = [sys.executable, "-m", "playline.sim", "--port", "0", "--seed", str(seed)]
    args += ["--token", token, "--stop-on-stdin-eof"]
    if latency_ms is not None:
        args += ["--latency-ms", str(latency_ms)]
    if providers:
        args += ["--providers", "--time-scale", str(time_scale)]
        if time_origin is not None:
            args += ["--time-origin", repr(time_origin)]
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            process_group=0,
        )
        assert proc.stdout is not None and proc.stdin is not None
        lines: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(
            target=_first_line, args=(proc.stdout, lines), name="playline-sim-out", daemon=True
        )
        reader.start()
        try:
            try:
                line = lines.get(timeout=START_TIMEOUT)
            except queue.Empty:
                line = ""
            found = _URL.search(line)
            if found is None:
                _stop(proc)
                stderr.seek(0)
                tail = stderr.read().decode(errors="replace").strip()[-2000:]
                raise RuntimeError(
                    f"the simulator process did not say where it listens within "
                    f"{START_TIMEOUT:g}s (exit code {proc.poll()}): {tail or 'no output'}; "
                    f"run `{' '.join(args[:3])} --port 0` by hand to see why"
                )
            sim = SimProcess(url=found.group(0), token=token, seed=seed, pid=proc.pid)
            try:
                yield sim
            finally:
                sim.close()
        finally:
            proc.stdin.close()
            _stop(proc)
            reader.join(_STOP_TIMEOUT)  # it ends at the child's EOF
            proc.stdout.close()
