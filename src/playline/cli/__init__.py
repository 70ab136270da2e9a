"""The ``playline`` command line (Typer)."""

from ._app import app, main

__all__ = ["app", "main"]
