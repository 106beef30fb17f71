"""`GET /v1/sessions/{id}/todo|diff|errors` (bridge.http.session_state) on the real PostgreSQL: a token
limited to a parent session reads its subagent's state (the session tree widens it, as for every other
read), not the other way round; the todo list is answered from what the bridge keeps (no upstream call),
a session it knows nothing of is asked of the serve once and then kept; recorded session errors are listed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.auth import Claims
from bridge.command_service import CommandService, DoorSettings
from bridge.command_service.rows import DoorStore
from bridge.commands.ratelimit import RateLimiter
from bridge.fanout.live_state import LiveSessionState
from bridge.http.commands import CommandsContext, add_command_routes
from bridge.http.session_state import add_session_state_routes
from bridge.store.chat_sessions import tree
from bridge.store.commands_pending import PromptQueueStore
from bridge.store.session_errors import SessionErrorStore
from bridge.store.writes.event_store import EventStore
from tests.support.chat_events import chat_event
from tests.support.commands_twin import SID, UpstreamCommandsTwin
from tests.support.serve_model import Clock

from .test_audit_openapi import SPEC, conforms
from .test_commands_http import SECRET, UPSTREAM, auth

CHILD = "ses_dd5b82c1bffeRY2dx3KoNdpwXy"  # the twin's other session, here a subagent of SID
TODOS = [{"content": "Write tests", "status": "in_progress", "priority": "high"}]


class StateTwin(UpstreamCommandsTwin):
    async def session_op(self, sid: str, directory: str, method: str, tail: str,
                         body: dict[str, Any] | None) -> tuple[int, Any]:
        self.calls.append(("session_op", (sid, method, tail)))
        return 200, TODOS if tail == "todo" else []


@pytest.fixture
async def served(engine: AsyncEngine) -> AsyncIterator[tuple[TestClient[Any, Any], StateTwin, LiveSessionState]]:
    twin, clock, kept = StateTwin(), Clock(1000.0), LiveSessionState()

    async def widen(claims: Claims, sid: str) -> Claims:
        return await tree.widen(claims, engine, UPSTREAM, sid)

    service = CommandService(DoorStore(engine, UPSTREAM), twin,  # type: ignore[arg-type]
                             DoorSettings(clock=clock, exit_after_upstream=""),
                             limiter=RateLimiter(rate_per_s=1.0, burst=6, clock=clock), widen=widen,
                             queue=PromptQueueStore(engine, UPSTREAM))
    store = EventStore(engine, UPSTREAM)
    epoch, _ = await store.claim(CHILD, "follower")
    created = chat_event(0, session_id=CHILD, type_="session.created", kind="session:created",
                         data={"info": {"id": CHILD, "parentID": SID}})
    await store.write_batch(CHILD, epoch, [created], datetime.now(UTC))
    errors = SessionErrorStore(engine, UPSTREAM)
    app = web.Application()
    add_command_routes(app, CommandsContext(service, SECRET))
    add_session_state_routes(app, kept, errors)
    async with TestClient(TestServer(app)) as client:
        yield client, twin, kept


async def test_a_parent_s_token_reads_its_subagent_s_todo_and_diff_but_not_the_reverse(
        served: tuple[TestClient[Any, Any], StateTwin, LiveSessionState]) -> None:
    http, _, _ = served
    parent_only = auth("read", [SID])
    for what in ("todo", "diff", "errors"):
        got = await http.get(f"/v1/sessions/{CHILD}/{what}", headers=parent_only)
        assert got.status == 200, (what, await got.text())
        refused = await http.get(f"/v1/sessions/{SID}/{what}", headers=auth("read", [CHILD]))
        assert refused.status == 403, what
    assert (await http.get(f"/v1/sessions/{CHILD}/commands", headers=parent_only)).status == 200


async def test_the_kept_todo_is_served_without_asking_the_serve_and_an_unknown_one_is_asked_once(
        served: tuple[TestClient[Any, Any], StateTwin, LiveSessionState]) -> None:
    http, twin, kept = served
    kept.put(SID, "todo", [{"content": "kept", "status": "pending", "priority": "low"}])
    got = await http.get(f"/v1/sessions/{SID}/todo", headers=auth("read"))
    assert (await got.json())["data"] == [{"content": "kept", "status": "pending", "priority": "low"}]
    assert [c for c in twin.calls if c[0] == "session_op"] == []
    for _ in range(2):
        got = await http.get(f"/v1/sessions/{CHILD}/todo", headers=auth("read"))
        assert (await got.json())["data"] == TODOS
    assert [c for c in twin.calls if c[0] == "session_op"] == [("session_op", (CHILD, "GET", "todo"))]
    assert kept.get(CHILD, "todo") == TODOS


async def test_recorded_session_errors_are_listed_once_each(
        engine: AsyncEngine, served: tuple[TestClient[Any, Any], StateTwin, LiveSessionState]) -> None:
    http, _, _ = served
    errors = SessionErrorStore(engine, UPSTREAM)
    for _ in range(2):  # two replicas relaying the same live event: one row
        await errors.record(SID, "evt_err_1", "APIError", "Bad request (mock)",
                            {"type": "session.error"}, datetime.now(UTC))
    got = await http.get(f"/v1/sessions/{SID}/errors", headers=auth("read"))
    rows = (await got.json())["data"]
    assert [(r["event_id"], r["error_type"], r["error_message"]) for r in rows] == [
        ("evt_err_1", "APIError", "Bad request (mock)")]
    op = SPEC["paths"]["/v1/sessions/{session_id}/errors"]["get"]
    assert conforms(await got.json(), op["responses"]["200"]["content"]["application/json"]["schema"]) == []
