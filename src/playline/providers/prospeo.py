"""Prospeo: a skeleton, filled in from the provider's documentation (see hunter.py)."""

from __future__ import annotations

from .._secrets import Secret
from ..tools import Auth, HttpTool
from ._provider import Provider, ProviderTools

__all__ = ["PROVIDER", "prospeo"]


def _tools(base: str, auth: Auth, account: str | None) -> list[HttpTool]:
    return []


PROVIDER = Provider(
    name="prospeo",
    title="Prospeo",
    key="PROSPEO_API_KEY",
    url="https://api.prospeo.io",
    auth=lambda secret: Auth.header("X-KEY", secret),
    build=_tools,
)


def prospeo(
    api_key: str | Secret | None = None, base_url: str | None = None, account: str | None = None
) -> ProviderTools:
    """Prospeo's tools. The key: ``api_key``, else ``PROSPEO_API_KEY``."""
    return PROVIDER.tools(api_key, base_url, account)
