"""The transport of declared HTTP tools: one request sent on a pooled client, and a failure
to get an answer told apart by whether the request may have reached the provider.

Every ``HttpTool`` and the LLM providers' own calls (``providers/openai.py``,
``providers/anthropic.py``, ``tools/_gateway.py``) send through ``request_or_raise``. Clients
are pooled per provider account and event loop, with timeouts, connection limits and the
proxies of the environment (``HTTPS_PROXY``...). httpx's exception tree, which these codes
follow: https://www.python-httpx.org/exceptions/
"""

from __future__ import annotations

import asyncio
import urllib.parse
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..errors import ToolError

__all__ = ["request_or_raise"]


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    url: str
    query: Mapping[str, Any] = field(default_factory=dict)
    json: Any = None
    form: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)


async def request_or_raise(
    client: httpx.AsyncClient, tool: str, method: str, url: str, **kwargs: Any
) -> httpx.Response:
    """Send one request; a failure to get an answer is a ``ToolError`` whose ``code`` says
    whether the request may have reached the provider: ``connection_error`` (it did not:
    refused, or no connection in time) or ``timeout`` / ``protocol_error`` (it may have: no
    answer in time, or the connection broke). A request that cannot be built (a header or
    URL httpx or h11 refuses) left nothing on the wire: it fails as ``invalid_input``, not
    sent and never in doubt."""
    auth = kwargs.pop("auth", httpx.USE_CLIENT_DEFAULT)
    try:
        request = client.build_request(method, url, **kwargs)
    except (TypeError, ValueError, httpx.InvalidURL) as exc:
        raise _not_sent(
            tool, f"the request cannot be built ({type(exc).__name__}: {exc})"
        ) from None
    try:
        return await client.send(request, auth=auth)
    except (httpx.LocalProtocolError, httpx.UnsupportedProtocol) as exc:
        # refused while writing the request's head, before its first byte was sent
        raise _not_sent(tool, f"the request cannot be sent ({type(exc).__name__}: {exc})") from None
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
        raise ToolError(
            tool,
            f"could not connect to {_where(url)} ({type(exc).__name__}: {exc})",
            code="connection_error",
        ) from None
    except httpx.TimeoutException:
        raise ToolError(
            tool, f"no answer from {_where(url)} in time (it may still be working)", code="timeout"
        ) from None
    except httpx.HTTPError as exc:
        raise ToolError(
            tool,
            f"the connection to {_where(url)} broke ({type(exc).__name__}: {exc})",
            code="protocol_error",
        ) from None


_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, httpx.AsyncClient]] = (
    weakref.WeakKeyDictionary()
)


def _client(account: str) -> httpx.AsyncClient:
    """The account's pooled client on this event loop (proxies from the environment)."""
    clients = _clients.setdefault(asyncio.get_running_loop(), {})
    client = clients.get(account)
    if client is None:
        client = clients[account] = httpx.AsyncClient(
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
            trust_env=True,
        )
    return client


def _not_sent(tool: str, why: str) -> ToolError:
    """A call whose request cannot be built: it fails alone, never sent, never repeated."""
    return ToolError(tool, f"not sent: {why}", code="invalid_input", outcome="fatal")


def _where(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"
