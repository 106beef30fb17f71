"""Response headers and the `Host` guard of the bridge's HTTP app.

- Every response gets `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer` and a CSP that
  allows only the viewer's own script, its inline styles and a connection back to itself, with
  `frame-ancestors 'none'` (no framing, no click-jacking of the viewer).
- Every request must carry a trusted `Host` (bridge.hosts): a DNS-rebound page is refused 403
  `bad_host` before any route runs, in every mode (it would read `/metrics`, `/readyz`, the OpenAPI).
- Every request that is not GET/HEAD/OPTIONS (the commands) must come from an allowed Origin (or none: not
  a browser) and carry `Content-Type: application/json`: a cross-site page cannot POST a command, not even
  a "simple" `no-cors` one (403 `bad_origin`, 415 `unsupported_media_type`; docs/security.md, "CSRF").
- Every `/v1` answer is in the one error envelope when it is an error (bridge.http.envelope, docs/errors.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web
from aiohttp.typedefs import Middleware

from bridge import metrics
from bridge.auth import bearer_token, verify_token
from bridge.errors import AuthError
from bridge.forwarded import Network
from bridge.hosts import LOOPBACK_TRUSTED, host_trusted, origin_allowed
from bridge.http.cors import cors_headers, preflight_guard
from bridge.http.envelope import error_response, install_envelope
from bridge.http.proxies import forwarded_middleware

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
            return error_response(403, "bad_host", "Host not allowed (DNS rebinding?): use 127.0.0.1, "
                                  "localhost, BRIDGE_HTTP_HOST or an origin in BRIDGE_ALLOWED_ORIGINS")
        return await handler(request)

    return guard


_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def write_guard(allowed_origins: frozenset[str], trusted: frozenset[str]) -> Middleware:
    """Origin and content type of every state-changing request. A method no route takes (TRACE, PUT on a
    POST route) is the router's 405 (404 for no route), before origin and content type are looked at."""

    @web.middleware
    async def guard(request: web.Request, handler: _Handler) -> web.StreamResponse:
        if request.method in _SAFE_METHODS:
            return await handler(request)
        refused = request.match_info.http_exception
        if refused is not None:
            raise refused
        if not origin_allowed(request.headers.get("Origin"), request.headers.get("Host"), allowed_origins, trusted):
            metrics.HTTP_REFUSED.labels(reason="bad_origin").inc()
            return error_response(403, "bad_origin", "origin not allowed: same origin or one of "
                                  "BRIDGE_ALLOWED_ORIGINS")
        if request.content_type != "application/json":
            metrics.HTTP_REFUSED.labels(reason="content_type").inc()
            return error_response(415, "unsupported_media_type", "send Content-Type: application/json")
        return await handler(request)

    return guard


def protect(app: web.Application, *, trusted_hosts: frozenset[str] = LOOPBACK_TRUSTED,
            allowed_origins: frozenset[str] = frozenset(), trusted_proxies: Sequence[Network] = ()
            ) -> web.Application:
    """Security headers on every response; the error envelope of `/v1` around everything (bridge.http.envelope);
    the `Host` guard, CORS for the allowed origins (bridge.http.cors) and the write guard on every request."""
    app.on_response_prepare.append(_add_headers)
    app.on_response_prepare.append(cors_headers(allowed_origins))
    if trusted_proxies:  # first: everything after sees the client's address (bridge.http.proxies)
        app.middlewares.insert(0, forwarded_middleware(trusted_proxies))
    install_envelope(app)
    app.middlewares.append(host_guard(trusted_hosts))
    app.middlewares.append(preflight_guard(allowed_origins))
    app.middlewares.append(write_guard(allowed_origins, trusted_hosts))
    return app


def token_holder(secret: str, upstream: str, revoked: Callable[[str], bool] | None = None
                 ) -> Callable[[web.Request], bool]:
    """Whether a request carries a valid token (`Authorization: Bearer`): who may see readiness details."""

    def check(request: web.Request) -> bool:
        try:
            verify_token(bearer_token(request.headers), secret, upstream, revoked=revoked)
        except AuthError:
            return False
        return True

    return check
