"""REST client for `opencode serve`: paths, auth, `{data: …}` unwrapping, typed errors, bounded bodies.

Everything that speaks HTTP to the upstream goes through `UpstreamClient`; the bytes move through one
`Transport` (`bridge.upstream.transport`), which tests replace with a `MockTransport`. Streams are opened
with *no* total/read timeout: the durable stream sends no headers until it has an event and never sends
keepalives (docs/upstream.md §3.3, §3.4). Dead peers are found by TCP keepalive (set on every socket) and
by the followers' own watchdogs.

Every session id is checked against the upstream's id shape (`bridge.ids`) and every path segment is
percent-encoded, so no id can point a request at another route. A JSON body is read up to
`max_body_bytes` and no further (`BodyTooLarge`).
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, urlencode

from bridge import __version__, metrics
from bridge.errors import (
    InvalidSessionId,
    SessionNotFound,
    UpstreamError,
)
from bridge.ids import valid_session_id
from bridge.upstream.responses import HistoryPage, ServerHealth, decode_json, error_body, error_for, read_bounded
from bridge.upstream.transport import AiohttpTransport, Request, Transport
from bridge.upstream.urls import split_credentials

# A `/history` page is the fallback for frames over the SSE limit (16 MiB), so one page may hold a large
# event; beyond this bound it is refused rather than held in memory.
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
# `/sync/history` cutoffs are validated like `after` (integer 0..2^53-1); the largest names an aggregate
# whose events we do not want (docs/upstream.md §14).
SYNC_CUTOFF_MAX = 2**53 - 1
# The cursor of a follower that has not stored seq 0 yet (a cursor is exclusive): reads start at seq 0.
FROM_START = -1
MAX_KNOWN_AGGREGATES = 50_000  # ~2 MiB of request body at most
# `/history` pages fetched at once by the whole process (one client per upstream): a warm-up of 1,000
# sessions pages at this pace instead of 1,000 requests at once. A slot is held only while one page is
# fetched and decoded, never across a write or the durable stream (docs/mirror.md "Catch-up").
HISTORY_PAGES_IN_FLIGHT = 32
# Sync logs (`POST /sync/history`) read at once, likewise: an answer may be as large as the body bound, so
# fewer (8 of 64 MiB at the very worst) — a warm-up of 1,000 sessions repairs at this pace.
SYNC_LOGS_IN_FLIGHT = 8


class UpstreamClient:
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
        history_pages_in_flight: int = HISTORY_PAGES_IN_FLIGHT,
        sync_logs_in_flight: int = SYNC_LOGS_IN_FLIGHT,
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
        self._known_aggregates: set[str] = set()  # left out of sync-log answers (sync_history)
        self._history_slots = asyncio.Semaphore(history_pages_in_flight)
        self.history_waiting = 0  # `/history` requests waiting for a slot (tests)
        self._sync_slots = asyncio.Semaphore(sync_logs_in_flight)
        self.sync_waiting = 0  # sync-log reads waiting for a slot (tests)

    def __repr__(self) -> str:
        return f"UpstreamClient({self.base_url!r})"

    async def __aenter__(self) -> UpstreamClient:
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

    # -- routes ---------------------------------------------------------------------------------------

    async def health(self) -> dict[str, Any]:
        body = await self._get_json("/api/health")
        return body if isinstance(body, dict) else {"body": body}

    async def server_health(self) -> ServerHealth:
        """`GET /global/health` as `doctor` reads it: any HTTP answer is returned; 401 raises
        `Unauthorized`, a transport failure `UpstreamUnavailable`."""
        what = "GET /global/health"
        async with self.transport.send(self._request("GET", "/global/health", None, stream=False)) as resp:
            date = resp.headers.get("Date")
            try:
                server_time = parsedate_to_datetime(date).timestamp() if date else None
            except (TypeError, ValueError):
                server_time = None
            if resp.status == 401:
                raise error_for(401, await error_body(resp), what)
            if resp.status != 200:
                return ServerHealth(resp.status, None, server_time)
            body = decode_json(await read_bounded(resp, self._max_body_bytes, what))
            return ServerHealth(resp.status, body, server_time)

    async def config(self) -> Any:
        """The serve's configuration (legacy `GET /config`, not wrapped in `{data}`)."""
        return await self._get_json("/config")

    async def providers(self) -> list[dict[str, Any]]:
        """The providers that have a credential (`GET /api/provider`)."""
        data = self._unwrap(await self._get_json("/api/provider"), "/api/provider")
        return [p for p in data if isinstance(p, dict)] if isinstance(data, list) else []

    async def list_sessions(self) -> list[dict[str, Any]]:
        """Every session of the server, following the list cursor. An item whose id does not have the
        upstream's shape is left out (counted as `bridge_rejects_total{reason="bad_session_id"}`)."""
        out: list[dict[str, Any]] = []
        params: dict[str, str] | None = None
        seen_cursors: set[str] = set()
        while True:
            body = await self._get_json("/api/session", params)
            page = self._unwrap(body, "/api/session")
            if not isinstance(page, list):
                raise UpstreamError("GET /api/session: data is not a list")
            listed = [s for s in page if isinstance(s, dict) and isinstance(s.get("id"), str)]
            kept = [s for s in listed if valid_session_id(s["id"])]
            if len(kept) < len(listed):
                metrics.REJECTS.labels(reason="bad_session_id").inc(len(listed) - len(kept))
            out.extend(kept)
            self.learn_aggregates(s["id"] for s in kept)
            cursor = body.get("cursor") if isinstance(body, dict) else None
            nxt = cursor.get("next") if isinstance(cursor, dict) else None
            if not page or not isinstance(nxt, str) or nxt in seen_cursors:
                return out
            seen_cursors.add(nxt)
            params = {"cursor": nxt}

    async def get_session(self, session_id: str) -> dict[str, Any]:
        path = self.session_path(session_id)
        data = self._unwrap(await self._get_json(path), path)
        if not isinstance(data, dict):
            raise UpstreamError(f"GET {path}: data is not an object")
        return data

    async def pending_permissions(self, session_id: str) -> list[dict[str, Any]]:
        """The session's pending permission requests (the `data` of their `permission.v2.asked`,
        docs/upstream.md §4.4). A session unknown upstream (404) has none."""
        try:
            path = self.session_path(session_id, "permission")
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
        """Stop the session's running turn upstream (204; a no-op when idle, docs/upstream.md §4.2). Not to
        be confused with releasing a session, which only stops the bridge's following of it."""
        await self._call("POST", self.session_path(session_id, "interrupt"), ok=(200, 204))

    async def history(self, session_id: str, after: int, limit: int = 100) -> HistoryPage:
        path = self.session_path(session_id, "history")
        self.history_waiting += 1
        try:
            await self._history_slots.acquire()
        finally:
            self.history_waiting -= 1
        try:
            body = await self._get_json(path, {"after": str(max(after, 0)), "limit": str(limit)})
        finally:
            self._history_slots.release()
        data = self._unwrap(body, path)
        if not isinstance(data, list):
            raise UpstreamError(f"GET {path}: data is not a list")
        has_more = bool(body.get("hasMore")) if isinstance(body, dict) else False
        return HistoryPage(events=data, has_more=has_more)

    # -- streams --------------------------------------------------------------------------------------

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

    def open_session_events(self, session_id: str, after: int) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """The session's durable stream `GET /api/session/{id}/event?after=<after>`."""
        # FROM_START (-1) reads from 0: seq 0 (`session.created`) is never a durable-stream event (§14).
        return self.open_stream(self.session_path(session_id, "event"), {"after": str(max(after, 0))})

    def open_live_events(self) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """The global live stream `GET /api/event`."""
        return self.open_stream("/api/event")

    # -- the sync protocol (docs/upstream.md §14, §15) ------------------------------------------------

    async def sync_history(self, session_id: str, after: int) -> list[Any]:
        """The session's persisted log after `after` (exclusive), legacy and v2 events in one gap-free
        seq order: `POST /sync/history {"<sid>": after}` (a JSON array of sync items, docs/upstream.md
        §14). The body is bounded like every JSON body (`BodyTooLarge`).

        The answer also holds the *whole* log of every aggregate the body does not name (§14), so every
        other session this client has seen (listed, or in an earlier answer) is named with the largest
        cutoff the upstream accepts; the caller still drops items of other aggregates."""
        self.session_path(session_id)  # the id check; the id goes into the body, not the URL
        what = "POST /sync/history"
        req = self._request("POST", "/sync/history", None, stream=False)
        cutoffs = dict.fromkeys(self._known_aggregates - {session_id}, SYNC_CUTOFF_MAX)
        if after >= 0:
            cutoffs[session_id] = after
        # else FROM_START: a cutoff below 0 is refused (400), and an aggregate the body does not name comes
        # back whole from seq 0 — `session.created` included (docs/upstream.md §14, docs/mirror.md).
        body = json.dumps(cutoffs, separators=(",", ":")).encode()
        req = Request(req.method, req.url, {**req.headers, "Content-Type": "application/json",
                                            "Accept": "application/json"},
                      req.timeout_s, req.connect_timeout_s, body)
        self.sync_waiting += 1
        try:
            await self._sync_slots.acquire()
        finally:
            self.sync_waiting -= 1
        try:  # a slot is held while the log is read and decoded, nothing longer
            async with self.transport.send(req) as resp:
                if resp.status != 200:
                    raise error_for(resp.status, await error_body(resp), what)
                data = decode_json(await read_bounded(resp, self._max_body_bytes, what))
        finally:
            self._sync_slots.release()
        if not isinstance(data, list):
            raise UpstreamError(f"{what}: answer is not a JSON array")
        self.learn_aggregates(i.get("aggregate_id") for i in data if isinstance(i, dict))
        return data

    def learn_aggregates(self, ids: Iterable[object]) -> None:
        """Session ids to leave out of every later sync-log answer (at most `MAX_KNOWN_AGGREGATES`)."""
        for sid in ids:
            if len(self._known_aggregates) >= MAX_KNOWN_AGGREGATES:
                return
            if isinstance(sid, str) and valid_session_id(sid):
                self._known_aggregates.add(sid)

    def open_global_events(self) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """`GET /global/event`: every directory, both runtimes, persisted events with their sync twins
        (docs/upstream.md §15)."""
        return self.open_stream("/global/event")

    # -- commands (docs/commands.md) ------------------------------------------------------------------

    async def send_json(self, method: str, path: str, body: Any = None, *, directory: str | None = None,
                        ok: tuple[int, ...] = (200, 201, 204)) -> tuple[int, Any]:
        """One command call: `path` already encoded, `body` sent as JSON, `directory` as the location
        (`?location[directory]=`, docs/upstream.md §6: legacy and location-scoped routes need it). The
        status and the decoded answer (None when empty)."""
        request = self._request(method, path, {"location[directory]": directory} if directory else None,
                                stream=False)
        if body is not None:
            request = replace(request, headers={**request.headers, "Content-Type": "application/json"},
                              body=json.dumps(body).encode())
        what = f"{method} {path}"
        async with self.transport.send(request) as resp:
            if resp.status not in ok:
                raise error_for(resp.status, await error_body(resp), what)
            return resp.status, decode_json(await read_bounded(resp, self._max_body_bytes, what))
