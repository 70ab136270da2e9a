"""Icypeas: a skeleton, filled in from the provider's documentation (see hunter.py)."""

from __future__ import annotations

from .._secrets import Secret
from ..tools import Auth, HttpTool
from ._provider import Provider, ProviderTools

__all__ = ["PROVIDER", "icypeas"]


def _tools(base: str, auth: Auth, account: str | None) -> list[HttpTool]:
    return []


PROVIDER = Provider(
    name="icypeas",
    title="Icypeas",
    key="ICYPEAS_API_KEY",
    url="https://app.icypeas.com",
    auth=lambda secret: Auth.header("Authorization", secret),
    build=_tools,
)


def icypeas(
    api_key: str | Secret | None = None, base_url: str | None = None, account: str | None = None
) -> ProviderTools:
    """Icypeas's tools. The key: ``api_key``, else ``ICYPEAS_API_KEY``."""
    return PROVIDER.tools(api_key, base_url, account)
