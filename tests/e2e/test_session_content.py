"""The whole session as OpenCode shows it, on the real `opencode serve` 1.18.33 with the mock provider
(docs/upstream.md §20, §22): a subagent (`task`), a todo list, a written file, undo and deletion, a rename
and a slash-command list through the bridge; the stored (seq, event_id) of parent and child equal their
sync logs from seq 0."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.auth import mint_token
from tests.support.bridge_proc import BridgeFactory, BridgeProcess
from tests.support.fanout_client import WsClient
from tests.support.mock_llm import MockLLM
from tests.support.opencode import OpencodeServe
from tests.support.stored_rows import wait_synced
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

UPSTREAM = "e2e-content"
SECRET = "e2e-content-secret-" + "x" * 40


def token(scope: str = "read", sessions: list[str] | None = None) -> str:
    return mint_token(SECRET, UPSTREAM, sessions, 600, "web", scope=scope)


class Bridge:
    def __init__(self, proc: BridgeProcess, http: aiohttp.ClientSession) -> None:
        self.proc, self.http = proc, http

    async def get(self, path: str, tok: str | None = None) -> tuple[int, Any]:
        async with self.http.get(self.proc.url + path, headers={"Authorization": f"Bearer {tok or token()}"}) as r:
            return r.status, await r.json()

    async def post(self, path: str, body: dict[str, Any], tok: str | None = None) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {tok or token('control')}"}
        async with self.http.post(self.proc.url + path, json=body, headers=headers) as r:
            return r.status, await r.json()

    async def transcript(self, sid: str, tok: str | None = None) -> list[dict[str, Any]]:
        status, body = await self.get(f"/v1/sessions/{sid}/transcript", tok)
        assert status == 200, body
        return list(body["data"]["entries"])


@pytest.fixture
async def bridge(bridge_processes: BridgeFactory, opencode: OpencodeServe) -> AsyncIterator[Bridge]:
    # named for this module's UPSTREAM, which its tokens carry, also when another module uses the fixture
    proc = bridge_processes(BRIDGE_UPSTREAM_NAME=UPSTREAM, BRIDGE_AUTH_SECRET=SECRET,
                            BRIDGE_ALLOWED_DIRECTORIES=str(opencode.project_dir))
    proc.start()
    http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
    try:
        await proc.wait_ready(60)
        yield Bridge(proc, http)
    finally:
        await http.close()


async def unknown_kinds(db: AsyncEngine, *sessions: str) -> list[str]:
    async with db.connect() as c:
        rows = await c.execute(text("select type from chat_session_events where session_id = any(:s) "
                                    "and kind = 'unknown'"), {"s": list(sessions)})
        return [r.type for r in rows]


def tools_of(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for e in entries if e["type"] == "assistant" for p in e["parts"] if p.get("type") == "tool"]


async def test_task_todo_and_write_turns_show_the_child_the_plan_and_the_files(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge: Bridge, db: AsyncEngine
) -> None:
    sid = await opencode.create_session()
    await opencode.prompt_async(sid, "MOCK:task delegate")
    await opencode.wait_legacy_idle(sid, 1)
    children = await opencode.request("GET", f"/session/{sid}/children")
    assert len(children) == 1
    child = str(children[0]["id"])
    # The model of the child saw the task's prompt only (docs/upstream.md §20).
    assert [r.user_text for r in mock_llm.requests_for("none")] == ["MOCK:none"]

    live = await WsClient.connect(bridge.proc.url, token("read", [sid]))
    try:
        await live.subscribe(sid)
        await live.wait_for("caught_up", session=sid)
        await opencode.prompt_async(sid, "MOCK:todo plan")
        todo_frame = await live.wait_for("todo", 30, session=sid)  # relayed live (not in the sync log)
        assert [t["content"] for t in todo_frame["todos"]] == ["Write tests", "Ship it"]
    finally:
        await live.close()
    await opencode.wait_legacy_idle(sid, 2)
    await opencode.prompt_async(sid, "MOCK:write one")
    await opencode.wait_legacy_idle(sid, 3)
    await wait_synced(db, opencode, UPSTREAM, sid, child)
    assert await unknown_kinds(db, sid, child) == []

    parent_token = token("read", [sid])
    entries = await bridge.transcript(sid, parent_token)
    task = [t for t in tools_of(entries) if t["tool"] == "task"]
    assert len(task) == 1 and task[0]["child_session_id"] == child
    status, first = await bridge.get(f"/v1/sessions/{child}/events?limit=1")
    assert status == 200 and first["data"][0]["seq"] == 0 and first["data"][0]["kind"] == "session:created"
    assert first["data"][0]["payload"]["data"]["info"]["parentID"] == sid

    # The child is readable with the parent's session-limited token, and listed under its parent.
    status, child_session = await bridge.get(f"/v1/sessions/{child}", parent_token)
    assert status == 200 and child_session["data"]["parent_id"] == sid
    child_entries = await bridge.transcript(child, parent_token)
    assert [e["text"] for e in child_entries if e["type"] == "user"] == ["MOCK:none"]
    status, listed = await bridge.get(f"/v1/sessions?parent={sid}", parent_token)
    assert status == 200 and [s["session_id"] for s in listed["data"]] == [child]
    status, _ = await bridge.get(f"/v1/sessions/{sid}", token("read", [child]))
    assert status == 403  # a child's token does not grant its parent
    c = await WsClient.connect(bridge.proc.url, parent_token)
    try:
        await c.subscribe(child)
        await c.wait_for("caught_up", session=child)
        assert c.of("subscribed", child)[0]["parent_id"] == sid  # nested without the audit API
        assert next(m["kind"] for m in c.of("event", child)) == "session:created"
        await c.send(op="sessions", parent=sid, id="kids")
        kids = await c.wait_for("sessions", 20, id="kids")
        assert [(k["session"], k["parent_id"]) for k in kids["sessions"]] == [(child, sid)]
    finally:
        await c.close()

    status, todo = await bridge.get(f"/v1/sessions/{sid}/todo", parent_token)
    assert status == 200 and todo["data"] == [
        {"content": "Write tests", "status": "in_progress", "priority": "high"},
        {"content": "Ship it", "status": "pending", "priority": "low"}]
    status, _ = await bridge.get(f"/v1/sessions/{sid}/todo", token("read", [child]))
    assert status == 403

    files = [f for e in entries if e["type"] == "assistant" for p in e["parts"] if p.get("type") == "patch"
             for f in p["files"]]
    assert [Path(f).name for f in files] == ["written.txt"]


async def test_revert_delete_rename_and_commands_through_the_bridge(
    opencode: OpencodeServe, mock_llm: MockLLM, bridge: Bridge, db: AsyncEngine
) -> None:
    sid = await opencode.create_session()
    await opencode.prompt_async(sid, "MOCK:text one")
    await opencode.wait_legacy_idle(sid, 1)
    await opencode.prompt_async(sid, "MOCK:text two")
    await opencode.wait_legacy_idle(sid, 2)
    users = [m["info"]["id"] for m in await opencode.legacy_messages(sid) if m["info"]["role"] == "user"]
    assert len(users) == 2

    status, body = await bridge.post(f"/v1/sessions/{sid}/revert", {"command_id": "rv-1", "message_id": users[1]})
    assert status == 200 and body["revert"]["message_id"] == users[1], body
    status, again = await bridge.post(f"/v1/sessions/{sid}/revert", {"command_id": "rv-1", "message_id": users[1]})
    assert (status, again) == (200, body)  # exactly once: the stored answer
    status, _ = await bridge.post(f"/v1/sessions/{sid}/revert", {"command_id": "rv-2", "message_id": users[1]},
                                  token("prompt", [sid]))
    assert status == 403  # undo needs control

    await opencode.prompt_async(sid, "MOCK:text after revert")  # removes the reverted messages
    await opencode.wait_legacy_idle(sid, 2)
    await opencode.request("DELETE", f"/session/{sid}/message/{users[0]}")
    await wait_synced(db, opencode, UPSTREAM, sid)
    # The model no longer saw the reverted prompt: "one" and "after revert" only (docs/upstream.md §22).
    last = mock_llm.requests_for("text")[-1]
    assert last.user_text == "MOCK:text after revert" and last.roles.count("user") == 2, last

    entries = await bridge.transcript(sid)
    removed = {e["message_id"] for e in entries if e.get("removed")}
    assert {users[0], users[1]} <= removed
    assert [e["text"] for e in entries if e["type"] == "user"] == ["MOCK:text one", "MOCK:text two",
                                                                    "MOCK:text after revert"]

    c = await WsClient.connect(bridge.proc.url, token("read", [sid]))
    try:
        await c.subscribe(sid)
        await c.wait_for("caught_up", session=sid)
        kinds = [m["kind"] for m in c.of("event", sid)]
        assert kinds[0] == "session:created" and kinds.count("message:removed") >= 3
        removal = [m for m in c.of("event", sid) if m["kind"] == "message:removed"]
        assert {m["fields"]["message_id"] for m in removal} >= {users[0], users[1]}
    finally:
        await c.close()

    status, body = await bridge.post(f"/v1/sessions/{sid}/title", {"command_id": "t-1", "title": "Renamed"})
    assert status == 200, body

    async def renamed() -> bool:
        _, listed = await bridge.get("/v1/sessions")
        return any(s["session_id"] == sid and s.get("title") == "Renamed" for s in listed["data"])

    await wait_until(renamed, 30, 0.2, message="the new title listed by /v1/sessions")

    status, commands = await bridge.get(f"/v1/commands?session={sid}")
    assert status == 200 and isinstance(commands["data"], list)
    assert all("name" in c for c in commands["data"])
