"""A fake `opencode serve` for fault injection: speaks the wire format of the captures exactly.

Only what the bridge reads is implemented: `/api/session`, `/api/session/active`,
`/api/session/{id}/history`, `/api/session/{id}/event`, `/api/session/{id}/permission` (the settable
`permissions[sid]`), `/api/event`, `POST /sync/history` (each session's sync log: v2 and legacy events in
one seq order, docs/upstream.md §14) and `/global/event` (§15: `server.connected` first, then every
published event as a bus event `{directory, payload: {id, type, properties}}` and, if persisted, its sync
twin `{directory, payload: {type: "sync", syncEvent: {id, type: "<name>.<version>", seq, aggregateID, data},
id}}`, with v2 timestamps as ISO strings like the real server's). Like the real server, the
durable stream sends **no status line or headers until it has an event** (docs/upstream.md §3.3), frames
are `data: <one-line JSON>\\n\\n` only, `/api/event` opens with `server.connected` and `: heartbeat`.

Faults a test can inject: raw bytes on a durable stream (bad frames, huge frames), dropping every open
connection mid-body (like a killed server), answering a route with an error status, and holding the
durable stream silent (a hung server) while /history and /api/event still tell the truth.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

FIXTURES = "fixtures/opencode-1.18.33"


def dumps(obj: Any) -> str:
    # The server's JSON is compact with keys in insertion order (see captures/*.sse).
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


@dataclass
class FakeSession:
    id: str
    directory: str = "/srv/agent/proj"
    events: list[dict[str, Any]] = field(default_factory=list)  # durable envelopes (no location)
    deleted: bool = False
    next_seq: int = 1
    raw_injections: list[tuple[int, bytes]] = field(default_factory=list)  # (after seq, bytes)
    # Injections are bad input, not history: each is written once, to whichever durable stream of the
    # session is open next (a reconnect whose `after` already passes it must still get it).
    raw_delivered: set[int] = field(default_factory=set)
    log: list[dict[str, Any]] = field(default_factory=list)  # the sync log: every persisted event, in seq order


def sync_item(env: dict[str, Any]) -> dict[str, Any]:
    """The sync-log item of a durable envelope (docs/upstream.md §14)."""
    d = env["durable"]
    return {"id": env["id"], "aggregate_id": d["aggregateID"], "seq": d["seq"],
            "type": f"{env['type']}.{d.get('version', 1)}", "data": env["data"]}


def _iso(data: dict[str, Any]) -> dict[str, Any]:
    """A v2 payload as /global/event carries it: `timestamp` as an ISO string (docs/legacy.md)."""
    ts = data.get("timestamp")
    if not isinstance(ts, int):
        return data
    iso = datetime.fromtimestamp(ts / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts % 1000:03d}Z"
    return {**data, "timestamp": iso}


def global_frames(env: dict[str, Any], directory: str | None) -> list[dict[str, Any]]:
    """The `/global/event` frames of one event: its bus copy and, if persisted, its sync twin."""
    d = env.get("durable")
    v2 = env["type"].startswith("session.next.")
    data = _iso(env.get("data", {})) if v2 else env.get("data", {})
    where = {"directory": directory} if directory is not None else {}
    frames = [{**where, "payload": {"id": env["id"], "type": env["type"], "properties": data}}]
    if isinstance(d, dict):
        twin = {"id": env["id"], "type": f"{env['type']}.{d.get('version', 1)}", "seq": d["seq"],
                "aggregateID": d["aggregateID"], "data": data}
        frames.append({**where, "payload": {"type": "sync", "syncEvent": twin, "id": env["id"]}})
    return frames


class FakeUpstream:
    def __init__(self) -> None:
        self.sessions: dict[str, FakeSession] = {}
        self.active: dict[str, Any] = {}
        self.permissions: dict[str, list[dict[str, Any]]] = {}  # pending requests per session
        self.questions: dict[str, list[dict[str, Any]]] = {}  # pending v2 questions per session
        self.legacy_questions: list[dict[str, Any]] = []  # `GET /question` (every session)
        self.todos: dict[str, list[dict[str, Any]]] = {}  # `GET /session/{id}/todo` per session
        self._hung: set[int] = set()  # ids of durable requests that went silent (hang_durable_streams)
        self.fail_status: dict[str, int] = {}  # route name -> status to answer with
        self._changed = asyncio.Condition()
        self._durable_conns: set[web.StreamResponse] = set()
        self._durable_reqs: dict[int, web.Request] = {}
        self._prepared: set[int] = set()  # ids of durable requests whose headers went out
        self._generation = 0  # bumped by drop_connections(); durable handlers of older generations die
        self._live_queues: list[asyncio.Queue[bytes | None]] = []
        self._global_queues: list[asyncio.Queue[bytes | None]] = []
        self.global_paused = False  # True: /global/event frames are lost (as while a reader is away)
        self.sync_calls = 0
        self.sync_request_bytes = 0  # request bodies of POST /sync/history, in all
        self.sync_items_answered = 0  # items of POST /sync/history answers, in all
        self.sync_bodies: list[dict[str, int]] = []  # the request bodies, in order
        self.sync_drop_next = 0  # the next N POST /sync/history have their connection cut, unanswered
        self.global_connects = 0
        self.durable_connects = 0
        self._counter = 0
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

    # -- test API -------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add_session(self, sid: str, *, created: bool = False) -> FakeSession:
        """A new session; its first event takes seq 1. `created`: its seq 0 is its `session.created`, as the
        real serve's always is (docs/upstream.md §3.1, §14): in the sync log only, never on the durable stream
        or /history. Off by default: most tests here compare the mirror with the durable events from seq 1."""
        s = FakeSession(sid)
        self.sessions[sid] = s
        if not created:
            return s
        self._counter += 1
        s.log.append({"id": f"evt_{0:012d}{self._counter:014d}", "aggregate_id": sid, "seq": 0,
                      "type": "session.created.1",
                      "data": {"sessionID": sid, "info": {"id": sid, "title": "New session",
                                                          "directory": s.directory}}})
        return s

    async def append(self, sid: str, type_: str, data: dict[str, Any], *, version: int = 1,
                     seq: int | None = None, live: bool = True) -> dict[str, Any]:
        """Commit one durable event (seq = next, or given to create gaps) and publish it."""
        s = self.sessions[sid]
        seq = s.next_seq if seq is None else seq
        s.next_seq = seq + 1
        self._counter += 1
        # Like the real server: ids are time-prefixed and unique; timestamp is the commit time (epoch ms).
        env = {"id": f"evt_{seq:012d}{self._counter:014d}", "type": type_,
               "durable": {"aggregateID": sid, "seq": seq, "version": version},
               "data": {"timestamp": int(time.time() * 1000), "sessionID": sid, **data}}
        s.events.append(env)
        s.log.append(sync_item(env))
        if live:
            self.publish_live({**env, "location": {"directory": s.directory}})
        async with self._changed:
            self._changed.notify_all()
        return env

    async def append_legacy(self, sid: str, type_: str, data: dict[str, Any], *, live: bool = True,
                            in_log: bool = True) -> dict[str, Any]:
        """Commit one legacy event (`message.updated`, `message.part.updated`, `session.updated` …): it takes
        the next seq, is in the sync log (unless `in_log` is False: a hole of the log itself) and on
        /global/event (bus copy and exact twin), never on the durable stream (docs/upstream.md §3.1)."""
        s = self.sessions[sid]
        seq = s.next_seq
        s.next_seq = seq + 1
        self._counter += 1
        item = {"id": f"evt_{seq:012d}{self._counter:014d}", "aggregate_id": sid, "seq": seq,
                "type": f"{type_}.1", "data": {"sessionID": sid, **data}}
        if in_log:
            s.log.append(item)
        if live:
            env = {"id": item["id"], "type": type_, "data": item["data"],
                   "durable": {"aggregateID": sid, "seq": seq, "version": 1}}
            for frame in global_frames(env, s.directory):
                self.publish_global(frame)
        async with self._changed:
            self._changed.notify_all()
        return item

    def publish_global(self, frame: dict[str, Any]) -> None:
        """One `/global/event` frame to every reader (lost while `global_paused`)."""
        if self.global_paused:
            return
        raw = f"data: {dumps(frame)}\n\n".encode()
        for q in self._global_queues:
            q.put_nowait(raw)

    def drop_global(self, *, clean: bool = False) -> None:
        """End every `/global/event` connection: cut mid-body, or with a clean EOF."""
        for q in self._global_queues:
            q.put_nowait(None if clean else b"")

    @property
    def global_subscribers(self) -> int:
        return len(self._global_queues)

    async def inject_raw(self, sid: str, raw: bytes) -> None:
        """Send raw bytes on durable streams of `sid` after the current head (bad input)."""
        s = self.sessions[sid]
        s.raw_injections.append((s.next_seq - 1, raw))
        async with self._changed:
            self._changed.notify_all()

    def publish_live(self, env: dict[str, Any]) -> None:
        """An event on `/api/event` (as given) and on `/global/event` (bus copy and sync twin)."""
        frame = f"data: {dumps(env)}\n\n".encode()
        for q in self._live_queues:
            q.put_nowait(frame)
        loc = env.get("location")
        directory = loc.get("directory") if isinstance(loc, dict) else None
        for frame in global_frames(env, directory if isinstance(directory, str) else None):
            self.publish_global(frame)

    def publish_live_raw(self, frame: bytes) -> None:
        """Raw bytes on `/api/event` and `/global/event` alike (bad frames)."""
        for q in self._live_queues + ([] if self.global_paused else self._global_queues):
            q.put_nowait(frame)

    @property
    def live_subscribers(self) -> int:
        """Open live-stream readers, `/api/event` and `/global/event` together."""
        return len(self._live_queues) + len(self._global_queues)

    async def delete(self, sid: str) -> None:
        self.sessions[sid].deleted = True
        self.publish_live({"id": "evt_del" + sid, "type": "session.deleted",
                           "durable": {"aggregateID": sid, "seq": 99, "version": 1},
                           "location": {"directory": "/srv/agent/proj"}, "data": {"sessionID": sid}})

    def open_durable_streams(self, sid: str) -> int:
        """Durable streams of `sid` that have sent their headers (i.e. at least one event)."""
        return sum(1 for rid in self._prepared
                   if rid in self._durable_reqs and self._durable_reqs[rid].match_info.get("sid") == sid)

    def hang_durable_streams(self) -> None:
        """Every durable stream open now goes silent forever (a hung server); new ones work."""
        self._hung |= set(self._durable_reqs)

    def hang_durable_stream(self, sid: str) -> None:
        """The durable streams of `sid` open now go silent forever (one stuck stream); new ones work."""
        self._hung |= {rid for rid, r in self._durable_reqs.items() if r.match_info.get("sid") == sid}

    def durable_requests(self, sid: str) -> int:
        """Durable stream requests of `sid` currently held open (with or without headers sent)."""
        return sum(1 for r in self._durable_reqs.values() if r.match_info.get("sid") == sid)

    def drop_connections(self) -> None:
        """Cut every open stream mid-body, like a killed server (no final chunk)."""
        self._generation += 1
        for req in list(self._durable_reqs.values()):
            if req.transport is not None:
                req.transport.abort()
        for resp in list(self._durable_conns):
            tr = resp._req.transport if resp._req is not None else None
            if tr is not None:
                tr.abort()
        self._durable_reqs.clear()
        self._durable_conns.clear()
        self._prepared.clear()
        for q in self._live_queues:
            q.put_nowait(None)
        self.drop_global()

    async def _wake(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def start(self) -> None:
        app = web.Application(middlewares=[self._record])
        app.router.add_get("/api/health", self._health)
        app.router.add_get("/api/session", self._list)
        app.router.add_get("/api/session/active", self._active)
        app.router.add_get("/api/session/{sid}", self._get_session)
        app.router.add_get("/api/session/{sid}/history", self._history)
        app.router.add_get("/api/session/{sid}/event", self._durable)
        app.router.add_get("/api/session/{sid}/permission", self._permissions)
        app.router.add_get("/api/session/{sid}/question", self._questions)
        app.router.add_get("/question", self._legacy_questions)
        app.router.add_get("/permission", self._legacy_permissions)
        app.router.add_get("/session/{sid}/todo", self._todo)
        app.router.add_get("/session/{sid}/diff", self._diff)
        app.router.add_get("/api/event", self._live)
        app.router.add_get("/global/event", self._global)
        app.router.add_post("/sync/history", self._sync_history)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port or 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def stop(self) -> None:
        self.drop_connections()
        await self._wake()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- handlers ----------------------------------------------------------------------------------
    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.request_paths.append(request.raw_path)
        response: web.StreamResponse = await handler(request)
        return response

    def _session_or_404(self, sid: str) -> FakeSession:
        s = self.sessions.get(sid)
        if s is None or s.deleted:
            raise web.HTTPNotFound(text=dumps({"_tag": "SessionNotFoundError", "sessionID": sid,
                                               "message": f"Session not found: {sid}"}),
                                   content_type="application/json")
        return s

    def _failure(self, route: str) -> web.Response | None:
        status = self.fail_status.get(route)
        if not status:
            return None
        return web.Response(status=status, text=dumps({"_tag": "InjectedError", "message": f"injected {status}"}),
                            content_type="application/json")

    @staticmethod
    def _after(request: web.Request) -> int:
        raw = request.query.get("after", "")
        if raw == "":
            return 0
        if not raw.isdigit() or int(raw) > 2**53 - 1:
            raise web.HTTPBadRequest(text=dumps({"_tag": "InvalidRequestError", "kind": "Query",
                                                 "message": f"Expected an integer, got {raw}\n  at [\"after\"]"}),
                                     content_type="application/json")
        return int(raw)

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"healthy": True, "version": "1.18.33"})

    async def _list(self, request: web.Request) -> web.Response:
        if (failed := self._failure("list")) is not None:
            return failed
        data = [{"id": s.id, "location": {"directory": s.directory}} for s in self.sessions.values()
                if not s.deleted]
        return web.json_response({"data": data, "cursor": {"previous": None, "next": None}})

    async def _active(self, request: web.Request) -> web.Response:
        return web.json_response({"data": self.active})

    async def _get_session(self, request: web.Request) -> web.Response:
        s = self._session_or_404(request.match_info["sid"])
        return web.json_response({"data": {"id": s.id, "location": {"directory": s.directory}}})

    async def _history(self, request: web.Request) -> web.Response:
        self.history_calls += 1
        s = self._session_or_404(request.match_info["sid"])
        if (failed := self._failure("history")) is not None:
            return failed
        after = self._after(request)
        if self.on_history is not None:
            self.history_in_flight += 1
            self.history_max_in_flight = max(self.history_max_in_flight, self.history_in_flight)
            try:
                await self.on_history(s.id, after)
            finally:
                self.history_in_flight -= 1
        limit = min(int(request.query.get("limit", "100")), 100)
        newer = [e for e in s.events if e["durable"]["seq"] > after]
        return web.json_response({"data": newer[:limit], "hasMore": len(newer) > limit})

    async def _permissions(self, request: web.Request) -> web.Response:
        s = self._session_or_404(request.match_info["sid"])
        if (failed := self._failure("permission")) is not None:
            return failed
        return web.json_response({"data": self.permissions.get(s.id, [])})

    async def _questions(self, request: web.Request) -> web.Response:
        s = self._session_or_404(request.match_info["sid"])
        if (failed := self._failure("question")) is not None:
            return failed
        return web.json_response({"data": self.questions.get(s.id, [])})

    async def _legacy_questions(self, request: web.Request) -> web.Response:
        if (failed := self._failure("question")) is not None:
            return failed
        return web.json_response(self.legacy_questions)

    async def _legacy_permissions(self, request: web.Request) -> web.Response:
        return web.json_response([])

    async def _todo(self, request: web.Request) -> web.Response:
        self._session_or_404(request.match_info["sid"])
        return web.json_response(self.todos.get(request.match_info["sid"], []))

    async def _diff(self, request: web.Request) -> web.Response:
        self._session_or_404(request.match_info["sid"])
        return web.json_response([])

    async def _durable(self, request: web.Request) -> web.StreamResponse:
        s = self._session_or_404(request.match_info["sid"])
        if (failed := self._failure("durable")) is not None:
            return failed
        after = self._after(request)
        self.durable_connects += 1
        generation = self._generation
        self._durable_reqs[id(request)] = request
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Vary": "Origin"})
        prepared = False
        pos = 0
        try:
            while generation == self._generation:
                pending: list[bytes] = []
                raws: list[int] = []
                if id(request) not in self._hung:
                    while pos < len(s.events):  # events are appended in seq order
                        e = s.events[pos]
                        pos += 1
                        if e["durable"]["seq"] > after:
                            pending.append(f"data: {dumps(e)}\n\n".encode())
                            after = e["durable"]["seq"]
                    raws = [i for i in range(len(s.raw_injections)) if i not in s.raw_delivered]
                    pending += [s.raw_injections[i][1] for i in raws]
                if pending:
                    if not prepared:  # headers only with the first event (docs/upstream.md §3.3)
                        await resp.prepare(request)
                        self._durable_conns.add(resp)
                        self._prepared.add(id(request))
                        prepared = True
                    await resp.write(b"".join(pending))
                    s.raw_delivered.update(raws)
                async with self._changed:
                    await self._changed.wait()
            if request.transport is not None:
                request.transport.abort()  # dropped mid-body: no final chunk, like a killed server
            return resp
        finally:
            self._durable_conns.discard(resp)
            self._durable_reqs.pop(id(request), None)
            self._prepared.discard(id(request))

    async def _live(self, request: web.Request) -> web.StreamResponse:
        if (failed := self._failure("live")) is not None:
            return failed
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache, no-transform"})
        await resp.prepare(request)
        q: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._live_queues.append(q)
        try:
            await resp.write(b'data: {"id":"evt_connected","type":"server.connected","data":{}}\n\n: heartbeat\n\n')
            while True:
                item = await q.get()
                if item is None:
                    return resp  # clean EOF, like a legacy prompt start
                await resp.write(item)
        finally:
            self._live_queues.remove(q)

    async def _sync_history(self, request: web.Request) -> web.Response:
        self.sync_calls += 1
        if (failed := self._failure("sync")) is not None:
            return failed
        raw = await request.read()
        self.sync_request_bytes += len(raw)
        if self.sync_drop_next > 0:
            self.sync_drop_next -= 1
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
        if not isinstance(asked, dict):
            raise web.HTTPBadRequest(text=dumps({"_tag": "InvalidRequestError", "kind": "Payload"}),
                                     content_type="application/json")
        # Like the real server: named aggregates after their cutoff, every other one from the start.
        self.sync_bodies.append(asked)
        out: list[dict[str, Any]] = []
        for s in self.sessions.values():
            after = asked.get(s.id, -1)
            out.extend(i for i in s.log if i["seq"] > after)
        self.sync_items_answered += len(out)
        return web.Response(text=dumps(out), content_type="application/json")

    async def _global(self, request: web.Request) -> web.StreamResponse:
        # "live" names the live reader's route, whichever stream it reads (existing fault tests use it)
        if (failed := self._failure("global") or self._failure("live")) is not None:
            return failed
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache, no-transform"})
        await resp.prepare(request)
        q: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._global_queues.append(q)
        self.global_connects += 1
        try:
            self._counter += 1
            await resp.write(f'data: {{"payload":{{"id":"evt_gc{self._counter}","type":"server.connected",'
                             f'"properties":{{}}}}}}\n\n'.encode())
            while True:
                item = await q.get()
                if item is None:
                    return resp  # clean EOF
                if item == b"":
                    if request.transport is not None:
                        request.transport.abort()  # cut mid-body
                    return resp
                await resp.write(item)
        finally:
            self._global_queues.remove(q)
