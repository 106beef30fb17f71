"""The runner of the bridge's HTTP app, with the connection-level bounds aiohttp does not set by default.

- `keepalive_timeout` 75 s (aiohttp's default is 3630 s): an idle keep-alive socket, or one that never
  sends a request, is closed instead of holding a file descriptor for an hour.
- At most `max_connections` open connections. At the cap a new connection first takes the place of the
  oldest idle one (no request read or running, not a WebSocket: a socket that never sent a request, or a
  keep-alive between requests; `bridge_http_refused_total{reason="idle_evicted"}`), so strangers holding
  sockets open cannot starve `/readyz` and the commands (docs/security.md, "Floods"). Only when every
  connection is busy does it get a bare `503` and is closed at once (`reason="connections"`): idle sockets
  never exhaust the descriptors the database and upstream connections need.
- `handler_cancellation=True`: a handler whose client went away is cancelled (aiohttp ≥ 3.9 lets it
  run to the end by default), so an abandoned heavy read stops using the read pool.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from bridge import metrics

KEEPALIVE_TIMEOUT_S = 75.0
# Connections the kernel completes while the process has not accepted them yet (capped by
# net.core.somaxconn): a reconnect storm arrives at once. aiohttp's sites default to 128 and asyncio
# applies it to a socket inherited already listening too: beyond it SYNs are dropped and a client waits
# for the kernel's retransmissions (1, 3, 7, 15 … s) instead of being served (BENCHMARKS.md "A deploy").
LISTEN_BACKLOG = 4096
_REFUSAL_BODY = b'{"error":{"code":"too_many_connections","message":"retry in a moment","retry_after":1}}'
_REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nRetry-After: 1\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(_REFUSAL_BODY), _REFUSAL_BODY)
)


def make_runner(app: web.Application, *, max_connections: int,
                keepalive_timeout_s: float = KEEPALIVE_TIMEOUT_S) -> web.AppRunner:
    return _CappedRunner(app, max_connections=max_connections, handle_signals=False, access_log=None,
                         keepalive_timeout=keepalive_timeout_s, handler_cancellation=True)


class _CappedRunner(web.AppRunner):
    def __init__(self, app: web.Application, *, max_connections: int, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._max_connections = max_connections

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        _cap_connections(server, self._max_connections)
        return server


def _cap_connections(server: web.Server, cap: int) -> None:
    admit = server.connection_made

    def connection_made(handler: RequestHandler, transport: asyncio.Transport) -> None:
        if len(server.connections) >= cap:
            idle = next((h for h in server.connections if _idle(h)), None)
            if idle is not None:
                metrics.HTTP_REFUSED.labels(reason="idle_evicted").inc()
                idle.force_close()
                # Unregistered now (its connection_lost comes a loop turn later and then finds nothing).
                server._connections.pop(idle, None)
        if len(server.connections) >= cap:
            # Not registered with the server: its connection_lost ignores it; the handler sees EOF.
            metrics.HTTP_REFUSED.labels(reason="connections").inc()
            transport.write(_REFUSAL)
            transport.close()
            return
        admit(handler, transport)

    server.connection_made = connection_made  # type: ignore[method-assign]


def _idle(handler: RequestHandler) -> bool:
    """No request being read or handled and not upgraded (aiohttp 3.x internals, checked in
    tests/hostile/test_security_floods.py): closing it loses no work."""
    return not (getattr(handler, "_request_in_progress", True) or getattr(handler, "_messages", True)
                or getattr(handler, "_upgraded", True))
