"""The ``playline`` command line (Typer)."""

from . import _admin, _inspect, _plan, _providers, _runcmds, _schedules, _serve, _ui  # noqa: F401 - importing them registers their commands
from ._app import app, main

__all__ = ["app", "main"]
