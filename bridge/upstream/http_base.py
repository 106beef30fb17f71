"""The HTTP every call to `opencode serve` goes through: credentials, percent-encoded session paths,
JSON bodies read up to a bound, typed errors, SSE streams (no read timeout) and command calls.
`UpstreamClient` (bridge.upstream.client) adds the routes on top.

The bytes move through one `Transport` (`bridge.upstream.transport`), which tests replace with a
`MockTransport`. Streams are opened with *no* total/read timeout: the durable stream sends no headers
until it has an event and never sends keepalives (docs/upstream.md §3.3, §3.4). Dead peers are found by
TCP keepalive (set on every socket) and by the followers' own watchdogs.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, Self
from urllib.parse import quote, urlencode

from bridge import __version__
from bridge.errors import InvalidSessionId, UpstreamError
from bridge.ids import valid_session_id
from bridge.upstream.responses import decode_json, error_body, error_for, read_bounded
from bridge.upstream.transport import AiohttpTransport, Request, Transport
from bridge.url_credentials import split_credentials

# A `/history` page is the fallback for frames over the SSE limit (16 MiB), so one page may hold a large
# event; beyond this bound it is refused rather than held in memory.
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024



def location_query(path: str, directory: str | None) -> dict[str, str] | None:
    """The query naming a route's location (docs/upstream.md §6): v2 routes (`/api/…`) read
    `location[directory]`, legacy routes `directory` (checked on 1.18.33: a legacy route given only
    `location[directory]` answers for the serve's own directory)."""
    if not directory:
        return None
    return {"location[directory]": directory} if path.startswith("/api/") else {"directory": directory}

class UpstreamHttp:
    def __init__(
        self,
        base_url: str,
        username: str = "opencode",
        password: str = "",
        connect_timeout_s: float = 10.0,
        request_timeout_s: float = 30.0,
        *,
        transport: Transport | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        # Credentials in the URL are taken out of it, so `base_url` is always safe to log.
        url, url_user, url_password = split_credentials(base_url.rstrip("/"))
        self.base_url = url
        if not password and url_password:
            username, password = url_user or username, url_password
        self._headers = {"User-Agent": f"opencode-bridge/{__version__}"}
        self.has_credentials = bool(password)
        if password:
            token = base64.b64encode(f"{username or 'opencode'}:{password}".encode()).decode("ascii")
            self._headers["Authorization"] = f"Basic {token}"
        self._connect_timeout_s = connect_timeout_s
        self._request_timeout_s = request_timeout_s
        self._max_body_bytes = max_body_bytes
        self._given_transport = transport
        self._transport: Transport | None = transport

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"

    async def __aenter__(self) -> Self:
        if self._transport is None:
            self._transport = AiohttpTransport()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._transport is not None:
            await self._transport.aclose()
            self._transport = self._given_transport

    @property
    def transport(self) -> Transport:
        if self._transport is None:
            raise RuntimeError("UpstreamClient used outside `async with`")
        return self._transport

    # -- requests -------------------------------------------------------------------------------------

    @staticmethod
    def session_path(session_id: str, *rest: str) -> str:
        """`/api/session/{id}/…` with every segment percent-encoded; refuses an id of the wrong shape."""
        if not valid_session_id(session_id):
            raise InvalidSessionId(f"not a session id: {session_id[:80]!r}")
        return "/".join(["/api/session", *(quote(s, safe="") for s in (session_id, *rest))])

    def _request(self, method: str, path: str, params: Mapping[str, str] | None, *, stream: bool) -> Request:
        url = self.base_url + path + (f"?{urlencode(params)}" if params else "")
        headers = dict(self._headers)
        if stream:
            headers["Accept"] = "text/event-stream"
        return Request(method, url, headers, None if stream else self._request_timeout_s, self._connect_timeout_s)

    async def _call(self, method: str, path: str, params: Mapping[str, str] | None = None,
                    ok: tuple[int, ...] = (200,)) -> Any:
        what = f"{method} {path}"
        async with self.transport.send(self._request(method, path, params, stream=False)) as resp:
            if resp.status not in ok:
                raise error_for(resp.status, await error_body(resp), what)
            return decode_json(await read_bounded(resp, self._max_body_bytes, what))

    async def _get_json(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        return await self._call("GET", path, params)

    @staticmethod
    def _unwrap(body: Any, path: str) -> Any:
        # Most /api/* bodies are {"data": …}; a few are not (docs/upstream.md §6) — callers know which.
        if not isinstance(body, dict) or "data" not in body:
            raise UpstreamError(f"GET {path}: expected a {{data: …}} body")
        return body["data"]

    # -- streams and commands -----------------------------------------------------------------------------

    @asynccontextmanager
    async def open_stream(self, path: str, params: Mapping[str, str] | None = None) -> AsyncIterator[
        AsyncIterator[bytes]
    ]:
        """GET an SSE endpoint (`path` already encoded) and yield its body, one chunk per read. Only the
        connect phase has a timeout: the response headers may legitimately take forever on the durable
        stream (docs/upstream.md §3.3)."""
        async with self.transport.send(self._request("GET", path, params, stream=True)) as resp:
            if resp.status != 200:
                raise error_for(resp.status, await error_body(resp), f"GET {path}")
            yield resp.body

    async def send_json(self, method: str, path: str, body: Any = None, *, directory: str | None = None,
                        ok: tuple[int, ...] = (200, 201, 204)) -> tuple[int, Any]:
        """One command call: `path` already encoded, `body` sent as JSON, `directory` as the location
        (docs/upstream.md §6: legacy and location-scoped routes need it) — `?location[directory]=` on a v2
        route (`/api/…`), `?directory=` on a legacy one (which ignores the other form). The status and the
        decoded answer (None when empty)."""
        request = self._request(method, path, location_query(path, directory), stream=False)
        if body is not None:
            request = replace(request, headers={**request.headers, "Content-Type": "application/json"},
                              body=json.dumps(body).encode())
        what = f"{method} {path}"
        async with self.transport.send(request) as resp:
            if resp.status not in ok:
                raise error_for(resp.status, await error_body(resp), what)
            return resp.status, decode_json(await read_bounded(resp, self._max_body_bytes, what))
