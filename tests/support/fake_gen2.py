"""A fake OpenCode 2.x serve on a real socket, built from 2.x's published source (no 2.x build can be
installed here, so nothing in it was checked against a running 2.x serve: docs/upstream.md "OpenCode 2.x").

Each route cites the file and commit of `anomalyco/opencode` it follows:

- `GET /api/info` → `ServerInfo {version, pid, urls, paths{tmp, home?}}`, not wrapped in `{data}`
  (packages/protocol/src/groups/server.ts@51819a10a412d8a9a1d7d68b86ac5c93ebab71b0);
- `GET /api/health` → `{healthy: true, version, pid}`
  (packages/protocol/src/groups/health.ts@7c3c912ea4ff9f83fba481be4720529b053b12d6);
- every other path → 200 `text/html` (the web app), as a third-party report says V1 routes answer on 2.0.7
  (and as 1.18.33 itself answers unknown `/api/…` paths: docs/upstream.md "OpenCode 2.x");
- Basic auth on every route, user `opencode` (2.x always asks for it: third-party report, NOTES); a
  missing or wrong password → 401 `{"_tag":"UnauthorizedError","message":…}`.
- sessions `GET /api/session` (`{data, cursor}`), `GET /api/session/active` (`{data: {id: {type:
  "running"}}}`), the durable log `GET /api/experimental/session/:id/log?after=&follow=` (`after`
  exclusive, absent = from seq 0, `session.created`; the replay ends with a `log.synced` marker; a failing
  read ends with `event: effect/http-api/stream/failure`), prompt (the inbox entry; same `id` and body → the
  same entry, another body → 409 `ConflictError`), interrupt `{interrupted}`, model and agent (204 and their
  `session.*.selected` event), permission replies `{decision}` and forms (get, reply `{answer}`, cancel)
  — packages/protocol/src/groups/session.ts@01fd0c8548b2adb12ad40fd3573b2cfa80f130c4,
  packages/schema/src/event.ts@162a75f99cc10925fe2922b86940b72a49dbb60b (the envelope
  `{id, created, type, durable{aggregateID, seq, version}, data}`),
  packages/schema/src/form.ts@23699db9682c24c6217d86ea1133bfb20b08d769,
  packages/cli/test/acp/wire-fixture.ts@1fb51e4ab10be0adacf54a917950ec60a03995af (2.x's own fake:
  `/api/event` opens with `server.connected`; interrupt answers `{interrupted}`; permission replies
  `{decision}`);
- hints `GET /api/event/changes`: `log.sweep_required` first on every subscribe, then `log.hint{aggregateID,
  seq}` per committed event (packages/protocol/src/groups/event.ts@014a439e5f023ffa8eae33e9c43b40f5f64b359c,
  packages/schema/src/event-log.ts@2d6e2bb6e22492db1138f4f3ffe0781abb045f45); live `GET /api/event`.

Faults: `drop_connections()` cuts every open stream mid-body (a killed serve), `fail_next_log(sid)` ends
the next log read of a session with the failure event after its first event, `hints_paused` loses hints
(as while a reader is away).
"""

from __future__ import annotations

import asyncio
import base64
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.support.serve_model.frames import dumps, session_not_found

PAGE = b"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\" /></head><body></body></html>\n"
FAILURE_EVENT = "effect/http-api/stream/failure"


def _not_found(sid: str) -> web.Response:  # the same body as 1.18.33's (the serve model's frames)
    status, body = session_not_found(sid)
    return web.Response(status=status, content_type="application/json", text=dumps(body))


@dataclass
class Gen2Session:
    id: str
    directory: str = "/srv/agent/proj"
    parent_id: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)  # the durable log, seq 0 = session.created
    inbox: dict[str, dict[str, Any]] = field(default_factory=dict)  # prompt id → inbox entry
    forms: dict[str, dict[str, Any]] = field(default_factory=dict)  # form id → Form.Info
    fail_next_log: bool = False
    raw_next: list[bytes] = field(default_factory=list)  # written once, by the next log read, after its replay


class FakeGen2Serve:
    def __init__(self, *, version: str = "2.0.17", username: str = "opencode", password: str = "pw",
                 port: int = 0) -> None:
        self.version = version
        self.username = username
        self.password = password
        self.port = port
        self.request_paths: list[str] = []
        self.sessions: dict[str, Gen2Session] = {}
        self.active: set[str] = set()
        self.replies: list[tuple[str, str, str]] = []  # (session, request, decision)
        self.form_answers: list[tuple[str, str, dict[str, Any] | None]] = []  # (session, form, answer | None)
        self.hints_paused = False
        self.log_reads = 0
        self._counter = 0
        self._changed = asyncio.Condition()
        self._generation = 0  # bumped by drop_connections(): older streams end at once
        self._hint_queues: list[asyncio.Queue[bytes | None]] = []
        self._live_queues: list[asyncio.Queue[bytes | None]] = []
        self._streams: set[web.StreamResponse] = set()
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- the serve, as a test plays it ---------------------------------------------------------------

    def add_session(self, sid: str, directory: str = "/srv/agent/proj", parent_id: str | None = None) -> Gen2Session:
        s = Gen2Session(sid, directory, parent_id)
        self.sessions[sid] = s
        self._commit(s, "session.created", {"title": "New session", "location": {"directory": directory}})
        return s

    def _commit(self, s: Gen2Session, type_: str, data: dict[str, Any], version: int = 1,
                seq: int | None = None) -> dict[str, Any]:
        seq = (s.events[-1]["durable"]["seq"] + 1 if s.events else 0) if seq is None else seq
        self._counter += 1
        env = {"id": f"evt_{seq:012d}{self._counter:014d}", "created": int(time.time() * 1000), "type": type_,
               "durable": {"aggregateID": s.id, "seq": seq, "version": version},
               "data": {"sessionID": s.id, **data}}
        s.events.append(env)
        if not self.hints_paused:
            self._publish(self._hint_queues, {"type": "log.hint", "aggregateID": s.id, "seq": seq})
        self._publish(self._live_queues, {**env, "location": {"directory": s.directory}})
        return env

    async def append(self, sid: str, type_: str, data: dict[str, Any], *, version: int = 1,
                     seq: int | None = None) -> dict[str, Any]:
        """Commit one durable event (seq = next, or given to make a gap), hint it, publish it live."""
        env = self._commit(self.sessions[sid], type_, data, version, seq)
        await self._wake()
        return env

    def publish_live(self, env: dict[str, Any]) -> None:
        self._publish(self._live_queues, env)

    def ask_form(self, sid: str, form: dict[str, Any]) -> None:
        """A pending form (`form.created` live, form.ts above)."""
        self.sessions[sid].forms[form["id"]] = form
        self.publish_live({"id": f"evt_formc{len(self.sessions[sid].forms):021d}", "type": "form.created",
                           "created": int(time.time() * 1000), "data": {"form": form}})

    def fail_next_log(self, sid: str) -> None:
        self.sessions[sid].fail_next_log = True

    def drop_connections(self) -> None:
        self._generation += 1
        for resp in list(self._streams):
            transport = resp._req.transport if resp._req is not None else None  # type: ignore[attr-defined]
            if transport is not None:
                transport.close()
        for q in [*self._hint_queues, *self._live_queues]:
            q.put_nowait(None)

    @staticmethod
    def _publish(queues: list[asyncio.Queue[bytes | None]], obj: dict[str, Any]) -> None:
        frame = f"data: {dumps(obj)}\n\n".encode()
        for q in queues:
            q.put_nowait(frame)

    async def _wake(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- lifecycle -----------------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application(middlewares=[self._auth])
        r = app.router
        r.add_get("/api/info", self._info)
        r.add_get("/api/health", self._health)
        r.add_get("/api/session", self._list)
        r.add_get("/api/session/active", self._active)
        r.add_get("/api/session/{sid}", self._get_session)
        r.add_get("/api/model", self._models)
        r.add_get("/api/model/default", self._default_model)
        r.add_get("/api/experimental/session/{sid}/log", self._log)
        r.add_get("/api/event/changes", self._changes)
        r.add_get("/api/event", self._live)
        r.add_post("/api/session/{sid}/prompt", self._prompt)
        r.add_post("/api/session/{sid}/interrupt", self._interrupt)
        r.add_post("/api/session/{sid}/model", self._select)
        r.add_post("/api/session/{sid}/agent", self._select)
        r.add_get("/api/session/{sid}/permission", self._permission_list)
        r.add_post("/api/session/{sid}/permission/{rid}/reply", self._permission_reply)
        r.add_get("/api/session/{sid}/form", self._form_list)
        r.add_get("/api/session/{sid}/form/{fid}", self._form_get)
        r.add_delete("/api/session/{sid}/form/{fid}", self._form_cancel)
        r.add_post("/api/session/{sid}/form/{fid}/reply", self._form_reply)
        r.add_route("*", "/{tail:.*}", self._page)
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

    # -- handlers ------------------------------------------------------------------------------------

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.request_paths.append(request.raw_path.split("?")[0])
        sent = request.headers.get("Authorization", "")
        try:
            user, _, password = base64.b64decode(sent.removeprefix("Basic ")).decode().partition(":")
        except ValueError:
            user, password = "", ""
        if (user, password) != (self.username, self.password):
            return web.Response(status=401, content_type="application/json", headers={
                "WWW-Authenticate": 'Basic realm="Secure Area"'},
                text=dumps({"_tag": "UnauthorizedError", "message": "Authentication required"}))
        response: web.StreamResponse = await handler(request)
        return response

    async def _info(self, request: web.Request) -> web.Response:
        return web.json_response({"version": self.version, "pid": 4242, "urls": [self.url],
                                  "paths": {"tmp": "/tmp/opencode", "home": "/home/opencode"}})

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"healthy": True, "version": self.version, "pid": 4242})

    async def _page(self, request: web.Request) -> web.Response:
        return web.Response(status=200, body=PAGE, content_type="text/html")

    async def _list(self, request: web.Request) -> web.Response:
        data = [{"id": s.id, "title": "New session", "location": {"directory": s.directory},
                 **({"parentID": s.parent_id} if s.parent_id else {})} for s in self.sessions.values()]
        return web.json_response({"data": data, "cursor": {}})

    async def _active(self, request: web.Request) -> web.Response:
        return web.json_response({"data": {sid: {"type": "running"} for sid in sorted(self.active)}})

    async def _get_session(self, request: web.Request) -> web.Response:
        s = self.sessions.get(request.match_info["sid"])
        if s is None:
            return _not_found(request.match_info["sid"])
        return web.json_response({"data": {"id": s.id, "title": "New session",
                                           "location": {"directory": s.directory}}})

    async def _models(self, request: web.Request) -> web.Response:
        # `{location, data: models}` as 2.x's own fake answers it (wire-fixture.ts above)
        model = {"id": "mock-1", "modelID": "mock-1", "providerID": "mock", "name": "Mock"}
        return web.json_response({"location": {"directory": request.query.get("location[directory]", "/")},
                                  "data": [model]})

    async def _default_model(self, request: web.Request) -> web.Response:
        return web.json_response({"location": {"directory": request.query.get("location[directory]", "/")},
                                  "data": {"id": "mock-1", "providerID": "mock"}})

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        self._streams.add(resp)
        return resp

    async def _log(self, request: web.Request) -> web.StreamResponse:
        s = self.sessions.get(request.match_info["sid"])
        if s is None:
            return _not_found(request.match_info["sid"])
        raw = request.query.get("after")
        if raw is not None and (not raw.isdigit() or int(raw) > 2**53 - 1):
            return web.Response(status=400, content_type="application/json", text=dumps(
                {"_tag": "InvalidRequestError", "message": f"Expected an integer, got {raw}"}))
        cursor, follow = (int(raw) if raw is not None else -1), request.query.get("follow") == "true"
        self.log_reads += 1
        generation, fail = self._generation, s.fail_next_log
        s.fail_next_log = False
        resp = await self._stream(request)
        try:
            fresh = [e for e in s.events if e["durable"]["seq"] > cursor]
            for env in fresh[:1] if fail else fresh:
                await resp.write(f"data: {dumps(env)}\n\n".encode())
                cursor = env["durable"]["seq"]
            if fail:
                await resp.write(f"event: {FAILURE_EVENT}\ndata: {dumps({'message': 'log reader failed'})}\n\n"
                                 .encode())
                return resp
            while s.raw_next:  # bad input, written once
                await resp.write(s.raw_next.pop(0))
            head = s.events[-1]["durable"]["seq"] if s.events else None
            await resp.write(f"data: {dumps({'type': 'log.synced', 'aggregateID': s.id, 'seq': head})}\n\n".encode())
            while follow and generation == self._generation:
                async with self._changed:
                    await self._changed.wait_for(lambda c=cursor: generation != self._generation or any(  # type: ignore[misc]
                        e["durable"]["seq"] > c for e in s.events))
                for env in [e for e in s.events if e["durable"]["seq"] > cursor]:
                    if generation != self._generation:
                        break
                    await resp.write(f"data: {dumps(env)}\n\n".encode())
                    cursor = env["durable"]["seq"]
            return resp
        except (ConnectionResetError, RuntimeError):
            return resp
        finally:
            self._streams.discard(resp)

    async def _queue_stream(self, request: web.Request, queues: list[asyncio.Queue[bytes | None]],
                            first: dict[str, Any]) -> web.StreamResponse:
        q: asyncio.Queue[bytes | None] = asyncio.Queue()
        queues.append(q)
        resp = await self._stream(request)
        try:
            await resp.write(f"data: {dumps(first)}\n\n".encode())
            while (frame := await q.get()) is not None:
                await resp.write(frame)
        except (ConnectionResetError, RuntimeError):
            pass
        finally:
            queues.remove(q)
            self._streams.discard(resp)
        return resp

    async def _changes(self, request: web.Request) -> web.StreamResponse:
        return await self._queue_stream(request, self._hint_queues, {"type": "log.sweep_required"})

    async def _live(self, request: web.Request) -> web.StreamResponse:
        return await self._queue_stream(request, self._live_queues,
                                        {"id": "evt_connected", "type": "server.connected", "data": {}})

    async def _prompt(self, request: web.Request) -> web.Response:
        s = self.sessions.get(request.match_info["sid"])
        if s is None:
            return _not_found(request.match_info["sid"])
        body = await request.json()
        pid, text, delivery = body.get("id"), body.get("text"), body.get("delivery", "steer")
        if not isinstance(pid, str) or not isinstance(text, str) or delivery not in ("steer", "queue"):
            return web.Response(status=400, content_type="application/json",
                                text=dumps({"_tag": "InvalidRequestError", "message": "bad prompt"}))
        entry = s.inbox.get(pid)
        if entry is not None:
            if (entry["payload"]["text"], entry["delivery"]) != (text, delivery):
                return web.Response(status=409, content_type="application/json",
                                    text=dumps({"_tag": "ConflictError", "message": f"{pid} exists"}))
            return web.json_response({"data": entry})
        entry = {"id": pid, "sessionID": s.id, "timeCreated": int(time.time() * 1000), "type": "user",
                 "payload": {"text": text}, "delivery": delivery}
        s.inbox[pid] = entry
        await self.append(s.id, "session.input.admitted",
                          {"inputID": pid, "input": {"text": text, "delivery": delivery}})
        return web.json_response({"data": entry})

    async def _interrupt(self, request: web.Request) -> web.Response:
        sid = request.match_info["sid"]
        if sid not in self.sessions:
            return _not_found(sid)
        was = sid in self.active
        self.active.discard(sid)
        if was:
            await self.append(sid, "session.execution.interrupted", {"reason": "user"})
        return web.json_response({"interrupted": was})

    async def _select(self, request: web.Request) -> web.Response:
        sid = request.match_info["sid"]
        if sid not in self.sessions:
            return _not_found(sid)
        body = await request.json()
        if request.path.endswith("/model"):
            await self.append(sid, "session.model.selected", {"model": body["model"]})
        else:
            await self.append(sid, "session.agent.selected", {"agent": body["agent"]})
        return web.Response(status=204)

    async def _permission_list(self, request: web.Request) -> web.Response:
        # `/api/session/:id/permission`: the session's pending requests (packages/protocol/src/groups/
        # permission.ts@ef5d2092add1a52f45bd42a1a357c54e7754727a lists the route; none pending here)
        if request.match_info["sid"] not in self.sessions:
            return _not_found(request.match_info["sid"])
        return web.json_response({"data": []})

    async def _permission_reply(self, request: web.Request) -> web.Response:
        body = await request.json()
        # `{reply}` (permission.ts@047544f021a096472ec2c8d01b91a998c955e86b) or `{decision}` (wire-fixture.ts)
        decision = (body.get("reply") or body.get("decision")) if isinstance(body, dict) else None
        if decision not in ("once", "always", "reject"):
            return web.Response(status=400)
        self.replies.append((request.match_info["sid"], request.match_info["rid"], decision))
        return web.Response(status=204)

    def _form(self, request: web.Request) -> tuple[Gen2Session | None, dict[str, Any] | None]:
        s = self.sessions.get(request.match_info["sid"])
        return s, (s.forms.get(request.match_info["fid"]) if s is not None else None)

    async def _form_list(self, request: web.Request) -> web.Response:
        s = self.sessions.get(request.match_info["sid"])
        if s is None:
            return _not_found(request.match_info["sid"])
        return web.json_response({"data": list(s.forms.values())})

    async def _form_get(self, request: web.Request) -> web.Response:
        _, form = self._form(request)
        if form is None:
            return web.Response(status=404, content_type="application/json",
                                text=dumps({"_tag": "FormNotFoundError", "message": "no such form"}))
        return web.json_response({"data": {"form": form, "state": {"status": "pending"}}})

    async def _form_reply(self, request: web.Request) -> web.Response:
        s, form = self._form(request)
        if s is None or form is None:
            return web.Response(status=404)
        answer = (await request.json()).get("answer")
        self.form_answers.append((s.id, form["id"], answer))
        s.forms.pop(form["id"], None)
        self.publish_live({"id": f"evt_form{len(self.form_answers):022d}", "type": "form.replied",
                           "data": {"id": form["id"], "sessionID": s.id, "answer": answer}})
        return web.Response(status=204)

    async def _form_cancel(self, request: web.Request) -> web.Response:
        s, form = self._form(request)
        if s is None or form is None:
            return web.Response(status=404)
        self.form_answers.append((s.id, form["id"], None))
        s.forms.pop(form["id"], None)
        self.publish_live({"id": f"evt_formx{len(self.form_answers):021d}", "type": "form.cancelled",
                           "data": {"id": form["id"], "sessionID": s.id}})
        return web.Response(status=204)
