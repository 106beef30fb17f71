"""REST client for `opencode serve`: auth, `{data: …}` unwrapping, typed errors, stream opening.

Everything that speaks HTTP to the upstream goes through `UpstreamClient`; it owns one aiohttp
`ClientSession`. Streams are opened with *no* total/read timeout: the durable stream sends no headers
until it has an event and never sends keepalives (PROTOCOL.md §3.3, §3.4). Dead peers are found by TCP
keepalive (set on every socket) and by the followers' own watchdogs.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohappyeyeballs import AddrInfoType

from bridge import __version__


class UpstreamError(Exception):
    """Any failure talking to the upstream. `status` is None for transport failures."""

    def __init__(self, message: str, status: int | None = None, tag: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.tag = tag


class UpstreamUnavailable(UpstreamError):
    """Connection refused/reset, truncated body, or a 5xx: retry with backoff."""


class SessionNotFound(UpstreamError):
    """404 on a session route: deleted upstream, or never existed."""


class InvalidRequest(UpstreamError):
    """400: our request is wrong (e.g. a cursor the upstream rejects). Retrying will not help."""


class Unauthorized(UpstreamError):
    """401: BRIDGE_UPSTREAM_USERNAME / BRIDGE_UPSTREAM_PASSWORD are wrong or missing."""


@dataclass(frozen=True)
class HistoryPage:
    events: list[dict[str, Any]]
    has_more: bool


def _keepalive_socket(addr_info: AddrInfoType) -> socket.socket:
    family, type_, proto, _, _ = addr_info
    sock = socket.socket(family=family, type=type_, proto=proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    # A silent durable stream is normal (no keepalive upstream); only TCP can tell a dead peer.
    for opt, val in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, opt):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, opt), val)
    return sock


def _error_for(status: int, body: Any, what: str) -> UpstreamError:
    tag = body.get("_tag") if isinstance(body, dict) else None
    msg = body.get("message") if isinstance(body, dict) else None
    if not isinstance(msg, str) and isinstance(body, dict):
        data = body.get("data")
        msg = data.get("message") if isinstance(data, dict) else None
    text = f"{what}: HTTP {status}" + (f" {tag}" if isinstance(tag, str) else "")
    if isinstance(msg, str):
        text += f": {msg[:500]}"
    tag_s = tag if isinstance(tag, str) else None
    if status == 404:
        return SessionNotFound(text, status, tag_s)
    if status == 400:
        return InvalidRequest(text, status, tag_s)
    if status == 401:
        return Unauthorized(text + " (check BRIDGE_UPSTREAM_USERNAME/PASSWORD)", status, tag_s)
    if status >= 500:
        return UpstreamUnavailable(text, status, tag_s)
    return UpstreamError(text, status, tag_s)


class UpstreamClient:
    def __init__(
        self,
        base_url: str,
        username: str = "opencode",
        password: str = "",
        connect_timeout_s: float = 10.0,
        request_timeout_s: float = 30.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._auth = aiohttp.BasicAuth(username or "opencode", password) if password else None
        self._connect_timeout_s = connect_timeout_s
        self._request_timeout_s = request_timeout_s
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> UpstreamClient:
        connector = aiohttp.TCPConnector(limit=0, socket_factory=_keepalive_socket)
        self._session = aiohttp.ClientSession(
            connector=connector,
            auth=self._auth,
            headers={"User-Agent": f"opencode-bridge/{__version__}"},
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def http(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("UpstreamClient used outside `async with`")
        return self._session

    async def _get_json(self, path: str, params: dict[str, str] | None = None) -> Any:
        timeout = aiohttp.ClientTimeout(total=self._request_timeout_s, connect=self._connect_timeout_s)
        try:
            async with self.http.get(self.base_url + path, params=params, timeout=timeout) as resp:
                try:
                    body: Any = await resp.json(content_type=None)
                except ValueError:
                    body = None
                if resp.status != 200:
                    raise _error_for(resp.status, body, f"GET {path}")
                return body
        except (aiohttp.ClientError, TimeoutError) as e:
            raise UpstreamUnavailable(f"GET {path}: {type(e).__name__}: {e}") from e

    @staticmethod
    def _unwrap(body: Any, path: str) -> Any:
        # Most /api/* bodies are {"data": …}; a few are not (PROTOCOL.md §6) — callers know which.
        if not isinstance(body, dict) or "data" not in body:
            raise UpstreamError(f"GET {path}: expected a {{data: …}} body")
        return body["data"]

    async def health(self) -> dict[str, Any]:
        body = await self._get_json("/api/health")
        return body if isinstance(body, dict) else {"body": body}

    async def list_sessions(self) -> list[dict[str, Any]]:
        """Every session of the server, following the list cursor."""
        out: list[dict[str, Any]] = []
        params: dict[str, str] | None = None
        seen_cursors: set[str] = set()
        while True:
            body = await self._get_json("/api/session", params)
            page = self._unwrap(body, "/api/session")
            if not isinstance(page, list):
                raise UpstreamError("GET /api/session: data is not a list")
            out.extend(s for s in page if isinstance(s, dict) and isinstance(s.get("id"), str))
            cursor = body.get("cursor") if isinstance(body, dict) else None
            nxt = cursor.get("next") if isinstance(cursor, dict) else None
            if not page or not isinstance(nxt, str) or nxt in seen_cursors:
                return out
            seen_cursors.add(nxt)
            params = {"cursor": nxt}

    async def get_session(self, session_id: str) -> dict[str, Any]:
        path = f"/api/session/{session_id}"
        data = self._unwrap(await self._get_json(path), path)
        if not isinstance(data, dict):
            raise UpstreamError(f"GET {path}: data is not an object")
        return data

    async def pending_permissions(self, session_id: str) -> list[dict[str, Any]]:
        """The session's pending permission requests (the `data` of their `permission.v2.asked`,
        PROTOCOL.md §4.4). A session unknown upstream (404) has none."""
        path = f"/api/session/{session_id}/permission"
        try:
            data = self._unwrap(await self._get_json(path), path)
        except SessionNotFound:
            return []
        if not isinstance(data, list):
            raise UpstreamError(f"GET {path}: data is not a list")
        return [p for p in data if isinstance(p, dict)]

    async def active(self) -> dict[str, Any]:
        data = self._unwrap(await self._get_json("/api/session/active"), "/api/session/active")
        return data if isinstance(data, dict) else {}

    async def interrupt(self, session_id: str) -> None:
        """Stop the session's running turn upstream (204; a no-op when idle, PROTOCOL.md §4.2). Not to be
        confused with releasing a session, which only stops the bridge's following of it."""
        path = f"/api/session/{session_id}/interrupt"
        timeout = aiohttp.ClientTimeout(total=self._request_timeout_s, connect=self._connect_timeout_s)
        try:
            async with self.http.post(self.base_url + path, timeout=timeout) as resp:
                if resp.status not in (200, 204):
                    try:
                        body: Any = await resp.json(content_type=None)
                    except ValueError:
                        body = None
                    raise _error_for(resp.status, body, f"POST {path}")
        except (aiohttp.ClientError, TimeoutError) as e:
            raise UpstreamUnavailable(f"POST {path}: {type(e).__name__}: {e}") from e

    async def history(self, session_id: str, after: int, limit: int = 100) -> HistoryPage:
        path = f"/api/session/{session_id}/history"
        body = await self._get_json(path, {"after": str(after), "limit": str(limit)})
        data = self._unwrap(body, path)
        if not isinstance(data, list):
            raise UpstreamError(f"GET {path}: data is not a list")
        has_more = bool(body.get("hasMore")) if isinstance(body, dict) else False
        return HistoryPage(events=data, has_more=has_more)

    @asynccontextmanager
    async def open_stream(self, path: str, params: dict[str, str] | None = None) -> AsyncIterator[
        aiohttp.ClientResponse
    ]:
        """GET an SSE endpoint. Only the connect phase has a timeout: the response headers may
        legitimately take forever on the durable stream (PROTOCOL.md §3.3)."""
        timeout = aiohttp.ClientTimeout(total=None, connect=self._connect_timeout_s, sock_read=None)
        try:
            async with self.http.get(
                self.base_url + path,
                params=params,
                timeout=timeout,
                headers={"Accept": "text/event-stream"},
            ) as resp:
                if resp.status != 200:
                    try:
                        body: Any = await resp.json(content_type=None)
                    except (ValueError, aiohttp.ClientError):
                        body = None
                    raise _error_for(resp.status, body, f"GET {path}")
                yield resp
        except aiohttp.ClientError as e:
            raise UpstreamUnavailable(f"GET {path}: {type(e).__name__}: {e}") from e
