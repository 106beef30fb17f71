"""The client's address behind trusted reverse proxies (bridge.forwarded, docs/security.md): every
handler, the per-address WebSocket limit and the logs see `request.remote` as the client, not the proxy."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web
from aiohttp.typedefs import Middleware

from bridge.forwarded import Network, client_address, forwarded_hops

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def forwarded_middleware(trusted: Sequence[Network]) -> Middleware:
    @web.middleware
    async def forwarded(request: web.Request, handler: _Handler) -> web.StreamResponse:
        client = client_address(request.remote, forwarded_hops(request.headers.items()), trusted)
        if client is not None and client != request.remote:
            request = request.clone(remote=client)
        return await handler(request)

    return forwarded
