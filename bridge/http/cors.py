"""CORS for the origins of `BRIDGE_ALLOWED_ORIGINS` on every `/v1` route (docs/security.md, "CORS").

A page of the product's own origin calls the bridge with `fetch` and `Authorization: Bearer …` and a JSON
body: the browser first sends a preflight (`OPTIONS` with `Access-Control-Request-Method`). For an origin
the operator listed, the preflight is answered `204` with the methods the route takes (aiohttp's router
knows them), the headers a client sends (`Authorization`, `Content-Type`) and a max age; every answer to
that origin then names it in `Access-Control-Allow-Origin` (never `*`: `*` in the setting still echoes the
one origin that asked), exposes `Retry-After` and `X-Correlation-Id`, and says `Vary: Origin` so a cache
never hands one origin's answer to another. No cookies are involved (tokens travel in a header), so no
`Access-Control-Allow-Credentials`.

A foreign origin gets no CORS header at all: its preflight falls through to the router (`405`), its
non-GET request stays refused by the write guard (`403 bad_origin`, bridge.http.security), and its GET,
which a browser sends without a preflight, is answered but unreadable to its script.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from bridge.http.envelope import CORRELATION_HEADER, V1_PREFIX

ALLOW_HEADERS = "Authorization, Content-Type"
EXPOSE_HEADERS = f"Retry-After, {CORRELATION_HEADER}"
MAX_AGE_S = 600

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def cors_origin(origin: str | None, allowed: frozenset[str]) -> str | None:
    """The origin to name in `Access-Control-Allow-Origin`, or None: only an origin listed (or `*`)."""
    if origin is None or origin == "null" or not origin.startswith(("http://", "https://")):
        return None
    return origin if "*" in allowed or origin.rstrip("/") in allowed else None


def _is_preflight(request: web.Request) -> bool:
    return request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers


def preflight_guard(allowed: frozenset[str]) -> Middleware:
    """Answers a preflight of an allowed origin for a `/v1` route that exists (204); anything else goes on."""

    @web.middleware
    async def preflight(request: web.Request, handler: _Handler) -> web.StreamResponse:
        if not (_is_preflight(request) and request.path.startswith(V1_PREFIX)
                and cors_origin(request.headers.get("Origin"), allowed) is not None):
            return await handler(request)
        refused = request.match_info.http_exception
        if not isinstance(refused, web.HTTPMethodNotAllowed):  # no such route (404): no CORS either
            return await handler(request)
        methods = sorted(m for m in refused.allowed_methods if m not in ("HEAD", "OPTIONS"))
        return web.Response(status=204, headers={
            "Access-Control-Allow-Methods": ", ".join(methods),
            "Access-Control-Allow-Headers": ALLOW_HEADERS,
            "Access-Control-Max-Age": str(MAX_AGE_S),
        })

    return preflight


def cors_headers(allowed: frozenset[str]) -> Callable[[web.Request, web.StreamResponse], Awaitable[None]]:
    """`on_response_prepare`: the CORS headers of every `/v1` answer to an allowed origin, errors included
    (a page must read why it was refused), and `Vary: Origin` on every `/v1` answer."""

    async def add(request: web.Request, response: web.StreamResponse) -> None:
        if not request.path.startswith(V1_PREFIX):
            return
        vary = response.headers.get("Vary")
        if vary is None or "origin" not in vary.lower():
            response.headers["Vary"] = "Origin" if not vary else f"{vary}, Origin"
        origin = cors_origin(request.headers.get("Origin"), allowed)
        if origin is None:
            return
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Access-Control-Expose-Headers"] = EXPOSE_HEADERS

    return add
