"""The serve model (tests/support/serve_model/) on a real socket on 127.0.0.1: a fake `opencode serve` for
integration, hostile, e2e tests and benches, speaking the wire format of the captures exactly.

Routes: `/api/session`, `/api/session/active`, `/api/session/{id}`, `…/history`, `…/event` (the durable
stream), `…/permission`, `…/question`, the legacy `/question`, `/permission`, `/session/{id}/todo`,
`/session/{id}/diff`, `/api/event`, `POST /sync/history` and `/global/event` (docs/upstream.md §3, §14, §15).
Like the real server, the durable stream sends **no status line or headers until it has an event**
(docs/upstream.md §3.3), `/api/event` opens with `server.connected` and `: heartbeat`, `/global/event` with
`server.connected`.

Faults (the model's fault plan, plus what only a socket can do): error statuses per route, cut
`/sync/history` calls, durable streams gone silent (a hung server) while /history and the live streams still
tell the truth, raw bytes on a durable stream, and every open connection dropped mid-body (a killed server).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from tests.support.serve_model import FakeSession, ServeModel
from tests.support.serve_model.frames import (
    LIVE_CONNECTED,
    Answer,
    dumps,
    global_frames,
    global_server_frame,
    invalid_query,
    iso,
    parse_after,
    session_not_found,
    sync_item,
)
from tests.support.serve_model.model import DurableCursor, Stream
from tests.support.serve_model.reads import plain_read
from tests.support.serve_model.rules import check_sync_body

__all__ = ["FIXTURES", "FakeSession", "FakeUpstream", "_iso", "dumps", "global_frames", "sync_item"]
FIXTURES = "fixtures/opencode-1.18.33"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_iso = iso  # the name bench.wire_workload and older tests import


def answer(a: Answer) -> web.Response:
    status, body = a
    return web.Response(status=status, text=dumps(body), content_type="application/json")


def query_int(request: web.Request, name: str = "after", default: str = "") -> int:
    value = parse_after(request.query.get(name, default))
    if value is None:
        raise web.HTTPBadRequest(text=dumps(invalid_query(name)[1]), content_type="application/json")
    return value


async def stream_queue(request: web.Request, streams: list[Stream], first: bytes) -> web.StreamResponse:
    """A live stream (`/api/event`, `/global/event`): `first`, then what its queue brings; b"" cuts it."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                       "Cache-Control": "no-cache, no-transform"})
    await resp.prepare(request)
    q: Stream = asyncio.Queue()
    streams.append(q)
    try:
        await resp.write(first)
        while (item := await q.get()) is not None:  # None: a clean EOF (like a legacy prompt start)
            if item == b"":
                if request.transport is not None:
                    request.transport.abort()  # cut mid-body
                return resp
            await resp.write(item)
        return resp
    finally:
        streams.remove(q)


class FakeUpstream(ServeModel):
    def __init__(self) -> None:
        super().__init__()
        self._durable_reqs: dict[int, web.Request] = {}
        self._prepared: set[int] = set()  # ids of durable requests whose headers went out
        self._generation = 0  # bumped by drop_connections(); durable handlers of older generations die
        self.sync_calls = 0
        self.sync_request_bytes = 0  # request bodies of POST /sync/history, in all
        self.sync_items_answered = 0  # items of POST /sync/history answers, in all
        self.sync_bodies: list[dict[str, int]] = []  # the request bodies, in order
        self.global_connects = 0
        self.durable_connects = 0
        self.history_calls = 0
        # Awaited by every /history request (session id, `after`) before it is answered: a test sees a
        # request arrive, or holds it.
        self.on_history: Callable[[str, int], Awaitable[None]] | None = None
        self.history_in_flight = 0
        self.history_max_in_flight = 0
        # Awaited by every POST /sync/history before it is answered, like on_history.
        self.on_sync: Callable[[], Awaitable[None]] | None = None
        self.sync_in_flight = 0
        self.sync_max_in_flight = 0
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.request_paths: list[str] = []  # every request's path and query exactly as received

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- socket faults ----------------------------------------------------------------------------------
    def _durable_of(self, sid: str | None) -> set[int]:
        return {rid for rid, r in self._durable_reqs.items() if sid is None or r.match_info.get("sid") == sid}

    def open_durable_streams(self, sid: str) -> int:
        """Durable streams of `sid` that have sent their headers (i.e. at least one event)."""
        return len(self._durable_of(sid) & self._prepared)

    def durable_requests(self, sid: str) -> int:
        """Durable stream requests of `sid` currently held open (with or without headers sent)."""
        return len(self._durable_of(sid))

    def hang_durable_streams(self) -> None:
        """Every durable stream open now goes silent forever (a hung server); new ones work."""
        self.faults.hung |= self._durable_of(None)

    def hang_durable_stream(self, sid: str) -> None:
        """The durable streams of `sid` open now go silent forever (one stuck stream); new ones work."""
        self.faults.hung |= self._durable_of(sid)

    def drop_connections(self) -> None:
        """Cut every open stream mid-body, like a killed server (no final chunk)."""
        self._generation += 1
        for req in list(self._durable_reqs.values()):
            if req.transport is not None:
                req.transport.abort()
        self._durable_reqs.clear()
        self._prepared.clear()
        for q in self.live_streams:
            q.put_nowait(None)
        self.drop_global()

    # -- lifecycle --------------------------------------------------------------------------------------
    async def start(self) -> None:
        app = web.Application(middlewares=[self._record])
        gets: dict[str, Handler] = {
            "/api/health": self._read("health"), "/api/session": self._read("list"),
            "/api/session/active": self._read("active"), "/api/session/{sid}": self._read("session"),
            "/api/session/{sid}/history": self._history, "/api/session/{sid}/event": self._durable,
            "/api/session/{sid}/permission": self._read("permission"),
            "/api/session/{sid}/question": self._read("question"), "/question": self._read("legacy_question"),
            "/permission": self._read("legacy_permission"), "/session/{sid}/todo": self._read("todo"),
            "/session/{sid}/diff": self._read("diff"), "/api/event": self._live, "/global/event": self._global}
        for path, handler in gets.items():  # in this order: `/api/session/active` before `/api/session/{sid}`
            app.router.add_get(path, handler)
        app.router.add_post("/sync/history", self._sync_history)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port or 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        self.drop_connections()
        await self.wake()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- handlers ---------------------------------------------------------------------------------------
    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.request_paths.append(request.raw_path)
        response: web.StreamResponse = await handler(request)
        return response

    def _read(self, route: str) -> Handler:
        async def read(request: web.Request) -> web.StreamResponse:
            return answer(plain_read(self, route, request.match_info.get("sid")))
        return read

    def _session_or_404(self, sid: str) -> FakeSession:
        s = self.session(sid)
        if s is None:
            _, body = session_not_found(sid)
            raise web.HTTPNotFound(text=dumps(body), content_type="application/json")
        return s

    async def _history(self, request: web.Request) -> web.Response:
        self.history_calls += 1
        s = self._session_or_404(request.match_info["sid"])
        if (failed := self.faults.failure("history")) is not None:
            return answer(failed)
        after = query_int(request)
        if self.on_history is not None:
            self.history_in_flight += 1
            self.history_max_in_flight = max(self.history_max_in_flight, self.history_in_flight)
            try:
                await self.on_history(s.id, after)
            finally:
                self.history_in_flight -= 1
        page, more = self.history(s, after, query_int(request, "limit", "100"))
        return answer((200, {"data": page, "hasMore": more}))

    async def _durable(self, request: web.Request) -> web.StreamResponse:
        s = self._session_or_404(request.match_info["sid"])
        if (failed := self.faults.failure("durable")) is not None:
            return answer(failed)
        cursor = DurableCursor(s, query_int(request))
        self.durable_connects += 1
        generation, rid = self._generation, id(request)
        self._durable_reqs[rid] = request
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Vary": "Origin"})
        try:
            while generation == self._generation:
                chunk = b"" if rid in self.faults.hung else cursor.take()
                if chunk:
                    if not resp.prepared:  # headers only with the first event (docs/upstream.md §3.3)
                        await resp.prepare(request)
                        self._prepared.add(rid)
                    await resp.write(chunk)
                    cursor.sent()
                await self.changed()
            if request.transport is not None:
                request.transport.abort()  # dropped mid-body: no final chunk, like a killed server
            return resp
        finally:
            self._durable_reqs.pop(rid, None)
            self._prepared.discard(rid)

    async def _live(self, request: web.Request) -> web.StreamResponse:
        if (failed := self.faults.failure("live")) is not None:
            return answer(failed)
        return await stream_queue(request, self.live_streams, LIVE_CONNECTED)

    async def _global(self, request: web.Request) -> web.StreamResponse:
        # "live" names the live reader's route, whichever stream it reads (existing fault tests use it)
        if (failed := self.faults.failure("global", "live")) is not None:
            return answer(failed)
        self.global_connects += 1
        return await stream_queue(request, self.global_streams, global_server_frame(f"evt_gc{self.count()}"))

    async def _sync_history(self, request: web.Request) -> web.Response:
        self.sync_calls += 1
        if (failed := self.faults.failure("sync")) is not None:
            return answer(failed)
        raw = await request.read()
        self.sync_request_bytes += len(raw)
        if self.faults.drop_sync():
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=500)  # never sent: the connection is gone
        asked = json.loads(raw)
        if self.on_sync is not None:
            self.sync_in_flight += 1
            self.sync_max_in_flight = max(self.sync_max_in_flight, self.sync_in_flight)
            try:
                await self.on_sync()
            finally:
                self.sync_in_flight -= 1
        if (refused := check_sync_body(asked)) is not None:
            return answer(refused)
        self.sync_bodies.append(asked)
        out = self.sync(asked)
        self.sync_items_answered += len(out)
        return web.Response(text=dumps(out), content_type="application/json")
