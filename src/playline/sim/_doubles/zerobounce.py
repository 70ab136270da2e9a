"""ZeroBounce's API, as its documentation describes it: a skeleton (see hunter.py)."""

from __future__ import annotations

from starlette.routing import BaseRoute

from ._base import Double

__all__ = ["ZeroBounceDouble"]


class ZeroBounceDouble(Double):
    name = "zerobounce"

    def routes(self) -> list[BaseRoute]:
        return []
