"""Dropcontact's API, as its documentation describes it: a skeleton (see hunter.py)."""

from __future__ import annotations

from starlette.routing import BaseRoute

from ._base import Double

__all__ = ["DropcontactDouble"]


class DropcontactDouble(Double):
    name = "dropcontact"

    def routes(self) -> list[BaseRoute]:
        return []
