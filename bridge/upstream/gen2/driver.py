"""`Gen2Driver`: the driver port (bridge.upstream.driver) on an OpenCode 2.x serve, from its source
(`anomalyco/opencode`; docs/upstream.md "OpenCode 2.x" has the files and what was not verified):

- sessions: `GET /api/session` (`{data, cursor{next}}`, paged by `cursor`), turn state
  `GET /api/session/active` (`{data: {id: {type: "running"}}}`) —
  packages/protocol/src/groups/session.ts@01fd0c8548b2adb12ad40fd3573b2cfa80f130c4;
- the durable log: `GET /api/experimental/session/:id/log?after=&follow=true` (`after` exclusive; without
  it the log from its start, seq 0 = `session.created`; `log.caught_up`/`log.synced` markers between replay
  and live; a failing read ends with `event: effect/http-api/stream/failure`) — same file, and
  packages/schema/src/event-log.ts@2d6e2bb6e22492db1138f4f3ffe0781abb045f45;
- hints: `GET /api/event/changes` (`log.hint{aggregateID, seq}`, `log.sweep_required` first on every
  (re)subscribe), live events `GET /api/event` ("volatile by contract") —
  packages/protocol/src/groups/event.ts@014a439e5f023ffa8eae33e9c43b40f5f64b359c;
- commands: `POST …/prompt {id, text, delivery}` → the inbox entry `{data: {id, …}}`;
  `POST …/interrupt` → `{interrupted}`; `POST …/model {model}`, `…/agent {agent}` → 204;
  `POST …/permission/:id/reply {reply}` (`{decision}` in 2.x's test fake: both sent); forms
  `GET …/form/:id`, `POST …/form/:id/reply {answer}`, `DELETE …/form/:id` — session.ts above,
  packages/schema/src/form.ts@23699db9682c24c6217d86ea1133bfb20b08d769,
  packages/cli/test/acp/wire-fixture.ts@1fb51e4ab10be0adacf54a917950ec60a03995af.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

from bridge import metrics
from bridge.errors import BadFrame, UpstreamError
from bridge.events.envelope import Envelope, parse_frame
from bridge.events.fields import location_directory
from bridge.events.gen2 import form_answer, parse_log_item
from bridge.ids import valid_session_id
from bridge.perf.jsonload import strict_decode
from bridge.upstream.driver import SWEEP, Admission, Change, Delivery, ListedSession, LogRead
from bridge.upstream.driver_streams import hint, log_reads, parsed
from bridge.upstream.http_base import UpstreamHttp
from bridge.upstream.responses import next_cursor, session_page

MAX_PAGES = 10_000  # a session list that never ends is refused, not followed forever


def _q(segment: str) -> str:
    return quote(segment, safe="")


def _change(data: str) -> Change | None:
    try:
        obj = strict_decode(data)
    except (ValueError, RecursionError) as e:
        raise BadFrame("bad_json", str(e)[:200]) from None
    kind = obj.get("type") if isinstance(obj, dict) else None
    if kind == "log.sweep_required":
        return SWEEP
    if kind == "log.hint":
        change = hint(obj.get("aggregateID"), obj.get("seq"))
        if change is None:
            raise BadFrame("bad_shape", "log.hint without aggregateID or seq")
        return change
    raise BadFrame("bad_shape", f"not a change: {str(kind)[:80]}")


def _live(data: str) -> Envelope | None:
    env = parse_frame(data)
    return None if env.type == "server.connected" else env


def permission_reply_body(reply: str) -> dict[str, str]:
    """A permission reply's body, in both spellings read: `{reply}` (packages/protocol/src/groups/
    permission.ts@047544f021a096472ec2c8d01b91a998c955e86b) and `{decision}` (wire-fixture.ts above); an
    Effect struct ignores a key it does not declare, so either version reads its own."""
    return {"reply": reply, "decision": reply}


def _data(body: Any, what: str) -> Any:
    if not isinstance(body, dict) or "data" not in body:
        raise UpstreamError(f"{what}: expected a {{data: …}} body")
    return body["data"]


class Gen2Driver:
    generation = 2

    def __init__(self, http: UpstreamHttp) -> None:
        self.http = http

    def _s(self, session_id: str, *rest: str) -> str:
        return self.http.session_path(session_id, *rest)

    async def list_sessions(self) -> list[ListedSession]:
        out: list[ListedSession] = []
        params: dict[str, str] | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            _, body = await self.http.send_json("GET", "/api/session" + ("?cursor=" + _q(params["cursor"])
                                                                          if params else ""), ok=(200,))
            page = session_page(_data(body, "GET /api/session"))
            for s in page:
                sid = s.get("id") if isinstance(s, dict) else None
                if not isinstance(sid, str) or not valid_session_id(sid):
                    metrics.REJECTS.labels(reason="bad_session_id").inc()
                    continue
                parent = s.get("parentID")
                out.append(ListedSession(sid, location_directory(s), parent if isinstance(parent, str) else None))
            nxt = next_cursor(body, page, seen)
            if nxt is None:
                return out
            params = {"cursor": nxt}
        raise UpstreamError(f"GET /api/session: more than {MAX_PAGES} pages")

    async def running_sessions(self) -> set[str]:
        _, body = await self.http.send_json("GET", "/api/session/active", ok=(200,))
        data = _data(body, "GET /api/session/active")
        return {sid for sid in data if isinstance(sid, str)} if isinstance(data, dict) else set()

    @asynccontextmanager
    async def follow(self, session_id: str, after: int) -> AsyncIterator[AsyncIterator[LogRead]]:
        if not valid_session_id(session_id):
            raise UpstreamError(f"not a session id: {session_id[:80]!r}")
        params = {"follow": "true"} if after < 0 else {"after": str(after), "follow": "true"}
        path = f"/api/experimental/session/{_q(session_id)}/log"
        async with self.http.open_stream(path, params) as body:
            yield log_reads(body, parse_log_item)

    @asynccontextmanager
    async def changes(self) -> AsyncIterator[AsyncIterator[Change]]:
        async with self.http.open_stream("/api/event/changes") as body:
            yield parsed(body, _change, "changes")

    @asynccontextmanager
    async def live(self) -> AsyncIterator[AsyncIterator[Envelope]]:
        async with self.http.open_stream("/api/event") as body:
            yield parsed(body, _live, "live")

    async def prompt(self, session_id: str, directory: str, message_id: str, text: str,
                     delivery: Delivery) -> Admission:
        body = {"id": message_id, "text": text, "delivery": delivery}
        _, got = await self.http.send_json("POST", self._s(session_id, "prompt"), body, directory=directory)
        data = _data(got, "POST /api/session/{id}/prompt")
        data = data if isinstance(data, dict) else {}
        inbox = data.get("id")
        return Admission(message_id, None, inbox if isinstance(inbox, str) else None, data)

    async def interrupt(self, session_id: str, directory: str) -> bool | None:
        _, got = await self.http.send_json("POST", self._s(session_id, "interrupt"), directory=directory)
        interrupted = got.get("interrupted") if isinstance(got, dict) else None
        return interrupted if isinstance(interrupted, bool) else None

    async def switch_model(self, session_id: str, directory: str, provider_id: str, model_id: str) -> None:
        body = {"model": {"providerID": provider_id, "id": model_id}}
        await self.http.send_json("POST", self._s(session_id, "model"), body, directory=directory)

    async def switch_agent(self, session_id: str, directory: str, agent: str) -> None:
        await self.http.send_json("POST", self._s(session_id, "agent"), {"agent": agent}, directory=directory)

    async def reply_permission(self, session_id: str, directory: str, request_id: str, reply: str) -> None:
        path = self._s(session_id, "permission", request_id, "reply")
        await self.http.send_json("POST", path, permission_reply_body(reply), directory=directory)

    async def reply_question(self, session_id: str, directory: str, request_id: str,
                             answers: list[list[str]] | None) -> None:
        """A form answered as a question is: its fields read first, the answers keyed by them."""
        path = self._s(session_id, "form", request_id)
        if answers is None:
            await self.http.send_json("DELETE", path, directory=directory)
            return
        _, got = await self.http.send_json("GET", path, directory=directory, ok=(200,))
        detail = _data(got, "GET /api/session/{id}/form/{formID}")
        form = detail.get("form", detail) if isinstance(detail, dict) else {}
        answer = form_answer(form if isinstance(form, dict) else {}, answers)
        await self.http.send_json("POST", path + "/reply", {"answer": answer}, directory=directory)
