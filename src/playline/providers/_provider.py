"""A provider: its key's variable, its documented base URL, how the key is sent, the
``HttpTool`` declarations of its operations, and where it says what is left on the account.

``Provider.tools(api_key=None, base_url=None)`` gives the tools of one account:

- the key is the ``api_key`` given (a string or a ``pl.Secret``), else the secret of the
  provider's variable (``PLAYLINE_SECRET_HUNTER_API_KEY``, else ``HUNTER_API_KEY``), read
  when a request is sent;
- the base URL is ``base_url``, else ``PLAYLINE_<PROVIDER>_URL`` (a proxy, a double), else
  the documented one;
- the account (whose receipts, rate limits and quota the calls share) is named by the host
  and the variable, or for a key given in code by a digest of it: two keys are two
  accounts, and never share receipts unless ``account=`` names them one.
"""

from __future__ import annotations

import asyncio
import os
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from .._json import digest
from .._secrets import Secret, Secrets
from ..errors import PlayDefinitionError
from ..tools import Auth, HttpTool, ToolSpec

__all__ = ["AccountBalance", "Balance", "Provider", "ProviderTools", "has_key"]


@dataclass(frozen=True)
class Balance:
    """Where the provider says what the account has left: a GET of ``path`` (under the base
    URL), ``read`` turning its JSON into the number left (None when it does not say), in
    ``unit`` (``credits``, ``searches``...), spent by ``tools`` (operations; default: all)
    at their declared cost."""

    path: str
    read: Callable[[Any], float | None]
    unit: str = "credits"
    tools: tuple[str, ...] = ()


class AccountBalance:
    """What a provider account has left, asked of the provider (``await balance()``): the
    engine asks once per run, when it first calls one of the tools it counts, and spends no
    more than that (``_engine/ledger.py``)."""

    def __init__(self, tools: ProviderTools, balance: Balance) -> None:
        self._tools = tools
        self.unit = balance.unit

    async def __call__(self) -> float | None:
        return await self._tools.balance()


@dataclass(frozen=True)
class Provider:
    """A provider Playline ships an adapter for (``playline.providers``)."""

    name: str  # its module and the tools' prefix: "hunter"
    title: str  # "Hunter"
    key: str  # the key's variable: "HUNTER_API_KEY"
    url: str  # the documented origin: the tools' paths follow it (a double serves them too)
    auth: Callable[[str | Secret], Auth]  # how the key is sent
    build: Callable[[str, Auth, str | None], list[HttpTool]]  # (base URL, auth, account)
    balance: Balance | None = None
    docs: Sequence[str] = field(default=())  # the documentation pages the adapter follows

    @property
    def url_variable(self) -> str:
        return f"PLAYLINE_{self.name.upper()}_URL"

    def base_url(self, given: str | None = None) -> str:
        url = given or os.environ.get(self.url_variable) or self.url
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            where = "base_url" if given else self.url_variable
            raise PlayDefinitionError(
                f"{self.title}: {where}={url!r} is not an http(s) URL; give the provider's "
                f"base URL, e.g. {self.url!r} (or a double: "
                f"'http://127.0.0.1:8765/{self.name}' under `playline sim --providers`)."
            )
        return url.rstrip("/")

    def tools(
        self,
        api_key: str | Secret | None = None,
        base_url: str | None = None,
        account: str | None = None,
    ) -> ProviderTools:
        base = self.base_url(base_url)
        if api_key is None:
            secret: str | Secret = self.key
        elif isinstance(api_key, Secret):
            secret = api_key
        elif isinstance(api_key, str) and api_key.strip():
            secret = Secret(self.key, api_key.strip())
        else:
            raise PlayDefinitionError(
                f"playline.providers.{self.name}(api_key={type(api_key).__name__}): the key as "
                f"a string or a pl.Secret, or nothing to read {self.key}."
            )
        if account is None and isinstance(secret, Secret):
            host = urllib.parse.urlsplit(base).netloc
            account = digest("provider", host, self.key, digest(secret.reveal()))[:16]
        elif account is not None and not (isinstance(account, str) and account.strip()):
            raise PlayDefinitionError(
                f"playline.providers.{self.name}(account={account!r}): a name for the account."
            )
        auth = self.auth(secret)
        tools = ProviderTools(self, base, auth, self.build(base, auth, account))
        if self.balance is not None:
            counted = AccountBalance(tools, self.balance)
            for operation, tool in tools.operations():
                if not self.balance.tools or operation in self.balance.tools:
                    tool.balance = counted
        return tools


class ProviderTools:
    """The tools of one provider account: pass it in ``tools=[...]``; ``["email_finder"]``
    is one of its ``HttpTool`` declarations; ``check()`` asks the account what is left."""

    def __init__(
        self, provider: Provider, base_url: str, auth: Auth, tools: list[HttpTool]
    ) -> None:
        self.provider = provider
        self.base_url = base_url
        self.auth = auth
        self._tools = {t.id.split(".", 1)[1]: t for t in tools}

    def __repr__(self) -> str:
        return f"<playline.providers.{self.provider.name} at {self.base_url}>"

    def __iter__(self) -> Iterator[HttpTool]:
        return iter(self._tools.values())

    def __getitem__(self, operation: str) -> HttpTool:
        try:
            return self._tools[operation]
        except KeyError:
            known = ", ".join(self._tools)
            raise KeyError(f"{self.provider.name} has no {operation!r} (it has {known})") from None

    def specs(self) -> list[ToolSpec]:
        return [spec for tool in self._tools.values() for spec in tool.specs()]

    def operations(self) -> Iterator[tuple[str, HttpTool]]:
        return iter(self._tools.items())

    def remaining(self, *, timeout: float = 15.0) -> float | None:
        """``balance()``, from code that is not async (``playline providers check``)."""
        return asyncio.run(self.balance(wait=timeout))

    async def balance(self, *, wait: float = 15.0) -> float | None:
        """What the account has left (in ``provider.balance.unit``), asked of the provider;
        None when it has no such endpoint or does not say. Raises ``httpx.HTTPError`` when
        the provider cannot be reached and ``PermissionError`` when it refuses the key."""
        balance = self.provider.balance
        if balance is None:
            return None
        headers: dict[str, str] = {}
        params: dict[str, Any] = {}
        basic = self.auth.apply(headers, params)
        url = httpx.URL(self.base_url + balance.path).copy_merge_params(
            params
        )  # its own query kept
        async with httpx.AsyncClient(timeout=wait) as client:
            answer = await client.get(url, headers=headers, auth=basic or httpx.USE_CLIENT_DEFAULT)
        if answer.status_code in (401, 403):
            raise PermissionError(
                f"{self.provider.title} refused the key ({answer.status_code}): check "
                f"{self.provider.key}."
            )
        answer.raise_for_status()
        return balance.read(answer.json())


def has_key(provider: Provider) -> bool:
    """Whether the provider's key is set (and not blank) in the environment."""
    try:
        return bool(Secrets().get(provider.key).reveal().strip())
    except PlayDefinitionError:
        return False
