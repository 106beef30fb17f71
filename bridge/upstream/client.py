"""REST client for `opencode serve`: the routes the bridge reads, on top of `UpstreamHttp`
(bridge.upstream.http_base: paths, auth, `{data: …}` unwrapping, typed errors, bounded bodies).

Every session id is checked against the upstream's id shape (`bridge.ids`) and every path segment is
percent-encoded, so no id can point a request at another route. A JSON body is read up to
`max_body_bytes` and no further (`BodyTooLarge`).
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

import structlog

from bridge import metrics
from bridge.errors import SessionNotFound, UpstreamError
from bridge.ids import valid_session_id
from bridge.upstream import responses
from bridge.upstream.http_base import DEFAULT_MAX_BODY_BYTES, UpstreamHttp
from bridge.upstream.known_sizes import KnownSizes
from bridge.upstream.responses import HistoryPage, ServerHealth, decode_json, error_body, error_for, read_bounded
from bridge.upstream.sync_answer import NotStreamable, SyncAnswer, SyncAnswerReader, whole_answer
from bridge.upstream.sync_batch import BatchSettings, SyncBatcher
from bridge.upstream.sync_plan import MAX_NAMED, SYNC_CUTOFF_MAX, body_bytes, leave_out
from bridge.upstream.transport import Request, Transport

_log = structlog.get_logger("bridge.sync")

# The cursor of a follower that has not stored seq 0 yet (a cursor is exclusive): reads start at seq 0.
FROM_START = -1
# `/history` pages fetched at once by the whole process (one client per upstream): a warm-up of 1,000
# sessions pages at this pace instead of 1,000 requests at once. A slot is held only while one page is
# fetched and decoded, never across a write or the durable stream (docs/mirror.md "Catch-up").
HISTORY_PAGES_IN_FLIGHT = 32
# Sync logs (`POST /sync/history`) read at once, likewise: an answer may be as large as the body bound, so
# fewer (8 of 64 MiB at the very worst) — a warm-up of 1,000 sessions repairs at this pace.
SYNC_LOGS_IN_FLIGHT = 8


class Slots:
    """At most `n` requests of one kind at once; `waiting` counts those queued for a slot."""

    def __init__(self, n: int) -> None:
        self._semaphore = asyncio.Semaphore(n)
        self.waiting = 0

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        self.waiting += 1
        try:
            await self._semaphore.acquire()
        finally:
            self.waiting -= 1
        try:
            yield
        finally:
            self._semaphore.release()

    async def acquire(self) -> None:
        self.waiting += 1
        try:
            await self._semaphore.acquire()
        finally:
            self.waiting -= 1

    def release(self) -> None:
        self._semaphore.release()


@dataclass(frozen=True)
class ClientLimits:
    """How much of the serve one client asks for at once: `/history` pages and sync logs in flight, and
    how sync-log repairs are batched (bridge.upstream.sync_batch)."""

    history_pages_in_flight: int = HISTORY_PAGES_IN_FLIGHT
    sync_logs_in_flight: int = SYNC_LOGS_IN_FLIGHT
    sync_batch: BatchSettings = field(default_factory=BatchSettings)


class UpstreamClient(UpstreamHttp):
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
        limits: ClientLimits = ClientLimits(),
    ) -> None:
        super().__init__(base_url, username, password, connect_timeout_s, request_timeout_s,
                         transport=transport, max_body_bytes=max_body_bytes)
        # Sessions seen (listed, stored, in an answer) → the highest seq seen of each: the largest are left
        # out of sync-log answers by name (sync_history; at most `MAX_NAMED` names per body).
        self._known = KnownSizes()
        self.history_slots = Slots(limits.history_pages_in_flight)
        self.sync_slots = Slots(limits.sync_logs_in_flight)
        # Many sessions' sync logs in one request (docs/mirror.md "Sync-log repair, batched").
        self.sync_batcher = SyncBatcher(self._post_sync, self._known.view, self.note_sizes,
                                        self.sync_slots, limits.sync_batch)

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
            page = responses.session_page(self._unwrap(body, "/api/session"))
            listed = [s for s in page if isinstance(s, dict) and isinstance(s.get("id"), str)]
            kept = [s for s in listed if valid_session_id(s["id"])]
            if len(kept) < len(listed):
                metrics.REJECTS.labels(reason="bad_session_id").inc(len(listed) - len(kept))
            out.extend(kept)
            self.learn_aggregates(s["id"] for s in kept)
            nxt = responses.next_cursor(body, page, seen_cursors)
            if nxt is None:
                return out
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
        async with self.history_slots.held():
            body = await self._get_json(path, {"after": str(max(after, 0)), "limit": str(limit)})
        data = self._unwrap(body, path)
        if not isinstance(data, list):
            raise UpstreamError(f"GET {path}: data is not a list")
        has_more = bool(body.get("hasMore")) if isinstance(body, dict) else False
        return HistoryPage(events=data, has_more=has_more)

    # -- streams --------------------------------------------------------------------------------------

    def open_session_events(self, session_id: str, after: int) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """The session's durable stream `GET /api/session/{id}/event?after=<after>`."""
        # FROM_START (-1) reads from 0: seq 0 (`session.created`) is never a durable-stream event (§14).
        return self.open_stream(self.session_path(session_id, "event"), {"after": str(max(after, 0))})

    def open_live_events(self) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """The global live stream `GET /api/event`."""
        return self.open_stream("/api/event")

    # -- the sync protocol (docs/upstream.md §14, §15) ------------------------------------------------

    async def sync_history(self, session_id: str, after: int) -> list[Any]:
        """The session's persisted log after `after` (exclusive; `FROM_START`: from seq 0), legacy and v2
        events in one gap-free seq order (docs/upstream.md §14), as sync items (decoded JSON). Asked
        together with the other sessions waiting for theirs (`SyncBatcher`): one `POST /sync/history`
        names every session this client has seen, the asked ones with their cursor, the others with the
        largest cutoff (left out). An answer over the body bound is `BodyTooLarge` for one session alone.
        The items are this session's, plus (rarely) malformed items of its call, which it rejects."""
        self.session_path(session_id)  # the id check; the id goes into the body, not the URL
        return await self.sync_batcher.fetch(session_id, after)

    async def sync_heads(self, cursors: Mapping[str, int]) -> dict[str, int]:
        """Which of these sessions have events after their cursor: one `POST /sync/history` that keeps no
        item, only each aggregate's highest seq (discovery after a `/global/event` reconnect). The body names
        as many of them as it can, the largest logs first, with their cursors; the others' logs come back
        whole, which shows their heads too (docs/upstream.md §14). Returns session → highest seq, for the
        sessions of `cursors` whose head is above their cursor."""
        known = self._known.view()
        named = heapq.nlargest(MAX_NAMED, cursors, key=lambda sid: known.get(sid, cursors[sid]))
        body = {sid: max(cursors[sid], 0) for sid in named}
        for sid in leave_out(known, cursors.keys(), MAX_NAMED - len(body)):
            body[sid] = SYNC_CUTOFF_MAX
        await self.sync_batcher.paced()
        async with self.sync_slots.held():
            answer = await self._post_sync(body, {})
        self.sync_batcher.charge(answer.answered)
        self.note_sizes(answer.seen)
        return {sid: head for sid, head in answer.seen.items() if sid in cursors and head > cursors[sid]}

    async def _post_sync(self, cutoffs: dict[str, int], keep: Mapping[str, int]) -> SyncAnswer:
        """One `POST /sync/history` (the caller holds a sync slot). The answer is read as it arrives; only the
        items of the `keep` sessions above their cursors (and items of no session) are kept, within the body
        bound (bridge.upstream.sync_answer). One the streaming reader cannot read exactly is asked again and
        read whole, as before."""
        try:
            answer = await _post_sync_once(self, cutoffs, keep, stream=True)
        except NotStreamable as e:
            metrics.SYNC_ANSWERS_WHOLE.inc()
            _log.warning("sync_answer_read_whole", reason=str(e))
            answer = await _post_sync_once(self, cutoffs, keep, stream=False)
        metrics.SYNC_ITEMS_ANSWERED.inc(answer.answered)
        metrics.SYNC_ITEMS_KEPT.inc(len(answer.items))
        metrics.SYNC_ANSWER_BYTES.inc(answer.bytes)
        return answer

    def learn_aggregates(self, ids: Iterable[object]) -> None:
        """Session ids to leave out of later sync-log answers (bridge.upstream.known_sizes)."""
        self._known.note_sizes({sid: 0 for sid in ids if isinstance(sid, str)})

    def known_sessions(self) -> int:
        return len(self._known)

    def note_size(self, session_id: str, seq: int) -> None:
        """One session's log reaches at least `seq` (a stored batch): it is named, not answered whole."""
        self._known.note_size(session_id, seq)

    def note_sizes(self, sizes: Mapping[str, int]) -> None:
        """Sessions and the highest seq known of each (stored cursors, answers; bridge.upstream.known_sizes)."""
        self._known.note_sizes(sizes)

    def open_global_events(self) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """`GET /global/event`: every directory, both runtimes, persisted events with their sync twins
        (docs/upstream.md §15)."""
        return self.open_stream("/global/event")


async def _post_sync_once(http: UpstreamHttp, cutoffs: dict[str, int], keep: Mapping[str, int], *,
                          stream: bool) -> SyncAnswer:
    """One `POST /sync/history`, its answer read as it arrives (`stream`) or whole."""
    what = "POST /sync/history"
    req = http._request("POST", "/sync/history", None, stream=False)
    body = body_bytes(cutoffs)
    metrics.SYNC_REQUEST_BYTES.inc(len(body))
    req = Request(req.method, req.url, {**req.headers, "Content-Type": "application/json",
                                        "Accept": "application/json"},
                  req.timeout_s, req.connect_timeout_s, body)
    async with http.transport.send(req) as resp:
        if resp.status != 200:
            raise error_for(resp.status, await error_body(resp), what)
        if stream:
            reader = SyncAnswerReader(keep, max_kept_bytes=http._max_body_bytes, what=what)
            async for chunk in resp.body:
                reader.feed(chunk)
            return reader.close()
        raw = await read_bounded(resp, http._max_body_bytes, what)
    data = decode_json(raw)
    if not isinstance(data, list):
        raise UpstreamError(f"{what}: answer is not a JSON array")
    return whole_answer(data, keep, len(raw))
