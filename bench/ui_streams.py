"""ui_streams: the UI's resident memory with 100 event streams open on a live 100,000-row run.

A play of 100,000 rows through a local tool limited to RATE calls/s runs in a process of its
own on a SQLite store, so it stays live for the whole measurement. The UI serves that store in
another process. First its resident memory is sampled while it serves the run's grid with no
stream open (the reference); then STREAMS streams of the run's dataset are opened on it, as
tabs would: most read what comes, every tenth never reads a byte, every fourth reconnects from
an old seq (a catch-up). The UI's resident memory is sampled for SAMPLE_S seconds.

Goal (issue 36): the UI stays under 300 MB resident with 100 streams open. ``ratio`` is the
peak with the streams over the reference. ``PLAYLINE_BENCH_STREAMS`` changes the number of
streams; the caps are raised to that number so every stream is served.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import playline as pl

ROWS = 100_000
RATE = 1500  # tool calls per second: the run stays live for about a minute
STREAMS = int(os.environ.get("PLAYLINE_BENCH_STREAMS", "100"))
SILENT_EVERY = 10  # every tenth stream never reads
OLD_EVERY = int(os.environ.get("PLAYLINE_BENCH_OLD_EVERY", "4"))  # every 4th: from seq 1
SAMPLE_S = 30.0
REFERENCE_S = 5.0
GOAL_MB = 300
GUARD_MB = 2500  # the sampling stops past it: the machine is shared (code without bounds)
RUN_ID = "bench-streams"


@pl.tool("bench.slow_echo", rate=pl.Rate(per_second=RATE, burst=RATE // 10), cost=pl.Cost(0))
def slow_echo(input: dict[str, Any]) -> dict[str, Any]:
    return {"n": input["n"], "label": f"row {input['n']} " + "x" * 40}


@pl.play(name="bench-ui-streams")
async def live(ctx: pl.Context, input: dict[str, Any]) -> int:
    ds = await (
        ctx.dataset("rows", ({"n": i} for i in range(input["rows"])), key="n")
        .with_column("echo", lambda row, ctx: ctx.tool("bench.slow_echo", {"n": row["n"]}))
        .with_column("double", lambda row: row["n"] * 2)
        .run()
    )
    return len(ds)


def _run_child(url: str) -> None:
    pl.run(live, {"rows": ROWS}, store=url, tools=[slow_echo], run_id=RUN_ID)


def _ui_child(url: str, port: str) -> None:
    import uvicorn

    from playline.store import open_store
    from playline.web import UIConfig, create_app

    names = {f.name for f in dataclasses.fields(UIConfig)}
    caps = {k: STREAMS for k in ("max_streams", "max_streams_per_client") if k in names}
    app = create_app(UIConfig(store=open_store(url), store_url=url, **caps))  # type: ignore[arg-type]
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning", lifespan="off")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _client(port: int, path: str, reading: bool, stats: dict[str, int], stop: Any) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    await writer.drain()
    tail = b""
    first = True
    try:
        while not stop.is_set():
            if not reading:
                await asyncio.sleep(0.2)
                continue
            chunk = await reader.read(65536)
            if not chunk:
                stats["closed"] += 1
                return
            if first and not chunk.startswith(b"HTTP/1.1 200"):
                stats["refused"] += 1
            first = False
            stats["bytes"] += len(chunk)
            text = tail + chunk
            stats["reloads"] += text.count(b"event: reload")
            tail = text[-20:]
    finally:
        writer.close()


def _clients(port: int, stats: dict[str, int], stop: threading.Event) -> None:
    async def main() -> None:
        stopping = asyncio.Event()
        tasks = []
        for i in range(STREAMS):
            after = "&after=1" if i % OLD_EVERY == 0 else ""
            path = f"/api/stream/{RUN_ID}?dataset=rows{after}"
            task = _client(port, path, i % SILENT_EVERY != SILENT_EVERY - 1, stats, stopping)
            tasks.append(asyncio.create_task(task))
            await asyncio.sleep(0.02)  # tabs open one after another
        await asyncio.to_thread(stop.wait)
        stopping.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())


def _sample(pid: int, seconds: float) -> list[float]:
    import psutil

    process = psutil.Process(pid)
    samples = []
    end = time.monotonic() + seconds
    while time.monotonic() < end and (not samples or samples[-1] < GUARD_MB):
        samples.append(process.memory_info().rss / 2**20)
        time.sleep(0.2)  # the benchmark's own sampling clock
    return samples


def main() -> dict[str, Any]:
    import httpx

    from playline.store import open_store

    with tempfile.TemporaryDirectory(prefix="playline-bench-streams-") as tmp:
        url = f"sqlite:///{tmp}/streams.db"
        port = _free_port()
        me = [sys.executable, "-m", "bench.ui_streams"]
        runner = subprocess.Popen([*me, "run", url])
        ui = subprocess.Popen([*me, "ui", url, str(port)])
        stop = threading.Event()
        try:
            db = open_store(url)
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # the run has rows and the UI answers
                try:
                    if db.count_rows(RUN_ID, "rows") > 1000 and httpx.get(f"{base}/").is_success:
                        break
                except Exception:  # the store or the UI is not there yet
                    pass
                time.sleep(0.2)
            db.close()
            window = httpx.get(f"{base}/api/rows/{RUN_ID}?dataset=rows&limit=100")
            window.raise_for_status()
            reference = _sample(ui.pid, REFERENCE_S)
            stats = {"bytes": 0, "reloads": 0, "closed": 0, "refused": 0}
            clients = threading.Thread(target=_clients, args=(port, stats, stop))
            clients.start()
            samples = _sample(ui.pid, SAMPLE_S)
            live_at_end = runner.poll() is None
            stop.set()
            clients.join()
        finally:
            stop.set()
            for child in (ui, runner):
                child.terminate()
                child.wait()
    peak = max(samples)
    return {
        "bench": "ui_streams",
        "ratio": round(peak / max(reference), 2),
        "goal": f"peak RSS with {STREAMS} streams < {GOAL_MB} MB",
        "ok": peak < GOAL_MB and live_at_end,
        "streams": STREAMS,
        "peak_rss_mb": round(peak, 1),
        "end_rss_mb": round(samples[-1], 1),
        "reference_rss_mb": round(max(reference), 1),
        "run_live_at_end": live_at_end,
        "read_mb": round(stats["bytes"] / 2**20, 1),
        "reloads": stats["reloads"],
        "closed_by_server": stats["closed"],
        "refused": stats["refused"],
        "sampled_s": round(len(samples) * 0.2, 1),
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["run"]:
        _run_child(sys.argv[2])
    elif sys.argv[1:2] == ["ui"]:
        _ui_child(sys.argv[2], sys.argv[3])
    else:
        print(main())
