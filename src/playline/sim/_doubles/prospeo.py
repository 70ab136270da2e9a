"""Prospeo's API, as its documentation describes it: a skeleton (see hunter.py)."""

from __future__ import annotations

from starlette.routing import BaseRoute

from ._base import Double

__all__ = ["ProspeoDouble"]


class ProspeoDouble(Double):
    name = "prospeo"

    def routes(self) -> list[BaseRoute]:
        return []
