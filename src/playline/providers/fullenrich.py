"""FullEnrich: a skeleton, filled in from the provider's documentation (see hunter.py)."""

from __future__ import annotations

from .._secrets import Secret
from ..tools import Auth, HttpTool
from ._provider import Provider, ProviderTools

__all__ = ["PROVIDER", "fullenrich"]


def _tools(base: str, auth: Auth, account: str | None) -> list[HttpTool]:
    return []


PROVIDER = Provider(
    name="fullenrich",
    title="FullEnrich",
    key="FULLENRICH_API_KEY",
    url="https://app.fullenrich.com",
    auth=lambda secret: Auth.bearer(secret),
    build=_tools,
)


def fullenrich(
    api_key: str | Secret | None = None, base_url: str | None = None, account: str | None = None
) -> ProviderTools:
    """FullEnrich's tools. The key: ``api_key``, else ``FULLENRICH_API_KEY``."""
    return PROVIDER.tools(api_key, base_url, account)
