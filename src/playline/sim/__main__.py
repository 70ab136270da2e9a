"""``python -m playline.sim [--port 8765] [--seed 7] [--host 127.0.0.1] [--token dev]
[--latency-ms N] [--providers] [--stop-on-stdin-eof]``; ``--port 0`` picks a free port, and
the first line on stdout names the URL."""

from __future__ import annotations

import argparse
import sys

from ._run import main

parser = argparse.ArgumentParser(prog="python -m playline.sim", description=main.__doc__)
parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
parser.add_argument("--seed", type=int, default=7)
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--token", default="dev")
parser.add_argument("--latency-ms", type=float, default=None)
parser.add_argument(
    "--providers", action="store_true", help="also serve the real providers' doubles"
)
parser.add_argument(
    "--time-scale",
    type=float,
    default=1.0,
    help="the doubles' time runs this many times faster (tests of documented rates)",
)
parser.add_argument("--time-origin", type=float, default=None, help="epoch seconds it starts at")
parser.add_argument(
    "--stop-on-stdin-eof",
    action="store_true",
    help="also stop when stdin closes (a parent process that dies takes the simulator along)",
)
args = parser.parse_args()
try:
    main(
        args.port,
        args.seed,
        args.host,
        token=args.token,
        latency_ms=args.latency_ms,
        stop_on_stdin_eof=args.stop_on_stdin_eof,
        providers=args.providers,
        time_scale=args.time_scale,
        time_origin=args.time_origin,
    )
except OSError as exc:
    sys.exit(
        f"error: cannot listen on {args.host}:{args.port} ({exc.strerror or exc}); "
        "choose another port with --port (0 picks a free one)"
    )
