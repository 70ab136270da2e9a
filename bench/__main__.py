"""``python -m bench [NAME ...]``: run benchmarks, one JSON object per line."""

from __future__ import annotations

import importlib
import sys

import orjson

BENCHMARKS = [
    "bookkeeping",
    "cached_rerun",
    "pure_map",
    "saturation",
    "bulk",
    "packing",
    "waterfall_coverage",
    "store",
    "peers",
    "single_call",
    "receipt_layout",
    "ui",
    "ui_window",
    "ui_streams",
    "crash",
    "providers_crash",
    "contention",
    "temporal",
    "llm",
    "llm_shared",
    "scale",
]


def main(argv: list[str]) -> int:
    names = argv or BENCHMARKS
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
        return 2
    for name in names:
        result = importlib.import_module(f"bench.{name}").main()
        print(orjson.dumps(result).decode(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
