"""Measuring helpers shared by the benchmarks: wall time and peak memory of a child process."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def in_child(module: str, *args: str) -> dict[str, Any]:
    """Run ``python -m module args`` and parse the JSON object it prints last."""
    out = subprocess.run(
        [sys.executable, "-m", module, *args], check=True, capture_output=True, text=True
    ).stdout
    parsed: dict[str, Any] = orjson.loads(out.strip().splitlines()[-1])
    return parsed


def peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
