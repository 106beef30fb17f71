"""The one seam between the upstream client and the network: a request in, a status and a body of bytes out.

`UpstreamClient` builds requests (paths, query, auth header) and interprets answers (errors, `{data}`,
size bounds); a `Transport` only moves bytes. `AiohttpTransport` is the real one; `MockTransport` answers
from a function, so the client, the durable follower and the live reader run in unit tests without a
socket (the shape of httpx's transports).

A body is an async iterator of byte chunks, each one read as it arrived (`readany()`): the durable
follower turns one read into one write batch, so chunk boundaries are kept, never re-assembled.
Transport failures (refused, reset, cut mid-body, connect timeout) raise `UpstreamUnavailable`.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

import aiohttp
import yarl
from aiohappyeyeballs import AddrInfoType

from bridge.errors import UpstreamUnavailable


@dataclass(frozen=True)
class Request:
    method: str
    url: str  # absolute, every path segment and the query already percent-encoded
    headers: Mapping[str, str] = field(default_factory=dict)
    # None: no total/read timeout (SSE streams, docs/upstream.md §3.3, §3.4); only the connect phase is timed.
    timeout_s: float | None = None
    connect_timeout_s: float = 10.0
    body: bytes | None = None  # a command's JSON body (docs/commands.md)

    @property
    def path(self) -> str:
        """The path and query as sent on the wire (tests, logs)."""
        u = yarl.URL(self.url, encoded=True)
        return u.raw_path_qs


@dataclass
class Response:
    status: int
    headers: Mapping[str, str]
    body: AsyncIterator[bytes]


class Transport(Protocol):
    def send(self, request: Request) -> AbstractAsyncContextManager[Response]:
        """Open the request; the response (headers received) is valid inside the context only."""

    async def aclose(self) -> None: ...


def _keepalive_socket(addr_info: AddrInfoType) -> socket.socket:
    family, type_, proto, _, _ = addr_info
    sock = socket.socket(family=family, type=type_, proto=proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    # A silent durable stream is normal (no keepalive upstream); only TCP can tell a dead peer.
    for opt, val in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, opt):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, opt), val)
    return sock


def _unavailable(request: Request, e: BaseException) -> UpstreamUnavailable:
    return UpstreamUnavailable(f"{request.method} {yarl.URL(request.url, encoded=True).raw_path}: "
                               f"{type(e).__name__}: {e}")


class AiohttpTransport:
    """One aiohttp `ClientSession` (TCP keepalive on every socket, no connection limit); with `unix_socket`
    every request goes to that socket instead (a worker's `/global/event` from its parent, bridge.workers)."""

    def __init__(self, headers: Mapping[str, str] | None = None, *, unix_socket: str | None = None) -> None:
        connector: aiohttp.BaseConnector = (aiohttp.UnixConnector(path=unix_socket, limit=0) if unix_socket else
                                            aiohttp.TCPConnector(limit=0, socket_factory=_keepalive_socket))
        self._session = aiohttp.ClientSession(connector=connector, headers=dict(headers or {}))

    async def aclose(self) -> None:
        await self._session.close()

    @asynccontextmanager
    async def send(self, request: Request) -> AsyncIterator[Response]:
        timeout = aiohttp.ClientTimeout(total=request.timeout_s, connect=request.connect_timeout_s,
                                        sock_read=None)
        try:
            # encoded=True: the client quoted every segment; yarl must neither re-quote nor normalize.
            async with self._session.request(request.method, yarl.URL(request.url, encoded=True),
                                             headers=dict(request.headers), data=request.body,
                                             timeout=timeout) as resp:
                yield Response(resp.status, resp.headers, _chunks(resp, request))
        except aiohttp.ClientError as e:
            raise _unavailable(request, e) from e
        except TimeoutError as e:
            # Only a timed request's own total timeout counts; a stream has none, and a caller's timers
            # (stall, heartbeat) end as their own TimeoutError outside this context.
            if request.timeout_s is None:
                raise
            raise _unavailable(request, e) from e


async def _chunks(resp: aiohttp.ClientResponse, request: Request) -> AsyncIterator[bytes]:
    try:
        while True:
            chunk = await resp.content.readany()
            if not chunk:
                return
            yield chunk
    except aiohttp.ClientError as e:
        raise _unavailable(request, e) from e


# --- for tests ---------------------------------------------------------------------------------------

Handler = Callable[[Request], Awaitable[Response]]


def bytes_body(*chunks: bytes) -> AsyncIterator[bytes]:
    """A body of fixed chunks (each one is one read)."""

    async def gen() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    return gen()


class MockTransport:
    """Answers every request with `handler(request)`; records what was asked in `requests`."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self.requests: list[Request] = []

    async def aclose(self) -> None:
        return None

    @asynccontextmanager
    async def send(self, request: Request) -> AsyncIterator[Response]:
        self.requests.append(request)
        yield await self._handler(request)
