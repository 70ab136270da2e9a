"""People Data Labs: a skeleton, filled in from the provider's documentation (see hunter.py)."""

from __future__ import annotations

from .._secrets import Secret
from ..tools import Auth, HttpTool
from ._provider import Provider, ProviderTools

__all__ = ["PROVIDER", "pdl"]


def _tools(base: str, auth: Auth, account: str | None) -> list[HttpTool]:
    return []


PROVIDER = Provider(
    name="pdl",
    title="People Data Labs",
    key="PDL_API_KEY",
    url="https://api.peopledatalabs.com",
    auth=lambda secret: Auth.header("X-Api-Key", secret),
    build=_tools,
)


def pdl(
    api_key: str | Secret | None = None, base_url: str | None = None, account: str | None = None
) -> ProviderTools:
    """People Data Labs's tools. The key: ``api_key``, else ``PDL_API_KEY``."""
    return PROVIDER.tools(api_key, base_url, account)
