"""ZeroBounce: a skeleton, filled in from the provider's documentation (see hunter.py)."""

from __future__ import annotations

from .._secrets import Secret
from ..tools import Auth, HttpTool
from ._provider import Provider, ProviderTools

__all__ = ["PROVIDER", "zerobounce"]


def _tools(base: str, auth: Auth, account: str | None) -> list[HttpTool]:
    return []


PROVIDER = Provider(
    name="zerobounce",
    title="ZeroBounce",
    key="ZEROBOUNCE_API_KEY",
    url="https://api.zerobounce.net",
    auth=lambda secret: Auth.query("api_key", secret),
    build=_tools,
)


def zerobounce(
    api_key: str | Secret | None = None, base_url: str | None = None, account: str | None = None
) -> ProviderTools:
    """ZeroBounce's tools. The key: ``api_key``, else ``ZEROBOUNCE_API_KEY``."""
    return PROVIDER.tools(api_key, base_url, account)
