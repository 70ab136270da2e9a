"""Dropcontact: a skeleton, filled in from the provider's documentation (see hunter.py)."""

from __future__ import annotations

from .._secrets import Secret
from ..tools import Auth, HttpTool
from ._provider import Provider, ProviderTools

__all__ = ["PROVIDER", "dropcontact"]


def _tools(base: str, auth: Auth, account: str | None) -> list[HttpTool]:
    return []


PROVIDER = Provider(
    name="dropcontact",
    title="Dropcontact",
    key="DROPCONTACT_API_KEY",
    url="https://api.dropcontact.com",
    auth=lambda secret: Auth.header("X-Access-Token", secret),
    build=_tools,
)


def dropcontact(
    api_key: str | Secret | None = None, base_url: str | None = None, account: str | None = None
) -> ProviderTools:
    """Dropcontact's tools. The key: ``api_key``, else ``DROPCONTACT_API_KEY``."""
    return PROVIDER.tools(api_key, base_url, account)
