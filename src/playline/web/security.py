"""What keeps the local UI safe to open: a CSRF token on every action and a strict
Content-Security-Policy (nothing loads from anywhere but this server).

The UI has no login: it binds to 127.0.0.1 unless told otherwise. A page from another site
could still make the browser POST to it, so every action needs the token that only this
server's own pages carry (``X-CSRF-Token`` header or ``csrf_token`` form field), and a request
a browser marks as coming from another site (its ``Origin``, its ``Sec-Fetch-Site``) is
refused. A page of another site served under a name that resolves to this machine (DNS
rebinding) never gets that far: the app answers only for its own host names (``app.py``).
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

__all__ = [
    "CSRF_HEADER",
    "check_csrf",
    "csp",
    "form_fields",
    "new_nonce",
    "new_token",
    "secure_headers",
]

CSRF_HEADER = "x-csrf-token"


def new_token() -> str:
    return secrets.token_urlsafe(32)


def new_nonce() -> str:
    return secrets.token_urlsafe(16)


def csp(nonce: str | None) -> str:
    """``default-src 'self'``; the grid's themes inject a style element, allowed by a nonce
    fresh for each page; its icons are data: URLs in that CSS."""
    style = f"style-src 'self' 'nonce-{nonce}'" if nonce else "style-src 'self'"
    return (
        f"default-src 'self'; {style}; img-src 'self' data:; font-src 'self' data:; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'"
    )


async def check_csrf(request: Request, token: str) -> Response | None:
    """None when the request may act; else the 403 to answer."""
    if not _same_origin(request):
        where = request.headers.get("origin") or request.headers.get("sec-fetch-site")
        return JSONResponse(
            {"error": f"Refused an action from another site ({where}). Use the UI's own page."},
            status_code=403,
        )
    given = request.headers.get(CSRF_HEADER) or (await form_fields(request)).get("csrf_token")
    # as bytes: compare_digest refuses text that is not ASCII (a 500, not the 403 owed)
    if not given or not hmac.compare_digest(given.encode("utf-8", "replace"), token.encode()):
        return JSONResponse(
            {
                "error": "Missing or wrong CSRF token: reload the page and try again "
                "(actions need the token the UI's pages carry)."
            },
            status_code=403,
        )
    return None


def _same_origin(request: Request) -> bool:
    """Whether the browser sent it from one of this server's pages. ``Sec-Fetch-Site`` is the
    browser's own word (a page cannot set it); an ``Origin`` must name this host, except the
    ``null`` a browser sends for its own page's form when no referrer is allowed, which
    ``Sec-Fetch-Site: same-origin`` vouches for. A client that is no browser sends neither,
    and the token alone decides."""
    origin = request.headers.get("origin")
    site = request.headers.get("sec-fetch-site")
    if site is not None and site != "same-origin":
        return False
    if origin is None or (origin == "null" and site == "same-origin"):
        return True
    return urlsplit(origin).netloc == request.headers.get("host")


async def form_fields(request: Request) -> dict[str, str]:
    """A URL-encoded form's fields (what the UI's plain HTML forms send); {} for others.
    The body is read once and kept by the request."""
    if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return {}
    fields = parse_qs((await request.body()).decode("utf-8", "replace"), keep_blank_values=True)
    return {name: values[-1] for name, values in fields.items()}


Endpoint = Callable[[Request], Awaitable[Response]]


def secure_headers(response: Response, nonce: str | None = None) -> Response:
    response.headers.setdefault("Content-Security-Policy", csp(nonce))
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    # same-origin, not no-referrer: with no-referrer a browser sends a form POST to this server
    # with Origin: null (the grid's Download), which reads as another site's
    response.headers.setdefault("Referrer-Policy", "same-origin")
    response.headers.setdefault("X-Frame-Options", "DENY")
    return response
