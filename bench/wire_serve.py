"""A fast fake `opencode serve` in its own process, speaking the complete wire of the captures, for
`bench.wire` (docs/upstream.md §2, §3, §6, §14, §15; events from bench.wire_workload, pre-encoded).

- `GET /api/session/{id}/event?after=`: v2 events only; no headers until the first one (§3.3); never ends.
- `GET /global/event`: `server.connected`, then for every persisted event its bus event and its `sync` twin
  (plus bus-only deltas), `server.heartbeat` every 10 s (§15). Live only: pre-existing events are not on it.
- `POST /sync/history {sid: cutoff}`: every named session after its cutoff, every session the body does
  not name whole from seq 0 (§14); cutoffs validated like `after` (400 otherwise); a body naming more
  than 996 sessions is HTTP 500, as the real serve's SQLite expression-depth limit answers it (§14).
- `/api/session` (one page), `…/active` (`{}`), `…/{id}`, `…/history`, `…/permission`, `…/question`, the legacy
  `/question`, `/permission`, `/session/status`, health; anything else 404, counted under its own path.

Control: `POST /_bench/burst` appends `--burst` events to every session (round by round across all
sessions); `GET /_bench/counters`: per route, calls and request/response body bytes, and more;
`GET /_bench/expected`: every session's (seq, id) list. Prints `READY <url>` once listening.

Usage: python -m bench.wire_serve --sessions 1000 --events 20 --burst 20 [--legacy-every 4] [--port 0]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import time
from typing import Any

import orjson
from aiohttp import web

from bench import wire_workload as w
from bench.wire_answers import answer, bad_payload, bad_query, json_answer, not_found, route_name
from tests.support.serve_model.frames import global_server_frame, no_route, parse_after
from tests.support.serve_model.rules import check_sync_body, history_page, sync_answer

HEARTBEAT_S = 10.0
TASKS = web.AppKey("tasks", set[asyncio.Task[None]])


class WireServe:
    def __init__(self, sessions: int, events: int, burst: int, legacy_every: int) -> None:
        self.sessions = [w.WireSession(k, w.session_id(k)) for k in range(sessions)]
        self.by_id = {s.id: s for s in self.sessions}
        self.ids = frozenset(self.by_id)
        for s in self.sessions:
            s.add(w.created(s.k))
            for seq in range(1, events + 1):
                s.add(w.event(s.k, seq, legacy_every))
        # The burst, encoded beforehand (round r = every session's next event), so publishing costs no JSON.
        self._burst = [[w.event(s.k, events + 1 + r, legacy_every) for s in self.sessions] for r in range(burst)]
        self._listing = orjson.dumps({"data": [w.session_item(s.k) for s in reversed(self.sessions)],
                                      "cursor": {"previous": None, "next": None}})
        self.counters: dict[str, list[int]] = {}  # route -> [calls, request bytes, response bytes]
        self.open_durable = 0
        self.sync_items = 0  # items answered by /sync/history, all calls
        self.published = 0
        self.burst_global_bytes = 0  # the burst's /global/event frames, per reader
        self.burst_started_at: float | None = None
        self.burst_published_at: float | None = None
        self.first_request_at: float | None = None
        self._global: list[asyncio.Queue[bytes]] = []

    # -- counting -----------------------------------------------------------------------------------
    def _count(self, route: str, calls: int = 0, req: int = 0, resp: int = 0) -> None:
        c = self.counters.setdefault(route, [0, 0, 0])
        c[0] += calls
        c[1] += req
        c[2] += resp

    @web.middleware
    async def _counted(self, request: web.Request, handler: Any) -> web.StreamResponse:
        name = route_name(request)
        if not request.path.startswith("/_bench/"):
            self.first_request_at = self.first_request_at or time.time()
            self._count(name, calls=1, req=request.content_length or 0)
        response: web.StreamResponse = await handler(request)
        if isinstance(response, web.Response) and isinstance(response.body, bytes) \
                and not request.path.startswith("/_bench/"):
            self._count(name, resp=len(response.body))
        return response

    # -- the upstream's routes ------------------------------------------------------------------------
    async def health(self, request: web.Request) -> web.Response:
        return json_answer({"healthy": True, "version": "1.18.33"})

    async def listing(self, request: web.Request) -> web.Response:
        return web.Response(body=self._listing, content_type="application/json")

    async def one(self, request: web.Request) -> web.Response:
        s = self.by_id.get(request.match_info["sid"])
        return json_answer({"data": w.session_item(s.k)}) if s else not_found(request.match_info["sid"])

    async def empty_data(self, request: web.Request) -> web.Response:
        sid = request.match_info.get("sid")
        if sid is not None and sid not in self.by_id:
            return not_found(sid)
        return json_answer({"data": {} if request.path.endswith("/active") else []})

    async def bare_empty(self, request: web.Request) -> web.Response:
        return json_answer({} if request.path.endswith("/status") else [])

    async def history(self, request: web.Request) -> web.Response:
        s = self.by_id.get(request.match_info["sid"])
        if s is None:
            return not_found(request.match_info["sid"])
        after = parse_after(request.query.get("after", ""))
        limit = parse_after(request.query.get("limit", "100"))
        if after is None or limit is None:
            return bad_query("after" if after is None else "limit")
        page, more = history_page(s.history[bisect.bisect_right(s.v2_seqs, after):], limit)
        body = b'{"data":[' + b",".join(page) + b'],"hasMore":' + (b"true" if more else b"false") + b"}"
        return web.Response(body=body, content_type="application/json")

    async def durable(self, request: web.Request) -> web.StreamResponse:
        s = self.by_id.get(request.match_info["sid"])
        if s is None:
            return not_found(request.match_info["sid"])
        after = parse_after(request.query.get("after", ""))
        if after is None:
            return bad_query()
        route = route_name(request)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Vary": "Origin"})
        pos = bisect.bisect_right(s.v2_seqs, after)
        self.open_durable += 1
        try:
            while True:
                if pos < len(s.durable):
                    chunk = b"".join(s.durable[pos:])
                    pos = len(s.durable)
                    if not resp.prepared:  # headers only with the first event (docs/upstream.md §3.3)
                        await resp.prepare(request)
                    await resp.write(chunk)
                    self._count(route, resp=len(chunk))
                waiter = asyncio.get_running_loop().create_future()
                s.waiters.append(waiter)
                await waiter
        finally:
            self.open_durable -= 1

    async def sync_history(self, request: web.Request) -> web.Response:
        raw = await request.read()
        self._count(route_name(request), req=len(raw) - (request.content_length or 0))
        try:
            asked = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return bad_payload("Invalid JSON")
        if (refused := check_sync_body(asked)) is not None:
            return answer(refused)
        pieces = sync_answer(self.by_id, asked, w.WireSession.after)
        self.sync_items += len(pieces)
        return web.Response(body=b"[" + b",".join(pieces) + b"]", content_type="application/json")

    async def global_events(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        route = route_name(request)
        q: asyncio.Queue[bytes] = asyncio.Queue()
        self._global.append(q)
        q.put_nowait(global_server_frame(f"evt_{time.time_ns():026d}"))
        try:
            while True:
                chunk = await q.get()
                await resp.write(chunk)
                self._count(route, resp=len(chunk))
        finally:
            self._global.remove(q)

    async def legacy_events(self, request: web.Request) -> web.StreamResponse:  # `/api/event` (§5): unused here
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"id":"evt_connected","type":"server.connected","data":{}}\n\n: heartbeat\n\n')
        await asyncio.Event().wait()
        return resp

    async def other(self, request: web.Request) -> web.Response:
        return answer(no_route(request.path))

    # -- control --------------------------------------------------------------------------------------
    def _publish(self, chunk: bytes) -> None:
        for q in self._global:
            q.put_nowait(chunk)

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            self._publish(global_server_frame(f"evt_{time.time_ns():026d}", "server.heartbeat"))

    async def publish_burst(self) -> None:
        for events in self._burst:
            parts = []
            for s, e in zip(self.sessions, events, strict=True):
                s.add(e)
                parts.append(e.globals)
                self.published += 1
            chunk = b"".join(parts)
            self.burst_global_bytes += len(chunk)
            self._publish(chunk)
            await asyncio.sleep(0)  # let the streams write this round
        self._burst = []
        self.burst_published_at = time.time()

    async def start_burst(self, request: web.Request) -> web.Response:
        if self.burst_started_at is not None:
            return json_answer({"error": "the burst was started already"}, 409)
        self.burst_started_at = time.time()
        task = asyncio.create_task(self.publish_burst())
        request.app[TASKS].add(task)
        return json_answer({"events": sum(len(r) for r in self._burst), "started_at": self.burst_started_at})

    def snapshot(self) -> dict[str, Any]:
        return {"routes": self.counters, "open_durable": self.open_durable, "published": self.published,
                "burst_global_bytes": self.burst_global_bytes, "sync_items": self.sync_items,
                "global_readers": len(self._global), "first_request_at": self.first_request_at,
                "burst_started_at": self.burst_started_at, "burst_published_at": self.burst_published_at,
                "log_events": sum(len(s.seqs) for s in self.sessions)}

    async def show_counters(self, request: web.Request) -> web.Response:
        return json_answer(self.snapshot())

    def control(self) -> dict[str, Any]:  # the `POST /_bench/…` routes
        return {"/_bench/burst": self.start_burst}

    async def expected(self, request: web.Request) -> web.Response:
        return json_answer({s.id: [[q, i] for q, i in zip(s.seqs, s.ids, strict=True)] for s in self.sessions})

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._counted], client_max_size=256 * 1024 * 1024)
        app[TASKS] = set()
        r = app.router
        gets = {"/api/health": self.health, "/global/health": self.health, "/api/session": self.listing,
                "/api/session/active": self.empty_data, "/api/session/{sid}": self.one,
                "/api/session/{sid}/history": self.history, "/api/session/{sid}/event": self.durable,
                "/api/session/{sid}/permission": self.empty_data, "/api/session/{sid}/question": self.empty_data,
                "/question": self.bare_empty, "/permission": self.bare_empty, "/session/status": self.bare_empty,
                "/api/event": self.legacy_events, "/global/event": self.global_events,
                "/_bench/counters": self.show_counters, "/_bench/expected": self.expected}
        for path, handler in gets.items():  # in this order: `/api/session/active` before `/api/session/{sid}`
            r.add_get(path, handler)
        r.add_post("/sync/history", self.sync_history)
        for path, handler in self.control().items():
            r.add_post(path, handler)
        r.add_route("*", "/{tail:.*}", self.other)
        return app


async def serve(a: argparse.Namespace) -> None:
    await serve_forever(WireServe(a.sessions, a.events, a.burst, a.legacy_every), a.port)


async def serve_forever(fake: WireServe, port: int) -> None:
    """`fake` on 127.0.0.1:`port` (0: any) with its heartbeats, `READY <url>` printed, until cancelled."""
    runner = web.AppRunner(fake.app(), handle_signals=True, access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=4096)
    await site.start()
    beats = asyncio.create_task(fake._heartbeats())
    print(f"READY http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        beats.cancel()
        await runner.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--events", type=int, default=20, help="events per session before the start (seq 1..N)")
    ap.add_argument("--burst", type=int, default=20, help="events per session of the burst")
    ap.add_argument("--legacy-every", type=int, default=4, help="every Nth seq a legacy event (0: none)")
    ap.add_argument("--port", type=int, default=0)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(ap.parse_args()))


if __name__ == "__main__":
    main()
