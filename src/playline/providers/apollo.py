"""Apollo: a skeleton, filled in from the provider's documentation (see hunter.py)."""

from __future__ import annotations

from .._secrets import Secret
from ..tools import Auth, HttpTool
from ._provider import Provider, ProviderTools

__all__ = ["PROVIDER", "apollo"]


def _tools(base: str, auth: Auth, account: str | None) -> list[HttpTool]:
    return []


PROVIDER = Provider(
    name="apollo",
    title="Apollo",
    key="APOLLO_API_KEY",
    url="https://api.apollo.io",
    auth=lambda secret: Auth.header("x-api-key", secret),
    build=_tools,
)


def apollo(
    api_key: str | Secret | None = None, base_url: str | None = None, account: str | None = None
) -> ProviderTools:
    """Apollo's tools. The key: ``api_key``, else ``APOLLO_API_KEY``."""
    return PROVIDER.tools(api_key, base_url, account)
