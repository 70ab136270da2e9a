"""The provider simulator: paid data providers behind a tool gateway, on loopback.

>>> from playline.sim import serve
>>> with serve(seed=7, latency_ms=0) as sim:  # doctest: +SKIP
...     httpx.post(f"{sim.url}/api/v2/integrations/sim.email.alpha/execute",
...                json={"payload": {"first_name": "Ada", "last_name": "Lovelace",
...                                  "domain": "example.com"}}, headers=sim.headers)

Deterministic for a seed: the world, which provider knows whom, and which request fails.
:func:`spawn` runs it as a separate process instead, for tests that kill their client.
This package is standalone: it imports nothing else from ``playline``.
"""

from ._run import Simulator, main, serve
from ._spawn import SimProcess, spawn

__all__ = ["SimProcess", "Simulator", "main", "serve", "spawn"]
