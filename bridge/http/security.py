"""Response headers and the `Host` guard of the bridge's HTTP app.

- Every response gets `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer` and a CSP that
  allows only the viewer's own script, its inline styles and a connection back to itself, with
  `frame-ancestors 'none'` (no framing, no click-jacking of the viewer).
- With `BRIDGE_AUTH_DISABLED=true` (loopback only) every request must carry a trusted `Host`
  (bridge.hosts): a DNS-rebound page is refused 403 `bad_host` before any route runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from bridge import metrics
from bridge.auth import bearer_token, verify_token
from bridge.errors import AuthError
from bridge.hosts import host_trusted

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def _add_headers(_request: web.Request, response: web.StreamResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)


def host_guard(trusted: frozenset[str]) -> Middleware:
    @web.middleware
    async def guard(request: web.Request, handler: _Handler) -> web.StreamResponse:
        if not host_trusted(request.headers.get("Host"), trusted):
            metrics.HTTP_REFUSED.labels(reason="bad_host").inc()
            return web.json_response(
                {"error": {"code": "bad_host", "message": "Host not allowed (DNS rebinding?): use 127.0.0.1, "
                           "localhost, BRIDGE_HTTP_HOST or an origin in BRIDGE_ALLOWED_ORIGINS"}}, status=403)
        return await handler(request)

    return guard


def protect(app: web.Application, *, trusted_hosts: frozenset[str] | None) -> web.Application:
    """Security headers on every response; the `Host` guard when `trusted_hosts` is given (auth off)."""
    app.on_response_prepare.append(_add_headers)
    if trusted_hosts is not None:
        app.middlewares.append(host_guard(trusted_hosts))
    return app


def token_holder(secret: str, upstream: str) -> Callable[[web.Request], bool]:
    """Whether a request carries a valid token (`Authorization: Bearer`): who may see readiness details."""

    def check(request: web.Request) -> bool:
        try:
            verify_token(bearer_token(request.headers), secret, upstream)
        except AuthError:
            return False
        return True

    return check
