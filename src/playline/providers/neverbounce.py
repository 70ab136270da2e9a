"""NeverBounce: a skeleton, filled in from the provider's documentation (see hunter.py)."""

from __future__ import annotations

from .._secrets import Secret
from ..tools import Auth, HttpTool
from ._provider import Provider, ProviderTools

__all__ = ["PROVIDER", "neverbounce"]


def _tools(base: str, auth: Auth, account: str | None) -> list[HttpTool]:
    return []


PROVIDER = Provider(
    name="neverbounce",
    title="NeverBounce",
    key="NEVERBOUNCE_API_KEY",
    url="https://api.neverbounce.com",
    auth=lambda secret: Auth.query("key", secret),
    build=_tools,
)


def neverbounce(
    api_key: str | Secret | None = None, base_url: str | None = None, account: str | None = None
) -> ProviderTools:
    """NeverBounce's tools. The key: ``api_key``, else ``NEVERBOUNCE_API_KEY``."""
    return PROVIDER.tools(api_key, base_url, account)
